"""Global reductions over a :class:`~pyfw.domain.slab.SlabDomain` field.

Sums are made **independent of the decomposition**: each rank reduces its own planes one at a
time, the per-plane partials are placed in a zero-padded array of all planes and summed
element-wise across ranks (adding zeros is exact), and every rank then adds the planes in
global order. So a mean or a per-label statistic is bitwise the same on 1 or 4 ranks and
after a rebalance. Min and max are exact anyway.

Every collective goes through :func:`allreduce`, which uses the tuned collectives of
:mod:`pyfw.coll`.
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .. import coll

__all__ = ["allreduce", "field_min", "field_max", "field_sum", "field_mean", "label_stats",
           "probe"]

_OPS = {"sum": MPI.SUM, "min": MPI.MIN, "max": MPI.MAX}


def allreduce(comm, array: np.ndarray, op: str = "sum") -> np.ndarray:
    """Element-wise reduction of a numpy array over ``comm`` (a pyfw Comm); op: sum/min/max.

    Goes through the tuned dispatch of :mod:`pyfw.coll` (native MPI where that is faster).
    Sums stay bitwise reproducible whatever algorithm runs: callers reduce arrays in which
    each rank fills only its own planes and the others are zero.
    """
    a = np.ascontiguousarray(array)
    out = np.empty_like(a)
    coll.allreduce(comm.mpi, a, out, _OPS[op])
    return out


def _owned(dom, name, mask):
    a = dom.interior(name)
    if mask is None:
        return a, None
    m = dom.interior(mask) if isinstance(mask, str) else mask
    return a, m.astype(bool, copy=False)


def field_min(dom, name: str, mask=None) -> float:
    """Global minimum of a field (over voxels where ``mask`` is true; ``mask`` is a field
    name or a boolean array of the owned planes). +inf if no voxel is selected."""
    a, m = _owned(dom, name, mask)
    v = a[m] if m is not None else a
    local = np.array([v.min() if v.size else np.inf], dtype=np.float64)
    return float(allreduce(dom.comm, local, "min")[0])


def field_max(dom, name: str, mask=None) -> float:
    """Global maximum of a field (see :func:`field_min`); -inf if no voxel is selected."""
    a, m = _owned(dom, name, mask)
    v = a[m] if m is not None else a
    local = np.array([v.max() if v.size else -np.inf], dtype=np.float64)
    return float(allreduce(dom.comm, local, "max")[0])


def _plane_partials(dom, values, labels, nlabels):
    """Per-plane, per-label (count, sum) in zero-padded global arrays."""
    nz = dom.shape[0]
    cnt = np.zeros((nz, nlabels), dtype=np.float64)
    tot = np.zeros((nz, nlabels), dtype=np.float64)
    for k in range(dom.n):
        lab = labels[k].ravel()
        cnt[dom.lo + k] = np.bincount(lab, minlength=nlabels)[:nlabels]
        tot[dom.lo + k] = np.bincount(lab, weights=values[k].ravel(),
                                      minlength=nlabels)[:nlabels]
    both = allreduce(dom.comm, np.stack([cnt, tot]), "sum")
    # add planes in global order: identical on every rank and for every decomposition
    c = np.zeros(nlabels)
    s = np.zeros(nlabels)
    for z in range(nz):
        c += both[0, z]
        s += both[1, z]
    return c, s


def field_sum(dom, name: str, mask=None, weights=None) -> float:
    """Global sum of a field (times ``weights``, an array of the owned planes, if given)."""
    a, m = _owned(dom, name, mask)
    v = a * weights if weights is not None else a
    lab = np.zeros(a.shape, dtype=np.intp) if m is None else (~m).astype(np.intp)
    _, s = _plane_partials(dom, v, lab, 2)
    return float(s[0])


def field_mean(dom, name: str, mask=None) -> float:
    """Global mean of a field (over ``mask``); nan if no voxel is selected."""
    a, m = _owned(dom, name, mask)
    lab = np.zeros(a.shape, dtype=np.intp) if m is None else (~m).astype(np.intp)
    c, s = _plane_partials(dom, a, lab, 2)
    return float(s[0] / c[0]) if c[0] else float("nan")


def label_stats(dom, name: str, labels: str, nlabels: int) -> dict:
    """Per-label statistics of field ``name`` grouped by the integer field ``labels``
    (values ``0..nlabels-1``): dict of arrays ``count``, ``mean``, ``min``, ``max``."""
    a = dom.interior(name)
    lab = dom.interior(labels).astype(np.intp)
    c, s = _plane_partials(dom, a, lab, nlabels)
    lo = np.full(nlabels, np.inf)
    hi = np.full(nlabels, -np.inf)
    if a.size:
        flat, fl = a.ravel(), lab.ravel()
        np.minimum.at(lo, fl, flat)
        np.maximum.at(hi, fl, flat)
    lo = allreduce(dom.comm, lo, "min")
    hi = allreduce(dom.comm, hi, "max")
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(c > 0, s / np.where(c > 0, c, 1), np.nan)
    return {"count": c.astype(np.int64), "mean": mean, "min": lo, "max": hi}


def probe(dom, name: str, points) -> np.ndarray:
    """Values of a field at global voxel indices ``points`` (sequence of (z, y, x)), on every
    rank. Each owner contributes its values into a zero-padded array that is summed."""
    pts = np.asarray(points, dtype=np.int64).reshape(-1, 3)
    a = dom.fields[name]
    vals = np.zeros(len(pts), dtype=np.float64)
    for i, (z, y, x) in enumerate(pts):
        if dom.lo <= z < dom.hi:
            vals[i] = a[1 + z - dom.lo, y, x]
    return allreduce(dom.comm, vals, "sum")
