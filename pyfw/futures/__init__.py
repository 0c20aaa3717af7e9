"""``concurrent.futures`` executors over the pyfw farm: switch from mpi4py.futures by
changing one import.

::

    from pyfw.futures import MPIPoolExecutor   # was: from mpi4py.futures import ...
    with MPIPoolExecutor() as ex:              # (Executor is the same class)
        print(sum(ex.map(f, range(10**6))))    # adaptive chunking: no chunksize to tune

Launch modes (as in mpi4py.futures):

* ``pyfw-run -n N -- python -m pyfw.futures script.py [args]`` (also ``-m module``,
  ``-c code``): rank 0 runs the program; the other ranks serve every executor it creates.
* plain ``python script.py`` or ``mpiexec -n 1 python script.py``: each executor spawns
  its workers (``MPI_Comm_spawn``, ``max_workers`` as in mpi4py) and ends them at
  ``shutdown`` or exit; ``Executor(in_process=True)`` runs tasks in this process instead.
* SPMD: ``with MPICommExecutor(comm, root) as ex: if ex is not None: ...`` on every rank.

Inside a task, :func:`get_comm_workers` gives the communicator over the pool's workers.

Behaviour follows ``MPIPoolExecutor``: a task's own exception comes back with the remote
traceback as ``__cause__`` (plus a note naming the worker), a failing initializer breaks the
executor (``BrokenExecutor``), arguments are validated alike. Differences: ``chunksize=1``
(the default) means "choose for me" (adaptive chunks, pipelined); ordered ``map`` runs at
most 65,536 items ahead of the consumer unless ``buffersize`` says otherwise; under
``mpiexec --with-ft ulfm`` a dead worker's tasks run again elsewhere.
"""
from concurrent.futures import (ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION,
                                BrokenExecutor, CancelledError, Future, InvalidStateError,
                                TimeoutError, as_completed, wait)

from ._context import get_comm_workers
from .comm_executor import MPICommExecutor
from .executor import Executor

MPIPoolExecutor = Executor


def launched_workers() -> int:
    """Workers launched with this program (``python -m pyfw.futures``) that its executors
    share; 0 when executors spawn their own."""
    from . import _context
    pool = _context.shared_pool()
    return 0 if pool is None else pool.num_workers

__all__ = ["Executor", "MPIPoolExecutor", "MPICommExecutor", "Future", "wait",
           "as_completed", "FIRST_COMPLETED", "FIRST_EXCEPTION", "ALL_COMPLETED",
           "BrokenExecutor", "CancelledError", "TimeoutError", "InvalidStateError",
           "get_comm_workers", "launched_workers"]
