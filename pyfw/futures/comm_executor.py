""":class:`MPICommExecutor`: the SPMD form, as in mpi4py.futures."""
from __future__ import annotations

from mpi4py import MPI

from . import _context
from .executor import Executor

__all__ = ["MPICommExecutor"]


class MPICommExecutor:
    """Context manager over ``comm``: the executor on rank ``root``, ``None`` elsewhere.

    ::

        with MPICommExecutor(MPI.COMM_WORLD, root=0) as executor:
            if executor is not None:      # the master
                print(list(executor.map(f, range(100))))

    The other ranks serve as workers inside ``__enter__`` until the master leaves the block.
    Under ``python -m pyfw.futures`` the executor uses the shared workers (as in mpi4py).
    """

    def __init__(self, comm=None, root=0, **kwargs):
        if comm is None:
            comm = MPI.COMM_WORLD
        if comm.Is_inter():
            raise ValueError("expecting an intracommunicator")
        if root < 0 or root >= comm.Get_size():
            raise ValueError("expecting root in range(comm.size)")
        if _context.shared_pool() is not None or _context.serving:
            comm, root = MPI.COMM_SELF, 0
        self._comm, self._root, self._options = comm, root, kwargs
        self._executor = None
        self._inside = False

    def __enter__(self):
        if self._inside:
            raise RuntimeError("__enter__")
        self._inside = True
        comm = self._comm
        if comm.Get_size() == 1 or _context.shared_pool() is not None:
            executor = Executor(**self._options)
        else:
            executor = Executor(comm=comm, root=self._root, **self._options).__enter__()
        self._executor = executor
        return executor

    def __exit__(self, *exc_info):
        executor, self._executor = self._executor, None
        self._inside = False
        if executor is not None:
            executor.shutdown(wait=True)
            return False
        return True
