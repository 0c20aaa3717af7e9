"""Run as ``python -m pyfw.futures futures_script.py OUT [args]``: an ordinary
mpi4py.futures program (import swapped) that exercises what users hit: several executors in
a row and nested, an exception escaping one executor, what workers see."""
import json
import os
import sys
import time
from concurrent.futures import TimeoutError

from pyfw.futures import MPIPoolExecutor as Executor
from pyfw.futures import get_comm_workers


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


def comm_workers_size(_):
    return get_comm_workers().Get_size()


def rank_after(seconds):
    from mpi4py import MPI
    time.sleep(seconds)
    return MPI.COMM_WORLD.Get_rank()


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
    with Executor() as ex6:
        out["comm_workers"] = ex6.submit(comm_workers_size, 0).result()
        try:
            get_comm_workers()
        except RuntimeError:
            out["comm_workers_on_master"] = "RuntimeError"
        try:   # a map that times out leaves a task running on one worker ...
            list(ex6.map(rank_after, [1.0, 0.0], timeout=0.3, unordered=True))
        except TimeoutError:
            out["timed_out"] = True
        time.sleep(1.5)   # ... which has finished by now: both workers take the next map
        out["ranks_after_timeout"] = sorted(ex6.map(rank_after, [0.5, 0.0]))
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh)
