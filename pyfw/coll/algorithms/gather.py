"""Gather algorithms: ``linear(comm, sendbuf, recvbuf, root=0)`` and ``binomial(...)``.

Same shape as mpi4py's ``Gather``: ``recvbuf`` matters only at the root (``None`` elsewhere);
at the root ``sendbuf`` may be ``MPI.IN_PLACE``. Any p, any block size, any dtype.

* ``linear``: the root posts p−1 receives at once; (p−1)α + (p−1)/p·nβ at the root.
* ``binomial``: a binomial tree rooted at ``root``; ⌈lg p⌉α + (p−1)/p·nβ, interior ranks
  forward their whole subtree in one message.
"""
from __future__ import annotations

from .._util import IN_PLACE, TAG_GATHER as TAG, bview, raw, scratch, waitall

__all__ = ["linear", "binomial", "ALGORITHMS"]


def _root_prepare(c, p, r, sendbuf, recvbuf):
    R = bview(recvbuf)
    b = R.nbytes // p
    if sendbuf is not IN_PLACE:
        S = bview(sendbuf)
        if S.nbytes != b:
            raise ValueError(f"gather: send block is {S.nbytes} B but the receive buffer "
                             f"holds {p} blocks of {b} B")
        R[r * b:(r + 1) * b] = S
    return R, b


def linear(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """Linear gather: every rank sends straight to the root."""
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    if r != root:
        c.Send(bview(sendbuf), root, TAG)
        return
    R, b = _root_prepare(c, p, r, sendbuf, recvbuf)
    waitall([c.Irecv(R[i * b:(i + 1) * b], i, TAG) for i in range(p) if i != root])


def binomial(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """Binomial-tree gather (relative rank v = (rank − root) mod p; v's parent is v − lowbit(v))."""
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    v = (r - root) % p
    if r == root:
        R, b = _root_prepare(c, p, r, sendbuf, recvbuf)
        if p == 1:
            return
        # T holds blocks in relative order (block v at v*b); with root 0 it is R itself
        T = R if root == 0 else scratch(3, p * b)
        if root != 0:
            T[:b] = R[r * b:(r + 1) * b]
        mask = 1
        while mask < p:
            child = v + mask
            cnt = min(mask, p - child)
            c.Recv(T[child * b:(child + cnt) * b], (child + root) % p, TAG)
            mask <<= 1
        if root != 0:  # relative block i is rank (i + root) % p
            R[root * b:] = T[:(p - root) * b]
            R[:root * b] = T[(p - root) * b:]
        return
    S = bview(sendbuf)
    b = S.nbytes
    low = v & -v
    parent = ((v - low) + root) % p
    size = min(low, p - v)  # blocks in my subtree, me included
    if size == 1:
        c.Send(S, parent, TAG)
        return
    T = scratch(3, size * b)
    T[:b] = S
    mask = 1
    while mask < low and v + mask < p:
        child = v + mask
        cnt = min(mask, p - child)
        c.Recv(T[mask * b:(mask + cnt) * b], (child + root) % p, TAG)
        mask <<= 1
    c.Send(T, parent, TAG)


ALGORITHMS = {"linear": linear, "binomial": binomial}
