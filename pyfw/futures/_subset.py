"""``max_workers`` below the launched workers (private): an executor's own farm over
``max_workers`` of the ranks that ``python -m pyfw.futures`` shares.

mpi4py.futures lets every executor use every launched worker whatever its
``max_workers``; pyfw honours the number, as the class documents it ("at most
``max_workers`` processes"). The executor asks the shared farm for one task on a group of
``max_workers`` workers (a ``ranks=k`` task). That task connects its group to the program
(``MPI_Intercomm_create`` over ``COMM_WORLD``, the group's first rank naming itself with a
tag of this executor's own), and serves a farm of the executor's until the executor shuts
down, as spawned workers do (:mod:`pyfw.futures.server`). The other launched workers go on
serving the other executors meanwhile.

Such groups are given while at least one launched worker stays outside them all, for the
executors that share every worker; an executor whose group would take the last one shares
every worker instead, as in mpi4py (else executors that each wait for a group could wait
for ever: mpi4py's suite makes three of ``max_workers=1`` over two workers).
"""
from __future__ import annotations

import itertools
import threading
import time

from mpi4py import MPI

from ..farm import Farm
from . import _context

__all__ = ["SUBSET_GROUPS", "SubsetFarm", "serve_subset", "reserve", "unreserve"]

#: MPI tags of the group-to-program handshakes on COMM_WORLD (the farms use duplicates of
#: it, so these cannot meet a farm's messages); one per executor of this process
_TAG_BASE = 4096
#: on: a group task holds its workers for the executor's lifetime, alone (the shared
#: pool's submit rounds are ``exclusive``: nothing is queued behind it; without that,
#: other executors' tasks waited on it and mpi4py's test_multiple_executors hung)
SUBSET_GROUPS = True
_tags = itertools.count()
_reserved_lock = threading.Lock()
_reserved = 0   # launched workers held by the groups of this process's executors
#: one group connects at a time: MPI_Intercomm_create is collective over COMM_SELF here,
#: which two threads may not enter at once (two executors booting together hung)
_connecting = threading.Lock()


def reserve(k: int, launched: int) -> bool:
    """Hold ``k`` of the ``launched`` workers for one executor's group if at least one
    would stay outside every group; False (nothing held) otherwise."""
    global _reserved
    with _reserved_lock:
        if _reserved + k > launched - 1:
            return False
        _reserved += k
        return True


def unreserve(k: int) -> None:
    """Give back what :func:`reserve` held."""
    global _reserved
    with _reserved_lock:
        _reserved -= k


def serve_subset(comm, tag: int, program: int, farm_options: dict) -> None:
    """The group task (on each of the ``max_workers`` workers): connect to the program at
    COMM_WORLD rank ``program`` and serve the executor's farm until it closes."""
    from .server import serve_parent
    world = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        world.send(world.Get_rank(), dest=program, tag=tag)
    intercomm = comm.Create_intercomm(0, world, program, tag)
    serve_parent(intercomm, {"farm": farm_options})


class SubsetFarm:
    """The farm of one executor over ``max_workers`` of the shared workers (built in the
    executor's pool thread) and how to tear it down; ``shared_submit(fn, *args, ranks=k)``
    puts a task on the shared farm and returns its future."""

    def __init__(self, max_workers: int, shared_submit, farm_options: dict):
        """Needs ``reserve(max_workers, ...)`` done; gives it back when closed or failing."""
        self.size = max_workers
        try:
            self._start(max_workers, shared_submit, farm_options)
        except BaseException:
            unreserve(max_workers)
            raise

    def _start(self, max_workers: int, shared_submit, farm_options: dict) -> None:
        world = MPI.COMM_WORLD
        tag = _TAG_BASE + next(_tags) % 20000
        worker_side = {k: v for k, v in farm_options.items() if k == "hierarchy"}
        with _connecting:
            self.group = shared_submit(serve_subset, tag, world.Get_rank(), worker_side,
                                       ranks=max_workers)
            leader = self._leader(world, tag)
            self.intercomm = MPI.COMM_SELF.Create_intercomm(0, world, leader, tag)
            self.merged = self.intercomm.Merge(high=False)   # the program is rank 0
            self.farm = Farm(self.merged, master=0, **farm_options)
            self.workers = _context.split_workers(self.farm)  # collective: COMM_NULL here

    def _leader(self, world, tag: int) -> int:
        """COMM_WORLD rank of the group's first worker, once the group task runs (the
        group's failure, e.g. a broken shared pool, is raised instead of waiting)."""
        status = MPI.Status()
        pause = 1e-4
        while not world.Iprobe(MPI.ANY_SOURCE, tag, status):
            if self.group.done():
                raise RuntimeError("the workers for this executor could not be grouped") \
                    from self.group.exception()
            time.sleep(pause)
            pause = min(2 * pause, 5e-3)
        return world.recv(source=status.Get_source(), tag=tag)

    def close(self, reason=None) -> None:
        """Stop the farm (the group task on the workers returns) and disconnect."""
        from ._spawn import drain_workers, release
        try:
            self.farm.close(reason)
            drain_workers(self.farm.comm.mpi)   # nothing of this farm reaches the next one
        finally:
            release(self.farm.comm.mpi, self.merged, self.intercomm)
            unreserve(self.size)
