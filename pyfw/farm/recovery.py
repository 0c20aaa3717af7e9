"""What the master does when work goes missing (private): a worker found dead (ULFM), a
chunk past its task timeout, the tail of a round left to stragglers, a task lost too many
times (quarantined). A mixin of :class:`pyfw.farm.engine.Engine`, kept apart so dispatch
reads without the failure paths.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from ..errors import FarmBroken, TaskQuarantined

if TYPE_CHECKING:
    from .rounds import Chunk

__all__ = ["Recovery"]


class Recovery:
    """Failure handling of the engine: uses its ``workers``, ``chunks``, ``rounds``."""

    def _reconcile(self, chunk: Chunk) -> None:
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

    def _count_loss(self, chunk: Chunk) -> None:
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
