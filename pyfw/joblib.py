"""A joblib backend over :mod:`pyfw.futures`: scikit-learn and every other joblib user on
MPI workers.

::

    import joblib
    import pyfw.joblib                      # registers the "pyfw" backend

    with joblib.parallel_backend("pyfw"):   # or joblib.parallel_config(backend="pyfw")
        results = joblib.Parallel(n_jobs=-1)(joblib.delayed(f)(x) for x in xs)

Where the workers come from is :mod:`pyfw.futures`'s rule: under
``pyfw-run -n N -- python -m pyfw.futures script.py`` the N-1 launched ranks; otherwise
spawned workers (``MPI_Comm_spawn``), kept for the next ``Parallel`` call and ended at exit.

``n_jobs`` as in joblib: ``-1`` is every worker (spawned: the universe size minus one, or
the machine's cores if that is larger, or ``$MPI4PY_FUTURES_MAX_WORKERS``), ``-2`` all but
one, a positive number that many workers (spawned anew if the kept pool has another size;
launched ranks cannot grow, so it is capped at them, and fewer than them is a group of that
many, as ``max_workers``); ``1`` runs in this process as joblib's
own backends do. ``batch_size`` as in joblib (``"auto"`` adapts to the task duration).
A task's exception is raised with its own type (the remote traceback as ``__cause__``).
Tasks are pickled by reference where they can be, else with cloudpickle as loky does, so
lambdas and closures work.
"""
from __future__ import annotations

import os
import pickle
import threading

from joblib import register_parallel_backend
from joblib._parallel_backends import (AutoBatchingMixin, FallbackToBackend,
                                       ParallelBackendBase, SequentialBackend)

try:   # loky's serializer (joblib >= 1.5 depends on it; older ones vendor it)
    import cloudpickle
except ImportError:  # pragma: no cover
    try:
        from joblib.externals import cloudpickle
    except ImportError:
        import pickle as cloudpickle

__all__ = ["PyfwBackend", "register", "shutdown"]

_lock = threading.Lock()
_pool = None   # (size, Executor): kept across Parallel calls


def _available_workers() -> int:
    """Workers ``n_jobs=-1`` stands for."""
    from mpi4py import MPI

    from .futures import launched_workers
    launched = launched_workers()
    if launched:
        return launched
    env = os.environ.get("MPI4PY_FUTURES_MAX_WORKERS")
    if env is not None:
        return max(int(env), 1)
    universe = MPI.COMM_WORLD.Get_attr(MPI.UNIVERSE_SIZE) or 1
    return max(universe - MPI.COMM_WORLD.Get_size(), os.cpu_count() or 1, 1)


def _executor(size: int):
    """The kept executor of ``size`` workers (a new one if the kept one differs)."""
    global _pool
    from .futures import Executor, launched_workers
    with _lock:
        launched = launched_workers()
        if launched and size >= launched:
            size = 0   # every launched rank: one executor over all of them (else max_workers)
        if _pool is not None and _pool[0] == size:
            return _pool[1]
        if _pool is not None:
            _pool[1].shutdown(wait=True)
        executor = Executor(max_workers=size or None)
        _pool = (size, executor)
        return executor


def shutdown() -> None:
    """End the kept workers now (they are ended at exit anyway)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool[1].shutdown(wait=True)
            _pool = None


class _Call:
    """A joblib batch, pickled by reference where it can be (the workers import the main
    module, so exception classes defined there keep their identity), else with
    cloudpickle (lambdas, closures), as loky does."""

    __slots__ = ("blob", "cloud")

    def __init__(self, func):
        try:
            self.blob, self.cloud = pickle.dumps(func, pickle.HIGHEST_PROTOCOL), False
        except Exception:
            self.blob, self.cloud = cloudpickle.dumps(func), True

    def __getstate__(self):
        return self.blob, self.cloud

    def __setstate__(self, state):
        self.blob, self.cloud = state

    def __call__(self):
        return (cloudpickle if self.cloud else pickle).loads(self.blob)()


class PyfwBackend(AutoBatchingMixin, ParallelBackendBase):
    """joblib's ``ParallelBackendBase`` over a :class:`pyfw.futures.Executor`."""

    default_n_jobs = -1
    supports_retrieve_callback = True
    supports_timeout = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._executor = None
        self._futures = set()

    def effective_n_jobs(self, n_jobs):
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            n_jobs = self.default_n_jobs
        available = _available_workers()
        if n_jobs < 0:
            return max(available + 1 + n_jobs, 1)
        from .futures import launched_workers
        if launched_workers():
            return min(n_jobs, available)
        return n_jobs

    def configure(self, n_jobs=1, parallel=None, **backend_kwargs):
        n_jobs = self.effective_n_jobs(n_jobs)
        if n_jobs == 1:
            raise FallbackToBackend(SequentialBackend(nesting_level=self.nesting_level))
        self.parallel = parallel
        self._executor = _executor(n_jobs)
        return n_jobs

    def submit(self, func, callback=None):
        future = self._executor.submit(_Call(func))
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def retrieve_result_callback(self, future):
        return future.result()

    def abort_everything(self, ensure_ready=True):
        """A task failed: drop the batches that have not started (the pool stays)."""
        for future in list(self._futures):
            future.cancel()
        self._futures.clear()

    def terminate(self):
        self._executor = None   # the pool is kept for the next Parallel call
        self.reset_batch_stats()


def register() -> None:
    """Register the ``"pyfw"`` joblib backend (done when this module is imported)."""
    register_parallel_backend("pyfw", PyfwBackend)


register()
