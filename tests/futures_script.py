"""Run as ``python -m pyfw.futures futures_script.py OUT`` (a drop-in mpi4py.futures user)."""
import json
import sys

from pyfw.futures import Executor


def triple(x):          # defined in the main program: workers must find it
    return 3 * x


if __name__ == "__main__":
    with Executor() as ex:
        out = {"map": list(ex.map(triple, range(100))),
               "submit": ex.submit(pow, 2, 10).result(),
               "workers": ex.num_workers}
    with Executor() as ex2:  # a second executor shares the same workers
        out["second"] = sorted(ex2.map(triple, range(5), unordered=True))
    json.dump(out, open(sys.argv[1], "w"))
