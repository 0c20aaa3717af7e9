"""What users write: :class:`Task` subclasses (or plain functions), run with a :class:`Context`."""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, NamedTuple

from .. import exitguard

__all__ = ["Task", "Context", "Done", "Batch", "run_items"]


class Task:
    """A unit of work, pickled on the master and run on a worker.

    Subclass it and implement :meth:`run`. Keep instances small (they travel by pickle);
    put large read-only state in the worker context with :meth:`Context.resource`.
    """

    def run(self, ctx: "Context") -> Any:  # pragma: no cover - abstract
        """Do the work on a worker and return the result (picklable). ``ctx``: the
        worker's :class:`Context` (``ctx.cancelled()`` to stop early, ``ctx.resource`` for
        state kept per worker process)."""
        raise NotImplementedError(f"{type(self).__name__} must implement run(self, ctx)")


class Context:
    """Per-worker state handed to every task that worker runs.

    * ``rank``, ``size``, ``host``: where the task runs.
    * ``comm``: the communicator of the ranks that run the task together (an mpi4py
      ``Intracomm``: its group's for a multi-rank task, ``COMM_SELF`` otherwise).
    * ``state``: a dict that lives as long as the worker (filled by ``setup`` or by tasks).
    * :meth:`resource`: load something once per worker process and reuse it (a big table).
    * :meth:`cancelled`: cooperative cancellation; long tasks should call it between slices
      of work and return early when it is True (their result is then discarded).
    """

    def __init__(self, rank: int = 0, size: int = 1, host: str = "localhost",
                 check: Callable[[], bool] | None = None):
        self.rank, self.size, self.host = rank, size, host
        self.comm = None   # set by the engine that runs the task
        self.state: dict[str, Any] = {}
        self._resources: dict[str, Any] = {}
        self._check = check
        self._cancelled = False
        self._next_check = 0.0

    def resource(self, name: str, loader: Callable[..., Any], *args, **kwargs) -> Any:
        """``loader(*args, **kwargs)`` the first time ``name`` is asked for on this worker;
        the cached object afterwards."""
        try:
            return self._resources[name]
        except KeyError:
            value = self._resources[name] = loader(*args, **kwargs)
            return value

    def cancelled(self) -> bool:
        """True once the running task's round (or its duplicate) has been cancelled.

        Cheap enough to call often: the runtime looks for a cancel message at most once
        per millisecond.
        """
        if self._cancelled:
            return True
        if self._check is not None:
            now = time.perf_counter()
            if now >= self._next_check:
                self._next_check = now + 1e-3
                self._cancelled = self._check()
        return self._cancelled

    def _begin(self) -> None:
        self._cancelled = False
        self._next_check = 0.0


def run_items(items, fn, star: bool, ctx: Context, values: list, failures: list,
              with_comm: bool = False) -> None:
    """Run ``items`` in turn, appending each result to ``values``: ``item.run(ctx)`` for Task
    items (``fn`` None), else ``fn(*item)`` with ``star``, ``fn(item)`` without; with
    ``with_comm`` (a multi-rank round) ``fn(ctx.comm, ...)``.

    A task that raises fails alone: None takes its place in ``values`` and ``(position in
    values, exception)`` is appended to ``failures``. ``SystemExit`` and
    ``KeyboardInterrupt`` are not a task's failure but the process leaving: on a worker rank
    (guarded by :mod:`pyfw.exitguard`) it leaves as a dead rank, naming the task; in
    serial mode and on the master they propagate (docs/farm.md, "When a worker dies").
    The one place where every engine (worker, sub-master, serial) runs a task.
    """
    if with_comm and fn is not None:
        fn = functools.partial(fn, ctx.comm)
    for item in items:
        try:
            if fn is None:
                value = item.run(ctx)
            elif star:
                value = fn(*item)
            else:
                value = fn(item)
        except Exception as exc:
            failures.append((len(values), exc))
            value = None
        except (SystemExit, KeyboardInterrupt) as exc:
            exitguard.task_exit(exc, item, fn, star)
            raise
        values.append(value)


class Done:
    """One finished task of a round: ``index``, ``result`` or ``error``, the worker ``rank``
    that produced it and the number of ``attempts`` it took."""

    __slots__ = ("index", "result", "error", "rank", "attempts")

    def __init__(self, index, result=None, error=None, rank=0, attempts=1):
        self.index, self.result, self.error, self.rank, self.attempts = (
            index, result, error, rank, attempts)

    @property
    def ok(self) -> bool:
        """True when the task produced a result (no error)."""
        return self.error is None

    def __repr__(self) -> str:
        what = f"error={self.error!r}" if self.error is not None else f"result={self.result!r}"
        return f"Done(index={self.index}, {what}, rank={self.rank})"


class Batch(NamedTuple):
    """Results of consecutive tasks of one round that came back together (see
    :meth:`pyfw.farm.Round.drain`): task ``ids`` (a range or list), their ``values``,
    ``errors`` (``None``, or a dict mapping a position in ``ids`` to the
    :class:`pyfw.TaskError` that replaced the value there) and the worker ``rank``."""

    ids: Any
    values: list
    errors: dict | None
    rank: int
