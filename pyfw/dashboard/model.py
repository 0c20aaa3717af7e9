"""What the dashboard derives from the snapshots: rates, ETA, and the points of the plots."""
from __future__ import annotations

import math
from collections import deque

__all__ = ["Rate", "farm_point", "domain_point", "derived", "clean"]


class Rate:
    """Items per second over the last ``window`` seconds of (elapsed, count) samples."""

    def __init__(self, window: float = 5.0):
        self.window = window
        self.samples: deque = deque()

    def add(self, t: float, count: float) -> float | None:
        """Record the running total ``count`` at time ``t``; returns the rate over the last
        ``window`` seconds (None until two distinct times are known)."""
        s = self.samples
        s.append((t, count))
        while len(s) > 2 and t - s[1][0] >= self.window:
            s.popleft()
        t0, c0 = s[0]
        if t - t0 <= 0:
            return None
        return (count - c0) / (t - t0)


def derived(snap, rate: float | None) -> dict:
    """Rate and ETA of a snapshot (``rate`` from :class:`Rate`; the mean over the run once
    the job has finished)."""
    count = snap.done if snap.kind == "farm" else snap.step
    if snap.finished and snap.elapsed_s > 0:
        rate = count / snap.elapsed_s
    out = {"rate": rate, "eta_s": None, "total": None}
    if snap.kind == "farm":
        if snap.left is not None:
            remaining = snap.left + snap.in_flight
            out["total"] = snap.done + remaining
            if snap.finished or remaining == 0:
                out["eta_s"] = 0.0
            elif rate:
                out["eta_s"] = remaining / rate
    return out


def farm_point(snap, rate) -> dict:
    """One point of a farm's history (the plots over time)."""
    return {"t": round(snap.elapsed_s, 3), "done": snap.done, "in_flight": snap.in_flight,
            "left": snap.left, "rate": rate, "failures": snap.failures,
            "duplicates": snap.duplicates,
            "busy": [round(w.busy_s, 4) for w in snap.workers],
            "alive": sum(1 for w in snap.workers if w.alive)}


def domain_point(snap, rate) -> dict:
    """One point of a domain's history: the cuts and speeds over time."""
    return {"t": round(snap.elapsed_s, 3), "step": snap.step, "rate": rate,
            "cuts": list(snap.cuts), "speeds": list(snap.speeds), "step_s": snap.step_s,
            "moves": snap.moves}


def clean(obj):
    """``obj`` with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj
