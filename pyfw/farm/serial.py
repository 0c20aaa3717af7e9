"""The engine of a farm without workers (private): one process runs every task itself, with
the same round interface as :class:`pyfw.farm.engine.Engine`, so a script runs unchanged
without ``mpiexec``.
"""
from __future__ import annotations

import itertools
import time

from ..comm import Comm
from . import _protocol as P
from .policies import WorkerStats
from .rounds import RoundState, make_task_error
from .task import Context

__all__ = ["SerialEngine"]


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
        """Open a round run in this process (see :meth:`Engine.start_round`)."""
        rid = next(self._rid)
        rnd = RoundState(rid, source, fn, star, total, policy, name or f"round-{rid}",
                         None, skip)
        self.rounds[rid] = rnd
        return rnd

    def end_round(self, rnd) -> None:
        """Forget a finished round."""
        self.rounds.pop(rnd.rid, None)

    def cancel_round(self, rnd, wait=True, timeout=30.0) -> None:
        """Cancel a round: its remaining tasks are dropped."""
        rnd.cancelled = True
        rnd.drop_pending()

    def step(self) -> bool:
        """Run the next few tasks (about 2 ms of work) in this process."""
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
                    tid, 0, P.error_info(exc, 0, 1, ctx.host), tries)
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
        """Nothing to stop: there are no workers."""
        pass

    def worker_summary(self) -> list[dict]:
        """The one in-process "worker" (rank 0)."""
        s = self.stats
        return [{"rank": 0, "host": self.ctx.host, "alive": True, "tasks": s.tasks,
                 "chunks": s.chunks, "busy_s": round(s.busy, 6), "idle_s": 0.0,
                 "mean_task_s": None if s.mean is None else round(s.mean, 9),
                 "bytes_to": 0, "bytes_from": 0, "msgs_to": 0, "msgs_from": 0}]
