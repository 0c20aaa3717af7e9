"""What the master does when work goes missing (private): a worker found dead (ULFM), a
chunk past its task timeout, the tail of a round left to stragglers, a task lost too many
times (quarantined). Kept apart from :class:`pyfw.farm.engine.Engine` so dispatch reads
without the failure paths.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Callable

from ..errors import FarmBroken, TaskQuarantined
from .core import EngineCore, WorkerRecord
from ._protocol import ErrorInfo
from .rounds import Chunk, RoundState, make_task_error

__all__ = ["Recovery"]

#: ``send(worker, round, ids, items, now) -> Chunk or None``: the engine's dispatch of a chunk
Send = Callable[[WorkerRecord, RoundState, list, list, float], "Chunk | None"]


class Recovery:
    """Failure handling of an engine.

    It reads and updates the engine's declared state (:class:`EngineCore`: ``workers``,
    ``chunks``, ``rounds``, the counters, ``broken``), sends copies through ``send``, and owns
    its own settings: ``max_attempts`` (a task lost this often is quarantined) and
    ``task_timeout`` (seconds per task before a copy goes elsewhere; None: never).
    ``say``: where the line about a dead worker goes (the engine's stderr; None: nowhere);
    ``label``: how a worker's rank is named in it (a sub-master names its node's workers by
    their farm rank).
    """

    def __init__(self, core: EngineCore, send: Send, max_attempts: int = 3,
                 task_timeout: float | None = None, cancel_sends_to=None):
        self.core = core
        self.send = send
        self.max_attempts = max(1, int(max_attempts))
        self.task_timeout = task_timeout
        self.cancel_sends_to = cancel_sends_to or (lambda rank: None)
        self.say = _stderr
        self.label = str

    def reconcile(self, chunk: Chunk) -> None:
        """Requeue tasks of a finished chunk that are neither done nor covered by a twin."""
        rnd, core = chunk.rnd, self.core
        if rnd.cancelled or rnd.rid not in core.rounds:
            return
        twin = chunk.twin
        covered = twin is not None and twin.cid in core.chunks and core.workers[twin.rank].alive
        if covered:
            return
        pending = [(tid, item) for tid, item in zip(chunk.ids, chunk.items)
                   if tid not in rnd.done]
        rnd.requeue(pending)  # first in line again, in their order

    def lost(self, ranks) -> None:
        """Workers died: requeue their unfinished tasks (quarantine repeat offenders)."""
        core = self.core
        for r in ranks:
            w = core.workers.get(r)
            if w is None or not w.alive:
                if r == core.master:
                    raise FarmBroken("the master's own rank was reported failed")
                continue
            w.alive = False
            self.cancel_sends_to(r)
            lost = list(w.inflight)
            w.inflight.clear()
            again = set()
            for pos, chunk in enumerate(lost):
                core.chunks.pop(chunk.cid, None)
                if pos == 0:  # only the running chunk was attempted; queued ones never started
                    self.count_loss(chunk)
                self.reconcile(chunk)
                if not chunk.rnd.cancelled:   # neither done nor quarantined: they run again
                    again |= {(chunk.rnd.rid, t) for t in chunk.ids if t not in chunk.rnd.done}
            if self.say is not None:
                where = "" if w.host == "?" else f" on {w.host}"   # "?": died before hello
                self.say(f"pyfw farm: worker rank {self.label(r)}{where} died; "
                         f"{len(again)} task{'' if len(again) == 1 else 's'} run again "
                         f"elsewhere")
        if not core.alive_workers():
            core.broken = FarmBroken(f"every worker has failed (last: rank(s) {list(ranks)}); "
                                     f"pending tasks cannot run")

    def count_loss(self, chunk: Chunk) -> None:
        """One more attempt used by each unfinished task of ``chunk``; quarantine at the limit."""
        rnd, core = chunk.rnd, self.core
        if rnd.cancelled:
            return
        for tid in chunk.ids:
            if tid in rnd.done:
                continue
            tries = rnd.attempts.get(tid, 0) + 1
            rnd.attempts[tid] = tries
            core.failures += 1
            if tries >= self.max_attempts:
                why = f"lost {tries} time(s) (its worker died or it timed out); set aside"
                host = core.workers[chunk.rank].host
                err = make_task_error(tid, chunk.rank, ErrorInfo("Quarantined", why, why, host,
                                                                 None), tries, TaskQuarantined)
                core.quarantined.append(err)
                core.deliver(rnd, [tid], [None], {0: err}, chunk.rank)

    def check_timeouts(self) -> None:
        """Send a copy of each running chunk that has outlived ``task_timeout`` per task."""
        if self.task_timeout is None:
            return
        now = time.perf_counter()
        for w in self.core.alive_workers():
            if not w.inflight:
                continue
            head = w.inflight[0]
            if (head.twin is not None or head.rnd.cancelled or head.group is not None
                    or head.width > 1):
                continue
            if now - head.t_head > self.task_timeout * len(head.ids):
                self.count_loss(head)
                pending = [(t, it) for t, it in zip(head.ids, head.items)
                           if t not in head.rnd.done]
                if not pending:
                    continue
                target = self._least_loaded(exclude=w.rank)
                if target is None:
                    continue
                self._copy(head, target, pending, now)

    def _copy(self, chunk: Chunk, target: WorkerRecord, pending, now) -> bool:
        """Send ``target`` a copy of ``chunk``'s ``pending`` (id, task) pairs; True if sent."""
        twin = self.send(target, chunk.rnd, [t for t, _ in pending], [it for _, it in pending],
                         now)
        if twin is None:
            return False
        chunk.twin, twin.twin = twin, chunk
        self.core.duplicates += 1
        return True

    def _least_loaded(self, exclude: int):
        best = None
        for w in self.core.alive_workers():
            if w.rank == exclude:
                continue
            if best is None or len(w.inflight) < len(best.inflight):
                best = w
        return best

    def duplicate_tail(self, workers, now) -> bool:
        """rDLB: give an idle worker a copy of the work most likely to finish last.

        A copy is sent when it would finish on the idle worker sooner than the original is
        expected to finish where it is. A running chunk that has already outlived its
        estimate (or has none yet) is expected to need at least as long again as it has
        run so far.
        """
        idle = [w for w in workers if not w.inflight]
        if not idle:
            return False
        known = sorted(x.stats.mean_recent for x in workers if x.stats.mean_recent is not None)
        typical = known[len(known) // 2] if known else None
        # Every chunk that may be copied, with the time it is expected to need still, once
        # per call (not once per idle worker: at 255 workers that was 6 ms a call at the
        # tail of a map, while the master's replies waited).
        candidates = []
        for other in workers:
            if not other.inflight:
                continue
            mean = other.stats.mean_recent or typical or 0.0
            t = now
            for pos, c in enumerate(other.inflight):
                start = c.t_head if pos == 0 else t
                start = now if start == math.inf else start
                mark = c.t_mark if pos == 0 and c.t_mark != math.inf else start
                end = mark + c.left * mean
                if pos == 0:
                    end = max(end, now + (now - start))
                t = end
                if (c.twin is not None or c.rnd.cancelled or not c.rnd.tail_duplication
                        or c.group is not None or c.width > 1):
                    continue
                candidates.append((end - now, c))
        if not candidates:
            return False
        candidates.sort(key=lambda lc: lc[0], reverse=True)
        sent = False
        for w in idle:
            mine_per_task = w.stats.mean_recent or typical
            for left, c in candidates:   # the latest to finish first
                if c.twin is not None:
                    continue             # copied to an idle worker before this one
                # a copy pays if it would finish here sooner than it finishes there
                mine = (mine_per_task if mine_per_task is not None else left) * c.left
                if left > mine:
                    pending = [(t, it) for t, it in zip(c.ids, c.items)
                               if t not in c.rnd.done]
                    if pending and self._copy(c, w, pending, now):
                        sent = True
                    break
        return sent


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
