"""Non-blocking halo exchange of contiguous ghost planes.

For each field ``a`` (local shape ``(n + 2, ny, nx)``) :meth:`Halo.start` posts receives into
the ghost planes ``a[0]`` (from the lower rank) and ``a[n + 1]`` (from the upper rank), then
sends ``a[1]`` down and ``a[n]`` up. Planes are contiguous in C order, so they go as buffers
(never pickled, no packing). Neighbours that do not exist are ``MPI.PROC_NULL``.

Open MPI has no asynchronous progress thread: a large (rendezvous) message advances only
inside MPI calls, so the caller should call :meth:`Halo.test` between chunks of the interior
update (``SlabDomain.step`` does). Wire format: tag 11 carries a plane going up (to rank + 1),
tag 12 a plane going down; several fields go in the order given, which MPI preserves.

Emulated slow links (``PYFW_EMULATE_LINKS="I-J:LATENCY[:BANDWIDTH]"`` or a
:class:`pyfw.monitor.emulate.DeliveryShaper` as ``comm.shaper``): :meth:`pyfw.comm.Comm.Isend`
then returns a deferred send that the sender posts once the link's delay has passed, the
first time it is tested after that; completing the requests with :func:`pyfw.comm.testall`
(as here) is what makes the emulated latency hide behind the interior update exactly as a
real one would -- to within one interior chunk, the spacing of the tests.
"""
from __future__ import annotations

from mpi4py import MPI

from ..comm import testall, waitall

__all__ = ["Halo"]

TAG_UP = 11
TAG_DOWN = 12


class Halo:
    """One in-flight halo exchange at a time over a :class:`pyfw.comm.Comm`."""

    def __init__(self, comm, timeout: float = 600.0):
        self.comm = comm
        self.timeout = timeout
        self.reqs: list[MPI.Request] = []

    def start(self, arrays, lower: int, upper: int) -> "Halo":
        """Post receives, then sends, of the boundary planes of ``arrays``; returns self."""
        if self.reqs:
            self.wait()
        c = self.comm
        reqs = []
        for a in arrays:
            if lower != MPI.PROC_NULL:
                reqs.append(c.Irecv(a[0], lower, TAG_UP))
            if upper != MPI.PROC_NULL:
                reqs.append(c.Irecv(a[-1], upper, TAG_DOWN))
        for a in arrays:
            if lower != MPI.PROC_NULL:
                reqs.append(c.Isend(a[1], lower, TAG_DOWN))
            if upper != MPI.PROC_NULL:
                reqs.append(c.Isend(a[-2], upper, TAG_UP))
        self.reqs = reqs
        return self

    def test(self) -> bool:
        """Progress the exchange; True once every request has completed."""
        if not self.reqs:
            return True
        if testall(self.reqs):   # also completes sends held by an emulated slow link
            self.reqs = []
            return True
        return False

    def wait(self) -> None:
        """Complete the exchange, polling with a capped backoff (no busy core when ranks
        outnumber cores); :class:`pyfw.errors.CommTimeout` after ``timeout`` seconds."""
        if self.reqs:
            waitall(self.reqs, self.timeout, f"rank {self.comm.rank}: halo exchange")
            self.reqs = []
