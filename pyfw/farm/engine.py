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

import heapq
import itertools
import math
import pickle
import sys
import time

from ..comm import Backoff, Comm
from ..errors import PeerFailure, TaskSerializationError
from . import _protocol as P
from . import auto
from .core import EngineCore, WorkerRecord, summary_row
from .groups import Group, GroupRun, Groups
from .recovery import Recovery
from .rounds import Chunk, RoundState
from .policies import Pipeline, Policy
from .task import Task

__all__ = ["Engine"]

# An idle turn (poll, dispatch, sleep) costs the master ~60 us of CPU: at the backoff's
# 1 ms cap that was 5-10 % of a core taken from the workers it shares cores with. While
# every worker has queued work the master may sleep longer, up to a quarter of the least
# work any worker has left, within these bounds (s).
IDLE_SLEEP_MIN = 1e-3
IDLE_SLEEP_MAX = 1e-2

# Dispatch looks only at the workers whose state may let them take a chunk now (issue 41:
# a turn over every worker cost ~1 ms at 255 workers, once per result): those that replied,
# those whose queued work has run down to the lead time (a timer), and all of them when
# the rounds, the pipeline's depth factor or the worker set change, and at least this
# often (s), in case a forecast round trip moved a lead time.
FULL_SCAN_EVERY = 0.1
# At the end of a round, idle workers are offered copies of the chunks likely to finish
# last (rDLB); looking costs O(workers) or more, so it happens at most every this many
# seconds per worker (every turn with a few workers, every 5 ms with 255).
TAIL_CHECK_PER_WORKER = 2e-5
# A sub-master's node (a worker of width k > 1) is sent its next chunk while it still
# has this many tasks per rank queued beyond the lead time: its last tasks run on fewer
# ranks than it has, and each of its workers holds about two (the one running and one
# queued while the sub-master runs a piece itself), so with fewer the sub-master finds
# none left for itself (measured, 16 ranks in blocks of 8: 1.07-1.16x ideal with one per
# rank, 1.05-1.11x with three; flat 1.04-1.07x). Never more than the node's share of
# what the round has left: at a map's end three 100 ms tasks a rank stayed queued on some
# nodes while others had run out (256 ranks in blocks of 32; issue 41).
NODE_QUEUE_PER_RANK = 3
# A worker not yet timed in a round holds at most this many chunks of it (its one-task
# probes): the next one is sized from the first probe's reply. Without the bound, the
# pipeline's depth, set by the round trips of earlier rounds (hundreds of ms on a
# saturated box), sent a worker up to 32 one-task chunks before its first reply: at 256
# ranks, 10 ms tasks, half the workers ran their first factoring-sized chunk 0.3-1.4 s
# into the map, against 0.4 s with the bound (issue 41; docs/hierarchy.md, "Probes in
# flight").
PROBES_IN_FLIGHT = 2


class Engine(EngineCore):
    """Master side of the farm over ``comm`` (ranks other than ``master`` are workers)."""

    def __init__(self, comm: Comm, master: int = 0, pipeline: Pipeline | None = None,
                 task_timeout: float | None = None, max_attempts: int = 3, retries: int = 0,
                 tail_duplication: bool = True, workers=None):
        """``workers``: the ranks served (default: every rank but ``master``), or a dict
        rank -> how many ranks it stands for (a two-level farm's sub-masters: chunk sizes
        count their node's ranks, see :attr:`pyfw.farm.policies.WorkerStats.width`)."""
        super().__init__(master, retries, pipeline or Pipeline())
        self.comm = comm
        ranks = range(comm.size) if workers is None else workers   # two-level: see hierarchy
        self.workers = {r: WorkerRecord(r) for r in ranks if r != master}
        if isinstance(workers, dict):    # rank -> ranks it stands for (a sub-master: its node)
            for r, w in self.workers.items():
                w.stats.width = max(1, int(workers[r]))
        self.substats: dict[int, tuple] = {}  # sub-master -> (its node's rows, its own work)
        self.tail_duplication = tail_duplication
        self._cid = itertools.count()
        self.backoff = Backoff()
        self.recovery = Recovery(self, self._send, max_attempts, task_timeout,
                                 comm.cancel_sends_to)
        self.groups = Groups(self, self._post, self._send_group, self._send)
        self._recheck: set[int] = set()   # ranks to look at in the next dispatch
        self._wake: list = []             # heap of (time, rank): lead time reached
        self._scan_at = 0.0               # next full scan (0: the next dispatch)
        self._tail_at = 0.0               # next look for tail copies
        self._scan_key = None             # (active rounds, depth factor) at the last one
        self._stats: list = []            # every schedulable worker's stats (AWF weights)
        self._ranks = 1                   # ... the ranks they stand for (widths summed)
        self._round_cpu: dict = {}        # rid -> (process CPU, wall, results) at its start
        # the master process's own cost in the last round that ended: what tells whether
        # this master is the bottleneck (a flat master near busy 1 is; see docs/hierarchy.md)
        self.master_load: dict | None = None
        # the busiest such round long enough to tell (auto.MIN_RESULTS, auto.MIN_WALL_S;
        # what hierarchy="auto" decides by)
        self.master_peak: dict | None = None
        for r in self.workers:
            self._post(P.ctrl("ping", time.perf_counter()), r)

    # ---------------------------------------------------------------- public
    def start_round(self, source, fn=None, star=False, total=None, policy: Policy = None,
                    name=None, window=None, skip=None, ranks=None) -> RoundState:
        """Open a round over ``source`` (tasks or items for ``fn``); returns its state."""
        first = not self.rounds
        rnd = super().start_round(source, fn, star, total, policy, name, window, skip, ranks)
        self._round_cpu[rnd.rid] = (time.process_time(), time.perf_counter(), self.completed)
        policy.start(total, max(1, sum(w.stats.width for w in self.alive_workers())))
        self._scan_at = 0.0
        if first:
            # task durations differ from round to round (IDA* iterations grow ~13x): measure
            # anew; relative worker speeds (the AWF weights) carry over
            for w in self.workers.values():
                w.stats.mean_recent = None
        return rnd

    def end_round(self, rnd: RoundState) -> None:
        """Forget a finished round; keep the master process's CPU per result over it
        (``master_load``: results of any round that came meanwhile count too)."""
        start = self._round_cpu.pop(rnd.rid, None)
        if start is not None:
            cpu0, t0, done0 = start
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
            n = self.completed - done0
            self.master_load = {"round": rnd.name, "results": n, "wall_s": round(wall, 6),
                                "cpu_s": round(cpu, 6),
                                "cpu_per_result_us": round(1e6 * cpu / n, 3) if n else None,
                                "busy": round(cpu / wall, 4) if wall > 0 else None}
            load, peak = self.master_load, self.master_peak
            if (n >= auto.MIN_RESULTS and wall >= auto.MIN_WALL_S and load["busy"] is not None
                    and (peak is None or load["busy"] > peak["busy"])):
                self.master_peak = load
        super().end_round(rnd)

    def cancel_round(self, rnd: RoundState, wait: bool = True, timeout: float = 30.0) -> None:
        """Drop pending tasks and stop running ones; with ``wait``, until workers are idle."""
        rnd.cancelled = True
        rnd.drop_pending()
        self._scan_at = 0.0
        for w in self.alive_workers():
            if any(c.rnd is rnd for c in w.inflight):
                self._post(P.ctrl("cancel", rnd.rid), w.rank)
        if wait:
            deadline = time.monotonic() + timeout
            while any(c.rnd is rnd for c in self.chunks.values()):
                if time.monotonic() > deadline:
                    break  # a task that ignores ctx.cancelled(); its result will be dropped
                self.step()

    def step(self, wait: bool = True) -> bool:
        """One turn of the dispatch loop; returns True if anything happened. An idle turn
        sleeps the backoff unless ``wait`` is False (a caller with work of its own)."""
        self.check_broken()
        progressed = self._drain()
        self.recovery.check_timeouts()
        stuck = self.groups.stuck(time.perf_counter())
        if stuck is not None:
            self._abort_stuck(stuck)
        if self._dispatch():
            progressed = True
        if progressed:
            self.backoff.reset()
            self.backoff.tmax = IDLE_SLEEP_MIN
        else:
            try:
                self.comm.progress()
            except PeerFailure as exc:
                self._lost(exc.ranks)
            if wait:
                t0 = time.perf_counter()
                self._cap_idle_sleep(t0)
                self.backoff.sleep()
                self.idle_master += time.perf_counter() - t0
        if self.observer is not None:
            self.observer(self)
        return progressed

    def _cap_idle_sleep(self, now: float) -> None:
        """Set the backoff's cap for this idle streak: a quarter of the least predicted work
        any worker has left (less its lead time while a round still has tasks to send),
        between IDLE_SLEEP_MIN and IDLE_SLEEP_MAX; the minimum while any worker has nothing
        in flight or is untimed. Recomputed whenever the sleeps reach the cap, so it shrinks
        as the workers' queues run down."""
        backoff = self.backoff
        if backoff.delay < backoff.tmax:
            return                      # still doubling up from the short sleeps
        pending = any(r.has_pending() for r in self.rounds.values())
        slack = math.inf
        for w in self.alive_workers():
            if not w.inflight or w.stats.mean_recent is None:
                slack = 0.0
                break
            left = self._outstanding(w, now)
            slack = min(slack, left - self.pipeline.lead(w.rank) if pending else left)
        cap = min(IDLE_SLEEP_MAX, max(IDLE_SLEEP_MIN, 0.25 * slack))
        backoff.tmax = cap
        backoff.delay = min(backoff.delay, cap)

    def shutdown(self, reason: str | None = None, also=(), failed_elsewhere=()) -> None:
        """Tell every live worker to leave its serve loop (``reason``: the master's error),
        and the ranks ``also`` (workers the engine has not heard from yet). The stop names
        the ranks this engine saw die, or else ``failed_elsewhere`` (a sub-master passes on
        those its master named), so that every worker bounds its ``MPI_Finalize``."""
        failed = sorted(self.comm.failed) or list(failed_elsewhere)
        for rank in [w.rank for w in self.alive_workers()] + list(also):
            try:
                self.comm.isend(P.ctrl("stop", reason, failed), rank, P.CTRL)
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

    def _lost(self, ranks) -> None:
        """Workers died: a group with a dead member is dissolved (its task is lost with the
        member, and the survivors no longer hold it), then the recovery requeues."""
        self._scan_at = 0.0
        for r in ranks:
            for chunk in self.groups.lost(r):
                for m in chunk.group.group.members:
                    w = self.workers.get(m)
                    if m != r and w is not None and chunk in w.inflight:
                        w.inflight.remove(chunk)
        self.recovery.lost(ranks)

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
        self.groups.heard_from(src)
        kind, a = P.read_ctrl(msg)
        w = self.workers.get(src)
        if w is None:
            if kind != "hello" or src in self.comm.failed:
                return
            # a node worker whose sub-master died serves the master directly from now on
            w = self.workers[src] = WorkerRecord(src)
            self._scan_at = 0.0
        if kind == "hello":
            w.host, w.pid, setup_error = a["host"], a["pid"], a["setup_error"]
            w.hello = True
            if setup_error is not None:
                self.fail_setup(src, setup_error)
        elif kind == "pong":
            self.pipeline.observe_rtt(time.perf_counter() - a["t"])
        elif kind == "substats":
            self.substats[src] = (a["rows"], a["own"])
        elif kind == "width":
            w.stats.width = a["ranks"]

    def _on_done(self, msg, src) -> None:
        self.groups.heard_from(src)
        reply = P.read_done(msg)
        cid, rid, ids, values, errors, stats, status = reply
        w = self.workers[src]
        self._recheck.add(src)   # its queue changed: dispatch looks at it again
        now = time.perf_counter()
        group_chunk = self.chunks.get(cid)
        if group_chunk is not None and group_chunk.group is not None:
            self._on_group_done(group_chunk, w, reply, now)
            return
        if status == P.PARTIAL:
            chunk = self.chunks.get(cid)
            if chunk is not None:
                chunk.left -= len(ids)
                chunk.t_mark = now
        else:
            chunk = self.chunks.pop(cid, None)
        if chunk is not None and status != P.PARTIAL:
            try:
                w.inflight.remove(chunk)
            except ValueError:
                pass
            if w.inflight and w.inflight[0].t_head == math.inf:
                # it started when the one before it finished
                w.inflight[0].t_head = w.inflight[0].t_mark = now
        if stats is not None:
            st = P.read_stats(stats)
            n, busy, t_got, t_done = st.ntasks, st.busy_s, st.t_got, st.t_done
            w.stats.record(n, st.sum_t, st.sum_t2, busy, st.idle_s)
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
        errs = None
        if errors:
            ids, values, errs = self.settle_failures(
                rnd, ids, values, dict(errors), src,
                None if chunk is None else chunk.items_of(ids),
                {} if chunk is None else chunk.tries or {})
        if ids:
            self.deliver(rnd, ids, values, errs, src)
        if chunk is None or status == P.PARTIAL:
            return
        twin = chunk.twin
        if twin is not None and status == P.OK and twin.cid in self.chunks:
            self._post(P.ctrl("skip", [twin.cid]), twin.rank)
        if status != P.OK:
            self.recovery.reconcile(chunk)

    def _abort_stuck(self, chunk: Chunk) -> None:
        """Without ULFM, members waiting in a collective for a member whose task raised
        cannot be released: end the job with the task's error rather than hang."""
        run: GroupRun = chunk.group
        rank, info = run.errors[0]
        print(f"pyfw farm: task {list(chunk.ids)} of {chunk.rnd.name} raised on rank {rank} "
              f"({info.exc_type}: {info.message}) while rank(s) {sorted(run.waiting)} of its "
              f"group still wait in it; without ULFM (pyfw-run --ft) they cannot be "
              f"released, so the job ends here.{info.traceback}", file=sys.stderr, flush=True)
        self.comm.mpi.Abort(70)

    def _on_group_done(self, chunk: Chunk, w: WorkerRecord, reply: P.Reply, now) -> None:
        """One member of a group answered; once all have, the task's result (the root's)
        or its error (a member's own, not one caused by the group's failure) counts."""
        try:
            w.inflight.remove(chunk)
        except ValueError:
            pass
        st = P.read_stats(reply.stats)
        if st is not None:
            w.stats.record(st.ntasks, st.sum_t, st.sum_t2, st.busy_s, st.idle_s)
        if not self.groups.on_reply(chunk, w.rank, reply):
            return
        self.chunks.pop(chunk.cid, None)
        run: GroupRun = chunk.group
        self.groups.finish(chunk)
        rnd = chunk.rnd
        if rnd.cancelled or rnd.rid not in self.rounds:
            return
        root = run.reply
        if run.errors:
            rank, info = min(run.errors, key=lambda e: e[0] != chunk.rank)   # the root's first
            ids, values, errs = self.settle_failures(rnd, chunk.ids, [None], {0: info}, rank,
                                                     chunk.items, chunk.tries or {})
            if ids:
                self.deliver(rnd, ids, values, errs, rank)
        elif root is not None and root.status == P.OK and root.ids and not run.released:
            self.deliver(rnd, root.ids, root.values, None, chunk.rank)
        else:   # interrupted (a member died or it was cancelled): it runs again
            self.recovery.reconcile(chunk)

    # ---------------------------------------------------------------- dispatch
    def _outstanding(self, w: WorkerRecord, now: float) -> float:
        mean = w.stats.mean_recent
        if mean is None or not w.inflight:
            return 0.0
        head = w.inflight[0]
        # counted from its last partial reply, not from its start: the error of ``mean``
        # then spans a partial's worth of tasks, not a whole long chunk. No floor: a worker
        # behind its forecast is due its next chunk, not held off by a stale count (a floor
        # of half the last count kept every worker waiting for its next chunk; issue 41)
        left = max(0.0, head.t_mark + head.left * mean - now)
        return left + sum(c.left for c in itertools.islice(w.inflight, 1, None)) * mean

    def all_busy_for(self, seconds: float) -> bool:
        """True if every live worker free for single-rank work has at least ``seconds`` of
        forecast work running or queued."""
        now = time.perf_counter()
        busy = self.groups.busy
        return all(self._outstanding(w, now) >= seconds
                   for w in self.alive_workers() if not busy(w))

    def _dispatch(self) -> bool:
        active = [r for r in self.rounds.values() if r.has_pending()]
        sent = False
        now = time.perf_counter()
        groups = self.groups
        grouped = bool(groups.groups or groups.reserved or any(r.wide for r in active))
        if grouped:
            sent = groups.dispatch(active, now)
        pipeline = self.pipeline
        if not active:
            if self.tail_duplication and now >= self._tail_at:
                workers = [w for w in self.alive_workers() if not groups.busy(w)]
                # a look at every worker's queue: with many workers, not at every turn
                self._tail_at = now + TAIL_CHECK_PER_WORKER * len(workers)
                if any(not w.inflight for w in workers):
                    workers.sort(key=lambda w: len(w.inflight))
                    sent = self.recovery.duplicate_tail(workers, now) or sent
            return sent
        workers = self._candidates(active, now, grouped)
        if not workers:
            return sent
        stats = self._stats
        idle = sum(1 for w in workers if not w.inflight)   # idle workers are all candidates
        recheck, wake = self._recheck, self._wake
        for i, w in enumerate(workers):
            lead = pipeline.lead(w.rank)
            while True:
                rnd = next((r for r in active if r.has_pending()), None)
                if rnd is None:
                    recheck.update(x.rank for x in workers[i:])   # not looked at yet
                    return sent
                # a round's tasks may take much longer than the last round's (futures keep a
                # submit round open beside each map): size its chunks by its own timings
                here = rnd.task_time.get(w.rank)
                n = len(w.inflight)
                if n:
                    mean = w.stats.mean_recent
                    chunk_time = None if mean is None else mean * len(w.inflight[-1].ids)
                    if n >= pipeline.depth(chunk_time, w.rank):
                        break             # until it replies
                    if here is None:   # unmeasured in this round: probes only
                        if idle:
                            recheck.add(w.rank)
                            break  # a second one only once every worker has one
                        if n >= PROBES_IN_FLIGHT:
                            break  # until a probe's reply times it
                    if mean is not None and not rnd.eager:
                        # queued ahead: the lead, but never more than the worker's share
                        # of what a round of known size has left (a lead learnt while a
                        # saturated master answered late, seconds at 256 ranks on 2 cores,
                        # had one node take a quarter of the next short map; issue
                        # 41). A stream's read-ahead is no measure of what is left.
                        ahead = lead
                        if w.stats.width > 1:   # a node (mean: its time per task)
                            ahead += NODE_QUEUE_PER_RANK * w.stats.width * mean
                        if rnd.total is not None:
                            share = rnd.remaining() * w.stats.width / max(1, self._ranks)
                            ahead = min(ahead, max(share, w.stats.width) * mean)
                        left = self._outstanding(w, now) - ahead
                        if left >= 0:
                            heapq.heappush(wake, (now + left, w.rank))
                            break         # until its queued work runs down to the lead
                k = rnd.policy.chunk(w.stats, max(1, rnd.remaining()), stats, task_time=here)
                cap = rnd.chunk_cap(self._ranks)
                if cap is not None:
                    k = min(k, cap * w.stats.width)
                ids, items = rnd.take(max(1, int(k)))
                if not ids:
                    recheck.add(w.rank)
                    break
                if self._send(w, rnd, ids, items, now) is None:
                    recheck.add(w.rank)
                    break
                if n == 0:
                    idle -= 1
                sent = True
        return sent

    def _candidates(self, active, now: float, grouped: bool) -> list[WorkerRecord]:
        """The workers dispatch looks at in this turn, fewest chunks in flight first: every
        live one not held by a group on a full scan (see FULL_SCAN_EVERY), else those that
        replied, were left over, or whose lead time has come."""
        key = (tuple(r.rid for r in active), self.pipeline.factor)
        groups = self.groups
        if grouped or now >= self._scan_at or key != self._scan_key:
            workers = [w for w in self.alive_workers() if not groups.busy(w)]
            self._stats = [w.stats for w in workers]
            self._ranks = sum(st.width for st in self._stats)
            self._recheck.clear()
            self._wake.clear()
            self._scan_at, self._scan_key = now + FULL_SCAN_EVERY, key
        else:
            ranks, wake = self._recheck, self._wake
            while wake and wake[0][0] <= now:
                ranks.add(heapq.heappop(wake)[1])
            if not ranks:
                return []
            self._recheck = set()
            get = self.workers.get
            workers = [w for w in map(get, ranks)
                       if w is not None and w.alive and not groups.busy(w)]
        workers.sort(key=lambda w: len(w.inflight))
        return workers

    def _pack(self, cid, rnd: RoundState, ids, items, group=None, width=1) -> bytes:
        """The WORK message of a chunk (TaskSerializationError naming what cannot pickle);
        ``width`` > 1: tasks of that many ranks, for a sub-master."""
        fn = rnd.wire_fn
        if width > 1 and fn is not None:
            fn = (rnd.fn, rnd.star, width)
        try:
            return Comm.dumps(P.pack_work(cid, rnd.rid, ids,
                                          Comm.dumps(P.pack_payload(fn, items)), group))
        except Exception as exc:
            try:
                self._unpicklable(rnd, ids, items, exc)
            except TaskSerializationError as err:
                err.round_name = rnd.name  # a caller driving several rounds fails this one
                raise

    def _send_group(self, g: Group, rnd: RoundState, ids, items, now) -> Chunk | None:
        """Send a multi-rank task to every member of group ``g`` (the root answers with the
        result, every member with its status)."""
        cid = next(self._cid)
        data = self._pack(cid, rnd, ids, items, g.gid)
        chunk = Chunk(cid, rnd, ids, items, g.members[0], now)
        chunk.group = GroupRun(g)
        g.chunk = chunk
        self.chunks[cid] = chunk
        for r in g.members:
            self.workers[r].inflight.append(chunk)
        for r in g.members:
            try:
                self.comm.isend_bytes(data, r, P.WORK)
            except PeerFailure as exc:
                self._lost(exc.ranks)
                return None
        return chunk

    def _send(self, w: WorkerRecord, rnd: RoundState, ids, items, now,
              width: int = 1) -> Chunk | None:
        cid = next(self._cid)
        if not isinstance(ids, range) and ids[-1] - ids[0] == len(ids) - 1:
            ids = range(ids[0], ids[-1] + 1)  # consecutive after all: send it compactly
        data = self._pack(cid, rnd, ids, items, width=width)
        chunk = Chunk(cid, rnd, ids, items, w.rank, now)
        chunk.width = width
        if w.inflight:
            # becomes the head when the one before it comes back
            chunk.t_head = chunk.t_mark = math.inf
        try:
            self.comm.isend_bytes(data, w.rank, P.WORK)
        except PeerFailure as exc:
            rnd.requeue(list(zip(ids, items)))
            self._lost(exc.ranks)
            return None
        if not w.inflight:
            chunk.t_head = chunk.t_mark = now
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

    # ---------------------------------------------------------------- reporting
    def worker_summary(self) -> list[dict]:
        """One dict per worker: tasks, chunks, busy and idle seconds, bytes, alive."""
        traffic = self.comm.traffic()
        out = []
        for r, w in sorted(self.workers.items()):
            out.append(summary_row(w, traffic))
            if r in self.substats:   # a sub-master: its node's workers follow it
                rows, own = self.substats[r]
                out[-1].update(role="submaster", computed_tasks=own["tasks"],
                               computed_busy_s=own["busy_s"])
                for row in rows:
                    out.append(dict(row, alive=row["alive"] and w.alive))
        return out
