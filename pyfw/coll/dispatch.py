"""Tuned dispatch: ``allgather(comm, sendbuf, recvbuf)`` and friends pick an algorithm per
message-size bucket from the tuner's decision table, native MPI where it wins.

The first call on a communicator is collective: it builds a :class:`Plan` (a private
duplicate for the pyfw algorithms, the node layout, the decision table read by rank 0 and
broadcast) and caches it by the communicator's handle. After that a call costs one dict
lookup, one ``nbytes`` and one list index before the chosen function runs: the bucket of a
message of n bytes is ``n.bit_length()`` (0 B, 1 B, 2–3 B, 4–7 B, ...).

Every function takes mpi4py's uppercase signature with the communicator first, plus
``algorithm=`` to force one (a name from :data:`ALGORITHMS`, ``"native"`` included).
"""
from __future__ import annotations

import functools
import sys

import numpy as np
from mpi4py import MPI

from .algorithms import allgather as _ag, alltoall as _a2a, bcast as _bc, gather as _ga
from .algorithms import reduce as _rd
from ._util import raw

__all__ = ["Plan", "plan", "Bound", "bind", "allgather", "gather", "alltoall", "bcast", "allreduce", "reduce",
           "ALGORITHMS", "COLLECTIVES", "forget_plans"]

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

_PLANS: dict[int, "Plan"] = {}
_ndarray = np.ndarray
_partial = functools.partial
# last (communicator object, bucket list) per collective: the fast path is an identity test
_L_ALLGATHER: list = [None, None]
_L_GATHER: list = [None, None]
_L_ALLTOALL: list = [None, None]
_L_BCAST: list = [None, None]
_L_ALLREDUCE: list = [None, None]
_L_REDUCE: list = [None, None]
_LASTS = (_L_ALLGATHER, _L_GATHER, _L_ALLTOALL, _L_BCAST, _L_ALLREDUCE, _L_REDUCE)


def _reset_fast_paths() -> None:
    for L in _LASTS:
        L[0] = L[1] = None
_NOTIFIED: set[str] = set()


def _forget(comm, keyval, plan):
    """MPI attribute delete callback: the comm is being freed, or the attribute replaced."""
    h = getattr(plan, "handle", None)
    if _PLANS.get(h) is plan:
        del _PLANS[h]
        _reset_fast_paths()


_KEYVAL = MPI.Comm.Create_keyval(delete_fn=_forget)


class Plan:
    """Per-communicator state of the dispatch (collective to build; use :func:`plan`).

    ``plan.allgather[bucket]`` etc. are the chosen callables with mpi4py's signature;
    ``plan.choice[coll][bucket]`` their names.
    """

    def __init__(self, comm, table: dict | None = None, notice: bool = True):
        from . import tuner  # late import: the tuner imports this module
        c = raw(comm)
        self.comm = c
        self.handle = c.handle
        self.rank, self.size = c.Get_rank(), c.Get_size()
        self.priv = c.Dup()  # private context for the point-to-point algorithms
        self.layout = tuner.layout(c)
        self._smp: dict[str, object] = {}
        if table is None:
            table, why = tuner.load_table(c, self.layout)
            if why and notice and self.rank == 0 and why not in _NOTIFIED:
                _NOTIFIED.add(why)
                print(f"pyfw.coll: {why}; using native MPI", file=sys.stderr)
        self.table = table
        self.choice = tuner.decisions(table, self.size) if table else {}
        for coll in COLLECTIVES:
            names = self.choice.get(coll) or ["native"] * NBUCKETS
            self.choice[coll] = names
            setattr(self, coll, [self.algorithm(coll, n) for n in names])

    def algorithm(self, coll: str, name: str):
        """The callable for ``coll`` / ``name`` bound to this communicator."""
        if name == "native":
            return getattr(self.comm, _NATIVE[coll])
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
        if _PLANS.get(self.handle) is self:
            del _PLANS[self.handle]
        _reset_fast_paths()


def plan(comm, table: dict | None = None) -> Plan:
    """The cached :class:`Plan` of ``comm`` (built on first use: collective)."""
    c = raw(comm)
    p = _PLANS.get(c.handle)
    if p is None or table is not None:
        if p is not None:
            p.free()
        p = Plan(c, table)
        _PLANS[c.handle] = p
        if c not in (MPI.COMM_WORLD, MPI.COMM_SELF):
            try:
                c.Set_attr(_KEYVAL, p)
            except MPI.Exception:
                pass
    return p


class Bound:
    """The tuned collectives of one communicator as attributes with mpi4py's names and
    signatures (``b.Allgather(sendbuf, recvbuf)``, ``b.Gather(sendbuf, recvbuf, root)``, ...).

    Where the table chooses native MPI for every size of a collective, the attribute *is*
    the native bound method: zero added cost. Otherwise it is a closure indexing the size
    bucket (one ``nbytes``, one ``bit_length``, one list index). Numpy buffers only on the
    tuned path (other buffers go native); build a new one after re-tuning.
    """

    def __init__(self, p: "Plan"):
        self.plan = p
        nat = p.comm
        for coll, attr in _NATIVE.items():
            fns = getattr(p, coll)
            if all(n == "native" for n in p.choice[coll]):
                setattr(self, attr, getattr(nat, attr))
            else:
                setattr(self, attr, _bucketed(coll, fns, getattr(nat, attr), p.size))


def _bucketed(coll, fns, native, size):
    nd = _ndarray
    if coll == "alltoall":
        def alltoall(sendbuf, recvbuf):
            if sendbuf.__class__ is nd:
                return fns[(sendbuf.nbytes // size).bit_length()](sendbuf, recvbuf)
            return native(sendbuf, recvbuf)
        return alltoall
    if coll == "bcast":
        def bcast(buf, root=0):
            if buf.__class__ is nd:
                return fns[buf.nbytes.bit_length()](buf, root)
            return native(buf, root)
        return bcast
    if coll in ("allreduce", "reduce"):
        def red(sendbuf, recvbuf, op=MPI.SUM, *root):
            if sendbuf.__class__ is nd:
                fn = fns[sendbuf.nbytes.bit_length()]
                if fn.__class__ is not _partial or _predefined(op):
                    return fn(sendbuf, recvbuf, op, *root)
            return native(sendbuf, recvbuf, op, *root)
        return red

    def gathering(sendbuf, recvbuf, *root):
        if sendbuf.__class__ is nd:
            return fns[sendbuf.nbytes.bit_length()](sendbuf, recvbuf, *root)
        return native(sendbuf, recvbuf, *root)
    return gathering


def bind(comm) -> Bound:
    """:class:`Bound` tuned collectives of ``comm`` (collective on first use, like
    :func:`plan`): ``b = bind(comm); b.Allgather(send, recv)``."""
    return Bound(plan(comm))


def forget_plans() -> None:
    """Drop every cached plan (collective over each communicator); the next call rebuilds."""
    for p in list(_PLANS.values()):
        p.free()
    _PLANS.clear()


def _plan(comm) -> Plan:
    try:
        return _PLANS[comm.mpi.handle]
    except (AttributeError, KeyError):
        return plan(comm)


def allgather(comm, sendbuf, recvbuf, algorithm: str | None = None) -> None:
    """Tuned ``comm.Allgather(sendbuf, recvbuf)``; ``algorithm=`` forces one."""
    L = _L_ALLGATHER
    if comm is L[0] and sendbuf.__class__ is _ndarray and algorithm is None:
        return L[1][sendbuf.nbytes.bit_length()](sendbuf, recvbuf)
    try:
        p = _PLANS[comm.handle]
    except (AttributeError, KeyError):
        p = _plan(comm)
    if algorithm is None:
        try:
            n = sendbuf.nbytes
        except AttributeError:
            n = _nbytes(sendbuf, recvbuf, p.size)
        L[0], L[1] = comm, p.allgather
        return p.allgather[n.bit_length()](sendbuf, recvbuf)
    return p.algorithm("allgather", algorithm)(sendbuf, recvbuf)


def gather(comm, sendbuf, recvbuf, root: int = 0, algorithm: str | None = None) -> None:
    """Tuned ``comm.Gather(sendbuf, recvbuf, root)``; ``algorithm=`` forces one."""
    L = _L_GATHER
    if comm is L[0] and sendbuf.__class__ is _ndarray and algorithm is None:
        return L[1][sendbuf.nbytes.bit_length()](sendbuf, recvbuf, root)
    try:
        p = _PLANS[comm.handle]
    except (AttributeError, KeyError):
        p = _plan(comm)
    if algorithm is None:
        try:
            n = sendbuf.nbytes
        except AttributeError:
            n = _nbytes(sendbuf, recvbuf, p.size)
        L[0], L[1] = comm, p.gather
        return p.gather[n.bit_length()](sendbuf, recvbuf, root)
    return p.algorithm("gather", algorithm)(sendbuf, recvbuf, root)


def alltoall(comm, sendbuf, recvbuf, algorithm: str | None = None) -> None:
    """Tuned ``comm.Alltoall(sendbuf, recvbuf)`` (bucket = per-peer block); ``algorithm=``
    forces one."""
    L = _L_ALLTOALL
    if comm is L[0] and sendbuf.__class__ is _ndarray and algorithm is None:
        return L[1][0][(sendbuf.nbytes // L[1][1]).bit_length()](sendbuf, recvbuf)
    try:
        p = _PLANS[comm.handle]
    except (AttributeError, KeyError):
        p = _plan(comm)
    if algorithm is None:
        L[0], L[1] = comm, (p.alltoall, p.size)
        try:
            n = sendbuf.nbytes // p.size
        except AttributeError:
            n = _nbytes(sendbuf, recvbuf, p.size)
            if sendbuf is not MPI.IN_PLACE:
                n //= p.size
        return p.alltoall[n.bit_length()](sendbuf, recvbuf)
    return p.algorithm("alltoall", algorithm)(sendbuf, recvbuf)


def bcast(comm, buf, root: int = 0, algorithm: str | None = None) -> None:
    """Tuned ``comm.Bcast(buf, root)``; ``algorithm=`` forces one."""
    L = _L_BCAST
    if comm is L[0] and buf.__class__ is _ndarray and algorithm is None:
        return L[1][buf.nbytes.bit_length()](buf, root)
    try:
        p = _PLANS[comm.handle]
    except (AttributeError, KeyError):
        p = _plan(comm)
    if algorithm is None:
        try:
            n = buf.nbytes
        except AttributeError:
            n = _nbytes(buf, None, 1)
        L[0], L[1] = comm, p.bcast
        return p.bcast[n.bit_length()](buf, root)
    return p.algorithm("bcast", algorithm)(buf, root)


def allreduce(comm, sendbuf, recvbuf, op=MPI.SUM, algorithm: str | None = None) -> None:
    """Tuned ``comm.Allreduce(sendbuf, recvbuf, op)``; ``algorithm=`` forces one. The pyfw
    algorithms serve predefined ops on numpy arrays; other ops always go native."""
    L = _L_ALLREDUCE
    if comm is L[0] and recvbuf.__class__ is _ndarray and algorithm is None:
        fn = L[1][recvbuf.nbytes.bit_length()]
    else:
        try:
            p = _PLANS[comm.handle]
        except (AttributeError, KeyError):
            p = _plan(comm)
        if algorithm is not None:
            return p.algorithm("allreduce", algorithm)(sendbuf, recvbuf, op)
        L[0], L[1] = comm, p.allreduce
        fn = p.allreduce[_nbytes(recvbuf, None, 1).bit_length()]
    if fn.__class__ is _partial and not _predefined(op):
        fn = _native_of(comm).Allreduce
    return fn(sendbuf, recvbuf, op)


def reduce(comm, sendbuf, recvbuf, op=MPI.SUM, root: int = 0,
           algorithm: str | None = None) -> None:
    """Tuned ``comm.Reduce(sendbuf, recvbuf, op, root)``; ``algorithm=`` forces one (bucket =
    the send buffer's size, ``recvbuf``'s at an IN_PLACE root)."""
    L = _L_REDUCE
    if comm is L[0] and sendbuf.__class__ is _ndarray and algorithm is None:
        fn = L[1][sendbuf.nbytes.bit_length()]
    else:
        try:
            p = _PLANS[comm.handle]
        except (AttributeError, KeyError):
            p = _plan(comm)
        if algorithm is not None:
            return p.algorithm("reduce", algorithm)(sendbuf, recvbuf, op, root)
        L[0], L[1] = comm, p.reduce
        fn = p.reduce[_nbytes(sendbuf, recvbuf, 1).bit_length()]
    if fn.__class__ is _partial and not _predefined(op):
        fn = _native_of(comm).Reduce
    return fn(sendbuf, recvbuf, op, root)


def _native_of(comm):
    return raw(comm)


def _predefined(op) -> bool:
    try:
        _rd.ufunc_of(op)
        return True
    except TypeError:
        return False


def _nbytes(sendbuf, recvbuf, p: int) -> int:
    """Block size when ``sendbuf`` has no ``nbytes`` (IN_PLACE, bytes-like, buffer specs)."""
    from ._util import nbytes
    if sendbuf is MPI.IN_PLACE:
        return nbytes(recvbuf) // p
    return nbytes(sendbuf)
