"""What the dashboard derives from the snapshots: rates, ETA, and the points of the plots."""
from __future__ import annotations

import math
from collections import deque

__all__ = ["Rate", "farm_point", "domain_point", "derived", "clean"]


class Rate:
    """Items per second from (elapsed, running count) samples: over at least the last
    ``window`` seconds and ``changes`` increases of the count, never beyond ``max_window``
    seconds.

    Counts grow in steps (a farm worker's count moves once per chunk). A window of fixed
    length holds one step more or less depending on where the steps fall in it, so with
    few steps in it the rate swings (a plain 5 s window over one 2 s chunk of 10 tasks
    said 4, then 6 tasks/s, then 4). Here the window starts at a step (the first sample
    showing a new count) and holds several: the rate is then at most one step's share
    below the truth, and moves smoothly between steps; while nothing arrives it falls.
    """

    def __init__(self, window: float = 5.0, changes: int = 4, max_window: float = 60.0):
        self.window, self.changes, self.max_window = window, changes, max_window
        self.steps: deque = deque()   # (t, count): the first sample of each count kept

    def add(self, t: float, count: float) -> float | None:
        """Record the running total ``count`` at time ``t``; returns the rate over the
        window (None until two distinct times are known)."""
        s = self.steps
        if not s or count != s[-1][1]:
            s.append((t, count))
        while len(s) > 1:
            span = t - s[1][0]   # the window if the oldest step goes
            if span >= self.max_window or (span >= self.window
                                           and len(s) - 2 >= self.changes):
                s.popleft()
            else:
                break
        t0, c0 = s[0]
        if t - t0 <= 0:
            return None
        return (count - c0) / (t - t0)


def derived(snap, rate: float | None, worker_rates=None) -> dict:
    """Rate and ETA of a snapshot (``rate`` from :class:`Rate`; the mean over the run once
    the job has finished); for a farm also each worker's rate (``worker_rates``: one per
    worker of the snapshot, in its order, from :class:`Rate` over their task counts)."""
    count = snap.done if snap.kind == "farm" else snap.step
    if snap.finished and snap.elapsed_s > 0:
        rate = count / snap.elapsed_s
    out = {"rate": rate, "eta_s": None, "total": None}
    if snap.kind == "farm":
        if snap.finished and snap.elapsed_s > 0:
            worker_rates = [w.tasks / snap.elapsed_s for w in snap.workers]
        out["worker_rates"] = list(worker_rates or [None] * len(snap.workers))
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
