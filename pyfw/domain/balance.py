"""When and how to move slab boundaries during a run.

Each rank feeds :meth:`Balancer.record` the compute time of every step (update calls only,
never halo waits: ``SlabDomain.step`` returns exactly that). The balancer hands each
``(slab cost, seconds)`` pair to the job's online monitor (:attr:`SlabDomain.monitor`, a
:class:`pyfw.monitor.OnlineMonitor`), whose forecasts (a Network-Weather-Service bank per
rank) are kept in the history and shown on the dashboard.

Every ``every`` steps :meth:`Balancer.check` (collective) posts one monitor exchange
(:meth:`OnlineMonitor.sync_start`: a single non-blocking ``allgather`` carrying every rank's
mean step time over the window, plus a link probe if one is due) and ``lag`` steps later
(default 2) completes it -- by then it has progressed inside the halo exchanges, so no rank
waits for the slowest.

Speeds. Every window without a move gives one pace sample per rank, ``t_i / cost_i``
(compute seconds per unit of plane cost; it does not depend on the cuts, so samples stay
valid across moves). A rank's speed is the inverse of its mean pace over the last
``samples`` (32) windows -- a throughput, so a node that stalls in some windows (a CPU quota)
counts at its real rate -- and its noise the standard error of that mean, relative
(standard deviation of the paces / mean / sqrt(n); 0 with one window). Why not the
forecaster bank: a step's compute time is wall time, so a rank descheduled in the middle of
an update counts the time it was off its core. On a shared box (knee 67x53x53 on 2 ranks,
0.3 ms steps, two busy loops hopping between the 2 cores besides other jobs) single windows
took 9-35 ms a step, the window-to-window pace ratio of the two equal ranks spread 0.24-3.7
(5-95 %), and the bank, which ranks its predictors by squared error (dominated by such
outliers), answered with "last", "mean" or "exp0.5" in turn: 84 moves in 11,708 steps, cuts
between 5 and 66 of 67.

Moves. Each check proposes new cuts with :func:`~pyfw.domain.partition.partition` from those
speeds and moves the boundaries only when

* the time lost to imbalance since the last move, ``sum over steps of (t_max - t_mean)`` of the
  measured window times, exceeds the estimated cost of moving (measured on the previous move:
  seconds per byte plus a fixed part; a conservative guess before the first move), and
* the predicted gain per step, ``max_i(cost_i / s_i)`` now minus the bottleneck of the new cuts,
  is above ``min_gain`` of the current step time, above one plane's time on the slowest
  rank, and above ``confidence`` (2) times the noise of that prediction
  (``sqrt(2) * max_i(noise_i)`` of the current step time): noise that makes two equal ranks
  look uneven moves nothing, while a rank really 3x slower (windows within a few % of each
  other) moves as soon as three windows are in (proposed at the third, moved at the fourth;
  before, a proposal from the first window was confirmed by the second), and
* the previous check also proposed a move, with no cut going the opposite way (hysteresis).
  Cuts that one of the two proposals keeps and the other moves do not block it: with 8
  ranks (7 cuts) two estimates rarely round every cut alike, and demanding identical signs
  delayed the benchmark's move after a speed change by 2-4 checks.

Damping. Once a cut has moved back the way it came, each of its later moves goes at most half
as far as its move before that reversal (at least one plane), halving again at every further
reversal, and the cap does not grow while the cut keeps moving; it is forgotten only after the
cuts have held still for ``max_thin * every`` steps and four checks in a row proposed
nothing, or at a change point (a new situation, not a swing). So however the estimates
swing, a cut's swing can only shrink. (The rule before capped only a move
that reversed the move just before it, and a second move the same way was free again: the
cuts went 33 -> 5 -> 19 -> 52 in the run above.)

Stale windows and change points. While the cuts hold the checks thin out, and a mean over
32 windows follows a real change slowly. A window in which some rank is off the kept
windows' pace by more than ``stale`` (default 25 %) and by more than three times their
scatter is stale: the checks go back to every ``every`` steps, and the window is held back.
Four stale windows in a row that agree (the same ranks off the same way, within ``stale / 2``
of each other) are a change point: they replace the kept windows (and lift the damping caps),
so the cuts follow a real change at the next check. Noise rarely gives three such windows; a
row that does not agree joins the kept windows as ordinary samples. (Before, a single stale
window replaced the speeds: under noise half of the checks were stale, and proposed from one
window.)

Every rank takes the decision from the same gathered numbers, so all agree without a vote.
"""
from __future__ import annotations

import math
import time
from collections import deque

import numpy as np

from ..errors import ConfigurationError
from . import partition as _part

__all__ = ["Balancer", "WindowSpeeds"]

_CHANGE_RUN = 4     # stale windows in a row that agree (within stale / 2): a change point
_MIN_WINDOWS = 3    # windows before a proposal (two agree by chance too often under noise)
_CALM_CHECKS = 4     # quiet checks (and max_interval steps) after which move caps are forgotten


class WindowSpeeds:
    """The last ``keep`` windows' paces of every rank (compute seconds per unit of plane
    cost; one array per window) and what they say (pure, no MPI: identical on every rank when
    fed the same gathered numbers)."""

    def __init__(self, keep: int = 32):
        if keep < 1:
            raise ConfigurationError("samples must be >= 1")
        self.buf = deque(maxlen=int(keep))

    def add(self, paces) -> None:
        """One window's pace of every rank (all > 0 and finite)."""
        self.buf.append(np.asarray(paces, dtype=np.float64).copy())

    def restart(self, keep: int) -> None:
        """Forget all but the last ``keep`` windows (at a change point)."""
        while len(self.buf) > keep:
            self.buf.popleft()

    def __len__(self) -> int:
        return len(self.buf)

    def speeds(self) -> np.ndarray:
        """Each rank's speed: plane cost per compute second over the kept windows (the
        inverse of the mean pace: a throughput, so rare long stalls count at their weight)."""
        return 1.0 / np.mean(np.array(self.buf), axis=0)

    def spread(self) -> np.ndarray:
        """Each rank's relative scatter between windows: standard deviation of the paces
        over their mean; 0 with one window."""
        a = np.array(self.buf)
        if len(a) < 2:
            return np.zeros(a.shape[1])
        return np.std(a, axis=0, ddof=1) / np.mean(a, axis=0)

    def noise(self) -> np.ndarray:
        """Relative standard error of each rank's speed (0 with one window)."""
        return self.spread() / math.sqrt(len(self.buf))


class Balancer:
    """Measurement-based boundary mover for a :class:`~pyfw.domain.slab.SlabDomain`.

    ``every``: steps between checks; ``min_gain``: relative predicted gain needed to move;
    ``confidence``: how many times the noise of the predicted step time the gain must also
    exceed; ``samples``: windows whose mean pace gives a rank's speed; ``guess_bandwidth``
    (bytes/s) and ``guess_latency`` (s): move-cost model until a move has been measured;
    ``monitor``: the online monitor that carries the exchanges (default: the domain's,
    :attr:`SlabDomain.monitor`); ``lag``: steps between posting a window's exchange and
    deciding on it (0: decide at once, blocking); ``budget``: while the cuts hold, checks
    thin out (interval doubling from ``every``) until their measured cost is under 30 % of
    this fraction of the step time, but never beyond ``max_thin * every`` steps, which bounds
    how late a speed change is noticed; each proposed move halves the interval back towards
    ``every``; ``stale``: relative gap between a rank's measured and predicted step time
    above which (and above three times the noise) the checks go back to ``every`` (see the
    module docstring); ``warmup``: windows at the start that are not samples (they hold
    one-time costs: the knee's first window took 56 ms a step against 0.3 ms after, numba
    loading its kernels, and one such window kept in a mean of 32 blocked every move).
    """

    def __init__(self, domain, every: int = 20, min_gain: float = 0.10,
                 guess_bandwidth: float = 1e9, guess_latency: float = 2e-3, monitor=None,
                 lag: int = 2, budget: float = 0.01, stale: float = 0.25, max_thin: int = 16,
                 confidence: float = 2.0, samples: int = 32, warmup: int = 1):
        if every < 1:
            raise ConfigurationError("every must be >= 1")
        if max_thin < 1:
            raise ConfigurationError("max_thin must be >= 1")
        if lag < 0:
            raise ConfigurationError("lag must be >= 0")
        if not 0 < budget < 1:
            raise ConfigurationError("budget must be a fraction in (0, 1)")
        if not confidence >= 0:
            raise ConfigurationError("confidence must be >= 0")
        self.window_speeds = WindowSpeeds(samples)
        self.warmup = int(warmup)  # windows still to skip (one-time costs at the start)
        self._offrun = []          # the last stale windows in a row: (signs, paces)
        self.confidence = float(confidence)
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
        self._cap = None           # per cut: largest move allowed (inf: none), see _damped
        self._last_move = None     # per cut: its last nonzero move (planes, signed)
        self._moved_at = None      # step of the last move and the cuts it left
        self._quiet = 0            # checks in a row that proposed nothing
        self._calm = True          # the cuts held long enough since the last move: no caps
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
        """The balancer's speed of every rank (plane cost per compute second): the inverse of
        the mean pace over the kept windows (before the first one: the monitor's forecasts)."""
        if len(self.window_speeds):
            return self.window_speeds.speeds()
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

    def _sample(self, t, costs, dirty: bool) -> bool:
        """Take the window's paces into the samples (not when a move happened inside it);
        True when the window is stale: some rank off the pace of the kept windows (three at
        least) by more than ``stale`` and by more than three times their scatter. Stale
        windows are held back while they come in a row; four in a row that agree (the same
        ranks off the same way, their paces within ``stale / 2`` of each other) are a change
        point and replace the kept windows; a row's windows that do not join one (the first
        may straddle the change) become samples."""
        ws = self.window_speeds
        if dirty or not np.all(costs > 0):
            return False
        if self.warmup > 0:
            self.warmup -= 1
            return False
        pace = t / costs
        off = np.zeros(pace.size)
        if len(ws) >= 3:
            gap = pace * ws.speeds() - 1.0
            off = np.where((np.abs(gap) > self.stale) & (np.abs(gap) > 3.0 * ws.spread()),
                           np.sign(gap), 0.0)
        run = self._offrun
        if run and not np.array_equal(off, run[-1][0]):
            for _, p in run:             # the row ended: its windows were samples like any
                ws.add(p)
            run.clear()
        if not np.any(off):
            ws.add(pace)
            return False
        run.append((off, pace))
        if len(run) == _CHANGE_RUN:
            p = np.array([x[1] for x in run])
            if np.all(np.ptp(p, axis=0) <= 0.5 * self.stale * p.mean(axis=0)):
                ws.restart(0)            # a change point: the older windows are the past
                self._calm = True        # and earlier swings do not cap the next move
                for x in p:
                    ws.add(x)
                run.clear()
            else:                        # the oldest (e.g. half before a change) is a sample
                ws.add(run.pop(0)[1])
        return True

    def _decide(self, allw, force: bool, posted: int, dirty: bool = False):
        d = self.dom
        if allw.shape[1] < 2:
            self.next_check = max(self.steps + 1, posted + self.every)
            return None
        t = allw[:, 0]
        nsteps = float(allw[0, 1])
        if np.any(t <= 0) or not np.all(np.isfinite(t)):
            self.next_check = max(self.steps + 1, posted + self.every)
            return None
        self.loss += nsteps * (t.max() - t.mean())
        costs = _part.slab_costs(d.cost, d.cuts)
        stale = self._sample(t, costs, dirty)
        if not len(self.window_speeds):      # only windows with a move so far
            self.next_check = max(self.steps + 1, posted + self.every)
            return None
        speeds = self.window_speeds.speeds()
        noise = math.sqrt(2.0) * float(self.window_speeds.noise().max())
        now = float((costs / speeds).max())
        plane_time = float((d.cost.max() / speeds).max()) if d.cost.max() > 0 else 0.0
        need = self.min_gain * now
        # no cuts beat the continuous ideal: skip the partition when even that gains too little
        ideal = float(d.cost.sum() / speeds.sum())
        if now - ideal > need and now - ideal > plane_time:
            new = _part.partition(d.cost, speeds, d.min_planes)
            pred = _part.bottleneck(d.cost, speeds, new)
        else:
            new, pred = d.cuts, now
        gain = now - pred
        cost = self.move_cost(new)
        rec = {"step": self.steps, "times": t.tolist(), "cuts": d.cuts.tolist(),
               "speeds": speeds.tolist(), "noise": noise,
               "forecast": self.mon.speeds().tolist(),
               "forecasters": [self.mon.speed(r).predict().method for r in range(d.size)],
               "imbalance": float(t.max() / t.mean() - 1), "loss": self.loss,
               "move_cost": cost, "gain": gain, "stale": stale, "moved": False}
        self.history.append(rec)
        # a gain the noise could explain is no proposal, but the checks stay frequent: the
        # windows that would settle it are still to come
        maybe = not np.array_equal(new, d.cuts) and gain > need and gain > plane_time
        worth = (maybe and gain > self.confidence * noise * now
                 and len(self.window_speeds) >= min(_MIN_WINDOWS, self.window_speeds.buf.maxlen))
        self._quiet = 0 if maybe else self._quiet + 1
        if (self._quiet >= _CALM_CHECKS and self._moved_at is not None
                and self.steps - self._moved_at[0] >= self.max_interval):
            self._calm = True
        self._schedule(allw, t, bool(maybe), posted, stale)
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
        if np.array_equal(new, d.cuts):
            return None
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
        """The cuts to move to: ``new``, with each cut's move capped (see the module
        docstring: after a cut's first reversal its moves go at most half as far as its move
        before that reversal, at least one plane, the cap halving at each further reversal
        and never growing; forgotten at a change point, once the cuts have held for
        ``max_interval`` steps and four checks in a row proposed nothing, or when someone
        else moved the cuts, e.g. a restart). A forced move is not damped. Noisy
        speeds (a node throttled by a CPU quota in bursts) once made the cuts swing 83 -> 53
        -> 72 -> 89 -> 70 -> 90 -> 55 (of 120 planes, the right one ~80) in one 1,500-step
        run; with caps that only shrink such a swing dies out, while a real change after
        the cuts settled moves at once."""
        d = self.dom
        delta = new - d.cuts
        at = self._moved_at
        if force or self._calm or at is None or not np.array_equal(d.cuts, at[1]):
            self._cap = np.full(d.cuts.size, np.inf)
            self._last_move = np.zeros(d.cuts.size, dtype=np.int64)
        if not force:
            back = delta * self._last_move < 0
            self._cap = np.where(back, np.minimum(self._cap, np.maximum(
                1, np.abs(self._last_move) // 2)), self._cap)
            step = np.sign(delta) * np.minimum(np.abs(delta), self._cap)
            damped = d.cuts + step.astype(np.int64)
            m = d.min_planes   # keep every slab at min_planes (as partition does)
            for i in range(1, damped.size - 1):
                damped[i] = max(damped[i], damped[i - 1] + m)
            for i in range(damped.size - 2, 0, -1):
                damped[i] = min(damped[i], damped[i + 1] - m)
            new = damped
        moved = new - d.cuts
        self._last_move = np.where(moved != 0, moved, self._last_move)
        self._moved_at = (self.steps, np.array(new, copy=True))
        self._calm = False
        return new


def _max():
    from mpi4py import MPI
    return MPI.MAX
