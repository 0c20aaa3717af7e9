"""Reductions: ``allreduce_recursive_doubling(comm, sendbuf, recvbuf, op=MPI.SUM)`` and
``reduce_binomial(comm, sendbuf, recvbuf, op=MPI.SUM, root=0)``.

Numpy arrays and the predefined commutative operations only (SUM, PROD, MAX, MIN, LAND,
LOR, LXOR, BAND, BOR, BXOR); anything else raises ``TypeError`` (use native MPI). Floating
point results may differ from native MPI in the last bits (another summation order) but are
identical on every rank for ``allreduce``.

* recursive doubling: ⌈lg p⌉ (α + nβ + nγ), two correction steps when p is not a power of 2;
* binomial reduce: ⌈lg p⌉ (α + nβ + nγ).
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .._util import IN_PLACE, TAG_REDUCE as TAG, raw

__all__ = ["allreduce_recursive_doubling", "reduce_binomial", "ufunc_of", "ALLREDUCE", "REDUCE"]

_UFUNCS = [
    (MPI.SUM, np.add), (MPI.PROD, np.multiply), (MPI.MAX, np.maximum), (MPI.MIN, np.minimum),
    (MPI.LAND, np.logical_and), (MPI.LOR, np.logical_or), (MPI.LXOR, np.logical_xor),
    (MPI.BAND, np.bitwise_and), (MPI.BOR, np.bitwise_or), (MPI.BXOR, np.bitwise_xor),
]


def ufunc_of(op):
    """The numpy ufunc of a predefined MPI operation (``TypeError`` for others)."""
    for k, f in _UFUNCS:
        if op == k:
            return f
    raise TypeError(f"pyfw.coll reductions support only predefined ops, not {op!r}")


def _apply(f, acc: np.ndarray, other: np.ndarray) -> None:
    if f in (np.logical_and, np.logical_or, np.logical_xor):
        acc[...] = f(acc, other)  # logical ufuncs return bool; cast back to the buffer dtype
    else:
        f(acc, other, out=acc)


def _arrays(sendbuf, recvbuf):
    R = np.asarray(recvbuf)
    if sendbuf is not IN_PLACE:
        S = np.asarray(sendbuf)
        if S.shape != R.shape and S.size != R.size:
            raise ValueError("reduction: send and receive buffers differ in size")
        R.reshape(-1)[...] = S.reshape(-1)
    return R.reshape(-1)


def allreduce_recursive_doubling(comm, sendbuf, recvbuf, op=MPI.SUM) -> None:
    """Recursive-doubling all-reduce (any p: extra ranks fold into a partner first)."""
    f = ufunc_of(op)
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    acc = _arrays(sendbuf, recvbuf)
    if p == 1 or acc.size == 0:
        return
    tmp = np.empty_like(acc)
    q = 1 << (p.bit_length() - 1)
    extra = p - q
    if r >= q:
        c.Send(acc, r - q, TAG)
        c.Recv(acc, r - q, TAG)
        return
    if r < extra:
        c.Recv(tmp, r + q, TAG)
        _apply(f, acc, tmp)
    mask = 1
    while mask < q:
        peer = r ^ mask
        c.Sendrecv(acc, peer, TAG, tmp, peer, TAG)
        # combine in rank order so every rank computes the same bits
        if peer < r:
            _apply(f, tmp, acc)
            acc[...] = tmp
        else:
            _apply(f, acc, tmp)
        mask <<= 1
    if r < extra:
        c.Send(acc, r + q, TAG)


def reduce_binomial(comm, sendbuf, recvbuf, op=MPI.SUM, root: int = 0) -> None:
    """Binomial-tree reduce to ``root`` (``recvbuf`` needed only at the root)."""
    f = ufunc_of(op)
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    if r == root:
        acc = _arrays(sendbuf, recvbuf)
    else:
        acc = np.array(np.asarray(sendbuf).reshape(-1))
    if p == 1 or acc.size == 0:
        return
    v = (r - root) % p
    tmp = np.empty_like(acc)
    mask = 1
    while mask < p:
        if v & mask:
            c.Send(acc, (r - mask) % p, TAG)
            return
        if v + mask < p:
            c.Recv(tmp, (r + mask) % p, TAG)
            _apply(f, acc, tmp)
        mask <<= 1


ALLREDUCE = {"recursive_doubling": allreduce_recursive_doubling}
REDUCE = {"binomial": reduce_binomial}
