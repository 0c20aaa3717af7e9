"""All-gather algorithms over point-to-point messages.

Each public function has mpi4py's ``Allgather(sendbuf, recvbuf)`` shape plus the communicator
first: ``ring(comm, sendbuf, recvbuf)``. ``sendbuf`` may be ``MPI.IN_PLACE`` (the own block
is already in ``recvbuf``). Any process count, any block size (0 included), any dtype.

Costs (α latency, β per byte, n = p·b bytes gathered):

* ``ring``: (p−1)α + (p−1)/p·nβ; one neighbour each way, good for large blocks.
* ``recursive_doubling``: ⌈lg p⌉α (+2α correction when p is not a power of two); the
  ``p − 2^⌊lg p⌋`` extra ranks first hand their block to a partner and get the result back.
* ``bruck``: ⌈lg p⌉α + (p−1)/p·nβ for any p, plus a final local rotation.
* ``bruck_k(k)``: radix-(k+1) Bruck with k transfers in flight per step, ⌈log_{k+1} p⌉ steps.
* ``direct``: all p−1 transfers in flight at once (α + contention).
* ``direct_k(k)``: direct exchange in rounds that keep k sends and k receives in flight.
"""
from __future__ import annotations

from .._util import IN_PLACE, TAG_ALLGATHER as TAG, bview, raw, scratch, waitall

__all__ = ["ring", "recursive_doubling", "bruck", "bruck_k", "direct", "direct_k", "ALGORITHMS"]


def _prepare(comm, sendbuf, recvbuf):
    c = raw(comm)
    p, r = c.Get_size(), c.Get_rank()
    R = bview(recvbuf)
    b = R.nbytes // p
    if sendbuf is not IN_PLACE:
        S = bview(sendbuf)
        if S.nbytes != b:
            raise ValueError(f"allgather: send block is {S.nbytes} B but the receive buffer "
                             f"holds {p} blocks of {b} B")
        R[r * b:(r + 1) * b] = S
    return c, p, r, R, b


def ring(comm, sendbuf, recvbuf) -> None:
    """Ring all-gather: p−1 steps, each rank passes one block to its right neighbour."""
    c, p, r, R, b = _prepare(comm, sendbuf, recvbuf)
    right, left = (r + 1) % p, (r - 1) % p
    for i in range(p - 1):
        s, t = (r - i) % p, (r - i - 1) % p
        c.Sendrecv(R[s * b:(s + 1) * b], right, TAG, R[t * b:(t + 1) * b], left, TAG)


def recursive_doubling(comm, sendbuf, recvbuf) -> None:
    """Recursive doubling: exchange with rank XOR 2^k, doubling the data each step.

    For p not a power of two, let q = 2^⌊lg p⌋: rank q+i first sends its block to rank i,
    the q low ranks run the exchange (virtual rank v owns blocks v and v+q), then rank i
    sends the whole result to rank q+i (the two correction steps).
    """
    c, p, r, R, b = _prepare(comm, sendbuf, recvbuf)
    if p == 1:
        return
    q = 1 << (p.bit_length() - 1)
    extra = p - q
    if r >= q:  # extra rank: hand over the block, get everything back
        c.Send(R[r * b:(r + 1) * b], r - q, TAG)
        c.Recv(R, r - q, TAG)
        return
    if r < extra:
        c.Recv(R[(r + q) * b:(r + q + 1) * b], r + q, TAG)
    mask = 1
    while mask < q:
        peer = r ^ mask
        mine, theirs = r & ~(mask - 1), peer & ~(mask - 1)
        reqs = [c.Irecv(R[theirs * b:(theirs + mask) * b], peer, TAG)]
        hi = min(q + theirs + mask, p)
        if q + theirs < hi:
            reqs.append(c.Irecv(R[(q + theirs) * b:hi * b], peer, TAG + 100))
        reqs.append(c.Isend(R[mine * b:(mine + mask) * b], peer, TAG))
        hi = min(q + mine + mask, p)
        if q + mine < hi:
            reqs.append(c.Isend(R[(q + mine) * b:hi * b], peer, TAG + 100))
        waitall(reqs)
        mask <<= 1
    if r < extra:
        c.Send(R, r + q, TAG)


def _bruck(comm, sendbuf, recvbuf, k: int) -> None:
    c, p, r, R, b = _prepare(comm, sendbuf, recvbuf)
    if p == 1:
        return
    T = scratch(1, p * b)  # T block i holds the block of rank (r + i) % p
    T[:b] = R[r * b:(r + 1) * b]
    dist = 1
    radix = k + 1
    while dist < p:
        reqs = []
        for j in range(1, radix):
            d = j * dist
            if d >= p:
                break
            cnt = min(dist, p - d)
            reqs.append(c.Irecv(T[d * b:(d + cnt) * b], (r + d) % p, TAG))
            reqs.append(c.Isend(T[:cnt * b], (r - d) % p, TAG))
        waitall(reqs)
        dist *= radix
    # rotate: T[i] -> R[(r + i) % p]
    R[r * b:] = T[:(p - r) * b]
    R[:r * b] = T[(p - r) * b:]


def bruck(comm, sendbuf, recvbuf) -> None:
    """Bruck all-gather: ⌈lg p⌉ steps for any p, then a local rotation."""
    _bruck(comm, sendbuf, recvbuf, 1)


def bruck_k(k: int):
    """Multi-port Bruck: radix k+1, k sends and k receives in flight per step."""
    def algo(comm, sendbuf, recvbuf) -> None:
        _bruck(comm, sendbuf, recvbuf, k)
    algo.__name__ = algo.__qualname__ = f"bruck_k{k}"
    algo.__doc__ = f"Radix-{k + 1} Bruck all-gather, {k} transfers in flight per step."
    return algo


def _direct(comm, sendbuf, recvbuf, k: int) -> None:
    c, p, r, R, b = _prepare(comm, sendbuf, recvbuf)
    mine = R[r * b:(r + 1) * b]
    d = 1
    while d < p:
        reqs = []
        for dd in range(d, min(d + k, p)):
            src = (r - dd) % p
            reqs.append(c.Irecv(R[src * b:(src + 1) * b], src, TAG))
            reqs.append(c.Isend(mine, (r + dd) % p, TAG))
        waitall(reqs)
        d += k


def direct(comm, sendbuf, recvbuf) -> None:
    """Direct all-gather: every rank sends its block to every peer, all in flight at once."""
    _direct(comm, sendbuf, recvbuf, 1 << 30)


def direct_k(k: int):
    """Direct all-gather in rounds of k peers (k sends + k receives in flight)."""
    def algo(comm, sendbuf, recvbuf) -> None:
        _direct(comm, sendbuf, recvbuf, k)
    algo.__name__ = algo.__qualname__ = f"direct_k{k}"
    algo.__doc__ = f"Direct all-gather, {k} peers in flight per round."
    return algo


#: name -> algorithm; the SMP-aware ones live in :mod:`pyfw.coll.smp`
ALGORITHMS = {
    "ring": ring,
    "recursive_doubling": recursive_doubling,
    "bruck": bruck,
    "bruck_k2": bruck_k(2),
    "bruck_k3": bruck_k(3),
    "direct": direct,
    "direct_k2": direct_k(2),
}
