"""Slab bounds from a per-plane cost and per-rank speeds (pure functions, no MPI).

A slab decomposition of ``n`` planes over ``p`` ranks is described by ``cuts``: an int array of
length ``p + 1`` with ``cuts[0] == 0``, ``cuts[-1] == n`` and rank ``i`` owning planes
``cuts[i]:cuts[i+1]``.

:func:`partition` places the cuts by a prefix sum: with ``W_k`` the cost of planes ``0..k-1``
and ``S_i`` the speed of ranks ``0..i-1``, cut ``i`` is the plane boundary whose ``W`` is
nearest to ``W_n * S_i / S_p`` (then clamped so every rank keeps ``min_planes``). Every rank's
time ``cost_i / speed_i`` is then within one plane of its share of the ideal time
``W_n / S_p``, so the slowest rank is optimal to one plane.

One plane can be a lot: 200 planes over 8 ranks with one 3x slower leave that rank ~9
planes, so rounding its cut the wrong way costs ~11 % (measured: 1.11x the ideal with a
non-uniform cost, where the best whole-plane cuts give 1.02x). So the rounded cuts are then
tightened: bisection on the bottleneck ``T`` with a greedy test (each rank, in order, takes
the most planes whose cost fits in ``T * speed``) finds the smallest ``T`` whole planes
allow, and each cut is placed nearest its proportional target inside the window that keeps
every slab within that ``T`` (so cuts barely move when speeds wobble). The tightened cuts are
kept only if their bottleneck is smaller by more than 0.1 % (so a speed wobble does not
flip the cuts); the result is never worse than the rounding and is a pure function of the
inputs (the same on every rank).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigurationError

__all__ = ["even_cuts", "partition", "slab_costs", "slab_times", "bottleneck", "validate_cuts"]


def even_cuts(n: int, p: int, min_planes: int = 1) -> np.ndarray:
    """Cuts that give every rank ``n // p`` or ``n // p + 1`` planes (the first ranks get more)."""
    return partition(np.ones(n), np.ones(p), min_planes=min_planes)


def _check(n: int, p: int, min_planes: int) -> None:
    if p < 1:
        raise ConfigurationError(f"need at least one rank, got {p}")
    if min_planes < 1:
        raise ConfigurationError(f"min_planes must be >= 1, got {min_planes}")
    if n < p * min_planes:
        raise ConfigurationError(
            f"grid too small for {p} ranks: {n} planes along the slab axis, need at least "
            f"{p * min_planes} ({min_planes} per rank)")


def partition(cost, speeds, min_planes: int = 1) -> np.ndarray:
    """Cuts (length ``len(speeds) + 1``) balancing ``cost`` (one value per plane, >= 0) over
    ranks of the given ``speeds`` (> 0, any unit); see the module docstring.

    Raises :class:`pyfw.errors.ConfigurationError` on bad input (too few planes for the ranks,
    negative cost, non-positive or non-finite speed).
    """
    cost = np.asarray(cost, dtype=np.float64)
    speeds = np.asarray(speeds, dtype=np.float64)
    if cost.ndim != 1 or speeds.ndim != 1:
        raise ConfigurationError("cost and speeds must be 1-D")
    n, p = cost.size, speeds.size
    _check(n, p, min_planes)
    if not np.all(np.isfinite(cost)) or np.any(cost < 0):
        raise ConfigurationError("plane costs must be finite and >= 0")
    if not np.all(np.isfinite(speeds)) or np.any(speeds <= 0):
        raise ConfigurationError(f"rank speeds must be finite and > 0, got {speeds.tolist()}")
    W = np.concatenate(([0.0], np.cumsum(cost)))
    S = np.concatenate(([0.0], np.cumsum(speeds)))
    cuts = np.empty(p + 1, dtype=np.int64)
    cuts[0], cuts[p] = 0, n
    if W[-1] <= 0:  # no cost anywhere: split the planes evenly
        W = np.arange(n + 1, dtype=np.float64)
    targets = W[-1] * S[1:p] / S[p]
    for i, target in enumerate(targets, start=1):
        k = int(np.searchsorted(W, target))  # W[k-1] < target <= W[k]
        k = min(max(k, 1), n)
        if target - W[k - 1] < W[k] - target:  # the nearer boundary (ties go up)
            k -= 1
        cuts[i] = k
    # enforce monotone cuts with at least min_planes per rank (forward then backward pass)
    for i in range(1, p):
        cuts[i] = max(cuts[i], cuts[i - 1] + min_planes)
    for i in range(p - 1, 0, -1):
        cuts[i] = min(cuts[i], cuts[i + 1] - min_planes)
    if p > 1:
        tight = _tighten(W, speeds, targets, cuts, min_planes)
        if tight is not None:
            cuts = tight
    return cuts


_RTOL = 1e-9
_MIN_GAIN = 1e-3   # tightened cuts replace the rounded ones only if 0.1 % faster


def _greedy(W, speeds, T, min_planes):
    """Cuts where each rank in turn takes the most planes whose cost fits in ``T * speed``
    (leaving ``min_planes`` for each later rank), or None if they do not reach the end."""
    n, p = W.size - 1, speeds.size
    cuts = np.empty(p + 1, dtype=np.int64)
    cuts[0] = z = 0
    for i in range(p):
        k = int(np.searchsorted(W, W[z] + T * speeds[i] * (1 + _RTOL), side="right")) - 1
        k = min(k, n - (p - 1 - i) * min_planes)
        if k < z + min_planes:
            return None
        cuts[i + 1] = z = k
    return cuts if z == n else None


def _tighten(W, speeds, targets, cuts, min_planes):
    """Cuts of the smallest whole-plane bottleneck, each nearest its target within the
    window that keeps that bottleneck; None when they would not beat ``cuts``."""
    n, p = W.size - 1, speeds.size
    hi = float(((W[cuts[1:]] - W[cuts[:-1]]) / speeds).max())
    lo = float(W[-1] / speeds.sum())           # the continuous ideal: a lower bound
    if hi <= lo * (1 + _RTOL) or _greedy(W, speeds, hi, min_planes) is None:
        return None
    for _ in range(60):
        if hi - lo <= _RTOL * hi:
            break
        mid = 0.5 * (lo + hi)
        if _greedy(W, speeds, mid, min_planes) is None:
            lo = mid
        else:
            hi = mid
    g = _greedy(W, speeds, hi, min_planes)
    T = float(((W[g[1:]] - W[g[:-1]]) / speeds).max())
    best = float(((W[cuts[1:]] - W[cuts[:-1]]) / speeds).max())
    if not T < best * (1 - _MIN_GAIN):   # a negligible gain is not worth other cuts
        return None
    # lowest position of each cut from which the later ranks still fit (greedy from the top)
    low = np.empty(p + 1, dtype=np.int64)
    low[p] = z = n
    for i in range(p - 1, 0, -1):
        k = int(np.searchsorted(W, W[z] - T * speeds[i] * (1 + _RTOL), side="left"))
        low[i] = z = max(min(k, z - min_planes), i * min_planes)
    out = np.empty(p + 1, dtype=np.int64)
    out[0], out[p] = 0, n
    for i in range(1, p):
        z = out[i - 1]
        reach = int(np.searchsorted(W, W[z] + T * speeds[i - 1] * (1 + _RTOL),
                                    side="right")) - 1
        a = max(low[i], z + min_planes)
        b = min(reach, g[i], n - (p - i) * min_planes)
        if a > b:
            return g
        k = int(np.searchsorted(W, targets[i - 1]))
        k = min(max(k, 1), n)
        if targets[i - 1] - W[k - 1] < W[k] - targets[i - 1]:
            k -= 1
        out[i] = min(max(k, a), b)
    if np.any(np.diff(out) < min_planes):
        return g
    t = float(((W[out[1:]] - W[out[:-1]]) / speeds).max())
    return out if t <= T * (1 + 1e-7) else g


def validate_cuts(cuts, n: int, p: int, min_planes: int = 1) -> np.ndarray:
    """``cuts`` as an int64 array, checked (length, ends, >= ``min_planes`` planes per rank)."""
    _check(n, p, min_planes)
    c = np.asarray(cuts, dtype=np.int64)
    if c.shape != (p + 1,) or c[0] != 0 or c[-1] != n or np.any(np.diff(c) < min_planes):
        raise ConfigurationError(
            f"invalid cuts {np.asarray(cuts).tolist()} for {n} planes on {p} ranks "
            f"(need 0 = c0 < ... < c{p} = {n}, at least {min_planes} plane(s) each)")
    return c


def slab_costs(cost, cuts) -> np.ndarray:
    """Total cost of each rank's slab."""
    W = np.concatenate(([0.0], np.cumsum(np.asarray(cost, dtype=np.float64))))
    cuts = np.asarray(cuts)
    return W[cuts[1:]] - W[cuts[:-1]]


def slab_times(cost, speeds, cuts) -> np.ndarray:
    """Predicted time of each rank: its slab cost over its speed."""
    return slab_costs(cost, cuts) / np.asarray(speeds, dtype=np.float64)


def bottleneck(cost, speeds, cuts) -> float:
    """Predicted step time of a partition: the slowest rank's time."""
    return float(slab_times(cost, speeds, cuts).max())
