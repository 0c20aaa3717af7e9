"""The plan types of the tuned collectives, shared by :mod:`.dispatch` (which decides per
call) and :mod:`.tuner` (which measures): the algorithm catalogue, the machine layout of a
communicator and :class:`Bindings`, a communicator's algorithms bound to a private duplicate.

Both import this module and neither imports the other's way back (dispatch -> tuner -> plan).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform

from mpi4py import MPI

from .algorithms import allgather as _ag, alltoall as _a2a, bcast as _bc, gather as _ga
from .algorithms import reduce as _rd
from ._util import raw

__all__ = ["ALGORITHMS", "COLLECTIVES", "NBUCKETS", "Bindings", "layout"]

NBUCKETS = 65

#: collective -> names of its algorithms ("native" first); "smp*" exist only for allgather
ALGORITHMS = {
    "allgather": ["native", *_ag.ALGORITHMS, "smp", "smp_bruck"],
    "gather": ["native", *_ga.ALGORITHMS],
    "alltoall": ["native", *_a2a.ALGORITHMS],
    "bcast": ["native", *_bc.ALGORITHMS],
    "allreduce": ["native", *_rd.ALLREDUCE],
    "reduce": ["native", *_rd.REDUCE],
}
COLLECTIVES = tuple(ALGORITHMS)
_NATIVE = {"allgather": "Allgather", "gather": "Gather", "alltoall": "Alltoall",
           "bcast": "Bcast", "allreduce": "Allreduce", "reduce": "Reduce"}
_FUNCS = {"allgather": _ag.ALGORITHMS, "gather": _ga.ALGORITHMS, "alltoall": _a2a.ALGORITHMS,
          "bcast": _bc.ALGORITHMS, "allreduce": _rd.ALLREDUCE, "reduce": _rd.REDUCE}


def _empty(*args) -> None:
    """The 0-byte collective: nothing to move, so nothing to do (MPICH returns early the
    same way); every rank sees the same size, so every rank skips it."""
    return None



# ------------------------------------------------------------------ machine and layout
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def layout(comm) -> dict:
    """Machine and layout description of ``comm`` (collective): host names, CPU models,
    rank-to-node map; ``layout(c)["key"]`` identifies the decision table."""
    c = raw(comm)
    node = c.Split_type(MPI.COMM_TYPE_SHARED, key=c.Get_rank())
    try:
        leader = node.bcast(c.Get_rank(), root=0)
    finally:
        node.Free()
    info = c.allgather((MPI.Get_processor_name(), _cpu_model(), os.cpu_count(), leader))
    leaders = sorted({i[3] for i in info})
    node_of = [leaders.index(i[3]) for i in info]
    machine = sorted({(h, cpu, n) for h, cpu, n, _ in info})
    desc = {"size": c.Get_size(), "nodes": len(leaders), "node_of": node_of,
            "machine": [list(m) for m in machine]}
    desc["key"] = hashlib.sha1(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]
    return desc


class Bindings:
    """A communicator's collective algorithms, bound to a private duplicate (collective to
    build: it duplicates ``comm`` and describes its layout; :meth:`free` releases both).

    :class:`pyfw.coll.Plan` adds the decision table to it; the tuner measures with it."""

    def __init__(self, comm):
        c = raw(comm)
        self.comm = c
        self.handle = c.handle
        self.rank, self.size = c.Get_rank(), c.Get_size()
        self.priv = c.Dup()  # private context for the point-to-point algorithms
        self.layout = layout(c)
        self._smp: dict[str, object] = {}

    def algorithm(self, coll: str, name: str):
        """The callable for ``coll`` / ``name`` bound to this communicator."""
        if name == "native":
            return getattr(self.comm, _NATIVE[coll])
        if name == "empty":
            return _empty
        if coll == "allgather" and name in ("smp", "smp_bruck"):
            return self.smp("bruck" if name == "smp_bruck" else "direct")
        try:
            fn = _FUNCS[coll][name]
        except KeyError:
            raise ValueError(f"unknown {coll} algorithm {name!r}; "
                             f"known: {', '.join(ALGORITHMS[coll])}") from None
        return functools.partial(fn, self.priv)

    def smp(self, leader: str = "direct"):
        """The (lazily built, collective) :class:`pyfw.coll.smp.SmpAllgather` of this plan."""
        obj = self._smp.get(leader)
        if obj is None:
            def lazy(sendbuf, recvbuf):
                return self._smp_object(leader)(sendbuf, recvbuf)
            return lazy
        return obj

    def _smp_object(self, leader):
        obj = self._smp.get(leader)
        if obj is None:
            from .smp import SmpAllgather
            obj = self._smp[leader] = SmpAllgather(self.priv, leader=leader)
        return obj

    def free(self) -> None:
        """Free the private communicators and windows (collective)."""
        for obj in self._smp.values():
            obj.free()
        self._smp.clear()
        if self.priv != MPI.COMM_NULL:
            self.priv.Free()
            self.priv = MPI.COMM_NULL
