"""The slab domain's snapshot for observers (built on rank 0, in its own thread).

Speeds and link forecasts change only when the monitor exchanges or probes, so they are
read again only then: a tick between exchanges costs a few attribute reads.
"""
from __future__ import annotations

import math
import time

from ..snapshots import DomainSnapshot, LinkView

__all__ = ["DomainView"]


class DomainView:
    """Builds :class:`~pyfw.snapshots.DomainSnapshot` of a domain (one per domain)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self._speeds_key, self._speeds = None, ()
        self._links_key, self._links = None, None

    def __call__(self, dom, finished: bool = False) -> DomainSnapshot:
        mon = dom._monitor   # never create one: an observer must not change the job
        return DomainSnapshot(
            elapsed_s=time.perf_counter() - self.t0, step=dom.steps,
            shape=tuple(dom.shape), cuts=tuple(int(c) for c in dom.cuts),
            speeds=self._rank_speeds(mon, dom.size), step_s=dom.compute_time,
            moves=dom.moves, links=self._link_view(mon), finished=finished)

    def _rank_speeds(self, mon, size: int) -> tuple:
        if mon is None:
            return (math.nan,) * size
        if mon.syncs != self._speeds_key:
            self._speeds_key = mon.syncs
            self._speeds = tuple(float(s) for s in mon.speeds())
        return self._speeds

    def _link_view(self, mon) -> LinkView | None:
        if mon is None or not mon.links_on:
            return None
        if mon.probes != self._links_key:
            self._links_key = mon.probes
            ranks = tuple(range(mon.size))
            lat, bw = mon.matrices()
            methods = tuple(tuple(mon.link(i, j).predict().latency.method if i != j else ""
                                  for j in ranks) for i in ranks)
            self._links = LinkView(ranks=ranks, cols=ranks,
                                   latency_s=tuple(tuple(map(float, row)) for row in lat),
                                   bandwidth=tuple(tuple(map(float, row)) for row in bw),
                                   method=methods, what="one-way latency")
        return self._links
