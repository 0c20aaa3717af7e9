"""Run as ``python -m pyfw.futures futures_script.py OUT [args]``: an ordinary
mpi4py.futures program (import swapped) that exercises what users hit: several executors in
a row and nested, an exception escaping one executor, what workers see."""
import json
import os
import sys

from pyfw.futures import MPIPoolExecutor as Executor


def triple(x):          # defined in the main program: workers must find it
    return 3 * x


def worker_view(_):
    """What a task sees on its worker."""
    return {"name": __name__, "argv_tail": sys.argv[-2:], "cwd": os.getcwd(),
            "env": os.environ.get("PYFW_SCRIPT_ENV"), "main_has_triple":
            hasattr(sys.modules["__main__"], "triple")}


def nested(n):
    """A task that makes its own executor (it runs in the worker's process)."""
    with Executor() as inner:
        return sum(inner.map(triple, range(n)))


def fails(x):
    raise KeyError(x)


if __name__ == "__main__":
    out = {"master_argv": sys.argv[1:]}
    with Executor() as ex:
        out["map"] = list(ex.map(triple, range(100)))
        out["submit"] = ex.submit(pow, 2, 10).result()
        out["workers"] = ex.num_workers
        out["view"] = ex.submit(worker_view, 0).result()
    with Executor() as ex2:   # a second executor shares the same workers
        out["second"] = sorted(ex2.map(triple, range(5), unordered=True))
        with Executor() as ex3:   # nested on the master
            out["nested_master"] = list(ex3.map(triple, range(3)))
        out["nested_worker"] = ex2.submit(nested, 4).result()
    try:
        with Executor() as ex4:
            ex4.submit(fails, "k").result()
    except KeyError as exc:   # escaped the executor; the next one still works
        out["escaped"] = [repr(exc), type(exc.__cause__).__name__]
    with Executor() as ex5:
        out["after_escape"] = list(ex5.map(triple, range(3), chunksize=2))
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh)
