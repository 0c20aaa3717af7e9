"""How many tasks to hand a worker at once (chunking) and how many chunks to keep in flight.

Chunk-size policies follow the dynamic loop scheduling literature (notation: N tasks, P
workers, R tasks not yet handed out, mu_p / sigma_p the measured mean / standard deviation of
a task's time on worker p):

========== ==================================================================================
static     one chunk of ceil(N/P) per worker
ss         pure self-scheduling: 1 task per chunk
gss        guided (Polychronopoulos & Kuck 1987): ceil(R/P)
tss        trapezoid (Tzen & Ni 1993): linear decrease from F=ceil(N/2P) to 1
fac2       factoring with x=2 (Hummel et al. 1992): batches of P chunks of ceil(R_j/2P)
awf        adaptive weighted factoring, AWF-C (Banicescu et al. 2003): w_p * ceil(R/2P),
           weights from measured per-worker rates (recent chunks weigh more), updated per chunk
af         adaptive factoring (Banicescu & Liu 2000): from mu_p and sigma_p,
           K_p = (D + 2TR - sqrt(D^2 + 4DTR)) / (2 mu_p), D = sum sigma^2/mu, T = 1/sum(1/mu)
adaptive   the default: AWF-C weights for balance, plus a floor so a chunk lasts at least
           ``target_chunk_time`` (amortises the per-message cost of tiny tasks), no more than
           R/(2P) weighted (keeps the end of a round balanced)
fixed      a chunk size given by the user (``chunksize=k``), as in mpi4py.futures
========== ==================================================================================

When the number of tasks is unknown (a lazy stream), R is the number of tasks read ahead.
"""
from __future__ import annotations

import copy
import math

from ..errors import ConfigurationError
from ..monitor.forecast import ForecasterBank

__all__ = ["WorkerStats", "make_policy", "POLICIES", "Pipeline"]

_UNSET = object()   # task_time not given: use the worker's own recent mean

#: a pipeline's round-trip forecasters take about this many samples per second in all
BANK_UPDATES_PER_S = 1000.0   # unchanged sampling up to 10 workers


class WorkerStats:
    """What the master knows about one worker's speed (updated from every chunk's stats)."""

    #: bumped by every :meth:`record` of any worker: AWF weights computed over a list of
    #: workers stay valid while it is unchanged (see :func:`_weights`)
    epoch = 0

    __slots__ = ("rank", "tasks", "chunks", "busy", "idle", "sum_t", "sum_t2",
                 "awf_num", "awf_den", "awf_k", "mean_recent", "width")

    def __init__(self, rank: int, width: int = 1):
        self.rank = rank
        # ranks this worker stands for: a two-level farm's sub-master serves its node's
        # ranks, so it counts as that many workers until its speed is measured
        self.width = width
        self.tasks = self.chunks = 0
        self.busy = self.idle = 0.0
        self.sum_t = self.sum_t2 = 0.0
        self.awf_num = self.awf_den = 0.0
        self.awf_k = 0
        self.mean_recent = None  # exponentially smoothed time per task

    def record(self, n: int, sum_t: float, sum_t2: float, busy: float, idle: float) -> None:
        """Add one chunk's counts and times (sums of task times and their squares)."""
        if n <= 0:
            return
        self.tasks += n
        self.chunks += 1
        self.busy += busy
        self.idle += idle
        self.sum_t += sum_t
        self.sum_t2 += sum_t2
        # AWF: chunk k weighs k, so the estimate follows a worker whose speed changes
        WorkerStats.epoch += 1
        self.awf_k += 1
        self.awf_num += self.awf_k * busy
        self.awf_den += self.awf_k * n
        per_task = busy / n
        self.mean_recent = per_task if self.mean_recent is None else (
            0.7 * self.mean_recent + 0.3 * per_task)

    @property
    def measured(self) -> bool:
        """True once this worker has timed at least one task."""
        return self.tasks > 0

    @property
    def mean(self) -> float | None:
        """Mean time per task (chunk wall time / tasks, so per-task overhead counts)."""
        if not self.tasks:
            return None
        return max(self.busy / self.tasks, 1e-9)

    @property
    def std(self) -> float:
        """Standard deviation of the task time (0 until two samples)."""
        if self.tasks < 2:
            return 0.0
        m = self.sum_t / self.tasks
        return math.sqrt(max(self.sum_t2 / self.tasks - m * m, 0.0))

    @property
    def awf_time(self) -> float | None:
        """AWF's pi_p: recency-weighted time per task."""
        if self.awf_den <= 0:
            return None
        return max(self.awf_num / self.awf_den, 1e-9)


def _weights(me: WorkerStats, workers: list[WorkerStats]) -> float:
    """AWF weight of ``me``: P * (1/pi_me) / sum_q (1/pi_q), with P the ranks the workers
    stand for (their widths); its width until everyone is measured."""
    mine = me.awf_time
    if mine is None:
        return me.width
    inv, ranks = _inverse_sum(workers)
    if inv is None:
        return me.width
    return ranks * (1.0 / mine) / inv


_INV_CACHE: list = [None, -1, 0, (None, 0)]   # workers list, WorkerStats.epoch, length, sums


def _inverse_sum(workers: list[WorkerStats]) -> tuple[float | None, int]:
    """(sum_q 1/pi_q over ``workers``, None while one is unmeasured; the ranks they stand
    for). Cached for the same list while no worker recorded a chunk: the master sizes
    many chunks between two replies, and the sum is O(workers)."""
    cache = _INV_CACHE
    if cache[0] is workers and cache[1] == WorkerStats.epoch and cache[2] == len(workers):
        return cache[3]
    times = [w.awf_time for w in workers]
    inv = None if any(t is None for t in times) else sum(1.0 / t for t in times)
    sums = (inv, sum(w.width for w in workers))
    cache[:] = [workers, WorkerStats.epoch, len(workers), sums]
    return sums


class Policy:
    """A chunk-size rule: how many tasks a worker gets per message (``policy=`` names one
    of :data:`POLICIES`)."""
    name = "?"

    def start(self, total: int | None, nworkers: int) -> None:
        """Reset for a round of ``total`` tasks (None: unknown) over ``nworkers`` workers
        (counted by the ranks they stand for: see :attr:`WorkerStats.width`)."""
        self.total, self.P = total, max(nworkers, 1)
        self.count = 0

    def chunk(self, w: WorkerStats, remaining: int, workers: list[WorkerStats],
              task_time: float | None = _UNSET) -> int:
        """Tasks for worker ``w``'s next chunk, ``remaining`` tasks not yet handed out.
        ``task_time``: ``w``'s measured time per task in this round (None: not measured
        yet); policies that size chunks by time use it instead of ``w``'s recent mean.
        A worker of width k (a sub-master) gets what k workers would."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


class Static(Policy):
    """Static: the round split into one equal chunk per worker up front."""
    name = "static"

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        n = self.total if self.total is not None else remaining
        return w.width * max(1, math.ceil(n / self.P))


class SelfScheduling(Policy):
    """Pure self-scheduling (SS): one task per chunk."""
    name = "ss"

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        return w.width


class Fixed(Policy):
    """A fixed chunk size (``map(..., chunksize=k)``)."""
    name = "fixed"

    def __init__(self, size: int):
        if int(size) < 1:
            raise ConfigurationError(f"chunksize must be >= 1, got {size}")
        self.size = int(size)

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        return self.size


class Guided(Policy):
    """Guided self-scheduling (GSS, Polychronopoulos & Kuck 1987): remaining / P."""
    name = "gss"

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        return w.width * max(1, math.ceil(remaining / self.P))


class Trapezoid(Policy):
    """Trapezoid self-scheduling (TSS, Tzen & Ni 1993): chunks falling linearly from N / 2P to 1."""
    name = "tss"

    def start(self, total, nworkers):
        super().start(total, nworkers)
        n = total if total is not None else 0
        self.first = max(1, math.ceil(n / (2 * self.P))) if n else None
        self.last = 1
        if self.first:
            c = max(2, math.ceil(2 * n / (self.first + self.last)))
            self.delta = (self.first - self.last) / (c - 1)

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        if self.first is None:  # unknown N: fall back to guided on what is read ahead
            return w.width * max(1, math.ceil(remaining / (2 * self.P)))
        k = self.first - self.count * self.delta
        self.count += w.width
        return w.width * max(self.last, int(round(k)))


class Factoring2(Policy):
    """Factoring (FAC2, Hummel et al. 1992): batches of P equal chunks of remaining / 2P."""
    name = "fac2"

    def start(self, total, nworkers):
        super().start(total, nworkers)
        self.batch_left = 0
        self.batch_size = 1

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        if self.batch_left <= 0:
            self.batch_size = max(1, math.ceil(remaining / (2 * self.P)))
            self.batch_left = self.P
        self.batch_left -= w.width
        return w.width * self.batch_size


class AdaptiveWeightedFactoring(Policy):
    """Adaptive weighted factoring (AWF): factoring weighted by each worker's measured speed."""
    name = "awf"

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        return max(1, math.ceil(_weights(w, workers) * remaining / (2 * self.P)))


class AdaptiveFactoring(Policy):
    """Adaptive factoring (AF, Banicescu & Liu 2000): chunks from each worker's measured
    mean and deviation of the task time."""
    name = "af"

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        measured = [x for x in workers if x.measured]
        if not w.measured or not measured:
            return w.width  # probe: one task per rank tells us this worker's mu and sigma
        d = sum(x.std ** 2 / x.mean for x in measured)
        t = 1.0 / sum(1.0 / x.mean for x in measured)
        r = remaining
        k = (d + 2 * t * r - math.sqrt(d * d + 4 * d * t * r)) / (2 * w.mean)
        upper = w.width * max(1, math.ceil((self.total or remaining) / (2 * self.P)))
        return int(min(max(1, math.ceil(k)), upper))


class Adaptive(Policy):
    """The default: weighted factoring with an overhead floor (see the module docstring)."""

    name = "adaptive"

    def __init__(self, target_chunk_time: float = 2e-3, max_chunk: int = 100_000):
        self.target = target_chunk_time
        self.max_chunk = max_chunk

    def chunk(self, w, remaining, workers, task_time=_UNSET):
        fac = max(1, math.ceil(_weights(w, workers) * remaining / (2 * self.P)))
        mean = w.mean_recent if task_time is _UNSET else task_time
        if mean is None:
            return w.width  # first chunk on this worker: measure before committing more
        floor = max(1, math.ceil(self.target / mean))
        return int(min(max(fac, floor), self.max_chunk))


POLICIES = {cls.name: cls for cls in (Static, SelfScheduling, Guided, Trapezoid, Factoring2,
                                      AdaptiveWeightedFactoring, AdaptiveFactoring, Adaptive)}


def make_policy(policy, chunksize: int | None = None) -> Policy:
    """A fresh policy object from a name (see POLICIES), an instance (copied), or a fixed
    ``chunksize``."""
    if chunksize is not None:
        return Fixed(chunksize)
    if isinstance(policy, Policy):
        return copy.copy(policy)  # policies keep per-round state
    if not isinstance(policy, str) or policy.lower() not in POLICIES:
        raise ConfigurationError(
            f"unknown scheduling policy {policy!r}; choose one of "
            f"{', '.join(sorted(POLICIES))} (or pass chunksize=k)")
    return POLICIES[policy.lower()]()


class Pipeline:
    """How many chunks to keep in flight per worker, and when to send the next one.

    The count follows the pipelined-transfer rule: with ``BDP = rate * (RTT + t_chunk)``
    (the work a worker gets through while one chunk travels there and back), keep
    ``ceil(BDP / size)`` chunks outstanding, i.e. ``ceil(BDP/size) - 1`` queued behind the
    running one, so the worker never waits for the network. A queued chunk is sent only
    when the worker's outstanding work falls below the lead time ``factor * (RTT + margin)``
    (the "request when 15 % of the chunk remains" rule of DLS libraries), so prefetching
    never hands out work long before it is needed and decreasing chunk sizes keep their
    balancing effect. ``factor`` starts at 1 and is doubled while the measured utilisation of
    the workers (compute seconds per wall second) still improves by more than ``gain``
    (5 %); the first doubling that does not pay is reverted and the depth settles. The count
    never exceeds ``max_depth``.

    The round trip is forecast per worker by a :class:`pyfw.monitor.ForecasterBank`
    (Network Weather Service style: the predictor with the lowest recent error wins), so a
    worker behind a slow or jittery link gets a deeper pipeline than its neighbours.
    """

    def __init__(self, max_depth: int = 32, fixed: int | None = None, gain: float = 0.05,
                 window: float = 0.25, margin: float = 1e-3, sample_every: float = 0.01):
        if fixed is not None and fixed < 1:
            raise ConfigurationError(f"pipeline depth must be >= 1, got {fixed}")
        if max_depth < 1:
            raise ConfigurationError(f"max_depth must be >= 1, got {max_depth}")
        self.max_depth, self.fixed, self.gain = max_depth, fixed, gain
        self.window, self.margin = window, margin
        self.rtt = None          # smallest recent round-trip overhead over all workers (s)
        self._rtt_samples: list[float] = []
        # per worker: an NWS forecaster bank over its round-trip overhead, fed with the
        # smallest sample of every ``sample_every`` seconds (queueing inflates the others)
        self.sample_every = sample_every
        self._banks: dict[int, ForecasterBank] = {}
        self._window_min: dict[int, tuple[float, float]] = {}
        self.link_rtt: dict[int, float] = {}
        self.factor = 1
        self.settled = fixed is not None
        self._prev = None
        self._w_start = None
        self._w_busy = 0.0
        self._w_chunks = 0
        self.history: list[tuple[int, float]] = []  # (factor, utilisation) per window

    def observe_rtt(self, sample: float, rank: int | None = None, now: float = 0.0) -> None:
        """A measured round-trip overhead (network + polling) of a chunk to ``rank``."""
        if sample <= 0:
            return
        self._rtt_samples.append(sample)
        if len(self._rtt_samples) > 64:
            self._rtt_samples.pop(0)
        self.rtt = min(self._rtt_samples)
        if rank is None:
            return
        low, since = self._window_min.get(rank, (math.inf, now))
        low = min(low, sample)
        # a bank update costs tens of us: with hundreds of workers, sample each link less
        # often so that all of them together stay near BANK_UPDATES_PER_S
        every = max(self.sample_every, len(self._banks) / BANK_UPDATES_PER_S)
        if now - since < every and rank in self.link_rtt:
            self._window_min[rank] = (low, since)
            return
        bank = self._banks.get(rank)
        if bank is None:
            bank = self._banks[rank] = ForecasterBank()
        bank.update(low)
        self.link_rtt[rank] = bank.predict().value
        self._window_min[rank] = (math.inf, now)

    def rtt_of(self, rank: int | None) -> float | None:
        """The forecast round-trip overhead to ``rank`` (the global minimum until known)."""
        value = self.link_rtt.get(rank)
        return self.rtt if value is None or not math.isfinite(value) else value

    def forecasts(self) -> dict:
        """Per worker: forecast round trip (s) and the forecaster the bank trusts now."""
        return {r: {"rtt_s": self.link_rtt[r], "forecaster": b.predict().method}
                for r, b in sorted(self._banks.items())}

    def depth(self, chunk_time: float | None, rank: int | None = None) -> int:
        """Chunks allowed in flight on a worker whose chunks take ``chunk_time`` seconds."""
        if self.fixed is not None:
            return self.fixed
        rtt = self.rtt_of(rank)
        if rtt is None or not chunk_time:
            base = 2
        else:
            base = max(2, math.ceil((rtt + chunk_time) / chunk_time))
        return max(1, min(self.max_depth, base * self.factor))

    def lead(self, rank: int | None = None) -> float:
        """Send the next chunk when the worker has less than this much work left (s)."""
        if self.fixed is not None:
            return math.inf
        return self.factor * ((self.rtt_of(rank) or 0.0) + self.margin)

    def observe(self, now: float, busy: float, nworkers: int) -> None:
        """Feed the compute seconds a finished chunk reported; adjusts the doubling factor."""
        if self.settled:
            return
        if self._w_start is None:
            self._w_start = now
            return
        self._w_busy += busy
        self._w_chunks += 1
        span = now - self._w_start
        if span < self.window or self._w_chunks < 4 * nworkers:
            return
        util = self._w_busy / (span * max(nworkers, 1))
        self.history.append((self.factor, round(util, 4)))
        self._w_start, self._w_busy, self._w_chunks = now, 0.0, 0
        if self._prev is None or util > self._prev * (1 + self.gain):
            self._prev = util
            if self.factor * 2 <= self.max_depth:
                self.factor *= 2
            else:
                self.settled = True
        else:
            self.factor = max(1, self.factor // 2)
            self.settled = True
