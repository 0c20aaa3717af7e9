"""A bounded time series that keeps the whole run: when full, every other point goes.

Points carry a sequence number from a counter shared by the dashboard's sources, so a
client that has seen everything up to ``seq`` asks only for what came after it.
"""
from __future__ import annotations

import bisect

__all__ = ["History"]


class History:
    """At most ``maxlen`` points spread over the whole run (the newest is always kept)."""

    def __init__(self, maxlen: int = 2000):
        if maxlen < 4:
            raise ValueError(f"history needs room for at least 4 points, got {maxlen}")
        self.maxlen = maxlen
        self.seqs: list[int] = []
        self.points: list = []

    def __len__(self) -> int:
        return len(self.points)

    def add(self, seq: int, point) -> None:
        """Append one sample (the oldest drop out beyond the window)."""
        self.seqs.append(seq)
        self.points.append(point)
        if len(self.points) > self.maxlen:
            keep = list(range(0, len(self.points) - 1, 2)) + [len(self.points) - 1]
            self.seqs = [self.seqs[i] for i in keep]
            self.points = [self.points[i] for i in keep]

    def since(self, seq: int) -> list:
        """Points added after sequence number ``seq`` (all of them for ``seq < 0``)."""
        return self.points[bisect.bisect_right(self.seqs, seq):]
