"""What every farm engine shares (private): the rounds, the run's counters, the record kept of
each worker, how a failed task is counted against its retries, and the summary row.

:class:`pyfw.farm.engine.Engine` (workers over MPI) and :class:`pyfw.farm.serial.SerialEngine`
(the master runs the tasks itself) both derive from :class:`EngineCore`, so the farm, the
snapshot and the summary read one interface whichever engine runs.
"""
from __future__ import annotations

import itertools
import time
from collections import deque

from ..errors import FarmBroken, TaskError
from . import _protocol as P
from .policies import WorkerStats
from .rounds import Chunk, RoundState, make_task_error

__all__ = ["EngineCore", "WorkerRecord", "summary_row"]


class WorkerRecord:
    """What the master keeps about one worker: where it runs, whether it is alive, the chunks
    it holds (oldest first) and its measured speed."""

    __slots__ = ("rank", "host", "pid", "alive", "inflight", "stats", "hello")

    def __init__(self, rank: int, host: str = "?"):
        self.rank = rank
        self.host, self.pid = host, None
        self.alive = True
        self.hello = False
        self.inflight: deque[Chunk] = deque()
        self.stats = WorkerStats(rank)


def summary_row(w: WorkerRecord, traffic: dict | None = None) -> dict:
    """One worker's line of the end-of-run summary (``traffic``: :meth:`Comm.traffic`)."""
    s, r = w.stats, w.rank
    return {"rank": r, "host": w.host, "alive": w.alive, "tasks": s.tasks,
            "chunks": s.chunks, "busy_s": round(s.busy, 6), "idle_s": round(s.idle, 6),
            "mean_task_s": None if s.mean is None else round(s.mean, 9),
            "bytes_to": traffic["sent_bytes"][r] if traffic else 0,
            "bytes_from": traffic["recv_bytes"][r] if traffic else 0,
            "msgs_to": traffic["sent_msgs"][r] if traffic else 0,
            "msgs_from": traffic["recv_msgs"][r] if traffic else 0}


class EngineCore:
    """The state and bookkeeping every engine has.

    ``workers``: rank -> :class:`WorkerRecord`; ``chunks``: chunks in flight by id (always
    empty in serial mode); the run's counters: ``completed`` (distinct tasks with a final
    result or error), ``failures`` (failed attempts: a task raised, or was lost with its
    worker), ``duplicates`` (straggler copies sent), ``quarantined``; ``broken``: the error
    that stops the farm (raised by the next :meth:`step` or :meth:`start_round`).
    """

    def __init__(self, master: int, retries: int, pipeline=None):
        self.master = master
        self.retries = max(0, int(retries))
        self.pipeline = pipeline
        self.workers: dict[int, WorkerRecord] = {}
        self.rounds: dict[int, RoundState] = {}
        self.chunks: dict[int, Chunk] = {}
        self._rid = itertools.count()
        self.completed = 0
        self.failures = 0
        self.duplicates = 0
        self.quarantined: list = []
        self.broken: BaseException | None = None
        self.setup_error: TaskError | None = None
        self.started = time.perf_counter()
        self.idle_master = 0.0
        self.observer = None  # called with the engine after every step (a dashboard's Ticker)

    # ---------------------------------------------------------------- rounds
    def start_round(self, source, fn=None, star=False, total=None, policy=None, name=None,
                    window=None, skip=None, ranks=None) -> RoundState:
        """Open a round over ``source`` (tasks, or items for ``fn``; ``ranks``: how many
        ranks each task runs on, see :class:`RoundState`); returns its state."""
        self.check_broken()
        rid = next(self._rid)
        rnd = RoundState(rid, source, fn, star, total, policy, name or f"round-{rid}",
                         window, skip, ranks)
        self.rounds[rid] = rnd
        return rnd

    def end_round(self, rnd: RoundState) -> None:
        """Forget a finished round."""
        self.rounds.pop(rnd.rid, None)

    def alive_workers(self) -> list[WorkerRecord]:
        """The workers not known to have failed."""
        return [w for w in self.workers.values() if w.alive]

    def check_broken(self) -> None:
        """Raise the error that stopped the farm, if any."""
        if self.broken is not None:
            raise self.broken

    # ---------------------------------------------------------------- results
    def deliver(self, rnd: RoundState, ids, values, errors, rank: int) -> None:
        """Hand results to their round (duplicates dropped there) and count the new ones."""
        before = rnd.ndone
        rnd.deliver(ids, values, errors, rank)
        self.completed += rnd.ndone - before

    def settle_failures(self, rnd: RoundState, ids, values, failed: dict, rank: int,
                        items=None, tries_at_send=None):
        """Split a reply's failed tasks (``failed``: position -> ErrorInfo) into retries,
        queued again while ``retries`` allow, and errors to report. ``items``: the tasks
        by position (None: they cannot be sent again); ``tries_at_send``: failed attempts
        already counted for each id when this copy was sent, so the failure of a copy whose
        twin has reported it already is dropped (None: the tasks ran without copies). Returns ``(ids, values, errors or None)``
        for :meth:`deliver`."""
        out_ids, out_vals, errs = [], [], {}
        for pos, tid in enumerate(ids):
            info = failed.get(pos)
            if info is not None:
                counted = rnd.attempts.get(tid, 0)
                if tries_at_send is not None and counted > tries_at_send.get(tid, 0):
                    continue  # this attempt's failure was counted when its twin reported
                tries = rnd.attempts[tid] = counted + 1
                self.failures += 1
                if tries <= self.retries and items is not None:
                    rnd.requeue([(tid, items[pos])], front=False)
                    continue
                errs[len(out_ids)] = make_task_error(tid, rank, info, tries)
            out_ids.append(tid)
            out_vals.append(values[pos])
        return out_ids, out_vals, errs or None

    def fail_setup(self, rank: int, info: P.ErrorInfo) -> None:
        """The workers' ``setup`` raised on ``rank``: the farm is broken, and says where."""
        if self.setup_error is not None:
            return
        err = self.setup_error = make_task_error("setup", rank, info)
        host = self.workers[rank].host if rank in self.workers else info.host
        self.broken = FarmBroken(f"the worker setup function failed on rank {rank} ({host}): "
                                 f"{err.exc_type}: {err.message}")
        self.broken.__cause__ = err

    # ---------------------------------------------------------------- reporting
    def worker_summary(self) -> list[dict]:
        """One dict per worker: tasks, chunks, busy and idle seconds, bytes, alive."""
        return [summary_row(w) for _, w in sorted(self.workers.items())]
