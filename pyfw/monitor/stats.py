"""Robust summaries of repeated timings and the Hockney latency/bandwidth fit.

* :func:`summarize` turns the per-repetition times of one measurement into one number:
  ``"study"`` (the method of the computing-network study: 8 repetitions, drop the 2 slowest,
  average the rest; the default), ``"median"``, ``"min"`` (NetPIPE's capability figure) or
  ``"mean"``.
* :func:`spread` keeps the whole picture of a few repetitions: ``{median, min, max}`` (the
  form every benchmark result stores and ``benchmarks/report.py`` prints).
* :func:`hockney_fit` fits ``T(m) = alpha + m * beta`` to one-way times by least squares on
  *relative* error (weights ``1/T``), so 80-byte and 64-KiB points count alike; bandwidth is
  ``1/beta``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["METHODS", "summarize", "spread", "hockney_fit", "Hockney"]

METHODS = ("study", "median", "min", "mean")


def summarize(times: Sequence[float], method: str = "study", drop: int = 2) -> float:
    """One figure from repeated timings (see the module docstring for the methods).

    ``"study"`` drops the ``drop`` slowest values (fewer when there are too few repetitions to
    keep at least one) and averages the rest.
    """
    t = np.sort(np.asarray(times, dtype=float))
    if t.size == 0:
        raise ValueError("no timings to summarize")
    if method == "study":
        keep = max(1, t.size - drop)
        return float(t[:keep].mean())
    if method == "median":
        return float(np.median(t))
    if method == "min":
        return float(t[0])
    if method == "mean":
        return float(t.mean())
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


def spread(values: Sequence[float], keep_runs: bool = False) -> dict:
    """``{"median", "min", "max"}`` of repeated measurements (plus ``"runs"``, the values in
    their order, with ``keep_runs``)."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("no values to summarize")
    out = {"median": float(np.median(v)), "min": min(v), "max": max(v)}
    if keep_runs:
        out["runs"] = v
    return out


class Hockney(tuple):
    """``(alpha, beta)`` of ``T(m) = alpha + m * beta``; also ``.bandwidth`` (1/beta, B/s)
    and ``.time(m)``."""

    __slots__ = ()

    def __new__(cls, alpha: float, beta: float):
        return super().__new__(cls, (float(alpha), float(beta)))

    alpha = property(lambda self: self[0])
    beta = property(lambda self: self[1])

    @property
    def bandwidth(self) -> float:
        """Asymptotic bandwidth, bytes/s (1 / beta)."""
        return 1.0 / self.beta if self.beta > 0 else math.inf

    def time(self, nbytes: float) -> float:
        """Predicted one-way time of a message of ``nbytes`` bytes."""
        return self.alpha + nbytes * self.beta

    def __repr__(self) -> str:
        return f"Hockney(alpha={self.alpha:.3e} s, bandwidth={self.bandwidth:.3e} B/s)"


def hockney_fit(sizes: Sequence[float], times: Sequence[float]) -> Hockney:
    """Least-squares ``alpha, beta`` with relative weights; alpha, beta clipped at >= 0.

    NaN points are ignored. With a single size, beta is 0 and alpha that time.
    """
    m = np.asarray(sizes, dtype=float)
    t = np.asarray(times, dtype=float)
    ok = np.isfinite(t) & np.isfinite(m) & (t > 0)
    m, t = m[ok], t[ok]
    if t.size == 0:
        return Hockney(math.nan, math.nan)
    if np.unique(m).size < 2:
        return Hockney(float(t.mean()), 0.0)
    w = 1.0 / t
    a = np.stack([w, m * w], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, t * w, rcond=None)
    if beta * m.max() < 1e-9 * t.mean():  # no measurable slope (incl. round-off)
        beta = 0.0 if beta >= 0 else beta
    if beta < 0:
        beta = 0.0
        alpha = float(np.average(t, weights=w * w))
    if alpha < 0:
        # the small messages beat the line through the large ones: a token-bucket shaper
        # lets them through its burst at wire speed (a 100 Mbit tbf link: 16 us at 1 KiB,
        # 84.5 ms at 1 MiB). The slope is the link's bandwidth; a fit through the origin
        # weighted by relative error put it at the small message (59 MB/s for 12.5 MB/s)
        alpha = 0.0
    return Hockney(float(alpha), float(beta))
