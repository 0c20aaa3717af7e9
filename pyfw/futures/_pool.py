"""The thread that drives one farm for every executor on it (private).

A :class:`Pool` owns a :class:`pyfw.farm.Farm` (on the master rank) and one thread; only
that thread touches the farm, through its public round API (``open``, ``step``,
``Round.drain``, ``Round.close``). Executors hand it *jobs*: a :class:`SubmitJob` per
executor (its submitted calls) and a :class:`MapJob` per ``map`` call. Each turn the thread
starts new jobs, lets every job feed and drain its rounds, and steps the farm; with nothing
to do it sleeps on a condition (no polling). If the farm fails, every job fails with
``BrokenExecutor`` carrying the cause: nothing waits for ever.
"""
from __future__ import annotations

import itertools
import pickle
import threading
import time
import weakref
from collections import deque
from concurrent.futures import BrokenExecutor, CancelledError

from ..errors import TaskSerializationError
from . import _context
from ._remote import SubmitCall, is_initializer_failure, user_exception

__all__ = ["Pool", "SubmitJob", "MapJob", "close_own_pools", "initializer_broke"]

_names = itertools.count()


class Pool:
    """One farm, one driving thread, any number of executors (see the module docstring).

    ``start``, if given, makes the farm in the pool's thread (spawning workers takes a
    second or more: ``submit`` does not wait for it); it returns an object with ``farm``
    and ``close(reason)``, which then ends the farm instead of ``farm.close``."""

    def __init__(self, farm, own: bool, start=None):
        self.farm, self.own = farm, own
        self._start, self._owner = start, None
        self.ready = threading.Event()   # the farm exists (or could not be made)
        if farm is not None:
            self.ready.set()
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)    # the pool thread sleeps on it
        self.changed = threading.Condition(self.lock)   # a job finished, or the pool broke
        self.incoming: deque = deque()
        self.jobs: list = []
        self.closing = False
        self.close_asked = False   # set without the lock (a garbage-collected executor)
        self.broken: str | None = None
        self.broken_cause: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="pyfw-futures-pool", daemon=True)
        self.thread.start()
        if own:
            _at_exit.add(self)

    @property
    def num_workers(self) -> int:
        """Workers serving the pool (0 once it is broken); waits for a spawning pool."""
        self.ready.wait()
        return 0 if self.broken or self.farm is None else self.farm.num_workers

    def add(self, job) -> None:
        """Queue a new job (call with ``self.lock`` held)."""
        if self.broken is not None:
            err = BrokenExecutor(self.broken)
            err.__cause__ = self.broken_cause
            raise err
        self.incoming.append(job)
        self.wakeup.notify()

    def close(self, wait: bool = True) -> None:
        """Finish the jobs already queued, then stop (and close the farm if it is ours)."""
        with self.lock:
            self.closing = True
            for job in self.jobs + list(self.incoming):
                job.finish_when_idle()
            self.wakeup.notify()
        if wait and threading.current_thread() is not self.thread:
            self.thread.join()

    def _run(self) -> None:
        reason = None
        try:
            if self._start is not None:
                try:
                    self._owner = self._start()
                    self.farm = self._owner.farm
                finally:
                    self.ready.set()
            if self.farm.size == 1:
                _context.mark_in_process_thread()
            while self._turn():
                pass
        except BaseException as exc:  # the farm failed: fail everything, never hang
            reason = f"{type(exc).__name__}: {exc}"
            self._break(exc)
        finally:
            if self.own and self._owner is not None:
                self._owner.close(reason)
            elif self.own and self.farm is not None:
                self.farm.close(reason)
            _at_exit.discard(self)

    def ask_close(self) -> None:
        """Close once the queued work is done, from any thread and without the lock: the
        pool's thread notices within its idle wait (a finalizer may run in a thread that
        holds the lock already)."""
        self.close_asked = True

    def _turn(self) -> bool:
        with self.lock:
            if self.close_asked and not self.closing:
                self.closing = True
                for job in self.jobs + list(self.incoming):
                    job.finish_when_idle()
            new = list(self.incoming)
            self.incoming.clear()
            idle = not new and not any(job.busy for job in self.jobs)
            if idle and (self.broken or self.closing or not self.farm.in_flight):
                self._prune()
                if self.closing and not self.jobs:
                    return False
                self.wakeup.wait(0.25)
                return True
        if idle:
            # a cancelled map's running chunks still answer: take them in as they come, so
            # the next round finds those workers free (else it queued on the others)
            self.farm.step()
            return True
        farm = self.farm
        self.jobs.extend(new)
        for job in new:
            job.start(farm)
        for job in self.jobs:
            job.pump(farm)
        if any(job.done for job in self.jobs):
            with self.lock:
                self._prune()
        if any(job.busy for job in self.jobs):
            try:
                farm.step()
            except TaskSerializationError as exc:   # one map's items cannot be pickled
                self._fail_round(exc)
        return True

    def _prune(self) -> None:
        """Forget finished jobs and tell waiting shutdowns (call with the lock held)."""
        self.jobs = [job for job in self.jobs if not job.done]
        self.changed.notify_all()

    def wait_for(self, jobs) -> None:
        """Block until ``jobs`` are done (or the pool broke or stopped)."""
        with self.lock:
            while any(j is not None and not j.done for j in jobs):
                if self.broken is not None or not self.thread.is_alive():
                    return
                self.wakeup.notify()
                self.changed.wait(0.1)

    def _fail_round(self, exc) -> None:
        name = getattr(exc, "round_name", None)
        for job in self.jobs:
            if isinstance(job, MapJob) and job.owns(name):
                job.fail(exc.__cause__ if exc.__cause__ is not None else exc)
                return
        raise exc

    def _break(self, exc) -> None:
        msg = f"the executor's pool failed: {type(exc).__name__}: {exc}"
        with self.lock:
            self.broken, self.broken_cause = msg, exc
            jobs = self.jobs + list(self.incoming)
            self.incoming.clear()
        for job in jobs:
            job.broken(msg, exc)
        with self.lock:
            self.changed.notify_all()


#: pools that start their own workers (spawned, or a group of the launched ones): closed
#: (waiting for their work) when the interpreter exits, before MPI is finalized, so that no
#: worker outlives its parent
_at_exit: set = set()


def initializer_broke(job, err) -> BrokenExecutor:
    """A worker's initializer failed: break the job's executor (if it still exists) and
    return the error for the call that met it."""
    executor = job.executor
    if executor is None:
        exc = BrokenExecutor("initializer failed")
        exc.__cause__ = user_exception(err)
        return exc
    executor._mark_broken(err)
    return executor._broken_error()


def _note_broken(job, msg) -> None:
    executor = job.executor
    if executor is not None:
        executor._broken = executor._broken or msg


class _Owned:
    """A job refers to its executor weakly: an executor that the program drops can be
    garbage-collected (and its workers released) while its work finishes."""

    def _own(self, executor) -> None:
        self._owner = weakref.ref(executor)
        self.policy = executor._policy

    @property
    def executor(self):
        """The executor, or None once it has been garbage-collected."""
        return self._owner()


def close_own_pools() -> None:
    """Close every pool that started its own workers, waiting for the work queued there."""
    for pool in list(_at_exit):
        pool.close(wait=True)


if hasattr(threading, "_register_atexit"):   # runs before atexit's MPI_Finalize
    threading._register_atexit(close_own_pools)
else:  # pragma: no cover
    import atexit
    atexit.register(close_own_pools)


class SubmitJob(_Owned):
    """The submitted calls of one executor.

    Calls wait here (pending, cancellable) and move to the farm a batch at a time, keeping
    about twice the number of workers in flight when tasks are long, and about 50 ms of
    work when they are short; a call is *running* (no longer cancellable) once it moved.
    """

    def __init__(self, executor, setup):
        self._own(executor)
        self.lock = executor._pool.lock
        self.call = SubmitCall(setup)
        self.pending: deque = deque()   # (future, fn, args, kwargs, ranks); pool.lock
        self.rounds: list = []          # (Round, [future, ...]); pool thread only
        self.inflight = 0
        self.closed = False
        self.rate, self._count, self._t0 = 0.0, 0, time.monotonic()

    @property
    def busy(self) -> bool:
        return bool(self.pending) or bool(self.rounds)

    @property
    def done(self) -> bool:
        return self.closed and not self.busy

    def start(self, farm) -> None:
        pass

    def finish_when_idle(self) -> None:
        self.closed = True

    def pump(self, farm) -> None:
        self._feed(farm)
        still = []
        for rnd, futs in self.rounds:
            for batch in rnd.drain():
                self._settle(futs, batch)
            if rnd.finished:
                rnd.close()
            else:
                still.append((rnd, futs))
        self.rounds = still

    def _feed(self, farm) -> None:
        target = max(2 * max(1, farm.num_workers), int(self.rate * 0.05))
        room = target - self.inflight
        if room <= 0 or not self.pending:
            return
        with self.lock:
            calls = [self.pending.popleft() for _ in range(min(room, len(self.pending)))]
        by_width: dict = {}     # ranks -> (blobs, futures): one round per width
        for fut, fn, args, kwargs, ranks in calls:
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                blob = pickle.dumps((fn, args, kwargs), pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:   # as in mpi4py: the future fails, the pool goes on
                fut.set_exception(exc)
                continue
            blobs, futs = by_width.setdefault(ranks, ([], []))
            blobs.append(blob)
            futs.append(fut)
        for ranks, (blobs, futs) in by_width.items():
            try:
                # a task submitted with ranks holds them alone while it runs (a group of
                # one too): nothing else waits behind it (max_workers groups last as long
                # as their executor, pyfw.futures._subset)
                rnd = farm.open(self.call, blobs, name=f"futures-submit-{next(_names)}",
                                policy=self.policy, tail_duplication=False,
                                ranks=ranks, exclusive=ranks is not None)
            except BaseException as exc:   # these futures fail; a broken farm fails in step
                for fut in futs:
                    fut.set_exception(exc)
                continue
            self.rounds.append((rnd, futs))
            self.inflight += len(blobs)

    def _settle(self, futs, batch) -> None:
        errors = batch.errors
        for pos, (tid, value) in enumerate(zip(batch.ids, batch.values)):
            fut = futs[tid]
            err = errors.get(pos) if errors else None
            if err is None:
                try:
                    value = pickle.loads(value)
                except BaseException as exc:   # as in mpi4py: this future fails alone
                    fut.set_exception(exc)
                else:
                    fut.set_result(value)
            elif is_initializer_failure(err):
                fut.set_exception(initializer_broke(self, err))
            else:
                fut.set_exception(user_exception(err))
        n = len(batch.ids)
        self.inflight -= n
        self._count += n
        now = time.monotonic()
        if now - self._t0 > 0.02:
            self.rate, self._count, self._t0 = self._count / (now - self._t0), 0, now

    def cancel_pending(self) -> None:
        """Cancel the calls not yet handed to the farm (call with the pool lock held)."""
        while self.pending:
            fut = self.pending.popleft()[0]
            fut.cancel()
            fut.set_running_or_notify_cancel()   # wakes wait()/as_completed() on it

    def fail_pending(self, error) -> None:
        """Fail the calls not yet handed to the farm (call with the pool lock held)."""
        while self.pending:
            fut = self.pending.popleft()[0]
            if fut.set_running_or_notify_cancel():
                fut.set_exception(error)

    def broken(self, msg, exc) -> None:
        err = BrokenExecutor(msg)
        err.__cause__ = exc
        _note_broken(self, msg)
        for _, futs in self.rounds:
            for fut in futs:
                if not fut.done():
                    fut.set_exception(err)
        self.rounds = []
        with self.lock:
            self.fail_pending(err)
            self.closed = True


class MapJob(_Owned):
    """One ``map`` call: a round over its items; results go to the consuming thread."""

    def __init__(self, executor, fn, iterables, star, total, chunksize, window, ranks=None):
        self._own(executor)
        self.ranks = ranks
        self.cond = threading.Condition(executor._pool.lock)
        self.fn, self.iterables, self.star, self.total = fn, iterables, star, total
        self.chunksize, self.window = chunksize, window
        self.round = None
        self.batches: deque = deque()   # guarded by cond
        self.finished = False
        self.error: BaseException | None = None
        self.source_error: BaseException | None = None
        self.ack = 0                    # consumer's next index (ordered + window)
        self.abandoned = False
        self.unbounded = False

    busy = property(lambda self: not self.finished)
    done = property(lambda self: self.finished)

    def finish_when_idle(self) -> None:
        self.unbounded = True

    def owns(self, round_name) -> bool:
        return self.round is not None and self.round.name == round_name

    def _source(self):
        its = self.iterables
        it = iter(its[0]) if len(its) == 1 else zip(*its)
        try:
            yield from it
        except Exception as exc:   # the user's iterable raised: end the map with it
            self.source_error = exc

    def start(self, farm) -> None:
        if self.abandoned:
            self._finish(None)
            return
        try:
            self.round = farm.open(self.fn, self._source(), star=self.star, total=self.total,
                                   ranks=self.ranks,
                                   chunksize=self.chunksize, window=self.window,
                                   policy=self.policy,
                                   name=f"futures-map-{next(_names)}", tail_duplication=False)
        except BaseException as exc:
            self._finish(exc)

    def pump(self, farm) -> None:
        rnd = self.round
        if rnd is None or self.finished:
            return
        got = rnd.drain()
        if got:
            with self.cond:
                self.batches.extend(got)
                self.cond.notify_all()
        if self.abandoned:
            rnd.close()
            self._finish(None)
        elif self.source_error is not None:
            rnd.close()
            self._finish(self.source_error)
        elif rnd.finished:
            rnd.close()
            self._finish(None)
        elif self.window is not None:
            rnd.release(None if self.unbounded else self.ack)

    def _finish(self, error) -> None:
        with self.cond:
            self.finished = True
            if error is not None and self.error is None:
                self.error = error
            self.cond.notify_all()

    def fail(self, exc) -> None:
        if self.round is not None:
            self.round.close()
        self._finish(exc)

    def broken(self, msg, exc) -> None:
        err = BrokenExecutor(msg)
        err.__cause__ = exc
        _note_broken(self, msg)
        self._finish(err)

    def cancel(self) -> None:
        """``shutdown(cancel_futures=True)``: stop handing out this map's items."""
        self.error = self.error or CancelledError()
        self.abandoned = True
