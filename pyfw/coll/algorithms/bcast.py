"""Broadcast algorithms: ``binomial(comm, buf, root=0)`` and ``scatter_allgather(...)``.

Same shape as mpi4py's ``Bcast(buf, root)``. Any p, any size, any dtype.

* ``binomial``: ⌈lg p⌉α + ⌈lg p⌉·nβ; for small messages.
* ``scatter_allgather``: binomial scatter of p chunks, then a ring all-gather of the chunks
  (van de Geijn); (lg p + p − 1)α + 2(p−1)/p·nβ: for large messages.
"""
from __future__ import annotations

from .._util import TAG_BCAST as TAG, bview, raw

__all__ = ["binomial", "scatter_allgather", "ALGORITHMS"]


def binomial(comm, buf, root: int = 0) -> None:
    """Binomial-tree broadcast (relative rank v receives from v − lowbit(v))."""
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    if p == 1:
        return
    B = bview(buf)
    v = (r - root) % p
    mask = 1
    while mask < p:
        if v & mask:
            c.Recv(B, (r - mask) % p, TAG)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < p:
            c.Send(B, (r + mask) % p, TAG)
        mask >>= 1


def scatter_allgather(comm, buf, root: int = 0) -> None:
    """Scatter (binomial) + ring all-gather broadcast, chunk j of ⌈n/p⌉ bytes for relative
    rank j; chunks past the end are empty."""
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    if p == 1:
        return
    B = bview(buf)
    n = B.nbytes
    cs = -(-n // p)

    def span(first, count):  # byte range of chunks [first, first+count)
        return B[min(first * cs, n):min((first + count) * cs, n)]

    v = (r - root) % p
    # scatter: v receives chunks [v, v + lowbit(v)) from its parent, forwards the upper halves
    mask = 1
    while mask < p:
        if v & mask:
            c.Recv(span(v, min(mask, p - v)), (r - mask) % p, TAG)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < p:
            c.Send(span(v + mask, min(mask, p - v - mask)), (r + mask) % p, TAG)
        mask >>= 1
    # ring all-gather of the chunks, in relative ranks
    right, left = (r + 1) % p, (r - 1) % p
    for i in range(p - 1):
        s, t = (v - i) % p, (v - i - 1) % p
        c.Sendrecv(span(s, 1), right, TAG, span(t, 1), left, TAG)


ALGORITHMS = {"binomial": binomial, "scatter_allgather": scatter_allgather}
