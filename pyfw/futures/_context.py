"""Where this process stands (private): the shared pool of ``python -m pyfw.futures`` on the
master, or serving as a worker, where an Executor runs its tasks in-process."""
from __future__ import annotations

import contextlib
import threading

__all__ = ["shared_pool", "set_shared_pool", "serving_on",
           "get_comm_workers", "split_workers", "comm_workers_on"]

#: the name workers import the main program under (as mpi4py.futures does)
WORKER_RUN_NAME = "__worker__"

_shared = None
importing_main = False   # a worker is importing the user's main program
serving = False          # this process is a worker (an Executor made here runs in-process)
_comm_workers = None                 # this worker rank's communicator over the pool's workers
_in_process = threading.local()      # .comm set in the thread of an in-process pool


def shared_pool():
    """The pool that this process's executors share (None before the first one)."""
    return _shared


def set_shared_pool(pool) -> None:
    """Make ``pool`` the one this process's executors share (None: none)."""
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


def get_comm_workers():
    """The communicator over the workers of the pool running the current task (as
    ``mpi4py.futures.get_comm_workers``): call it inside a task; elsewhere RuntimeError."""
    comm = getattr(_in_process, "comm", None) or _comm_workers
    if comm is None:
        raise RuntimeError("get_comm_workers() works inside a task running on a "
                           "pyfw.futures worker")
    return comm


def split_workers(farm):
    """Collective over ``farm``'s ranks: a communicator over its workers (``COMM_NULL`` on
    the master), made before the workers start serving."""
    from mpi4py import MPI
    mpi = farm.comm.mpi
    return mpi.Split(MPI.UNDEFINED if farm.is_master else 0, mpi.Get_rank())


@contextlib.contextmanager
def comm_workers_on(comm):
    """Serve with ``comm`` as the workers' communicator, and free it afterwards."""
    global _comm_workers
    from mpi4py import MPI
    if comm == MPI.COMM_NULL:
        yield
        return
    before, _comm_workers = _comm_workers, comm
    try:
        yield
    finally:
        _comm_workers = before
        try:
            comm.Free()
        except MPI.Exception:   # a worker died under ULFM: the handle goes with the job
            pass


def mark_in_process_thread() -> None:
    """Tasks of a one-process pool run in the calling thread: their workers are COMM_SELF."""
    from mpi4py import MPI
    _in_process.comm = MPI.COMM_SELF
