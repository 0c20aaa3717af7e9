"""The master's dispatch engine (private): rounds, chunks in flight, failures, stragglers.

One thread drives everything (no MPI_THREAD_MULTIPLE needed): :meth:`Engine.step` drains
every waiting message, re-dispatches what was lost, hands out new chunks to workers that
need them, and sleeps with a capped backoff when nothing happened, so an idle master does
not burn the core it shares with a worker.

Exactly-once delivery: every round tracks which task ids are done; a result for a task that
is already done (from a duplicate sent to beat a straggler, or a re-dispatch after a worker
died) is dropped. Tasks are re-dispatched when their worker dies (ULFM), when they exceed
the per-task timeout, or at the end of a round to an idle worker (rDLB-style tail
duplication); a task lost ``max_attempts`` times is quarantined.
"""
from __future__ import annotations

import bisect
import itertools
import math
import pickle
import time
from collections import deque

from ..comm import Backoff, Comm
from ..errors import (FarmBroken, PeerFailure, RemoteTraceback, TaskError, TaskQuarantined,
                      TaskSerializationError)
from . import _protocol as P
from .policies import Pipeline, Policy, WorkerStats
from .task import Context, Task

__all__ = ["Engine", "SerialEngine", "RoundState", "make_task_error"]


def make_task_error(index, rank, info, attempts=1, cls=TaskError) -> TaskError:
    """A TaskError from a worker's error_info tuple, with the remote traceback as cause."""
    exc_type, message, text, host, blob = info[:5]
    if len(info) > 5:   # raised on a node worker behind a sub-master (pyfw.farm.hierarchy)
        rank = info[5]
    original = None
    if blob is not None:
        try:
            original = pickle.loads(blob)
        except Exception:
            original = None
    err = cls(index, rank, host, exc_type, message, original, attempts)
    err.__cause__ = RemoteTraceback(text)
    return err


class _Done:
    """The set of finished task ids: everything below ``low``, plus disjoint half-open
    intervals above it (as many as there are out-of-order chunks, so a handful)."""

    __slots__ = ("low", "starts", "stops")

    def __init__(self):
        self.low = 0
        self.starts: list[int] = []
        self.stops: list[int] = []

    def __contains__(self, tid: int) -> bool:
        if tid < self.low:
            return True
        i = bisect.bisect_right(self.starts, tid) - 1
        return i >= 0 and tid < self.stops[i]

    def overlaps(self, a: int, b: int) -> bool:
        """True if any id in [a, b) is done."""
        if a < self.low:
            return True
        i = bisect.bisect_right(self.starts, b - 1) - 1
        return i >= 0 and self.stops[i] > a

    def add_range(self, a: int, b: int) -> None:
        """Mark [a, b) done (it must not overlap what is done already)."""
        starts, stops = self.starts, self.stops
        i = bisect.bisect_left(starts, a)
        if i > 0 and stops[i - 1] == a:          # extends the interval before
            i -= 1
            stops[i] = b
        else:
            starts.insert(i, a)
            stops.insert(i, b)
        if i + 1 < len(starts) and starts[i + 1] == stops[i]:   # meets the one after
            stops[i] = stops.pop(i + 1)
            starts.pop(i + 1)
        if starts and starts[0] == self.low:
            self.low = stops[0]
            del starts[0], stops[0]

    def add(self, tid: int) -> None:
        if tid not in self:
            self.add_range(tid, tid + 1)

    @property
    def high(self) -> int:
        """How many finished ids lie above ``low`` (out of order)."""
        return sum(b - a for a, b in zip(self.starts, self.stops))


class RoundState:
    """One wave of tasks: its source, what is pending, done, and what to hand back.

    Tasks are read from the source in blocks (never more than a chunk's worth ahead of
    dispatch, so a huge or lazy stream costs bounded memory) and keep consecutive ids, so a
    chunk's ids travel as a ``range``.
    """

    READ_AHEAD = 1024

    def observe_task_time(self, rank: int, per_task: float) -> None:
        """Smooth one chunk's time per task on ``rank`` into this round's estimate."""
        before = self.task_time.get(rank)
        self.task_time[rank] = per_task if before is None else 0.7 * before + 0.3 * per_task

    def __init__(self, rid, source, fn, star, total, policy: Policy, name, window=None,
                 skip=None):
        self.rid, self.fn, self.star, self.total = rid, fn, star, total
        self.name = name
        self.source = iter(source)
        self.policy = policy
        self.next_tid = 0                # ids handed to tasks read so far
        self.exhausted = False
        self.buf: list = []              # items read, not yet sent ...
        self.buf_ids = None              # ... their ids (None: consecutive from buf_start)
        self.buf_start = 0
        self.buf_pos = 0
        self.retry: deque = deque()      # (tid, item) to send again first
        self.done = _Done()
        self.ndone = 0
        self.outputs: deque = deque()    # records: (ids, values, errors{pos: TaskError}, rank)
        self.task_time: dict = {}        # rank -> smoothed time per task of *this* round's fn
        self.cancelled = False
        self.attempts: dict[int, int] = {}
        self.window = window             # ordered delivery: dispatch only tid < base + window
        self.window_base = 0
        self.skip = skip or {}           # tid -> value already known (journal)
        self.tail_duplication = True     # idle workers may get copies of its last chunks
        self.wire_fn = None if fn is None else (fn, star)

    # ---------------------------------------------------------------- task supply
    def _refill(self, want: int) -> None:
        """Read the next block of tasks (at least ``want`` if the source has them)."""
        if self.exhausted:
            return
        n_want = max(want, self.READ_AHEAD)
        items = list(itertools.islice(self.source, n_want))
        start = self.next_tid
        self.next_tid += len(items)
        if len(items) < n_want:
            self.exhausted = True
            if self.total is None:
                self.total = self.next_tid
        self.buf_start, self.buf_pos, self.buf_ids = start, 0, None
        if self.skip:  # results known from the journal are delivered, not sent
            ids, kept = [], []
            for off, item in enumerate(items):
                tid = start + off
                if tid in self.skip:
                    self.deliver([tid], [self.skip.pop(tid)], None, -1)
                else:
                    ids.append(tid)
                    kept.append(item)
            items, self.buf_ids = kept, ids
        self.buf = items

    def _buffered(self) -> int:
        return len(self.buf) - self.buf_pos

    def _next_tid(self) -> int:
        pos = self.buf_pos
        return self.buf_start + pos if self.buf_ids is None else self.buf_ids[pos]

    def remaining(self) -> int:
        """Tasks not yet handed out (exact when the total is known, else read-ahead)."""
        if not self._buffered():
            self._refill(1)
        left = len(self.retry) + self._buffered()
        if self.total is not None and not self.exhausted:
            left += self.total - self.next_tid
        return left

    def has_pending(self) -> bool:
        if self.cancelled:
            return False
        if self.retry:
            return True
        if not self._buffered():
            self._refill(1)
            if not self._buffered():
                return False
        return self.window is None or self._next_tid() < self.window_base + self.window

    def take(self, k: int):
        """Up to ``k`` tasks to send: ``(ids, items)``; ids a range when consecutive."""
        if self.retry:
            # a task that has failed before travels alone: if it kills its next worker too,
            # the blame falls on it and not on innocent neighbours of its chunk
            ids, items = [], []
            retry, attempts = self.retry, self.attempts
            while retry and len(ids) < k:
                tid, item = retry[0]
                if tid in self.done:
                    retry.popleft()
                    continue
                if attempts.get(tid) and ids:
                    break
                retry.popleft()
                ids.append(tid)
                items.append(item)
                if attempts.get(tid):
                    break
            return ids, items
        if not self._buffered():
            self._refill(k)
        pos = self.buf_pos
        n = min(k, self._buffered())
        if self.window is not None and n:
            n = max(0, min(n, self.window_base + self.window - self._next_tid()))
        items = self.buf[pos:pos + n]
        if self.buf_ids is None:
            first = self.buf_start + pos
            ids = range(first, first + n)
        else:
            ids = self.buf_ids[pos:pos + n]
        self.buf_pos = pos + n
        if self.buf_pos == len(self.buf):
            self.buf, self.buf_ids, self.buf_pos = [], None, 0
        return ids, items

    def drop_pending(self) -> None:
        self.buf, self.buf_ids, self.buf_pos = [], None, 0
        self.retry.clear()

    @property
    def finished(self) -> bool:
        if self.cancelled:
            return True
        return (self.exhausted and not self._buffered() and not self.retry
                and self.total is not None and self.ndone >= self.total)

    # ---------------------------------------------------------------- results
    def deliver(self, ids, values, errors, rank) -> None:
        """Record results (dropping duplicates) and queue them for the consumer."""
        done = self.done
        if isinstance(ids, range):
            fresh = not done.overlaps(ids.start, ids.stop)
            if fresh and len(ids):
                done.add_range(ids.start, ids.stop)
        else:
            fresh = all(t not in done for t in ids)
            if fresh:
                for t in ids:
                    done.add_range(t, t + 1)
        if fresh:
            fresh_ids, fresh_vals, fresh_errs = ids, values, errors
        else:
            fresh_ids, fresh_vals, fresh_errs = [], [], {}
            for pos, t in enumerate(ids):
                if t in done:
                    continue
                done.add_range(t, t + 1)
                if errors and pos in errors:
                    fresh_errs[len(fresh_ids)] = errors[pos]
                fresh_ids.append(t)
                fresh_vals.append(values[pos])
        if not len(fresh_ids):
            return
        self.ndone += len(fresh_ids)
        self.outputs.append((fresh_ids, fresh_vals, fresh_errs or None, rank))


class _Chunk:
    __slots__ = ("cid", "rnd", "ids", "items", "rank", "t_sent", "t_head", "twin", "left",
                 "tries")

    def __init__(self, cid, rnd, ids, items, rank, now):
        self.cid, self.rnd, self.ids, self.items, self.rank = cid, rnd, ids, items, rank
        # failed attempts already counted for its tasks when it was sent (retries only)
        attempts = rnd.attempts
        self.tries = {t: attempts[t] for t in ids if t in attempts} if attempts else None
        self.left = len(ids)  # tasks whose results have not come back yet
        self.t_sent = self.t_head = now
        self.twin = None


class _Worker:
    __slots__ = ("rank", "host", "pid", "alive", "inflight", "stats", "hello")

    def __init__(self, rank):
        self.rank = rank
        self.host, self.pid = "?", None
        self.alive = True
        self.hello = False
        self.inflight: deque[_Chunk] = deque()
        self.stats = WorkerStats(rank)


class Engine:
    """Master side of the farm over ``comm`` (ranks other than ``master`` are workers)."""

    def __init__(self, comm: Comm, master: int = 0, pipeline: Pipeline | None = None,
                 task_timeout: float | None = None, max_attempts: int = 3, retries: int = 0,
                 tail_duplication: bool = True, workers=None):
        self.comm, self.master = comm, master
        ranks = range(comm.size) if workers is None else workers   # two-level: see hierarchy
        self.workers = {r: _Worker(r) for r in ranks if r != master}
        self.substats: dict[int, tuple] = {}  # sub-master -> (its node's rows, its own work)
        self.pipeline = pipeline or Pipeline()
        self.task_timeout = task_timeout
        self.max_attempts = max(1, int(max_attempts))
        self.retries = max(0, int(retries))
        self.tail_duplication = tail_duplication
        self.rounds: dict[int, RoundState] = {}
        self._rid = itertools.count()
        self._cid = itertools.count()
        self.chunks: dict[int, _Chunk] = {}
        self.backoff = Backoff()
        self.broken: BaseException | None = None
        self.setup_error = None
        self.quarantined: list[TaskQuarantined] = []
        self.duplicates = 0
        self.completed = 0   # distinct tasks whose result (or final error) came back this run
        self.started = time.perf_counter()
        self.idle_master = 0.0
        self.failures = 0     # failed attempts: a task raised, or was lost with its worker
        self.observer = None  # called with the engine after every step (a dashboard's Ticker)
        for r in self.workers:
            self._post(("ping", time.perf_counter()), r)

    # ---------------------------------------------------------------- public
    def alive_workers(self) -> list[_Worker]:
        return [w for w in self.workers.values() if w.alive]

    def start_round(self, source, fn=None, star=False, total=None, policy: Policy = None,
                    name=None, window=None, skip=None) -> RoundState:
        self._check_broken()
        rid = next(self._rid)
        rnd = RoundState(rid, source, fn, star, total, policy, name or f"round-{rid}",
                         window, skip)
        policy.start(total, max(1, len(self.alive_workers())))
        if not self.rounds:
            # task durations differ from round to round (IDA* iterations grow ~13x): measure
            # anew; relative worker speeds (the AWF weights) carry over
            for w in self.workers.values():
                w.stats.mean_recent = None
        self.rounds[rid] = rnd
        return rnd

    def end_round(self, rnd: RoundState) -> None:
        self.rounds.pop(rnd.rid, None)

    def cancel_round(self, rnd: RoundState, wait: bool = True, timeout: float = 30.0) -> None:
        """Drop pending tasks and stop running ones; with ``wait``, until workers are idle."""
        rnd.cancelled = True
        rnd.drop_pending()
        for w in self.alive_workers():
            if any(c.rnd is rnd for c in w.inflight):
                self._post(("cancel", rnd.rid), w.rank)
        if wait:
            deadline = time.monotonic() + timeout
            while any(c.rnd is rnd for c in self.chunks.values()):
                if time.monotonic() > deadline:
                    break  # a task that ignores ctx.cancelled(); its result will be dropped
                self.step()

    def step(self) -> bool:
        """One turn of the dispatch loop; returns True if anything happened."""
        self._check_broken()
        progressed = self._drain()
        if self.task_timeout is not None:
            self._check_timeouts()
        if self._dispatch():
            progressed = True
        if progressed:
            self.backoff.reset()
        else:
            try:
                self.comm.progress()
            except PeerFailure as exc:
                self._lost(exc.ranks)
            t0 = time.perf_counter()
            self.backoff.sleep()
            self.idle_master += time.perf_counter() - t0
        if self.observer is not None:
            self.observer(self)
        return progressed

    def shutdown(self, reason: str | None = None) -> None:
        """Tell every live worker to leave its serve loop (``reason``: the master's error)."""
        failed = sorted(self.comm.failed)
        for w in self.alive_workers():
            try:
                self.comm.isend(("stop", reason, failed), w.rank, P.CTRL)
            except PeerFailure:
                pass
        try:
            self.comm.flush(timeout=10.0, raise_on_timeout=False)
        except PeerFailure:
            pass

    # ---------------------------------------------------------------- messages
    def _post(self, msg, rank: int) -> None:
        """Send a control message; a peer found dead on the way is handled, not raised."""
        try:
            self.comm.isend(msg, rank, P.CTRL)
        except PeerFailure as exc:
            self._lost(exc.ranks)

    def _drain(self) -> bool:
        comm = self.comm
        progressed = False
        while True:
            try:
                got = comm.poll()
            except PeerFailure as exc:
                self._lost(exc.ranks)
                progressed = True
                continue
            if got is None:
                return progressed
            progressed = True
            msg, src, tag = got
            if tag == P.DONE:
                self._on_done(msg, src)
            elif tag == P.CTRL:
                self._on_ctrl(msg, src)

    def _on_ctrl(self, msg, src) -> None:
        kind = msg[0]
        w = self.workers.get(src)
        if w is None:
            return
        if kind == "hello":
            _, w.host, w.pid, setup_error = msg
            w.hello = True
            if setup_error is not None and self.setup_error is None:
                self.setup_error = make_task_error("setup", src, setup_error)
                self.broken = FarmBroken(
                    f"the worker setup function failed on rank {src} ({w.host}): "
                    f"{setup_error[0]}: {setup_error[1]}")
                self.broken.__cause__ = self.setup_error
        elif kind == "pong":
            self.pipeline.observe_rtt(time.perf_counter() - msg[1])
        elif kind == "substats":
            self.substats[src] = (msg[1], msg[2])

    def _on_done(self, msg, src) -> None:
        cid, rid, ids, values, errors, stats, status = msg
        w = self.workers[src]
        now = time.perf_counter()
        if status == P.PARTIAL:
            chunk = self.chunks.get(cid)
            if chunk is not None:
                chunk.left -= len(ids)
        else:
            chunk = self.chunks.pop(cid, None)
        if chunk is not None and status != P.PARTIAL:
            try:
                w.inflight.remove(chunk)
            except ValueError:
                pass
            if w.inflight and w.inflight[0].t_head == math.inf:
                w.inflight[0].t_head = now  # it started when the one before it finished
        if stats is not None:
            n, sum_t, sum_t2, busy, idle, t_got, t_done = stats
            w.stats.record(n, sum_t, sum_t2, busy, idle)
            rnd = self.rounds.get(rid)
            if rnd is not None and n > 0:
                rnd.observe_task_time(src, busy / n)
            if chunk is not None and status != P.PARTIAL:
                # round trip minus the worker's own time holding the chunk: network + polling
                self.pipeline.observe_rtt((now - chunk.t_sent) - (t_done - t_got), src, now)
            self.pipeline.observe(now, busy, len(self.workers))
        rnd = self.rounds.get(rid)
        if rnd is None or rnd.cancelled:
            return
        if errors:
            ids, values, errs = self._sort_errors(rnd, chunk, src, ids, values, errors)
        else:
            errs = None
        if ids:
            before = rnd.ndone
            rnd.deliver(ids, values, errs, src)
            self.completed += rnd.ndone - before
        if chunk is None or status == P.PARTIAL:
            return
        twin = chunk.twin
        if twin is not None and status == P.OK and twin.cid in self.chunks:
            self._post(("skip", [twin.cid]), twin.rank)
        if status != P.OK:
            self._reconcile(chunk)

    def _sort_errors(self, rnd, chunk, src, ids, values, errors):
        """Split failed tasks into retries (requeued) and errors to report. A failure from
        a copy of an attempt that was already counted (a duplicate chunk) is dropped."""
        failed = dict(errors)
        out_ids, out_vals, errs = [], [], {}
        for pos, tid in enumerate(ids):
            info = failed.get(pos)
            if info is not None:
                counted = rnd.attempts.get(tid, 0)
                sent_at = chunk.tries.get(tid, 0) if chunk is not None and chunk.tries else 0
                if counted > sent_at:
                    continue  # this attempt's failure was counted when its twin reported
                tries = counted + 1
                rnd.attempts[tid] = tries
                self.failures += 1
                if tries <= self.retries and chunk is not None:
                    rnd.retry.append((tid, chunk.items[pos]))
                    continue
                errs[len(out_ids)] = make_task_error(tid, src, info, tries)
            out_ids.append(tid)
            out_vals.append(values[pos])
        return out_ids, out_vals, errs or None

    def _reconcile(self, chunk: _Chunk) -> None:
        """Requeue tasks of a finished chunk that are neither done nor covered by a twin."""
        rnd = chunk.rnd
        if rnd.cancelled or rnd.rid not in self.rounds:
            return
        twin = chunk.twin
        covered = twin is not None and twin.cid in self.chunks and self.workers[twin.rank].alive
        if covered:
            return
        pending = [(tid, item) for tid, item in zip(chunk.ids, chunk.items)
                   if tid not in rnd.done]
        rnd.retry.extendleft(reversed(pending))  # first in line again, in their order

    # ---------------------------------------------------------------- failures
    def _lost(self, ranks) -> None:
        """Workers died: requeue their unfinished tasks (quarantine repeat offenders)."""
        for r in ranks:
            w = self.workers.get(r)
            if w is None or not w.alive:
                if r == self.master:
                    raise FarmBroken("the master's own rank was reported failed")
                continue
            w.alive = False
            self.comm.cancel_sends_to(r)
            lost = list(w.inflight)
            w.inflight.clear()
            for pos, chunk in enumerate(lost):
                self.chunks.pop(chunk.cid, None)
                if pos == 0:  # only the running chunk was attempted; queued ones never started
                    self._count_loss(chunk)
                self._reconcile(chunk)
        if not self.alive_workers():
            self.broken = FarmBroken(f"every worker has failed (last: rank(s) {list(ranks)}); "
                                     f"pending tasks cannot run")

    def _count_loss(self, chunk: _Chunk) -> None:
        """One more attempt used by each unfinished task of ``chunk``; quarantine at the limit."""
        rnd = chunk.rnd
        if rnd.cancelled:
            return
        for pos, tid in enumerate(chunk.ids):
            if tid in rnd.done:
                continue
            tries = rnd.attempts.get(tid, 0) + 1
            rnd.attempts[tid] = tries
            self.failures += 1
            if tries >= self.max_attempts:
                err = TaskQuarantined(tid, chunk.rank, self.workers[chunk.rank].host,
                                      "Quarantined", f"lost {tries} time(s) (its worker died "
                                      f"or it timed out); set aside", None, tries)
                self.quarantined.append(err)
                before = rnd.ndone
                rnd.deliver([tid], [None], {0: err}, chunk.rank)
                self.completed += rnd.ndone - before

    def _check_timeouts(self) -> None:
        now = time.perf_counter()
        for w in self.alive_workers():
            if not w.inflight:
                continue
            head = w.inflight[0]
            if head.twin is not None or head.rnd.cancelled:
                continue
            if now - head.t_head > self.task_timeout * len(head.ids):
                self._count_loss(head)
                pending = [(t, it) for t, it in zip(head.ids, head.items)
                           if t not in head.rnd.done]
                if not pending:
                    continue
                target = self._least_loaded(exclude=w.rank)
                if target is None:
                    continue
                twin = self._send(target, head.rnd, [t for t, _ in pending],
                                  [it for _, it in pending], now)
                if twin is not None:
                    head.twin, twin.twin = twin, head
                    self.duplicates += 1

    def _least_loaded(self, exclude: int):
        best = None
        for w in self.alive_workers():
            if w.rank == exclude:
                continue
            if best is None or len(w.inflight) < len(best.inflight):
                best = w
        return best

    # ---------------------------------------------------------------- dispatch
    def _outstanding(self, w: _Worker, now: float) -> float:
        mean = w.stats.mean_recent
        if mean is None or not w.inflight:
            return 0.0
        head = w.inflight[0]
        left = max(0.0, head.t_head + len(head.ids) * mean - now, head.left * mean * 0.5)
        return left + sum(c.left for c in itertools.islice(w.inflight, 1, None)) * mean

    def _dispatch(self) -> bool:
        active = [r for r in self.rounds.values() if r.has_pending()]
        sent = False
        now = time.perf_counter()
        pipeline = self.pipeline
        workers = sorted(self.alive_workers(), key=lambda w: len(w.inflight))
        if not active:
            if self.tail_duplication and any(not w.inflight for w in workers):
                sent = self._duplicate_tail(workers, now)
            return sent
        stats = [w.stats for w in workers]
        for w in workers:
            lead = pipeline.lead(w.rank)
            while True:
                rnd = next((r for r in active if r.has_pending()), None)
                if rnd is None:
                    return sent
                # a round's tasks may take much longer than the last round's (futures keep a
                # submit round open beside each map): size its chunks by its own timings
                here = rnd.task_time.get(w.rank)
                n = len(w.inflight)
                if n:
                    mean = w.stats.mean_recent
                    chunk_time = None if mean is None else mean * len(w.inflight[-1].ids)
                    if n >= pipeline.depth(chunk_time, w.rank):
                        break
                    if here is None and any(not x.inflight for x in workers):
                        break  # unmeasured: a second chunk only once every worker has one
                    if mean is not None and self._outstanding(w, now) >= lead:
                        break
                k = rnd.policy.chunk(w.stats, max(1, rnd.remaining()), stats, task_time=here)
                ids, items = rnd.take(max(1, int(k)))
                if not ids:
                    break
                if self._send(w, rnd, ids, items, now) is None:
                    break
                sent = True
        return sent

    def _send(self, w: _Worker, rnd: RoundState, ids, items, now) -> _Chunk | None:
        cid = next(self._cid)
        if not isinstance(ids, range) and ids[-1] - ids[0] == len(ids) - 1:
            ids = range(ids[0], ids[-1] + 1)  # consecutive after all: send it compactly
        wire_ids = ids
        try:
            data = Comm.dumps((cid, rnd.rid, wire_ids, Comm.dumps((rnd.wire_fn, items))))
        except Exception as exc:
            try:
                self._unpicklable(rnd, ids, items, exc)
            except TaskSerializationError as err:
                err.round_name = rnd.name  # a caller driving several rounds fails this one
                raise
        chunk = _Chunk(cid, rnd, ids, items, w.rank, now)
        if w.inflight:
            chunk.t_head = math.inf  # becomes the head when the one before it comes back
        try:
            self.comm.isend_bytes(data, w.rank, P.WORK)
        except PeerFailure as exc:
            rnd.retry.extendleft(reversed(list(zip(ids, items))))
            self._lost(exc.ranks)
            return None
        if not w.inflight:
            chunk.t_head = now
        w.inflight.append(chunk)
        self.chunks[cid] = chunk
        return chunk

    def _unpicklable(self, rnd, ids, items, exc):
        if rnd.wire_fn is not None:
            try:
                pickle.dumps(rnd.wire_fn)
            except Exception as fexc:
                raise TaskSerializationError(
                    f"the function {getattr(rnd.fn, '__qualname__', rnd.fn)!r} of "
                    f"{rnd.name} cannot be pickled (use a module-level function, not a "
                    f"lambda or closure): {fexc}") from fexc
        for tid, item in zip(ids, items):
            try:
                pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as iexc:
                what = "task" if isinstance(item, Task) else "item"
                raise TaskSerializationError(
                    f"{what} {tid} of {rnd.name} ({type(item).__name__}) cannot be "
                    f"pickled: {iexc}") from iexc
        raise TaskSerializationError(f"a chunk of {rnd.name} cannot be pickled: {exc}") from exc

    def _duplicate_tail(self, workers, now) -> bool:
        """rDLB: give an idle worker a copy of the work most likely to finish last.

        A copy is sent when it would finish on the idle worker sooner than the original is
        expected to finish where it is. A running chunk that has already outlived its
        estimate (or has none yet) is expected to need at least as long again as it has
        run so far.
        """
        idle = [w for w in workers if not w.inflight]
        known = sorted(x.stats.mean_recent for x in workers if x.stats.mean_recent is not None)
        typical = known[len(known) // 2] if known else None
        sent = False
        for w in idle:
            best, best_left = None, 0.0
            mine_per_task = w.stats.mean_recent or typical
            for other in workers:
                if other is w or not other.inflight:
                    continue
                mean = other.stats.mean_recent or typical or 0.0
                t = now
                for pos, c in enumerate(other.inflight):
                    start = c.t_head if pos == 0 else t
                    start = now if start == math.inf else start
                    end = start + c.left * mean
                    if pos == 0:
                        end = max(end, now + (now - start))
                    t = end
                    if c.twin is not None or c.rnd.cancelled or not c.rnd.tail_duplication:
                        continue
                    left = end - now
                    # a copy pays if it would finish here sooner than it finishes there
                    mine = (mine_per_task if mine_per_task is not None else left) * c.left
                    if left > mine and left > best_left:
                        best, best_left = c, left
            if best is None:
                continue
            pending = [(t, it) for t, it in zip(best.ids, best.items) if t not in best.rnd.done]
            if not pending:
                continue
            twin = self._send(w, best.rnd, [t for t, _ in pending], [it for _, it in pending],
                              now)
            if twin is not None:
                best.twin, twin.twin = twin, best
                self.duplicates += 1
                sent = True
        return sent

    def _check_broken(self) -> None:
        if self.broken is not None:
            raise self.broken

    # ---------------------------------------------------------------- reporting
    def worker_summary(self) -> list[dict]:
        traffic = self.comm.traffic()
        out = []
        for r, w in sorted(self.workers.items()):
            s = w.stats
            out.append({"rank": r, "host": w.host, "alive": w.alive, "tasks": s.tasks,
                        "chunks": s.chunks, "busy_s": round(s.busy, 6),
                        "idle_s": round(s.idle, 6),
                        "mean_task_s": None if s.mean is None else round(s.mean, 9),
                        "bytes_to": traffic["sent_bytes"][r],
                        "bytes_from": traffic["recv_bytes"][r],
                        "msgs_to": traffic["sent_msgs"][r],
                        "msgs_from": traffic["recv_msgs"][r]})
            if r in self.substats:   # a sub-master: its node's workers follow it
                rows, own = self.substats[r]
                out[-1].update(role="submaster", computed_tasks=own["tasks"],
                               computed_busy_s=own["busy_s"])
                for row in rows:
                    out.append(dict(row, alive=row["alive"] and w.alive))
        return out


class SerialEngine:
    """The same interface with no workers: tasks run in this process, one per step."""

    def __init__(self, comm: Comm | None = None, setup=None, setup_args=(), retries=0, **_):
        self.comm = comm
        self.rounds: dict[int, RoundState] = {}
        self._rid = itertools.count()
        self.ctx = Context(0, 1, comm.host if comm else "localhost", check=self._cancelled)
        self.current: RoundState | None = None
        self.stats = WorkerStats(0)
        self.retries = max(0, int(retries))
        self.quarantined: list = []
        self.duplicates = 0
        self.completed = 0
        self.broken = None
        self.setup_error = None
        self.started = time.perf_counter()
        self.idle_master = 0.0
        self.pipeline = None
        self.failures = 0
        self.observer = None
        if setup is not None:
            setup(self.ctx, *setup_args)

    def _cancelled(self) -> bool:
        return self.current is not None and self.current.cancelled

    def start_round(self, source, fn=None, star=False, total=None, policy=None, name=None,
                    window=None, skip=None) -> RoundState:
        rid = next(self._rid)
        rnd = RoundState(rid, source, fn, star, total, policy, name or f"round-{rid}",
                         None, skip)
        self.rounds[rid] = rnd
        return rnd

    def end_round(self, rnd) -> None:
        self.rounds.pop(rnd.rid, None)

    def cancel_round(self, rnd, wait=True, timeout=30.0) -> None:
        rnd.cancelled = True
        rnd.drop_pending()

    def step(self) -> bool:
        """Run the next few tasks (about 2 ms of work) in this process."""
        from .worker import error_info
        rnd = next((r for r in self.rounds.values() if r.has_pending()), None)
        if rnd is None:
            return False
        mean = self.stats.mean_recent
        k = 1 if mean is None else max(1, min(10_000, int(2e-3 / mean)))
        ids, items = rnd.take(k)
        self.current = rnd
        ctx = self.ctx
        clock = time.perf_counter
        done_ids, values, errors = [], [], {}
        n, s, s2 = 0, 0.0, 0.0
        t_start = clock()
        for tid, item in zip(ids, items):
            if rnd.cancelled:
                break
            ctx._begin()
            t0 = clock()
            try:
                if rnd.fn is None:
                    value = item.run(ctx)
                elif rnd.star:
                    value = rnd.fn(*item)
                else:
                    value = rnd.fn(item)
            except Exception as exc:
                value = None
                tries = rnd.attempts.get(tid, 0) + 1
                rnd.attempts[tid] = tries
                self.failures += 1
                if tries <= self.retries:
                    rnd.retry.append((tid, item))
                    continue
                errors[len(done_ids)] = make_task_error(
                    tid, 0, error_info(exc, 0, 1, ctx.host), tries)
            dt = clock() - t0
            n += 1
            s += dt
            s2 += dt * dt
            done_ids.append(tid)
            values.append(value)
        self.current = None
        self.stats.record(n, s, s2, clock() - t_start, 0.0)
        if done_ids and not rnd.cancelled:
            rnd.deliver(done_ids, values, errors or None, 0)
            self.completed += len(done_ids)
        if self.observer is not None:
            self.observer(self)
        return True

    def shutdown(self, reason=None) -> None:
        pass

    def worker_summary(self) -> list[dict]:
        s = self.stats
        return [{"rank": 0, "host": self.ctx.host, "alive": True, "tasks": s.tasks,
                 "chunks": s.chunks, "busy_s": round(s.busy, 6), "idle_s": 0.0,
                 "mean_task_s": None if s.mean is None else round(s.mean, 9),
                 "bytes_to": 0, "bytes_from": 0, "msgs_to": 0, "msgs_from": 0}]
