"""Per-algorithm link cost model: each algorithm's message schedule priced with per-link
latency α(i, j) and bandwidth B(i, j), as the link monitor measures and forecasts them.

:func:`schedule` lists an algorithm's steps; a step is a list of ``(src, dst, nbytes)``
transfers that are in flight together. :func:`cost` prices a schedule:

    step cost = max over ranks r of  max α of r's transfers
                                     + max(Σ sent nbytes / B, Σ received nbytes / B),

(full duplex: sending and receiving overlap, but a root that receives p − 1 blocks in one
step pays their bytes one after the other); the schedule costs the sum of its steps.

The tuner's measurements include Python and MPI overheads this model does not know, so the
model is not used alone: :func:`delta` is the change of an algorithm's modelled time between
the links at tuning time and the current ones, and the decision adds it to the measured (or
Hockney-fitted) time (:func:`pyfw.coll.tuner.decisions`). With links as at tuning time the
delta is 0 and the measured table decides alone. Native MPI is priced with the schedule of the
algorithm Open MPI 5's fixed rules pick for small communicators (:data:`NATIVE_LIKE`).

Block sizes: per rank for allgather / gather / alltoall (per peer), the whole buffer for
bcast / allreduce / reduce, as in the tuner's buckets. Root 0.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["schedule", "cost", "delta", "uniform_links", "links_from", "NATIVE_LIKE",
           "modelled"]


def _native_allgather(p):
    if p == 2:
        return "ring"                       # two_proc: one exchange
    return "recursive_doubling" if p & (p - 1) == 0 else "bruck"


#: collective -> function of p giving the pyfw algorithm whose schedule models native MPI
#: (Open MPI 5.0 coll/tuned fixed rules below 32 ranks; see research/collectives.md 1.3)
NATIVE_LIKE = {
    "allgather": _native_allgather,
    "gather": lambda p: "binomial",
    "alltoall": lambda p: "pairwise",
    "bcast": lambda p: "binomial",
    "allreduce": lambda p: "recursive_doubling",
    "reduce": lambda p: "binomial",
}


def _rd_allgather(p, b):
    q = 1 << (p.bit_length() - 1)
    extra = p - q
    steps = []
    if extra:
        steps.append([(q + i, i, b) for i in range(extra)])
    mask = 1
    while mask < q:
        # each of the q ranks holds `mask` virtual blocks (plus their extra partners' ones)
        nb = int(round(mask * b * p / q))
        steps.append([(r, r ^ mask, nb) for r in range(q)])
        mask <<= 1
    if extra:
        steps.append([(i, q + i, p * b) for i in range(extra)])
    return steps


def _rd_allreduce(p, n):
    q = 1 << (p.bit_length() - 1)
    extra = p - q
    steps = []
    if extra:
        steps.append([(q + i, i, n) for i in range(extra)])
    mask = 1
    while mask < q:
        steps.append([(r, r ^ mask, n) for r in range(q)])
        mask <<= 1
    if extra:
        steps.append([(i, q + i, n) for i in range(extra)])
    return steps


def _bruck_allgather(p, b, k=1):
    steps, dist, radix = [], 1, k + 1
    while dist < p:
        step = []
        for j in range(1, radix):
            d = j * dist
            if d >= p:
                break
            cnt = min(dist, p - d)
            step += [(r, (r - d) % p, cnt * b) for r in range(p)]
        steps.append(step)
        dist *= radix
    return steps


def _direct_allgather(p, b, k=None):
    k = p if k is None else k
    steps, d = [], 1
    while d < p:
        steps.append([(r, (r + dd) % p, b) for dd in range(d, min(d + k, p)) for r in range(p)])
        d += k
    return steps


def _binomial_up(p, n_of):
    """Binomial tree towards root 0: v sends to v − lowbit(v) in the step of its low bit."""
    steps, mask = [], 1
    while mask < p:
        steps.append([(v, v - mask, n_of(v, mask)) for v in range(mask, p, 2 * mask)])
        mask <<= 1
    return steps


def _binomial_down(p, n_of):
    return [[(d, s, n) for s, d, n in st] for st in reversed(_binomial_up(p, n_of))]


def _smp(p, b, node_of):
    """Shared-memory all-gather: only the node leaders' exchange crosses links."""
    if node_of is None or len(set(node_of)) <= 1:
        return []
    nodes = sorted(set(node_of))
    leader = {nd: node_of.index(nd) for nd in nodes}
    count = {nd: node_of.count(nd) for nd in nodes}
    return [[(leader[a], leader[z], count[a] * b) for a in nodes for z in nodes if a != z]]


def schedule(coll: str, alg: str, p: int, b: int, node_of=None) -> list | None:
    """The steps of ``alg`` for ``coll`` on ``p`` ranks with block ``b`` bytes; ``None`` for
    an algorithm the model does not know (``"native"`` is priced by :data:`NATIVE_LIKE`)."""
    if p <= 1:
        return []
    if alg == "native":
        alg = NATIVE_LIKE[coll](p)
    b = int(b)
    if coll == "allgather":
        if alg == "ring":
            return [[(r, (r + 1) % p, b) for r in range(p)] for _ in range(p - 1)]
        if alg == "recursive_doubling":
            return _rd_allgather(p, b)
        if alg == "bruck":
            return _bruck_allgather(p, b)
        if alg.startswith("bruck_k"):
            return _bruck_allgather(p, b, int(alg[7:]))
        if alg == "direct":
            return _direct_allgather(p, b)
        if alg.startswith("direct_k"):
            return _direct_allgather(p, b, int(alg[8:]))
        if alg in ("smp", "smp_bruck"):
            return _smp(p, b, node_of)
    elif coll == "gather":
        if alg == "linear":
            return [[(r, 0, b) for r in range(1, p)]]
        if alg == "binomial":
            return _binomial_up(p, lambda v, m: min(m, p - v) * b)
    elif coll == "alltoall":
        if alg == "pairwise":
            return [[(r, (r + k) % p, b) for r in range(p)] for k in range(1, p)]
        if alg == "direct":
            return [[(r, (r + k) % p, b) for k in range(1, p) for r in range(p)]]
        if alg == "bruck":
            steps, dist = [], 1
            while dist < p:
                nb = sum(1 for i in range(p) if i & dist) * b
                steps.append([(r, (r + dist) % p, nb) for r in range(p)])
                dist <<= 1
            return steps
    elif coll == "bcast":
        if alg == "binomial":
            return _binomial_down(p, lambda v, m: b)
        if alg == "scatter_allgather":
            cs = -(-b // p)
            sc = _binomial_down(p, lambda v, m: min(m, p - v) * cs)
            return sc + [[(r, (r + 1) % p, cs) for r in range(p)] for _ in range(p - 1)]
    elif coll == "allreduce":
        if alg == "recursive_doubling":
            return _rd_allreduce(p, b)
    elif coll == "reduce":
        if alg == "binomial":
            return _binomial_up(p, lambda v, m: b)
    return None


def cost(steps, alpha: np.ndarray, inv_bw: np.ndarray) -> float:
    """Modelled seconds of a schedule (see the module docstring)."""
    total = 0.0
    for step in steps:
        lat: dict[int, float] = {}
        out: dict[int, float] = {}
        inn: dict[int, float] = {}
        for s, d, n in step:
            a = alpha[s, d]
            t = n * inv_bw[s, d]
            for r in (s, d):
                if a > lat.get(r, 0.0):
                    lat[r] = a
            out[s] = out.get(s, 0.0) + t
            inn[d] = inn.get(d, 0.0) + t
        if lat or out:
            total += max(lat.get(r, 0.0) + max(out.get(r, 0.0), inn.get(r, 0.0))
                         for r in set(lat) | set(out) | set(inn))
    return total


def modelled(coll: str, alg: str, p: int) -> bool:
    """Whether the model knows ``alg`` (for block size 1)."""
    return schedule(coll, alg, max(p, 2), 1) is not None


def _arrays(links):
    lat, bw = links
    lat = np.array(lat, dtype=float)
    bw = np.array(bw, dtype=float)
    with np.errstate(divide="ignore"):
        inv = np.where(np.isfinite(bw) & (bw > 0), 1.0 / bw, 0.0)
    lat = np.where(np.isfinite(lat), lat, 0.0)
    return lat, inv


def delta(coll: str, alg: str, p: int, b: float, then, now, node_of=None) -> float:
    """Modelled time of ``alg`` under links ``now`` minus under links ``then`` (each a
    ``(latency, bandwidth)`` pair of p x p arrays); 0 for algorithms the model lacks."""
    steps = schedule(coll, alg, p, int(b), node_of)
    if not steps:
        return 0.0
    a0, i0 = _arrays(then)
    a1, i1 = _arrays(now)
    return cost(steps, a1, i1) - cost(steps, a0, i0)


def uniform_links(p: int, latency: float, bandwidth: float):
    """``(latency, bandwidth)`` matrices of ``p`` ranks with every link alike."""
    lat = np.full((p, p), float(latency))
    bw = np.full((p, p), float(bandwidth))
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, np.inf)
    return lat, bw


def links_from(source, p: int | None = None):
    """``(latency, bandwidth)`` p x p arrays from a link source: an
    :class:`pyfw.monitor.OnlineMonitor` (its current forecasts, ``matrices()``), a
    :class:`pyfw.monitor.LinkMatrix` (``alpha``, ``bandwidth``) or a ``(latency, bandwidth)``
    pair. Links never measured (NaN) take the median of the measured ones."""
    if hasattr(source, "matrices"):
        lat, bw = source.matrices()
    elif hasattr(source, "alpha") and hasattr(source, "bandwidth"):
        lat, bw = source.alpha, source.bandwidth
    else:
        lat, bw = source
    lat = np.array(lat, dtype=float)
    bw = np.array(bw, dtype=float)
    if p is not None and lat.shape != (p, p):
        raise ValueError(f"link matrices are {lat.shape}, expected {(p, p)}")
    off = ~np.eye(lat.shape[0], dtype=bool)
    for m, default in ((lat, 0.0), (bw, math.inf)):
        good = off & np.isfinite(m) & (m >= 0)
        fill = float(np.median(m[good])) if good.any() else default
        m[off & ~good] = fill
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, np.inf)
    return lat, bw
