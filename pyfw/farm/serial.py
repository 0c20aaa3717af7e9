"""The engine of a farm without workers (private): one process runs every task itself, with
the same interface as :class:`pyfw.farm.engine.Engine` (both are an
:class:`~pyfw.farm.core.EngineCore`), so a script runs unchanged without ``mpiexec``.
"""
from __future__ import annotations

import time

from mpi4py import MPI

from ..comm import Comm
from . import _protocol as P
from .core import EngineCore, WorkerRecord
from .groups import refuse
from .rounds import RoundState
from .task import Context, run_items

__all__ = ["SerialEngine"]

#: the master runs about this much work per step, then looks at its rounds again
STEP_S = 2e-3


class SerialEngine(EngineCore):
    """The same interface with no workers: tasks run in this process, a few per step.

    Its one worker record is the master itself (rank 0). A failing ``setup`` breaks the farm
    as it does under MPI: :class:`pyfw.FarmBroken` at the first ``map`` or ``step``, with the
    setup's error as ``__cause__``.
    """

    def __init__(self, comm: Comm | None = None, setup=None, setup_args=(), retries=0, **_):
        super().__init__(0, retries)
        self.comm = comm
        host = comm.host if comm else "localhost"
        self.ctx = Context(0, 1, host, check=self._cancelled)
        self.ctx.comm = MPI.COMM_SELF
        self.me = self.workers[0] = WorkerRecord(0, host)
        self.me.hello = True
        self.current: RoundState | None = None
        if setup is not None:
            try:
                setup(self.ctx, *setup_args)
            except Exception as exc:
                self.fail_setup(0, P.error_info(exc, 0, 1, host))

    def _cancelled(self) -> bool:
        return self.current is not None and self.current.cancelled

    def cancel_round(self, rnd, wait=True, timeout=30.0) -> None:
        """Cancel a round: its remaining tasks are dropped."""
        rnd.cancelled = True
        rnd.drop_pending()

    def step(self, wait: bool = True) -> bool:
        """Run the next few tasks (about ``STEP_S`` of work) in this process."""
        self.check_broken()
        rnd = next((r for r in self.rounds.values() if r.has_pending()), None)
        if rnd is None:
            return False
        while rnd.wide:   # one process cannot run a task on several ranks
            tid, _, k = rnd.wide.popleft()
            refuse(self, rnd, tid, k, 1)
        stats = self.me.stats
        mean = stats.mean_recent
        ids, items = rnd.take(1 if mean is None else max(1, min(10_000, int(STEP_S / mean))))
        self.current = rnd
        self.ctx._begin()
        values, failures = [], []
        t0 = time.perf_counter()
        try:
            run_items(items, rnd.fn, rnd.star, self.ctx, values, failures,
                      with_comm=rnd.ranks is not None)
        finally:
            self.current = None
        dt = time.perf_counter() - t0
        n = len(values)
        stats.record(n, dt, dt * dt / max(1, n), dt, 0.0)
        if not rnd.cancelled:
            errs = None
            if failures:
                host = self.ctx.host
                failed = {pos: P.error_info(exc, 0, 1, host) for pos, exc in failures}
                ids, values, errs = self.settle_failures(rnd, ids, values, failed, 0, items)
            if len(ids):
                self.deliver(rnd, ids, values, errs, 0)
        if self.observer is not None:
            self.observer(self)
        return True

    def shutdown(self, reason=None, also=()) -> None:
        """Nothing to stop: there are no workers."""
