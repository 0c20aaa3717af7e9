"""All-to-all algorithms: ``pairwise(comm, sendbuf, recvbuf)``, ``direct``, ``bruck``.

Same shape as mpi4py's ``Alltoall``: ``sendbuf`` (or ``MPI.IN_PLACE``) and ``recvbuf`` each
hold p blocks of b bytes; block j of ``sendbuf`` goes to rank j. Any p, any block size, any dtype.

* ``pairwise``: p−1 ``Sendrecv`` steps with (rank+s, rank−s); (p−1)α + nβ.
* ``direct``: all p−1 sends and receives in flight at once.
* ``bruck``: ⌈lg p⌉ store-and-forward steps, each moving about half the blocks;
  lg p·α + (n/2)·lg p·β: for small blocks.
"""
from __future__ import annotations

import numpy as np

from .._util import IN_PLACE, TAG_ALLTOALL as TAG, bview, raw, scratch, waitall

__all__ = ["pairwise", "direct", "bruck", "ALGORITHMS"]


def _prepare(comm, sendbuf, recvbuf):
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    R = bview(recvbuf)
    S = memoryview(bytes(R)) if sendbuf is IN_PLACE else bview(sendbuf)
    if S.nbytes != R.nbytes:
        raise ValueError(f"alltoall: send buffer {S.nbytes} B, receive buffer {R.nbytes} B")
    b = R.nbytes // p
    R[r * b:(r + 1) * b] = S[r * b:(r + 1) * b]
    return c, p, r, S, R, b


def pairwise(comm, sendbuf, recvbuf) -> None:
    """Pairwise exchange: in step s send block rank+s to rank+s, receive from rank−s."""
    c, p, r, S, R, b = _prepare(comm, sendbuf, recvbuf)
    for s in range(1, p):
        dst, src = (r + s) % p, (r - s) % p
        c.Sendrecv(S[dst * b:(dst + 1) * b], dst, TAG, R[src * b:(src + 1) * b], src, TAG)


def direct(comm, sendbuf, recvbuf) -> None:
    """Direct all-to-all: every send and receive posted at once, then wait for all."""
    c, p, r, S, R, b = _prepare(comm, sendbuf, recvbuf)
    reqs = []
    for s in range(1, p):
        src = (r - s) % p
        reqs.append(c.Irecv(R[src * b:(src + 1) * b], src, TAG))
    for s in range(1, p):
        dst = (r + s) % p
        reqs.append(c.Isend(S[dst * b:(dst + 1) * b], dst, TAG))
    waitall(reqs)


_INDEX: dict[int, list] = {}


def _bruck_index(p: int) -> list:
    """Per step (dist, block indices with that bit set)."""
    got = _INDEX.get(p)
    if got is None:
        idx = np.arange(p)
        got, dist = [], 1
        while dist < p:
            got.append((dist, idx[(idx & dist) != 0]))
            dist <<= 1
        _INDEX[p] = got
    return got


def bruck(comm, sendbuf, recvbuf) -> None:
    """Bruck all-to-all: rotate, lg p steps sending the blocks whose index has bit k set to
    rank + 2^k, then rotate back (block i ends at rank − i)."""
    c, p, r, S, R, b = _prepare(comm, sendbuf, recvbuf)
    if p == 1 or b == 0:  # b is the same on every rank: all return together
        return
    Sa = np.frombuffer(S, np.uint8).reshape(p, b)
    T = np.frombuffer(scratch(4, p * b), np.uint8).reshape(p, b)
    T[:p - r] = Sa[r:]          # T[i] = S[(r + i) % p]
    T[p - r:] = Sa[:r]
    for dist, idx in _bruck_index(p):
        out = np.ascontiguousarray(T[idx])
        inn = np.empty_like(out)
        c.Sendrecv(out, (r + dist) % p, TAG, inn, (r - dist) % p, TAG)
        T[idx] = inn
    Ra = np.frombuffer(R, np.uint8).reshape(p, b)
    # R[(r - i) % p] = T[i]
    order = (r - np.arange(p)) % p
    Ra[order] = T


ALGORITHMS = {"pairwise": pairwise, "direct": direct, "bruck": bruck}
