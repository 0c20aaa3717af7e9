"""Cheap in-run probes for SPMD step loops, within an overhead budget, feeding forecasts.

One :class:`OnlineMonitor` per job is meant to be shared by everything that reads forecasts
(the domain balancer's rank speeds, the collectives tuner's link model, user code).

Feeding it (every rank):

* ``mon.record(work, seconds)`` -- local, O(1): this rank did ``work`` units (e.g. the plane
  cost of its slab) in ``seconds`` of *compute* time (never waits). At the next exchange the
  **throughput** since the previous one (work recorded / seconds recorded) becomes one speed
  sample of this rank. Not the median of per-step rates: a node under a CPU quota (a cgroup,
  a container limit, the test bed's slowed node) runs full speed and then stalls, so most
  of its steps are fast and a median saw no slowdown at all (a knee run on 2 test-bed nodes,
  one at half a core: the balancer never moved the cuts). A single pre-emption moves one
  sample, which the forecaster banks weigh against the others.
* ``mon.step(work=None, seconds=None)`` -- ``record`` plus a step count; collective on the
  steps where a link probe is due (the same steps on every rank).
* ``mon.sync(extra)`` -- collective now: one small ``allgather`` of every rank's record
  (speed sample, plus ``extra`` numbers of the caller: the balancer ships its window times in
  the same message). A link probe that would fall due within the next half interval is
  **piggybacked** on it, so a client that synchronises anyway (the balancer) pays no extra
  collective for the link monitor. ``sync_start(extra)`` / ``sync_finish()`` split it: the
  allgather is a native non-blocking ``Iallgather`` posted at one step and completed a step
  or two later (the balancer does this), so no rank stands still waiting for the slowest --
  on a loaded, oversubscribed node that wait, not the bytes, was most of the monitor's cost.
  (It is native rather than the tuned :mod:`pyfw.coll` dispatch because it must not block.)

On a probe it runs **one round** of the round-robin tournament (disjoint pairs, rotating
through the rounds, so every link is visited every p-1 or p probes): a short ping-pong at a
small and a large size (``reps`` repetitions, ``method`` summary), a Hockney fit, then the one
``allgather`` that shares the round's figures, so **every rank holds the forecasts of every
link and every rank's speed** (NWS forecaster banks, :mod:`.forecast`), updated from the same
numbers in the same order, hence identical on every rank.

Probe interval (adaptive, identical on every rank because it is computed from gathered
numbers):

* budget part: ``base = ceil(cost / (margin * budget * step))`` with ``cost`` the largest
  per-rank time of the last probe exchange (pair probe + allgather + forecast updates) and
  ``step`` the median step time over the ranks; ``margin`` (0.3) keeps the probes at 30 %
  of the budget, so scheduling noise, the balancer's checks (another 30 %, see
  :class:`pyfw.domain.Balancer`) and the per-step bookkeeping stay under it together;
* stability part: when every link measured in a probe lands inside its forecast's error band
  (``|x - f| <= max(band_sigma * err, band_rel * |f|)`` for latency and bandwidth), the
  interval stretches by 2 (up to ``max_stretch``); a measurement outside the band snaps it back
  to the budget part, so a link that changes is re-probed promptly.

``overhead()`` reports the measured fraction of this rank's time spent inside the monitor
(probes, exchanges, forecast updates), ``seconds`` the total.

Non-SPMD runtimes (the farm) do not call :meth:`step`; they feed
:meth:`pyfw.monitor.forecast.LinkForecast.observe` with timings of their own messages and
:class:`~pyfw.monitor.forecast.RankSpeedForecast` with task throughput.

Reading the forecasts (any rank, after at least one exchange)::

    mon.link(i, j).predict()          # LinkEstimate(latency=Forecast, bandwidth=Forecast)
    mon.link(i, j).time(nbytes)       # predicted one-way seconds
    alpha, bw = mon.matrices()        # p x p arrays of forecast latency (s), bandwidth (B/s)
    mon.speeds()                      # per-rank forecast speed (work units / s)
    mon.speed(r).predict()            # Forecast(value, error, method) of rank r
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..comm import mpi_of, waitall
from .forecast import LinkForecast, RankSpeedForecast
from .probes import _pair, round_robin
from .stats import hockney_fit, summarize

__all__ = ["OnlineMonitor"]

_NREC = 8  # peer, alpha, bandwidth, last exchange cost, step seconds, speed, records, probed


class OnlineMonitor:
    """In-run link and speed monitor for a communicator (see the module docstring).

    ``sizes``: the two (or more) probe sizes; ``first``: the step of the first probe;
    ``max_every``: upper bound of the interval; ``links=False``: speeds only (no probes);
    ``margin``, ``max_stretch``, ``band_sigma``, ``band_rel``: the adaptive interval.
    Arguments must match on every rank.
    """

    def __init__(self, comm, budget: float = 0.01, sizes=(80, 65536), reps: int = 4,
                 method: str = "median", timeout: float = 10.0, first: int = 10,
                 max_every: int = 10_000, window: int = 10, links: bool = True,
                 margin: float = 0.3, max_stretch: int = 16, band_sigma: float = 3.0,
                 band_rel: float = 0.25):
        if not 0 < budget < 1:
            raise ValueError("budget must be a fraction in (0, 1)")
        if not 0 < margin <= 1:
            raise ValueError("margin must be in (0, 1]")
        summarize([1.0], method)
        self.comm, self.mpi = comm, mpi_of(comm)
        self.rank, self.size = self.mpi.Get_rank(), self.mpi.Get_size()
        self.budget, self.sizes, self.reps, self.method = budget, list(sizes), reps, method
        self.timeout, self.max_every, self.margin = timeout, max_every, margin
        self.max_stretch, self.band_sigma, self.band_rel = max_stretch, band_sigma, band_rel
        self.links_on = bool(links) and self.size > 1
        self.rounds = round_robin(self.size) if self.links_on else []
        self._links = {(i, j): LinkForecast(window=window) for i in range(self.size)
                       for j in range(i + 1, self.size)}
        self._speeds = [RankSpeedForecast(window=window) for _ in range(self.size)]
        self.steps = 0
        self.first = max(1, int(first))
        self.next_probe = self.first if self.links_on else math.inf
        self.every, self.base_every, self.stretch = self.first, self.first, 1
        self.probes, self.syncs, self.round_index = 0, 0, 0
        self.seconds = 0.0          # time spent inside the monitor on this rank
        self.probe_seconds = 0.0    # kept for compatibility: same as ``seconds``
        self._last_cost = 0.0       # this rank's cost of the previous exchange
        self._post_cost = 0.0
        self._pending = []          # posted: (request, buffer, probe, step, ticket)
        self._ticket = 0
        self.t_start = time.perf_counter()
        self._t_mark, self._steps_mark = self.t_start, 0
        self._work = self._seconds = 0.0   # recorded since the last post
        self._records = 0

    # --------------------------------------------------------------- feeding
    def record(self, work: float, seconds: float) -> None:
        """Local and O(1): ``work`` units done in ``seconds`` of compute time on this rank
        (one step, or any piece of work; the throughput per exchange is the sample)."""
        if seconds > 0 and work >= 0:
            self._work += work
            self._seconds += seconds
            self._records += 1

    def step(self, work: float | None = None, seconds: float | None = None) -> bool:
        """Count a step (collective on probe steps); probe if due. ``work`` done in
        ``seconds`` is recorded (see :meth:`record`). Returns True if it probed.

        The probe's results travel in a non-blocking allgather completed at the next call,
        so no rank waits for the others to reach the probe step (only the two ranks of a
        probed pair meet)."""
        if seconds is not None and work is not None:
            self.record(work, seconds)
        self.steps += 1
        if self._pending and self._pending[0][2] and self.steps > self._pending[0][3]:
            self._complete(1)
        if self.steps < self.next_probe:
            return False
        self._post(True, None)
        self.next_probe = math.inf   # set again when the exchange completes
        return True

    def sync(self, extra=None) -> np.ndarray:
        """Collective, blocking: share every rank's speed sample (and ``extra``, a short
        sequence of floats, the same length on every rank) now. A link probe due within the
        next half interval rides along. Returns the gathered ``extra`` as a
        ``(size, len(extra))`` array (no columns if none)."""
        self.sync_start(extra)
        return self.sync_finish()

    def sync_start(self, extra=None) -> int:
        """Collective, non-blocking: post the exchange of :meth:`sync` (call
        :meth:`sync_finish` at the same step on every rank, a step or two later: by then the
        small allgather has progressed inside the ranks' other MPI calls and costs nothing
        to complete). Returns a ticket for :meth:`sync_finish`."""
        probe = (self.links_on and self.next_probe != math.inf
                 and self.steps + max(1, self.every // 2) >= self.next_probe)
        ticket = self._post(probe, extra)
        if probe:
            self.next_probe = math.inf
        return ticket

    def sync_finish(self, ticket: int | None = None) -> np.ndarray:
        """Complete pending exchanges in order, up to the one of ``ticket`` (default: all);
        returns that exchange's gathered ``extra`` (``(size, k)``; no columns if it is no
        longer pending)."""
        out = np.zeros((self.size, 0))
        while self._pending and (ticket is None or self._pending[0][4] <= ticket):
            t, got = self._pending[0][4], self._complete(1)
            if ticket is None or t == ticket:
                out = got
        return out

    def close(self) -> None:
        """Collective: complete every exchange still in flight (call it at the end of a run,
        before freeing the communicator, so no request is left behind)."""
        self.sync_finish()

    @property
    def pending(self) -> int:
        """Number of exchanges posted and not yet completed."""
        return len(self._pending)

    # --------------------------------------------------------------- the exchange
    def _post(self, probe: bool, extra) -> int:
        t0 = time.perf_counter()
        nsteps = self.steps - self._steps_mark
        step_time = (t0 - self._t_mark) / nsteps if nsteps > 0 else math.nan
        me = self.rank
        extra = np.zeros(0) if extra is None else np.asarray(extra, dtype=float).ravel()
        rec = np.full(_NREC + extra.size, np.nan)
        if probe and self.rounds:
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
        rec[3] = max(self._last_cost, time.perf_counter() - t0)
        rec[4] = step_time
        if self._records:
            rec[5], rec[6] = self._work / self._seconds, self._records
        rec[7] = 1.0 if probe else 0.0
        rec[_NREC:] = extra
        self._work = self._seconds = 0.0
        self._records = 0
        allrec = np.empty((self.size, rec.size))
        req = self.mpi.Iallgather(rec, allrec)
        self._ticket += 1
        self._pending.append((req, allrec, probe, self.steps, self._ticket))
        spent = time.perf_counter() - t0
        self._post_cost = spent
        self.seconds += spent
        self.probe_seconds = self.seconds
        self._t_mark, self._steps_mark = time.perf_counter(), self.steps
        return self._ticket

    def _complete(self, count: int) -> np.ndarray:
        t0 = time.perf_counter()
        out = np.zeros((self.size, 0))
        for _ in range(count):
            req, allrec, probe, _, _ = self._pending.pop(0)
            self._wait(req)
            stable = self._update(allrec)
            self.syncs += 1
            if probe:
                self._adapt(allrec, stable)
            out = allrec[:, _NREC:]
        spent = time.perf_counter() - t0
        self._last_cost = self._post_cost + spent
        self.seconds += spent
        self.probe_seconds = self.seconds
        self._t_mark += spent  # keep the monitor's own time out of the step time
        return out

    def _wait(self, req) -> None:
        waitall([req], self.timeout,
                f"rank {self.rank}: monitor exchange (a rank is stuck or dead?)")

    def _update(self, allrec: np.ndarray) -> bool:
        """Feed the gathered records to the banks (same order on every rank); True if every
        link measured now fell inside its forecast's band (and at least one was measured)."""
        stable, seen = True, False
        for i in range(self.size):
            j = allrec[i, 0]
            if math.isfinite(j):
                lf = self._links[(i, int(j))]
                seen = True
                stable = (stable and self._inside(lf.latency, allrec[i, 1])
                          and self._inside(lf.bandwidth, allrec[i, 2]))
                lf.update(allrec[i, 1], allrec[i, 2])
            if allrec[i, 6] > 0:
                self._speeds[i].update(allrec[i, 5])
        return stable and seen

    def _inside(self, bank, x: float) -> bool:
        if len(bank) < 3 or not math.isfinite(x):
            return False
        f = bank.predict()
        err = f.error if math.isfinite(f.error) else 0.0
        return abs(x - f.value) <= max(self.band_sigma * err, self.band_rel * abs(f.value))

    def _adapt(self, allrec: np.ndarray, stable: bool) -> None:
        cost = float(np.nanmax(allrec[:, 3]))        # gathered: the same on every rank
        steps = allrec[:, 4]
        step_med = float(np.nanmedian(steps)) if np.isfinite(steps).any() else math.nan
        if math.isfinite(step_med) and step_med > 0:
            need = cost / (self.margin * self.budget * step_med)
            self.base_every = int(min(self.max_every, max(1, math.ceil(need))))
        self.stretch = min(self.max_stretch, 2 * self.stretch) if stable else 1
        self.every = int(min(self.max_every, self.base_every * self.stretch))
        self.next_probe = self.steps + self.every
        self.round_index += 1
        self.probes += 1

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
        """Forecast speed of ``rank`` (work per compute second)."""
        return self._speeds[rank]

    def speeds(self) -> np.ndarray:
        """Forecast speed of every rank (NaN where no sample was given)."""
        return np.array([s.predict().value for s in self._speeds])

    def overhead(self) -> float:
        """Fraction of this rank's time since construction spent inside the monitor."""
        total = time.perf_counter() - self.t_start
        return self.seconds / total if total > 0 else 0.0
