"""The slab-decomposed 3-D grid: who owns which planes, fields with ghost planes, stepping,
scatter/gather and moving slab boundaries.

A global grid of shape ``(nz, ny, nx)`` is cut along axis 0 (the slowest, so a plane is one
contiguous block). Rank ``r`` owns global planes ``cuts[r]:cuts[r+1]`` and stores every field
as a local array of shape ``(n + 2, ny, nx)``: local plane ``k`` (1..n) is global plane
``lo + k - 1``; local planes 0 and ``n + 1`` are ghosts filled by the halo exchange (and left
untouched at the ends of the global grid).

All point-to-point traffic goes through :class:`pyfw.comm.Comm` (so the link monitor counts
it); tags used here: 11/12 (halo, see :mod:`.halo`), 21 (scatter/gather), 22 (repartition).
"""
from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from .. import observe
from ..comm import waitall
from ..errors import ConfigurationError
from . import partition as _part
from .comms import agree, as_comm
from .halo import Halo
from .snapshot import DomainView

__all__ = ["SlabDomain"]

TAG_SCATTER = 21
TAG_MOVE = 22


def _spans_job(mpi_comm) -> bool:
    """True if ``mpi_comm`` holds every rank of the job (local: no message)."""
    return MPI.Comm.Compare(mpi_comm, MPI.COMM_WORLD) in (MPI.IDENT, MPI.CONGRUENT)


class SlabDomain:
    """A grid of ``shape = (nz, ny, nx)`` cut in slabs along axis 0 over ``comm``.

    ``cuts`` (length ``size + 1``) fixes the slabs; otherwise they come from
    :func:`pyfw.domain.partition.partition` with ``cost`` (per plane, default uniform) and
    ``speeds`` (per rank, default equal). Every argument is validated identically on every
    rank before any message, so a bad one raises :class:`ConfigurationError` everywhere.

    ``slowdown`` (>= 1) emulates a slower CPU on this rank: after each update the rank sleeps
    ``(slowdown - 1)`` times the update's compute time, and that time counts as compute.

    ``monitor``: the job's shared :class:`pyfw.monitor.OnlineMonitor` (same object on the
    communicator's ranks), read by the :class:`~pyfw.domain.balance.Balancer` for rank
    speeds; by default one speed-only monitor is created on first use (:attr:`monitor`).

    ``dashboard``: serve a live view (cuts over time, rank speeds, link forecasts) from rank
    0, as ``Farm(dashboard=...)`` does (see :mod:`pyfw.observe`); it is updated at the end
    of :meth:`step`. The default (None) follows ``$PYFW_DASHBOARD`` / ``$PYFW_REPORT`` only
    when ``comm`` spans the whole job (``COMM_WORLD`` or a duplicate of it): a domain on a
    sub-communicator (one member of an ensemble) is not the job, so it publishes only when
    given a dashboard explicitly (else every group's rank 0 would open the job's port or
    write the job's report).
    """

    def __init__(self, comm, shape, cuts=None, cost=None, speeds=None, min_planes: int = 1,
                 slowdown: float = 1.0, monitor=None, dashboard=None):
        self.comm = as_comm(comm)
        self.rank, self.size = self.comm.rank, self.comm.size
        shape = tuple(int(s) for s in shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ConfigurationError(f"grid shape must be 3 positive ints, got {shape}")
        self.shape = shape
        self.min_planes = int(min_planes)
        nz = shape[0]
        self.cost = np.ones(nz) if cost is None else np.asarray(cost, dtype=np.float64)
        if self.cost.shape != (nz,):
            raise ConfigurationError(f"cost needs one value per plane ({nz}), "
                                     f"got shape {self.cost.shape}")
        if cuts is None:
            sp = np.ones(self.size) if speeds is None else speeds
            cuts = _part.partition(self.cost, sp, self.min_planes)
        self.cuts = _part.validate_cuts(cuts, nz, self.size, self.min_planes)
        if not slowdown >= 1.0:
            raise ConfigurationError(f"slowdown must be >= 1, got {slowdown}")
        self.slowdown = float(slowdown)
        watched = dashboard is not None or _spans_job(self.comm.mpi)
        dashboard = observe.check(dashboard) if watched else None
        self.fields: dict[str, np.ndarray] = {}
        self.halo = Halo(self.comm)
        self.compute_time = 0.0   # seconds of update() in the last step (incl. emulated load)
        self.moves = 0            # number of repartitions done
        self.steps = 0            # calls of step()
        self._monitor = monitor
        self._ticker = None
        if self.rank == 0 and watched:
            channel = observe.attach(dashboard, "domain", f"domain {shape} ({self.size} ranks)")
            if channel is not None:
                self._ticker = observe.Ticker(channel, DomainView())

    @property
    def monitor(self):
        """The online monitor whose rank-speed forecasts balance this domain (created on
        first use as ``OnlineMonitor(comm, links=False)``: speeds only, no link probes)."""
        if self._monitor is None:
            from ..monitor.online import OnlineMonitor
            self._monitor = OnlineMonitor(self.comm, links=False)
        return self._monitor

    def close(self) -> None:
        """Collective: complete the monitor's exchanges still in flight (call once at the end
        of a run, so no non-blocking collective is left pending at ``MPI_Finalize``)."""
        if self._monitor is not None:
            self._monitor.close()
        if self._ticker is not None:
            self._ticker.close(self)

    def slab_cost(self) -> float:
        """Total plane cost of this rank's slab (the work of one step, in cost units)."""
        return float(self.cost[self.lo:self.hi].sum())

    # ---------------------------------------------------------------- geometry
    @property
    def lo(self) -> int:
        """First global plane of this rank."""
        return int(self.cuts[self.rank])

    @property
    def hi(self) -> int:
        """One past the last global plane of this rank."""
        return int(self.cuts[self.rank + 1])

    @property
    def n(self) -> int:
        """Number of planes this rank owns."""
        return self.hi - self.lo

    @property
    def plane_shape(self) -> tuple[int, int]:
        """(ny, nx) of every plane."""
        return self.shape[1:]

    @property
    def lower(self) -> int:
        """Rank owning the planes below, or ``MPI.PROC_NULL``."""
        return self.rank - 1 if self.rank > 0 else MPI.PROC_NULL

    @property
    def upper(self) -> int:
        """Rank owning the planes above, or ``MPI.PROC_NULL``."""
        return self.rank + 1 if self.rank < self.size - 1 else MPI.PROC_NULL

    def owner(self, z: int) -> int:
        """Rank that owns global plane ``z``."""
        return int(np.searchsorted(self.cuts, z, side="right") - 1)

    # ---------------------------------------------------------------- fields
    def add(self, name: str, dtype=np.float64, fill=0) -> np.ndarray:
        """Create a local field (with ghost planes) filled with ``fill``; returns it."""
        a = np.full((self.n + 2,) + self.plane_shape, fill, dtype=dtype)
        self.fields[name] = a
        return a

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    def interior(self, name: str) -> np.ndarray:
        """View of the owned planes of a field (no ghosts)."""
        return self.fields[name][1:-1]

    def set_from_global(self, name: str, func_or_array, dtype=None) -> np.ndarray:
        """Fill a field from a global array every rank can slice, or from a function
        ``f(z0, z1) -> array (z1 - z0, ny, nx)`` giving global planes ``z0:z1``."""
        if callable(func_or_array):
            block = np.asarray(func_or_array(self.lo, self.hi))
        else:
            block = np.asarray(func_or_array)[self.lo:self.hi]
        if block.shape != (self.n,) + self.plane_shape:
            raise ConfigurationError(f"field {name!r}: got a block of shape {block.shape}, "
                                     f"expected {(self.n,) + self.plane_shape}")
        dt = dtype or block.dtype
        a = self.fields.get(name)
        if a is None or a.dtype != dt:
            a = self.add(name, dt)
        a[1:-1] = block
        return a

    def scatter(self, name: str, global_array=None, root: int = 0, dtype=None) -> np.ndarray:
        """Fill field ``name`` from ``global_array`` held by ``root`` only (others pass None)."""
        c = self.comm
        meta = None
        if self.rank == root:
            g = np.ascontiguousarray(global_array)
            meta = (g.dtype.str, g.shape)
        dstr, gshape = c.mpi.bcast(meta, root=root)
        if tuple(gshape) != self.shape:
            raise ConfigurationError(f"scatter {name!r}: array shape {tuple(gshape)} does not "
                                     f"match the grid {self.shape}")
        a = self.fields.get(name)
        if a is None or a.dtype != np.dtype(dtype or dstr):
            a = self.add(name, np.dtype(dtype or dstr))
        if self.rank == root:
            reqs = [c.Isend(np.ascontiguousarray(g[self.cuts[r]:self.cuts[r + 1]]), r,
                            TAG_SCATTER) for r in range(self.size) if r != root]
            a[1:-1] = g[self.lo:self.hi]
            waitall(reqs)
        else:
            buf = np.empty((self.n,) + self.plane_shape, dtype=np.dtype(dstr))
            c.Recv(buf, root, TAG_SCATTER)
            a[1:-1] = buf
        return a

    def gather(self, name: str, root: int = 0):
        """The whole field on ``root`` (None elsewhere). Collective."""
        c, a = self.comm, self.fields[name]
        if self.rank != root:
            c.Send(np.ascontiguousarray(a[1:-1]), root, TAG_SCATTER)
            return None
        out = np.empty(self.shape, dtype=a.dtype)
        reqs = [c.Irecv(out[self.cuts[r]:self.cuts[r + 1]], r, TAG_SCATTER)
                for r in range(self.size) if r != root]
        out[self.lo:self.hi] = a[1:-1]
        waitall(reqs)
        return out

    def allgather(self, name: str):
        """The whole field on every rank (for small grids and tests). Collective."""
        g = self.gather(name, 0)
        if self.rank != 0:
            g = np.empty(self.shape, dtype=self.fields[name].dtype)
        self.comm.mpi.Bcast(g, root=0)
        return g

    # ---------------------------------------------------------------- stepping
    def exchange(self, names) -> None:
        """Blocking halo exchange of the named fields."""
        self.halo.start([self.fields[x] for x in names], self.lower, self.upper).wait()

    def step(self, update, names, overlap: bool = True, chunk: int = 8) -> float:
        """One stencil step: ``update(k0, k1)`` must update local planes ``k0:k1`` (1-based,
        ghosts at 0 and n+1) reading neighbours from the named fields.

        With ``overlap`` the halo of ``names`` is posted first, the interior planes
        ``2:n`` are updated in chunks of ``chunk`` planes while the requests are progressed,
        then the exchange completes and planes 1 and n are updated. Without it, the exchange
        completes before the whole slab is updated (in the same chunks, so a comparison of the
        two measures the overlap alone, not the cache effect of chunking). Returns the compute
        time of this step (update calls plus emulated load; waits excluded), also kept in
        ``compute_time``.
        """
        n = self.n
        h = self.halo.start([self.fields[x] for x in names], self.lower, self.upper)
        spent = 0.0
        if overlap and n > 2:
            for k0 in range(2, n, chunk):
                t0 = time.perf_counter()
                update(k0, min(k0 + chunk, n))
                spent += time.perf_counter() - t0
                h.test()
            h.wait()
            t0 = time.perf_counter()
            update(1, 2)
            update(n, n + 1)
            spent += time.perf_counter() - t0
        else:
            h.wait()
            t0 = time.perf_counter()
            for k0 in range(1, n + 1, chunk):  # the same chunks: only the overlap differs
                update(k0, min(k0 + chunk, n + 1))
            spent += time.perf_counter() - t0
        spent += self._emulate(spent)
        self.compute_time = spent
        self.steps += 1
        if self._ticker is not None:
            self._ticker(self)
        return spent

    def _emulate(self, spent: float) -> float:
        if self.slowdown <= 1.0:
            return 0.0
        extra = (self.slowdown - 1.0) * spent
        t0 = time.perf_counter()
        time.sleep(extra)
        return time.perf_counter() - t0

    # ---------------------------------------------------------------- moving boundaries
    def repartition(self, new_cuts) -> dict:
        """Move slab boundaries to ``new_cuts`` (same on every rank), moving the planes of
        every field between the ranks that lose and gain them. Collective.

        Returns ``{"seconds": ..., "bytes": ...}`` (this rank's time and bytes sent+received).
        The ghost planes of every field are exchanged afterwards, so static fields (e.g. a
        material id) stay valid without further calls.
        """
        t0 = time.perf_counter()
        new = _part.validate_cuts(new_cuts, self.shape[0], self.size, self.min_planes)
        old = self.cuts
        me = self.rank
        nlo, nhi = int(new[me]), int(new[me + 1])
        olo, ohi = self.lo, self.hi
        c = self.comm
        moved = 0
        reqs = []
        newfields = {}
        for name, a in self.fields.items():
            b = np.zeros((nhi - nlo + 2,) + self.plane_shape, dtype=a.dtype)
            newfields[name] = b
            s, e = max(nlo, olo), min(nhi, ohi)
            if s < e:
                b[1 + s - nlo:1 + e - nlo] = a[1 + s - olo:1 + e - olo]
            for r in range(self.size):
                if r == me:
                    continue
                # planes I own now and r will own
                s, e = max(olo, int(new[r])), min(ohi, int(new[r + 1]))
                if s < e:
                    buf = a[1 + s - olo:1 + e - olo]
                    reqs.append(c.Isend(buf, r, TAG_MOVE))
                    moved += buf.nbytes
                # planes r owns now and I will own
                s, e = max(nlo, int(old[r])), min(nhi, int(old[r + 1]))
                if s < e:
                    buf = b[1 + s - nlo:1 + e - nlo]
                    reqs.append(c.Irecv(buf, r, TAG_MOVE))
                    moved += buf.nbytes
        waitall(reqs)
        self.fields = newfields
        self.cuts = new
        self.moves += 1
        self.exchange(list(self.fields))
        return {"seconds": time.perf_counter() - t0, "bytes": moved}

    # ---------------------------------------------------------------- checks
    def agree(self, exc: BaseException | None, what: str = "operation") -> None:
        """Raise on every rank if any rank passes an exception (see :func:`.comms.agree`)."""
        agree(self.comm, exc, what)
