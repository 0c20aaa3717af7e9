"""When and how to move slab boundaries during a run.

Each rank feeds :meth:`Balancer.record` the compute time of every step (update calls only,
never halo waits: ``SlabDomain.step`` returns exactly that). The balancer hands each
``(slab cost, seconds)`` pair to the job's online monitor (:attr:`SlabDomain.monitor`, a
:class:`pyfw.monitor.OnlineMonitor`), which turns each window into one speed sample per rank
(plane cost per compute second) and forecasts it with a Network-Weather-Service bank (last
value, sliding means/medians, exponential smoothing; the predictor with the lowest recent
error wins). Speeds in cost per second do not depend on the cuts, so they stay valid across
moves.

Every ``every`` steps :meth:`Balancer.check` (collective) posts one monitor exchange
(:meth:`OnlineMonitor.sync_start`: a single non-blocking ``allgather`` carrying the speed
samples and the window's mean step times, plus a link probe if one is due) and ``lag`` steps
later (default 2) completes it -- by then it has progressed inside the halo exchanges, so no
rank waits for the slowest -- reads the forecast speeds ``s_i``, proposes new cuts with
:func:`~pyfw.domain.partition.partition` and moves the boundaries only when

* the time lost to imbalance since the last move, ``sum over steps of (t_max - t_mean)`` of the
  measured window times, exceeds the estimated cost of moving (measured on the previous move:
  seconds per byte plus a fixed part; a conservative guess before the first move), and
* the predicted gain per step, ``max_i(cost_i / s_i)`` now minus the bottleneck of the new cuts,
  is above ``min_gain`` of the current step time and above one plane's time on the slowest
  rank, and
* the previous check also proposed a move, with no cut going the opposite way (hysteresis: a
  one-off noisy window, e.g. another process stealing a core for a moment, moves nothing).
  Cuts that one of the two proposals keeps and the other moves do not block it: with 8
  ranks (7 cuts) two estimates rarely round every cut alike, and demanding identical signs
  delayed the benchmark's move after a speed change by 2-4 checks.

A move that takes a cut back the way the previous move brought it goes at most half as far
as that move did (at least one plane): estimates that swing (a node throttled by a CPU quota
in bursts) then damp out instead of throwing the cuts between two extremes.

Stale forecasts: a forecaster bank follows a step change of a rank's speed only after a few
samples (its sliding means and medians still hold the old value), and while the cuts held
the checks had thinned out. So each check compares the window's measured step times ``t_i``
with what the forecasts predict for the current slabs (``cost_i / s_i``); when some rank is
off by more than ``stale`` (default 25 %) -- and no move happened inside the window -- the
proposal uses the window's own speeds ``cost_i / t_i`` and the checks go back to every
``every`` steps, so the cuts follow at the next check (hysteresis still needs it to agree).
Measured (``benchmarks/domain_balance_model.py``, 8 ranks, the 3x slower rank changes after
the cuts had settled): the move came 4 checks / 127 steps after the change without this,
1 check after the first check that saw it with it.

Every rank takes the decision from the same gathered numbers (the monitor's banks are fed
identically everywhere), so all agree without a vote.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..errors import ConfigurationError
from . import partition as _part

__all__ = ["Balancer"]


class Balancer:
    """Measurement-based boundary mover for a :class:`~pyfw.domain.slab.SlabDomain`.

    ``every``: steps between checks; ``min_gain``: relative predicted gain needed to move;
    ``guess_bandwidth`` (bytes/s) and ``guess_latency`` (s): move-cost model until a move has
    been measured; ``monitor``: the online monitor to read speeds from (default: the
    domain's, :attr:`SlabDomain.monitor`); ``lag``: steps between posting a window's
    exchange and deciding on it (0: decide at once, blocking); ``budget``: while the cuts
    hold, checks thin out (interval doubling from ``every``) until their measured cost is
    under 30 % of this fraction of the step time, but never beyond ``max_thin * every``
    steps, which bounds how late a speed change is noticed; each proposed move halves the
    interval back towards ``every``; ``stale``: relative gap between a rank's measured and
    forecast step time above which the forecasts are taken as stale (see the module
    docstring).
    """

    def __init__(self, domain, every: int = 20, min_gain: float = 0.10,
                 guess_bandwidth: float = 1e9, guess_latency: float = 2e-3, monitor=None,
                 lag: int = 2, budget: float = 0.01, stale: float = 0.25, max_thin: int = 16):
        if every < 1:
            raise ConfigurationError("every must be >= 1")
        if max_thin < 1:
            raise ConfigurationError("max_thin must be >= 1")
        if lag < 0:
            raise ConfigurationError("lag must be >= 0")
        if not 0 < budget < 1:
            raise ConfigurationError("budget must be a fraction in (0, 1)")
        self.lag = min(int(lag), every - 1)
        self.stale = float(stale)
        self._dirty = False        # a move happened inside the window being recorded
        self.budget = float(budget)
        self.share = 0.3           # of the budget, for the checks (the monitor's probes: 0.3)
        self._due = None           # (step to decide at, monitor ticket, step posted)
        self.interval = int(every)  # current steps between checks (every .. budget-bound)
        self.max_interval = int(every) * int(max_thin)
        self.next_check = int(every)
        self._check_cost = 0.0     # this rank's seconds in the previous check's calls
        self.dom = domain
        self.mon = monitor if monitor is not None else domain.monitor
        self.every = int(every)
        self.min_gain = float(min_gain)
        self.sec_per_byte = 1.0 / guess_bandwidth
        self.latency = guess_latency
        self.loss = 0.0            # seconds lost to imbalance since the last move
        self._window = []
        self._last_dir = None      # direction of the previous proposal (for hysteresis)
        self._moved = None         # cut changes of the previous move (reversals are damped)
        self._cost_key = None
        self._cost = 0.0
        self.steps = 0
        self.history = []          # one dict per check (for logs and tests)

    def record(self, seconds: float) -> None:
        """Add one step's compute time (this rank). It also counts the step for the monitor
        (``monitor.step``), which may run a due link probe there (collective on those steps;
        identical on every rank): with a balancer, the loop does not call ``monitor.step``
        itself."""
        self._window.append(seconds)
        self.steps += 1
        d = self.dom
        if d.cuts is not self._cost_key:   # repartition() installs a new cuts array
            self._cost_key, self._cost = d.cuts, d.slab_cost()
        self.mon.step(self._cost, seconds)

    def speeds(self) -> np.ndarray:
        """Forecast speed of every rank (plane cost per compute second)."""
        return self.mon.speeds()

    def move_cost(self, new_cuts) -> float:
        """Estimated seconds to move from the current cuts to ``new_cuts``."""
        d = self.dom
        plane = int(np.prod(d.plane_shape)) * sum(a.itemsize for a in d.fields.values())
        moved = int(np.abs(np.asarray(new_cuts) - d.cuts).sum()) * plane
        return self.latency + moved * self.sec_per_byte

    def check(self, force: bool = False):
        """Collective; call it after every :meth:`record`. When a check is due it posts the
        window's exchange (non-blocking); ``lag`` steps later it completes it, decides and,
        if worth it, repartitions (all ranks at the same step). ``force=True`` exchanges,
        decides and moves now (blocking). Returns the new cuts when boundaries moved, else
        None."""
        if force:
            if self._due is not None:
                self.mon.sync_finish(self._due[1])
            self._due = None
            dirty = self._dirty
            return self._decide(self.mon.sync_finish(self._post()), True, self.steps, dirty)
        if self._due is None and self.steps < self.next_check:
            return None
        t0 = time.perf_counter()
        out = None
        if self._due is not None and self.steps >= self._due[0]:
            _, ticket, posted, dirty = self._due
            self._due = None
            out = self._decide(self.mon.sync_finish(ticket), False, posted, dirty)
        if self._due is None and self.steps >= self.next_check:
            dirty = self._dirty
            ticket = self._post()
            self.next_check = math.inf   # set by the decision
            if self.lag == 0:
                out = self._decide(self.mon.sync_finish(ticket), False, self.steps, dirty)
            else:
                self._due = (self.steps + self.lag, ticket, self.steps, dirty)
        self._check_cost += time.perf_counter() - t0
        return out

    def _post(self) -> int:
        w = [float(np.mean(self._window)) if self._window else 0.0, len(self._window),
             self._check_cost]
        self._window = []
        self._check_cost = 0.0
        self._dirty = False
        return self.mon.sync_start(w)

    def _schedule(self, allw, t, proposed: bool, posted: int, stale: bool = False) -> None:
        """Next check. While the cuts hold, the interval doubles, up to what keeps the checks'
        measured cost (max over ranks, gathered) under ``share`` (0.3) of ``budget`` of the
        step time and at most ``max_interval`` (on a loaded machine the measured cost of a
        check can grow until a speed change waits hundreds of steps to be seen); each check
        that proposes a move halves it, down to ``every`` -- so a real
        imbalance (proposed check after check) is watched every ``every`` steps, while a
        single noisy proposal costs little. Same numbers on every rank."""
        cost = float(np.max(allw[:, 2])) if allw.shape[1] > 2 else 0.0
        step = float(t.mean())
        need = (math.ceil(cost / (self.share * self.budget * step)) if step > 0
                else self.every)
        if stale:
            self.interval = self.every
        elif proposed:
            self.interval = max(self.every, self.interval // 2)
        else:
            self.interval = max(self.every, min(2 * self.interval, need, self.max_interval))
        self.next_check = max(self.steps + 1, posted + self.interval)

    def _decide(self, allw, force: bool, posted: int, dirty: bool = False):
        d = self.dom
        if allw.shape[1] < 2:
            self.next_check = max(self.steps + 1, posted + self.every)
            return None
        t = allw[:, 0]
        nsteps = float(allw[0, 1])
        speeds = self.mon.speeds()
        if np.any(t <= 0) or not np.all(np.isfinite(speeds)) or np.any(speeds <= 0):
            self.next_check = max(self.steps + 1, posted + self.every)
            return None
        self.loss += nsteps * (t.max() - t.mean())
        costs = _part.slab_costs(d.cost, d.cuts)
        stale = False
        if not dirty and np.all(costs > 0):
            gap = float(np.max(np.abs(t * speeds / costs - 1.0)))
            if gap > self.stale:   # forecasts lag a change: use the window's own speeds
                stale = True
                speeds = costs / t
        now = float((costs / speeds).max())
        plane_time = float((d.cost.max() / speeds).max()) if d.cost.max() > 0 else 0.0
        # no cuts beat the continuous ideal: skip the partition when even that gains too little
        ideal = float(d.cost.sum() / speeds.sum())
        if now - ideal > self.min_gain * now and now - ideal > plane_time:
            new = _part.partition(d.cost, speeds, d.min_planes)
            pred = _part.bottleneck(d.cost, speeds, new)
        else:
            new, pred = d.cuts, now
        gain = now - pred
        cost = self.move_cost(new)
        rec = {"step": self.steps, "times": t.tolist(), "cuts": d.cuts.tolist(),
               "speeds": speeds.tolist(),
               "forecasters": [self.mon.speed(r).predict().method for r in range(d.size)],
               "imbalance": float(t.max() / t.mean() - 1), "loss": self.loss,
               "move_cost": cost, "gain": gain, "stale": stale, "moved": False}
        self.history.append(rec)
        worth = (not np.array_equal(new, d.cuts) and gain > self.min_gain * now
                 and gain > plane_time)
        self._schedule(allw, t, bool(worth), posted, stale)
        direction = np.sign(new - d.cuts) if worth else None
        rec["proposed"] = new.tolist() if worth else None
        # confirmed: the previous check also proposed a move, and no cut goes the other way
        # (a cut that one estimate keeps and the other moves by a plane does not count)
        confirmed = (direction is not None and self._last_dir is not None
                     and not np.any(direction * self._last_dir < 0)
                     and bool(np.any(direction * self._last_dir > 0)))
        self._last_dir = direction
        if not (worth and (force or (confirmed and self.loss > cost))):
            return None
        self._last_dir = None
        new = self._damped(new, force)
        info = d.repartition(new)
        self._dirty = True
        spent = float(d.comm.mpi.allreduce(info["seconds"], op=_max()))
        nbytes = float(d.comm.mpi.allreduce(info["bytes"], op=_max()))
        if nbytes > 0:
            self.sec_per_byte = max(spent - self.latency, 0.0) / nbytes
        self.loss = 0.0
        rec.update(moved=True, new_cuts=new.tolist(), seconds=spent)
        return new

    def _damped(self, new: np.ndarray, force: bool = False) -> np.ndarray:
        """The cuts to move to: ``new``, except that a cut going back the way the previous
        move brought it goes at most half as far as that move did (at least one plane; a
        forced move is not damped). Noisy speeds (a node throttled by a CPU quota in
        bursts) made the cuts swing 83 -> 53 -> 72 -> 89 -> 70 -> 90 -> 55 (of 120 planes,
        the right one ~80) in one 1,500-step run; halving each reversal makes such a swing
        die out, while a real change keeps moving one way (unlimited) after at most one
        shortened move."""
        d = self.dom
        delta = new - d.cuts
        last, self._moved = self._moved, None
        # the previous move counts only if the cuts are still where it left them (a
        # repartition by someone else, e.g. a restart, starts afresh)
        if last is not None and not force and np.array_equal(d.cuts, last[1]):
            back = delta * last[0] < 0
            limit = np.maximum(1, np.abs(last[0]) // 2)
            damped = d.cuts + np.where(back, np.sign(delta) * np.minimum(np.abs(delta), limit),
                                       delta)
            m = d.min_planes   # keep every slab at min_planes (as partition does)
            for i in range(1, damped.size - 1):
                damped[i] = max(damped[i], damped[i - 1] + m)
            for i in range(damped.size - 2, 0, -1):
                damped[i] = min(damped[i], damped[i + 1] - m)
            if not np.array_equal(damped, d.cuts):
                new = damped
        self._moved = (new - d.cuts, np.array(new, copy=True))
        return new


def _max():
    from mpi4py import MPI
    return MPI.MAX
