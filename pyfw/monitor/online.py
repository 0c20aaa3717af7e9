"""Cheap in-run probes for SPMD step loops, within an overhead budget, feeding forecasts.

:class:`OnlineMonitor` is called once per step by every rank (``mon.step(...)``; collective).
On a probe step it runs **one round** of the round-robin tournament (disjoint pairs, rotating
through the rounds, so every link is visited every p-1 or p probe steps): a short ping-pong at
a small and a large size (``reps`` repetitions, ``method`` summary), a Hockney fit, then one
small ``allgather`` that shares the round's figures, so **every rank holds the forecasts of
every link** (the collectives tuner reads them without further messages), and every rank's
speed forecast.

The probe interval adapts so the monitor's time stays under ``budget`` (default 1 %) of the
run: after each probe step, ``every = ceil(probe_seconds / (budget * step_seconds))``, from the
maximum probe time and the median step time over the ranks, identical on all ranks.
``overhead()`` reports the measured fraction.

Non-SPMD runtimes (the farm) do not call :meth:`step`; they feed
:meth:`pyfw.monitor.forecast.LinkForecast.observe` with timings of their own messages and
:class:`~pyfw.monitor.forecast.RankSpeedForecast` with task throughput.

Reading the forecasts (any rank, after at least one probe step)::

    mon.link(i, j).predict()          # LinkEstimate(latency=Forecast, bandwidth=Forecast)
    mon.link(i, j).time(nbytes)       # predicted one-way seconds
    alpha, bw = mon.matrices()        # p x p arrays of forecast latency (s), bandwidth (B/s)
    mon.speeds()                      # per-rank forecast speed (work units / s)
"""
from __future__ import annotations

import math
import time

import numpy as np

from .. import coll
from .forecast import LinkForecast, RankSpeedForecast
from .probes import _mpi, _pair, round_robin
from .stats import hockney_fit, summarize

__all__ = ["OnlineMonitor"]


class OnlineMonitor:
    """In-run link and speed monitor for a communicator (see the module docstring).

    ``sizes``: the two (or more) probe sizes; ``first``: the step of the first probe;
    ``max_every``: upper bound of the interval. Arguments must match on every rank.
    """

    def __init__(self, comm, budget: float = 0.01, sizes=(80, 65536), reps: int = 4,
                 method: str = "median", timeout: float = 10.0, first: int = 1,
                 max_every: int = 10_000, window: int = 10):
        if not 0 < budget < 1:
            raise ValueError("budget must be a fraction in (0, 1)")
        summarize([1.0], method)
        self.comm, self.mpi = comm, _mpi(comm)
        self.rank, self.size = self.mpi.Get_rank(), self.mpi.Get_size()
        self.budget, self.sizes, self.reps, self.method = budget, list(sizes), reps, method
        self.timeout, self.max_every = timeout, max_every
        self.rounds = round_robin(self.size)
        self._links = {(i, j): LinkForecast(window=window) for i in range(self.size)
                       for j in range(i + 1, self.size)}
        self._speeds = [RankSpeedForecast(window=window) for _ in range(self.size)]
        self.steps, self.next_probe, self.every = 0, first, first
        self.probes, self.round_index = 0, 0
        self.probe_seconds = 0.0
        self.t_start = time.perf_counter()
        self._t_mark, self._steps_mark = self.t_start, 0
        self._work = self._work_seconds = 0.0

    # --------------------------------------------------------------- the step hook
    def step(self, work: float | None = None, seconds: float | None = None) -> bool:
        """Count a step (collective); probe if due. ``work`` done in ``seconds`` is summed; at the next
        probe, total work / total seconds is this rank's speed sample. Returns True if it probed."""
        if work is not None and seconds is not None and seconds > 0:
            self._work += work
            self._work_seconds += seconds
        self.steps += 1
        if self.steps < self.next_probe:
            return False
        self._probe()
        return True

    def _probe(self) -> None:
        t0 = time.perf_counter()
        step_time = (t0 - self._t_mark) / max(1, self.steps - self._steps_mark)
        p, me = self.size, self.rank
        rec = np.full(5, np.nan)  # peer, alpha, bandwidth, probe seconds, step seconds
        if self.rounds:
            rnd = self.rounds[self.round_index % len(self.rounds)]
            for a, b in rnd:
                if me in (a, b):
                    peer = b if me == a else a
                    raw = _pair(self.comm, peer, self.sizes, self.reps, 1, 1, self.timeout,
                                self.timeout, 0.0, 1)
                    if me == a:
                        t = [summarize(r, self.method) for r in raw]
                        fit = hockney_fit(self.sizes, t)
                        rec[:3] = peer, fit.alpha, fit.bandwidth
        rec[4] = step_time
        rec[3] = time.perf_counter() - t0
        speed = self._work / self._work_seconds if self._work_seconds > 0 else math.nan
        send = np.concatenate([rec, [speed]])
        allrec = np.empty((p, 6))
        coll.allgather(self.mpi, send, allrec)   # tuned dispatch (issue 5: native if faster)
        for i in range(p):
            j = allrec[i, 0]
            if math.isfinite(j):
                self._links[(i, int(j))].update(allrec[i, 1], allrec[i, 2])
            if math.isfinite(allrec[i, 5]):
                self._speeds[i].update(allrec[i, 5])
        self._work = self._work_seconds = 0.0
        spent = time.perf_counter() - t0
        self.probe_seconds += spent
        probe_max = float(np.nanmax(allrec[:, 3]))  # gathered: the same on every rank
        step_med = float(np.nanmedian(allrec[:, 4]))
        # the interval is decided from gathered numbers, hence identical on every rank
        need = probe_max / (self.budget * max(step_med, 1e-9))
        self.every = int(min(self.max_every, max(1, math.ceil(need))))
        self.next_probe = self.steps + self.every
        self.round_index += 1
        self.probes += 1
        self._t_mark, self._steps_mark = time.perf_counter(), self.steps

    # --------------------------------------------------------------- reading
    def link(self, i: int, j: int) -> LinkForecast:
        """The forecasts of link i-j (symmetric)."""
        if i == j:
            raise ValueError("no link from a rank to itself")
        return self._links[(min(i, j), max(i, j))]

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(latency, bandwidth)``: p x p forecast values (NaN where not yet probed)."""
        lat = np.full((self.size, self.size), np.nan)
        bw = np.full((self.size, self.size), np.nan)
        for (i, j), lf in self._links.items():
            est = lf.predict()
            lat[i, j] = lat[j, i] = est.latency.value
            bw[i, j] = bw[j, i] = est.bandwidth.value
        return lat, bw

    def speed(self, rank: int) -> RankSpeedForecast:
        return self._speeds[rank]

    def speeds(self) -> np.ndarray:
        """Forecast speed of every rank (NaN where no sample was given)."""
        return np.array([s.predict().value for s in self._speeds])

    def overhead(self) -> float:
        """Fraction of this rank's time since construction spent probing."""
        total = time.perf_counter() - self.t_start
        return self.probe_seconds / total if total > 0 else 0.0
