"""Where this process stands (private): the shared pool of ``python -m pyfw.futures`` on the
master, or serving as a worker, where an Executor runs its tasks in-process."""
from __future__ import annotations

import contextlib
import warnings

__all__ = ["shared_pool", "set_shared_pool", "serving_on", "warn_if_unlaunched"]

#: the name workers import the main program under (as mpi4py.futures does)
WORKER_RUN_NAME = "__worker__"

_shared = None
importing_main = False   # a worker is importing the user's main program
serving = False          # this process is a worker (an Executor made here runs in-process)
_warned = False


def shared_pool():
    return _shared


def set_shared_pool(pool) -> None:
    global _shared
    _shared = pool


@contextlib.contextmanager
def serving_on(flag: bool = True):
    """Mark this process as serving (a worker) while the block runs."""
    global serving
    before, serving = serving, serving or flag
    try:
        yield
    finally:
        serving = before


def warn_if_unlaunched() -> None:
    """Warn once when an Executor runs in-process although mpiexec started several ranks."""
    global _warned
    from mpi4py import MPI
    if _warned or serving or MPI.COMM_WORLD.Get_size() == 1:
        return
    _warned = True
    warnings.warn("pyfw.futures.Executor() runs its tasks in this process: launch the program "
                  "with `pyfw-run -n N -- python -m pyfw.futures script.py` to use the other "
                  "ranks (or pass comm= on every rank for SPMD use)", RuntimeWarning,
                  stacklevel=4)
