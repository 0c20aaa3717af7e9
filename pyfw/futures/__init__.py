"""A ``concurrent.futures.Executor`` over the pyfw farm: switch from mpi4py.futures by
changing one import.

::

    from pyfw.futures import Executor          # was: from mpi4py.futures import MPIPoolExecutor
    with Executor() as ex:
        print(sum(ex.map(f, range(10**6))))    # adaptive chunking: no chunksize to tune

Launch modes:

* ``mpiexec -n N python -m pyfw.futures script.py [args]`` (like ``-m mpi4py.futures``):
  rank 0 runs the script, the other ranks serve every executor it creates.
* plain ``python script.py``: one process; tasks run in a background thread of it.
* SPMD, like ``MPICommExecutor``: ``with Executor(comm) as ex: if ex is not None: ...`` on
  every rank; workers serve inside ``__enter__``, which returns None on them.

Differences from mpi4py.futures that users notice: ``chunksize=1`` (the default) means
"choose for me" (adaptive chunking, pipelined); any other value is honoured as a fixed size.
Worker death under ``--with-ft ulfm`` is survived; task errors carry the remote traceback.
"""
from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import deque
from concurrent import futures as cf
from concurrent.futures import BrokenExecutor, Future

from mpi4py import MPI

from ..errors import TaskError
from ..farm import Farm
from ..farm.master import InOrder
from ..farm.policies import make_policy

__all__ = ["Executor", "BrokenExecutor", "wait", "as_completed", "FIRST_COMPLETED",
           "FIRST_EXCEPTION", "ALL_COMPLETED"]

wait, as_completed = cf.wait, cf.as_completed
FIRST_COMPLETED, FIRST_EXCEPTION, ALL_COMPLETED = (cf.FIRST_COMPLETED, cf.FIRST_EXCEPTION,
                                                   cf.ALL_COMPLETED)

_shared_farm: Farm | None = None   # set by ``python -m pyfw.futures``
_importing_main = False            # True while a worker imports the user's main program
_executor_ids = itertools.count()
_executors: "weakref.WeakSet[Executor]" = weakref.WeakSet()


class InitializerError(Exception):
    """The executor's initializer raised on a worker."""


def _ensure_initialized(exid, initializer, initargs) -> None:
    """Run the executor's initializer once on this worker (remember a failure)."""
    key = ("init", exid)
    if key not in _worker_state:
        try:
            initializer(*initargs)
        except Exception as exc:
            _worker_state[key] = exc
        else:
            _worker_state[key] = None
    failed = _worker_state[key]
    if failed is not None:
        raise InitializerError(f"the executor's initializer failed on this worker: "
                               f"{type(failed).__name__}: {failed}")


def _run_submitted(item):
    """Worker side of ``submit``: ``item = (executor_id, initializer, initargs, fn, args,
    kwargs)``."""
    exid, initializer, initargs, fn, args, kwargs = item
    if initializer is not None:
        _ensure_initialized(exid, initializer, initargs)
    return fn(*args, **kwargs)


class _MapCall:
    """Worker side of ``map``: the user's function, sent once per chunk, items bare."""

    def __init__(self, exid, initializer, initargs, fn):
        self.exid, self.initializer, self.initargs, self.fn = exid, initializer, initargs, fn

    def __call__(self, *args):
        if self.initializer is not None:
            _ensure_initialized(self.exid, self.initializer, self.initargs)
        return self.fn(*args)


_worker_state: dict = {}


class Executor(cf.Executor):
    """Run callables on the workers of a pyfw farm (see the module docstring).

    ``max_workers`` is accepted for compatibility (the pool is the ranks mpiexec started);
    ``initializer(*initargs)`` runs once per worker before its first task of this executor
    (a failure breaks the executor, as in mpi4py); remaining keyword arguments go to
    :class:`pyfw.farm.Farm` when the executor makes its own farm (``policy=``, ...).
    """

    def __init__(self, max_workers: int | None = None, initializer=None, initargs=(),
                 comm=None, **farm_kwargs):
        if _importing_main:
            raise RuntimeError(
                "an Executor was created while the workers imported the main program: under "
                "`python -m pyfw.futures` put the code that uses it under "
                "`if __name__ == '__main__':`")
        if max_workers is not None and max_workers < 1:
            raise ValueError("max_workers must be greater than 0")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        self._id = next(_executor_ids)
        self._init = (initializer, tuple(initargs))
        self._own = _shared_farm is None
        if self._own:
            self._farm = Farm(MPI.COMM_WORLD if comm is None else comm, **farm_kwargs)
            self._spmd = self._farm.size > 1
        else:
            self._farm, self._spmd = _shared_farm, False
        self._max_workers = max_workers
        # executors sharing one farm (``-m pyfw.futures``) take turns driving its engine
        self._engine_lock = self._farm.__dict__.setdefault("_engine_lock", threading.RLock())
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._submitted: deque = deque()     # (future, fn, args, kwargs) not yet in a round
        self._maps: deque = deque()          # (call, star, items, total, chunksize, window, reply)
        self._live: list = []                # (RoundState, reply or None) being served
        self._shutdown = False
        self._broken: str | None = None
        self._thread = None
        _executors.add(self)
        if self._farm.is_master and not self._spmd:
            self._start_thread()

    # ---------------------------------------------------------------- SPMD mode
    def __enter__(self):
        if self._spmd:
            self._farm.__enter__()          # workers serve here until the master is done
            if not self._farm.is_master:
                return None
            self._start_thread()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._farm.is_master:
            self.shutdown(wait=True)
        return False

    @property
    def num_workers(self) -> int:
        return self._farm.num_workers

    # ---------------------------------------------------------------- API
    def submit(self, fn, /, *args, **kwargs) -> Future:
        """Schedule ``fn(*args, **kwargs)``; returns a Future."""
        with self._lock:
            self._check_open()
            fut = Future()
            self._submitted.append((fut, fn, args, kwargs))
            self._wake.notify()
            return fut

    def map(self, fn, *iterables, timeout=None, chunksize=1, unordered=False,
            buffersize=None):
        """Like ``Executor.map``; ``chunksize=1`` (default) lets pyfw choose chunk sizes.

        Results come in order, or in completion order with ``unordered=True`` (as in
        mpi4py). ``buffersize`` bounds how many results may wait for an earlier one.
        """
        return self._map(fn, iterables, False, timeout, chunksize, unordered, buffersize)

    def starmap(self, fn, iterable, timeout=None, chunksize=1, unordered=False,
                buffersize=None):
        """``fn(*args)`` for each ``args`` of ``iterable``."""
        return self._map(fn, (iterable,), True, timeout, chunksize, unordered, buffersize)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if cancel_futures:
                while self._submitted:
                    fut = self._submitted.popleft()[0]
                    fut.cancel()
            self._shutdown = True
            self._wake.notify()
        if wait and self._thread is not None:
            self._thread.join()

    # ---------------------------------------------------------------- internals
    def _check_open(self):
        if self._broken is not None:
            raise BrokenExecutor(self._broken)
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")

    def _map(self, fn, iterables, star, timeout, chunksize, unordered, buffersize):
        if not iterables:
            raise TypeError("map() needs at least one iterable")
        deadline = None if timeout is None else time.monotonic() + timeout
        call = _MapCall(self._id, *self._init, fn)
        if len(iterables) > 1:
            items, star = zip(*iterables), True
        else:
            items = iterables[0]
        lens = [len(it) for it in iterables if hasattr(it, "__len__")]
        total = min(lens) if len(lens) == len(iterables) else None
        reply = {"records": deque(), "done": False, "error": None}
        window = None if unordered else (buffersize or 65536)
        with self._lock:
            self._check_open()
            self._maps.append((call, star, items, total,
                               None if chunksize in (None, 1) else chunksize, window, reply))
            self._wake.notify()
        return self._map_results(reply, unordered, deadline)

    def _map_results(self, reply, unordered, deadline):
        order = InOrder()
        while True:
            with self._lock:
                while not reply["records"] and not reply["done"]:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise cf.TimeoutError()
                    self._wake.wait(timeout=left if left is not None else 0.5)
                records = list(reply["records"])
                reply["records"].clear()
                finished, error = reply["done"], reply["error"]
            for ids, values, errors, _ in records:
                if errors:
                    first = min(errors)
                    raise errors[first]
                if unordered:
                    yield from values
                    continue
                yield from order.feed(ids, values)
                state = reply.get("state")
                if state is not None:
                    state.window_base = order.next
            if error is not None:
                raise error
            if finished and not reply["records"]:
                return

    def _start_thread(self):
        self._thread = threading.Thread(target=self._manage, name=f"pyfw-executor-{self._id}",
                                        daemon=True)
        self._thread.start()

    def _manage(self):
        farm = self._farm
        engine = farm.engine
        futures_of: dict[int, dict] = {}   # rid -> {tid: future}
        try:
            while True:
                with self._lock:
                    batch = list(self._submitted)
                    self._submitted.clear()
                    maps = list(self._maps)
                    self._maps.clear()
                    stop = self._shutdown and not self._live and not batch and not maps
                if stop:
                    break
                with self._engine_lock:
                    if batch:
                        self._start_batch(engine, batch, futures_of)
                    for call, star, items, total, chunksize, window, reply in maps:
                        state = engine.start_round(items, call, star, total,
                                                   make_policy(farm.policy, chunksize),
                                                   None, window)
                        reply["state"] = state
                        self._live.append((state, reply))
                    self._serve_outputs(futures_of)
                    if self._live:
                        engine.step()
                if not self._live:
                    with self._lock:
                        if not self._submitted and not self._maps and not self._shutdown:
                            self._wake.wait(timeout=0.01)
        except BaseException as exc:   # the pool is broken: fail everything pending
            self._fail_all(exc, futures_of)
        finally:
            if self._own:
                farm.close()

    def _start_batch(self, engine, batch, futures_of):
        exid, (init, initargs) = self._id, self._init
        futs = {}

        def source():
            tid = 0  # the round numbers the items it reads 0, 1, 2, ...
            for fut, fn, args, kwargs in batch:
                if not fut.set_running_or_notify_cancel():
                    continue
                futs[tid] = fut
                tid += 1
                yield (exid, init, initargs, fn, args, kwargs)

        state = engine.start_round(source(), _run_submitted, False, None,
                                   make_policy(self._farm.policy), None, None)
        futures_of[state.rid] = futs
        self._live.append((state, None))

    def _serve_outputs(self, futures_of):
        still = []
        for state, reply in self._live:
            if reply is None:
                futs = futures_of[state.rid]
                while state.outputs:
                    ids, values, errors, _ = state.outputs.popleft()
                    for pos, (tid, value) in enumerate(zip(ids, values)):
                        fut = futs.pop(tid)
                        err = errors.get(pos) if errors else None
                        if err is None:
                            fut.set_result(value)
                        else:
                            self._note_broken(err)
                            fut.set_exception(err)
            elif state.outputs:
                with self._lock:
                    while state.outputs:
                        rec = state.outputs.popleft()
                        if rec[2]:
                            for err in rec[2].values():
                                self._note_broken(err)
                        reply["records"].append(rec)
                    self._wake.notify_all()
            if state.finished and not state.outputs:
                self._farm.engine.end_round(state)
                if reply is None:
                    futures_of.pop(state.rid, None)
                else:
                    with self._lock:
                        reply["done"] = True
                        self._wake.notify_all()
            else:
                still.append((state, reply))
        self._live = still

    def _note_broken(self, err: TaskError):
        if err.exc_type == "InitializerError" and self._broken is None:
            self._broken = f"the initializer failed on rank {err.rank}: {err.message}"

    def _fail_all(self, exc, futures_of):
        msg = f"the executor's pool failed: {type(exc).__name__}: {exc}"
        self._broken = msg
        broken = BrokenExecutor(msg)
        broken.__cause__ = exc
        for futs in futures_of.values():
            for fut in futs.values():
                if not fut.done():
                    fut.set_exception(broken)
        with self._lock:
            for fut, *_ in self._submitted:
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(broken)
            self._submitted.clear()
            replies = [reply for _, reply in self._live if reply is not None]
            replies += [m[-1] for m in self._maps]
            self._maps.clear()
            for reply in replies:
                reply["error"], reply["done"] = broken, True
            self._wake.notify_all()

