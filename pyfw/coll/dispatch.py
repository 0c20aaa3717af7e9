"""Tuned dispatch: ``allgather(comm, sendbuf, recvbuf)`` and friends pick an algorithm per
message-size bucket from the tuner's decision table, native MPI where it wins.

The first call on a communicator is collective: it builds a :class:`Plan` (a private
duplicate for the pyfw algorithms, the node layout, the decision table read by rank 0 and
broadcast) and caches it by the communicator's handle. The bucket of a message of n bytes is
``n.bit_length()`` (0 B, 1 B, 2–3 B, 4–7 B, ...); bucket 0 is the ``"empty"`` no-op (a 0-byte
collective moves nothing, and every rank sees the same size).

Per-call cost: a call with the same communicator object and the same numpy buffer objects
as the previous call of that collective (the usual hot loop) goes straight to the resolved
callable -- for native MPI the mpi4py bound method itself, given pre-built
``[MPI.buffer, count, datatype]`` specs -- after one tuple unpack and three or four identity
tests. The Python frame of the dispatch costs what any one-line Python wrapper costs (on a
real communicator ~40-90 ns at 2 ranks, far more on oversubscribed cores or when the call
runs cache-cold); the specs save about as much inside mpi4py, so the hot path runs at
native speed or faster in a loop (see ``benchmarks/coll_osu.py``). Other calls look the plan
up and compute the bucket (~0.3 µs more). :func:`bind` gives the same dispatch without any
Python frame where the plan is native for every size. All ranks must call the same kind of
entry point (pyfw -- function or :func:`bind`, which decide alike -- or native mpi4py) for
the same collective, as they would have to for any pyfw algorithm.

Every function takes mpi4py's uppercase signature with the communicator first, plus
``algorithm=`` to force one (a name from :data:`ALGORITHMS`, ``"native"`` included).
:func:`use_links` re-ranks the algorithms for the link monitor's current forecasts.
"""
from __future__ import annotations

import functools
import sys
import types

import numpy as np
from mpi4py import MPI

from . import tuner
from .algorithms import reduce as _rd
from ._util import raw
from .plan import _NATIVE, ALGORITHMS, COLLECTIVES, NBUCKETS, Bindings  # noqa: F401 (re-exported)

__all__ = ["Plan", "plan", "Bound", "bind", "use_links", "allgather", "gather", "alltoall", "bcast",
           "allreduce", "reduce", "ALGORITHMS", "COLLECTIVES", "forget_plans"]

_PLANS: dict[int, "Plan"] = {}
_ndarray = np.ndarray
_partial = functools.partial
_NOTIFIED: set[str] = set()

# The hot path. Per collective, one tuple remembers the last call's resolution: the
# communicator object, the send and receive buffer objects (and the op), the resolved
# callable and the arguments to call it with. A call with the same communicator and the same
# numpy buffer objects (a numpy array cannot change its byte size while referenced) costs one
# tuple unpack, three or four identity tests and the call itself. Where native MPI was
# chosen, the callable is the mpi4py bound method and the arguments are pre-parsed
# ``[MPI.buffer(array), count, datatype]`` specs with the very datatype mpi4py infers from the
# array, which mpi4py parses 0.1-0.25 µs faster than a bare array on a real communicator
# (built on the first repeated call, by an ``_up_*`` function standing in for the callable,
# so one-off buffers do not pay for them). The specs hold a buffer export of the arrays
# until a call with other buffers; an array whose ``dtype`` is reassigned in place between
# two calls is not noticed (the cached spec keeps the old datatype).
# Any other call resolves the plan and the size bucket (``nbytes.bit_length()``), calls with
# the caller's own arguments and refreshes the tuple (which holds the last buffers).
_MISS = (None, None, None, None, None, None, None)
_MISS_BC = (None, None, None, None, None)
_MISS_OP = (None, None, None, None, None, None, None, None)
_AG = _GA = _A2A = _MISS
_BC = _MISS_BC
_AR = _RD = _MISS_OP
_TYPES = MPI._typedict
_membuf = MPI.buffer
_method = types.MethodType
_LAST_PLAN = (None, None)  # (communicator object, its plan): the resolvers' first try


def _reset_fast_paths() -> None:
    global _AG, _GA, _A2A, _BC, _AR, _RD, _LAST_PLAN
    _AG = _GA = _A2A = _MISS
    _BC = _MISS_BC
    _AR = _RD = _MISS_OP
    _LAST_PLAN = (None, None)


def _spec(buf, blocks: int = 1):
    """``[MPI.buffer(buf), count, datatype]`` for a contiguous native-order numpy array of a
    basic dtype, with the datatype mpi4py itself would infer and ``count`` = its items over
    ``blocks`` (the per-process count of a multi-block buffer); anything else unchanged, so
    mpi4py parses it (and raises) exactly as for a direct call.

    mpi4py parses such a spec faster than a bare array: the buffer export of an
    ``MPI.buffer`` is a plain fill-in (numpy's has to describe the array), and neither the
    format string nor the datatype extent is looked up. A read-only array gives a read-only
    buffer, which mpi4py refuses as a receive buffer as it would refuse the array."""
    if buf.__class__ is _ndarray:
        dt = buf.dtype
        t = _TYPES.get(dt.char)
        n = buf.size
        if t is not None and dt.isnative and n % blocks == 0 and \
                t.Get_extent()[1] == dt.itemsize:
            try:
                return [_membuf(buf), n // blocks, t]
            except (BufferError, ValueError, TypeError):  # not contiguous: mpi4py says so
                pass
    return buf


def _forget(comm, keyval, plan):
    """MPI attribute delete callback: the comm is being freed, or the attribute replaced."""
    h = getattr(plan, "handle", None)
    if _PLANS.get(h) is plan:
        del _PLANS[h]
        _reset_fast_paths()


_KEYVAL = MPI.Comm.Create_keyval(delete_fn=_forget)


class Plan(Bindings):
    """Per-communicator state of the dispatch (collective to build; use :func:`plan`).

    ``plan.allgather[bucket]`` etc. are the chosen callables with mpi4py's signature;
    ``plan.choice[coll][bucket]`` their names. Bucket 0 (0 B) is always ``"empty"``.
    :meth:`use_links` re-ranks the algorithms for the current link forecasts.
    """

    def __init__(self, comm, table: dict | None = None, notice: bool = True):
        super().__init__(comm)
        c = self.comm
        if table is None and self.size > 1:  # one process: native is the only candidate
            table, why = tuner.load_table(c, self.layout)
            if why and notice and self.rank == 0 and why not in _NOTIFIED:
                _NOTIFIED.add(why)
                print(f"pyfw.coll: {why}; using native MPI", file=sys.stderr)
        self.table = table
        self.links = None  # current (latency, bandwidth) matrices given to use_links
        self._decide()

    def _decide(self) -> None:
        choice = tuner.decisions(self.table, self.size, links=self.links) if self.table \
            else {}
        self.choice = {}
        for coll in COLLECTIVES:
            names = list(choice.get(coll) or ["native"] * NBUCKETS)
            names[0] = "empty"
            self.choice[coll] = names
            setattr(self, coll, [self.algorithm(coll, n) for n in names])
        _reset_fast_paths()

    def use_links(self, source) -> dict[str, list[str]]:
        """Re-rank the algorithms for the current links (collective): ``source`` is a
        :class:`pyfw.monitor.OnlineMonitor` (its per-link forecasts), a
        :class:`pyfw.monitor.LinkMatrix` or a ``(latency, bandwidth)`` pair of p x p arrays;
        ``None`` goes back to the tuned table alone. Rank 0's links are broadcast, so every
        rank decides alike. Returns the new :attr:`choice`."""
        from .model import links_from
        links = None if source is None else links_from(source, self.size)
        self.links = self.comm.bcast(links, root=0)
        self._decide()
        return self.choice

    def free(self) -> None:
        """Free the private communicators and windows (collective)."""
        super().free()
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
    _reset_fast_paths()
    return p


def use_links(comm, source) -> dict[str, list[str]]:
    """Re-rank ``comm``'s tuned choices for the link monitor's current forecasts
    (collective; see :meth:`Plan.use_links`)."""
    return plan(comm).use_links(source)


class Bound:
    """The tuned collectives of one communicator with mpi4py's names and signatures
    (``b.Allgather(sendbuf, recvbuf)``, ``b.Gather(sendbuf, recvbuf, root)``, ...), deciding
    exactly like the module functions (the same plan and buckets), so ranks may mix the two
    forms. :func:`bind` makes one; make a new one after re-tuning or :meth:`Plan.use_links`.

    ``bind(comm)`` returns a *subclass* of ``Bound`` made for that communicator, not an
    instance: the collectives are class attributes, which CPython finds through a cached
    class lookup, while an instance attribute is a dictionary lookup that cost +45 ns per call
    (~4 % of a 1 µs collective) in the paired benchmark at 2 ranks. ``b.plan`` is the plan.

    Where the plan picks native MPI for every non-empty size of a collective, the attribute
    *is* the communicator's mpi4py bound method (no Python frame at all: the call costs what
    native costs). A 0-byte native call completes locally in Open MPI and MPICH, like the
    dispatch's 0-byte no-op, so mixing the forms stays safe. Otherwise the attribute is a
    one-frame closure over the communicator running the module functions' hot path (and
    sharing its cache)."""

    plan: "Plan | None" = None

    def __new__(cls, *args, **kwargs):
        raise TypeError("use pyfw.coll.bind(comm): it returns the Bound class of comm")

    @staticmethod
    def of(p: "Plan") -> type:
        """The ``Bound`` subclass for plan ``p``."""
        comm = p.comm
        attrs = {"plan": p, "__slots__": (), "__doc__": Bound.__doc__}
        for coll, make in (("allgather", _bound_allgather), ("gather", _bound_gather),
                           ("alltoall", _bound_alltoall), ("bcast", _bound_bcast),
                           ("allreduce", _bound_allreduce), ("reduce", _bound_reduce)):
            if all(n == "native" for n in p.choice[coll][1:]):
                attrs[_NATIVE[coll]] = getattr(comm, _NATIVE[coll])
            else:
                attrs[_NATIVE[coll]] = make(comm)
        return type(f"Bound[{comm.Get_name() or hex(comm.handle)}]", (Bound,), attrs)


def _bound_allgather(comm):
    def Allgather(sendbuf, recvbuf):
        k, s, r, f, S, R, g = _AG
        if sendbuf is s and recvbuf is r and comm is k:
            return f(S, R)
        return _allgather(comm, sendbuf, recvbuf, None)
    return Allgather


def _bound_gather(comm):
    def Gather(sendbuf, recvbuf, root=0):
        k, s, r, f, S, R, g = _GA
        if sendbuf is s and recvbuf is r and comm is k:
            return f(S, R, root)
        return _gather(comm, sendbuf, recvbuf, root, None)
    return Gather


def _bound_alltoall(comm):
    def Alltoall(sendbuf, recvbuf):
        k, s, r, f, S, R, g = _A2A
        if sendbuf is s and recvbuf is r and comm is k:
            return f(S, R)
        return _alltoall(comm, sendbuf, recvbuf, None)
    return Alltoall


def _bound_bcast(comm):
    def Bcast(buf, root=0):
        k, b, f, B, g = _BC
        if buf is b and comm is k:
            return f(B, root)
        return _bcast(comm, buf, root, None)
    return Bcast


def _bound_allreduce(comm):
    def Allreduce(sendbuf, recvbuf, op=MPI.SUM):
        k, s, r, o, f, S, R, g = _AR
        if recvbuf is r and sendbuf is s and comm is k and op is o:
            return f(S, R, op)
        return _allreduce(comm, sendbuf, recvbuf, op, None)
    return Allreduce


def _bound_reduce(comm):
    def Reduce(sendbuf, recvbuf, op=MPI.SUM, root=0):
        k, s, r, o, f, S, R, g = _RD
        if sendbuf is s and recvbuf is r and comm is k and op is o:
            return f(S, R, op, root)
        return _reduce(comm, sendbuf, recvbuf, op, root, None)
    return Reduce


def bind(comm) -> type:
    """The :class:`Bound` tuned collectives of ``comm`` (collective on first use, like
    :func:`plan`): ``b = bind(comm); b.Allgather(send, recv)``."""
    return Bound.of(plan(comm))


def forget_plans() -> None:
    """Drop every cached plan (collective over each communicator); the next call rebuilds."""
    for p in list(_PLANS.values()):
        p.free()
    _PLANS.clear()
    _reset_fast_paths()


def _plan(comm) -> Plan:
    global _LAST_PLAN
    k, p = _LAST_PLAN
    if comm is k:
        return p
    try:
        p = _PLANS[comm.handle]
    except (AttributeError, KeyError):
        try:
            p = _PLANS[comm.mpi.handle]
        except (AttributeError, KeyError):
            p = plan(comm)
    _LAST_PLAN = (comm, p)
    return p


# ------------------------------------------------------------------ the dispatch functions
# Each is the hot path (identity tests on the cached tuple) in front of a resolver.

def allgather(comm, sendbuf, recvbuf, algorithm: str | None = None) -> None:
    """Tuned ``comm.Allgather(sendbuf, recvbuf)``; ``algorithm=`` forces one."""
    k, s, r, f, S, R, g = _AG
    if sendbuf is s and recvbuf is r and comm is k and algorithm is None:
        return f(S, R)
    return _allgather(comm, sendbuf, recvbuf, algorithm)


def _allgather(comm, sendbuf, recvbuf, algorithm):
    global _AG
    k, p = _LAST_PLAN
    if comm is not k:
        p = _plan(comm)
    if algorithm is not None:
        return p.algorithm("allgather", algorithm)(sendbuf, recvbuf)
    if sendbuf.__class__ is _ndarray:
        g = p.allgather[sendbuf.nbytes.bit_length()]
        _AG = (comm, sendbuf, recvbuf, _up_allgather if g.__class__ is _method else g,
               sendbuf, recvbuf, g)
        return g(sendbuf, recvbuf)
    return p.allgather[_nbytes(sendbuf, recvbuf, p.size).bit_length()](sendbuf, recvbuf)


def _up_allgather(sendbuf, recvbuf):
    global _AG
    k, s, r, f, S, R, g = _AG
    S, R = _spec(sendbuf), _spec(recvbuf, g.__self__.Get_size())
    _AG = (k, s, r, g, S, R, g)
    return g(S, R)


def gather(comm, sendbuf, recvbuf, root: int = 0, algorithm: str | None = None) -> None:
    """Tuned ``comm.Gather(sendbuf, recvbuf, root)``; ``algorithm=`` forces one."""
    k, s, r, f, S, R, g = _GA
    if sendbuf is s and recvbuf is r and comm is k and algorithm is None:
        return f(S, R, root)
    return _gather(comm, sendbuf, recvbuf, root, algorithm)


def _gather(comm, sendbuf, recvbuf, root, algorithm):
    global _GA
    k, p = _LAST_PLAN
    if comm is not k:
        p = _plan(comm)
    if algorithm is not None:
        return p.algorithm("gather", algorithm)(sendbuf, recvbuf, root)
    if sendbuf.__class__ is _ndarray:
        g = p.gather[sendbuf.nbytes.bit_length()]
        _GA = (comm, sendbuf, recvbuf, _up_gather if g.__class__ is _method else g,
               sendbuf, recvbuf, g)
        return g(sendbuf, recvbuf, root)
    return p.gather[_nbytes(sendbuf, recvbuf, p.size).bit_length()](sendbuf, recvbuf, root)


def _up_gather(sendbuf, recvbuf, root):
    global _GA
    k, s, r, f, S, R, g = _GA
    S, R = _spec(sendbuf), _spec(recvbuf, g.__self__.Get_size())
    _GA = (k, s, r, g, S, R, g)
    return g(S, R, root)


def alltoall(comm, sendbuf, recvbuf, algorithm: str | None = None) -> None:
    """Tuned ``comm.Alltoall(sendbuf, recvbuf)`` (bucket = per-peer block); ``algorithm=``
    forces one."""
    k, s, r, f, S, R, g = _A2A
    if sendbuf is s and recvbuf is r and comm is k and algorithm is None:
        return f(S, R)
    return _alltoall(comm, sendbuf, recvbuf, algorithm)


def _alltoall(comm, sendbuf, recvbuf, algorithm):
    global _A2A
    k, p = _LAST_PLAN
    if comm is not k:
        p = _plan(comm)
    if algorithm is not None:
        return p.algorithm("alltoall", algorithm)(sendbuf, recvbuf)
    if sendbuf.__class__ is _ndarray:
        g = p.alltoall[(sendbuf.nbytes // p.size).bit_length()]
        _A2A = (comm, sendbuf, recvbuf, _up_alltoall if g.__class__ is _method else g,
                sendbuf, recvbuf, g)
        return g(sendbuf, recvbuf)
    n = _nbytes(sendbuf, recvbuf, p.size)
    if sendbuf is not MPI.IN_PLACE:
        n //= p.size
    return p.alltoall[n.bit_length()](sendbuf, recvbuf)


def _up_alltoall(sendbuf, recvbuf):
    global _A2A
    k, s, r, f, S, R, g = _A2A
    n = g.__self__.Get_size()
    S, R = _spec(sendbuf, n), _spec(recvbuf, n)
    _A2A = (k, s, r, g, S, R, g)
    return g(S, R)


def bcast(comm, buf, root: int = 0, algorithm: str | None = None) -> None:
    """Tuned ``comm.Bcast(buf, root)``; ``algorithm=`` forces one."""
    k, b, f, B, g = _BC
    if buf is b and comm is k and algorithm is None:
        return f(B, root)
    return _bcast(comm, buf, root, algorithm)


def _bcast(comm, buf, root, algorithm):
    global _BC
    k, p = _LAST_PLAN
    if comm is not k:
        p = _plan(comm)
    if algorithm is not None:
        return p.algorithm("bcast", algorithm)(buf, root)
    if buf.__class__ is _ndarray:
        g = p.bcast[buf.nbytes.bit_length()]
        _BC = (comm, buf, _up_bcast if g.__class__ is _method else g, buf, g)
        return g(buf, root)
    return p.bcast[_nbytes(buf, None, 1).bit_length()](buf, root)


def _up_bcast(buf, root):
    global _BC
    k, b, f, B, g = _BC
    B = _spec(buf)
    _BC = (k, b, g, B, g)
    return g(B, root)


def allreduce(comm, sendbuf, recvbuf, op=MPI.SUM, algorithm: str | None = None) -> None:
    """Tuned ``comm.Allreduce(sendbuf, recvbuf, op)``; ``algorithm=`` forces one (bucket =
    the receive buffer's size). The pyfw algorithms serve predefined ops on numpy arrays;
    other ops always go native."""
    k, s, r, o, f, S, R, g = _AR
    if recvbuf is r and sendbuf is s and comm is k and op is o and algorithm is None:
        return f(S, R, op)
    return _allreduce(comm, sendbuf, recvbuf, op, algorithm)


def _allreduce(comm, sendbuf, recvbuf, op, algorithm):
    global _AR
    k, p = _LAST_PLAN
    if comm is not k:
        p = _plan(comm)
    if algorithm is not None:
        return p.algorithm("allreduce", algorithm)(sendbuf, recvbuf, op)
    nd = recvbuf.__class__ is _ndarray
    g = p.allreduce[(recvbuf.nbytes if nd else _nbytes(recvbuf, None, 1)).bit_length()]
    if g.__class__ is _partial and not (nd and _predefined(op)):
        g = p.comm.Allreduce
    if nd:
        _AR = (comm, sendbuf, recvbuf, op, _up_allreduce if g.__class__ is _method else g,
               sendbuf, recvbuf, g)
    return g(sendbuf, recvbuf, op)


def _up_allreduce(sendbuf, recvbuf, op):
    global _AR
    k, s, r, o, f, S, R, g = _AR
    S, R = _spec(sendbuf), _spec(recvbuf)
    _AR = (k, s, r, o, g, S, R, g)
    return g(S, R, op)


def reduce(comm, sendbuf, recvbuf, op=MPI.SUM, root: int = 0,
           algorithm: str | None = None) -> None:
    """Tuned ``comm.Reduce(sendbuf, recvbuf, op, root)``; ``algorithm=`` forces one (bucket =
    the send buffer's size, ``recvbuf``'s at an IN_PLACE root)."""
    k, s, r, o, f, S, R, g = _RD
    if sendbuf is s and recvbuf is r and comm is k and op is o and algorithm is None:
        return f(S, R, op, root)
    return _reduce(comm, sendbuf, recvbuf, op, root, algorithm)


def _reduce(comm, sendbuf, recvbuf, op, root, algorithm):
    global _RD
    k, p = _LAST_PLAN
    if comm is not k:
        p = _plan(comm)
    if algorithm is not None:
        return p.algorithm("reduce", algorithm)(sendbuf, recvbuf, op, root)
    nd = sendbuf.__class__ is _ndarray
    g = p.reduce[(sendbuf.nbytes if nd else _nbytes(sendbuf, recvbuf, 1)).bit_length()]
    if g.__class__ is _partial and not (nd and _predefined(op)):
        g = p.comm.Reduce
    if nd:
        _RD = (comm, sendbuf, recvbuf, op, _up_reduce if g.__class__ is _method else g,
               sendbuf, recvbuf, g)
    return g(sendbuf, recvbuf, op, root)


def _up_reduce(sendbuf, recvbuf, op, root):
    global _RD
    k, s, r, o, f, S, R, g = _RD
    S, R = _spec(sendbuf), _spec(recvbuf)
    _RD = (k, s, r, o, g, S, R, g)
    return g(S, R, op, root)


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
