""":class:`Executor`: mpi4py's ``MPIPoolExecutor`` interface over a pyfw farm."""
from __future__ import annotations

import functools
import itertools
import sys
import threading
import time
import warnings
import weakref
from concurrent import futures as cf

from mpi4py import MPI

from ..farm import Farm
from ..farm.ordering import DEFAULT_WINDOW
from ..farm.policies import make_policy
from . import _context
from ._context import WORKER_RUN_NAME
from ._pool import MapJob, Pool, SubmitJob
from ._spawn import SpawnedFarm, max_workers_default, use_pkl5_option
from ._subset import SUBSET_GROUPS, SubsetFarm, reserve
from ._remote import MapCall, Setup, user_exception
from ._results import results

__all__ = ["Executor"]

_ids = itertools.count()
#: MPIPoolExecutor's options for spawned workers (spawn mode); ``use_pkl5`` and ``backoff``
#: are validated and have nothing to do (the farm has its own transport and waiting)
_SPAWN_OPTIONS = ("python_exe", "python_args", "mpi_info", "main", "use_pkl5", "backoff")
_WORKER_OPTIONS = ("path", "wdir", "env", "globals")
#: options of the whole farm: honoured when the executor makes its own farm
_FARM_OPTIONS = ("task_timeout", "max_attempts", "retries", "pipeline_depth", "max_depth",
                 "setup", "setup_args", "progress", "summary", "journal", "dashboard",
                 "hierarchy")


def _dropped(pool, job) -> None:
    """An executor was garbage-collected without ``shutdown`` (as in mpi4py): the work it
    queued still runs, then a pool of its own closes and its workers leave. Takes no lock:
    a finalizer may run in any thread, the pool's included."""
    job.closed = True
    if pool.own:
        pool.ask_close()


def _submit_shared(fn, *args, ranks=None):
    """Put one task on the launched workers' shared farm (the group of a
    :class:`SubsetFarm`); its future."""
    helper = Executor()
    try:
        return helper.submit(fn, *args, ranks=ranks)
    finally:
        helper.shutdown(wait=False)


def _validate(max_workers, initializer, policy, options) -> None:
    """Reject bad arguments as MPIPoolExecutor does (same exception types and messages)."""
    if max_workers is not None and int(max_workers) <= 0:
        raise ValueError("max_workers must be greater than 0")
    if initializer is not None and not callable(initializer):
        raise TypeError("initializer must be a callable")
    if _context.importing_main:
        raise RuntimeError(
            "an Executor was created while a worker imported the main program: under "
            "`python -m pyfw.futures` put the code that uses it under "
            "`if __name__ == '__main__':`")
    unknown = set(options) - set(_SPAWN_OPTIONS + _WORKER_OPTIONS + _FARM_OPTIONS)
    if unknown:
        raise TypeError(f"Executor() got unexpected keyword argument(s): "
                        f"{', '.join(sorted(unknown))}")
    if policy is not None:
        make_policy(policy)   # an unknown name fails here, on the caller's thread


class Executor(cf.Executor):
    """Run callables on pyfw workers; a drop-in for ``mpi4py.futures.MPIPoolExecutor``.

    Where the workers come from (as in mpi4py): under ``python -m pyfw.futures`` the other
    ranks serve every executor; otherwise (``python script.py``, ``mpiexec -n 1``) each
    executor spawns ``max_workers`` workers with ``MPI_Comm_spawn`` at its first use
    (default: ``$MPI4PY_FUTURES_MAX_WORKERS``, else the universe size minus the world size,
    else 1) and ends them at ``shutdown`` or at exit. ``in_process=True`` runs the tasks in
    this process instead, on purpose.

    ``max_workers``, ``initializer``/``initargs`` and the keyword options of
    ``MPIPoolExecutor`` are accepted and validated as mpi4py does: ``path``, ``wdir``,
    ``env`` and ``globals`` are applied on every worker before this executor's first task
    there; ``python_exe``, ``python_args``, ``mpi_info`` (merged over pyfw's
    ``map_by=slot:OVERSUBSCRIBE``) and ``main`` shape spawned workers; ``use_pkl5`` and
    ``backoff`` have nothing to do. pyfw options: ``policy`` (chunking policy of this
    executor's rounds), ``comm`` and ``root`` (run SPMD over ``comm``, like
    ``MPICommExecutor``: call on every rank and use ``with``; the executor is ``None`` on
    the workers), ``in_process`` and, when the executor makes its own farm (spawned or
    in-process), the options of :class:`pyfw.farm.Farm`.
    """

    def __init__(self, max_workers=None, initializer=None, initargs=(), *, comm=None,
                 root: int = 0, policy=None, in_process: bool = False, **options):
        _validate(max_workers, initializer, policy, options)
        self._policy = policy
        self._max_workers_asked = None if max_workers is None else int(max_workers)
        self._in_process = bool(in_process)
        self._spawn_options = {k: v for k, v in options.items()
                               if k in _SPAWN_OPTIONS + _WORKER_OPTIONS}
        use_pkl5_option(options.get("use_pkl5"))
        self._setup = Setup(next(_ids), initializer, initargs,
                            *(options.get(k) for k in _WORKER_OPTIONS))
        self._farm_options = {k: v for k, v in options.items() if k in _FARM_OPTIONS}
        self._shutdown = False
        self._broken: str | None = None
        self._broken_cause = None
        self._pool: Pool | None = None
        self._job: SubmitJob | None = None
        self._maps: list = []
        self._bootlock = threading.Lock()
        self._finalizer = None
        self._spmd_farm = None
        self._spmd_left_out = False   # SPMD: a rank that max_workers leaves out of the farm
        self._spmd_comm = None        # SPMD: the sub-communicator that max_workers made
        shared = _context.shared_pool()
        # max_workers below the launched workers: this executor would get a farm over that
        # many (see _subset), but not yet: while a group task holds workers, other
        # executors' tasks were seen waiting for them (mpi4py's test_multiple_executors
        # hung), so under `python -m pyfw.futures` every executor shares all, as in mpi4py
        self._subset = (SUBSET_GROUPS and shared is not None and not _context.serving
                        and self._max_workers_asked is not None
                        and self._max_workers_asked < shared.num_workers)
        if shared is None and not _context.serving and comm is not None:
            comm, root = self._spmd_members(comm, root)
            if comm is None:
                self._spmd_left_out = True
                return
            farm = Farm(comm, master=root, **self._farm_options)
            if farm.size > 1:
                self._spmd_farm = farm
            else:
                self._pool = Pool(farm, own=True)
        elif self._farm_options and shared is not None and not self._subset:
            warnings.warn(f"Executor options {sorted(self._farm_options)} concern the whole "
                          f"farm; under `python -m pyfw.futures` they are ignored",
                          RuntimeWarning, stacklevel=2)

    def _spmd_members(self, comm, root):
        """SPMD with ``max_workers`` below the other ranks of ``comm`` (collective): the
        farm is ``root`` and the first ``max_workers`` other ranks, as (sub-communicator,
        root in it); (None, None) on a rank left out. Otherwise ``(comm, root)``."""
        from ..comm import mpi_of
        mpi = mpi_of(comm)
        size, rank = mpi.Get_size(), mpi.Get_rank()
        k = self._max_workers_asked
        if k is None or k >= size - 1:
            return comm, root
        members = sorted([root] + [r for r in range(size) if r != root][:k])
        sub = mpi.Split(0 if rank in members else MPI.UNDEFINED, rank)
        if sub == MPI.COMM_NULL:
            return None, None
        self._spmd_comm = sub
        return sub, members.index(root)

    # ---------------------------------------------------------------- lifetime
    def __enter__(self):
        if self._spmd_left_out:
            return None                   # max_workers left this rank out: nothing to serve
        farm = self._spmd_farm
        if farm is not None:
            workers = _context.split_workers(farm)
            with _context.serving_on(not farm.is_master), _context.comm_workers_on(workers):
                farm.__enter__()          # workers serve here until the master is done
            if not farm.is_master:
                self._free_spmd_comm()
                return None
            self._pool = Pool(farm, own=True)
        return self

    def __exit__(self, exc_type, exc, tb):
        farm = self._spmd_farm
        if self._spmd_left_out:
            return False
        if farm is None or farm.is_master:
            self.shutdown(wait=True)
        return False

    def _free_spmd_comm(self) -> None:
        comm, self._spmd_comm = self._spmd_comm, None
        if comm is not None:
            try:
                comm.Free()
            except MPI.Exception:   # a member died under ULFM
                pass

    def bootup(self, wait: bool = True):
        """Start the executor's resources now rather than at the first submission."""
        if self._shutdown:
            raise RuntimeError("cannot bootup after shutdown")
        self._bootstrap()
        return self

    @property
    def num_workers(self) -> int:
        """Number of workers (0 once the executor is shut down or broken)."""
        if self._broken or self._shutdown:
            return 0
        return self._bootstrap().num_workers

    @property
    def _max_workers(self) -> int:
        return self.num_workers

    # ---------------------------------------------------------------- API
    def submit(self, fn, /, *args, ranks: int | None = None, **kwargs) -> cf.Future:
        """Schedule ``fn(*args, **kwargs)`` and return a Future.

        pyfw extension: ``ranks=k`` runs the call on a group of ``k`` workers as
        ``fn(comm, *args, **kwargs)``, ``comm`` the group's communicator; the result is
        what the group's rank 0 returns (docs/ensembles.md). ``ranks`` is therefore not
        passed on to ``fn``."""
        if ranks is not None and (not isinstance(ranks, int) or ranks < 1):
            raise ValueError(f"ranks must be a positive int, got {ranks!r}")
        pool = self._bootstrap(check=True)
        with pool.lock:
            self._check_open("submit")
            fut = cf.Future()
            self._job.pending.append((fut, fn, args, kwargs, ranks))
            pool.wakeup.notify()
        return fut

    def map(self, fn, *iterables, timeout=None, chunksize=1, buffersize=None,
            unordered=False, ranks=None):
        """Like ``map(fn, *iterables)``, run on the workers; same arguments as mpi4py's.

        ``chunksize=1`` (the default) lets pyfw choose chunk sizes (adaptive, pipelined);
        another value fixes them. Results come in order, or as they complete with
        ``unordered=True``. ``buffersize`` bounds how many tasks may run ahead of the
        results consumed; without it pyfw bounds the lead to 65,536 items (lifted at
        ``shutdown`` so that an unconsumed map still runs to the end, as in mpi4py).
        pyfw extension: ``ranks=k`` runs each call on a group of ``k`` workers as
        ``fn(comm, *items)`` (docs/ensembles.md).
        """
        return self._map(fn, iterables, False, timeout, chunksize, buffersize, unordered,
                         ranks)

    def starmap(self, fn, iterable, timeout=None, chunksize=1, buffersize=None,
                unordered=False, ranks=None):
        """``fn(*args)`` for each ``args`` of ``iterable`` (options as in :meth:`map`)."""
        return self._map(fn, (iterable,), True, timeout, chunksize, buffersize, unordered,
                         ranks)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting work; with ``cancel_futures`` cancel what has not started; with
        ``wait`` return once everything started has finished. Safe to call again."""
        pool = self._pool
        if pool is None:
            self._shutdown = True
            return
        with pool.lock:
            self._shutdown = True
            job = self._job
            if job is not None:
                if cancel_futures:
                    job.cancel_pending()
                job.closed = True
            for m in self._maps:
                if cancel_futures:
                    m.cancel()
                m.unbounded = True
            pool.wakeup.notify()
        if self._spmd_farm is not None or pool.own:
            pool.close(wait)
        elif wait:
            pool.wait_for([self._job] + self._maps)
        if wait:
            self._pool = None   # as mpi4py: a shut-down executor holds no resources
            if self._finalizer is not None:
                self._finalizer.detach()
            if self._spmd_farm is not None:
                self._free_spmd_comm()

    # ---------------------------------------------------------------- internals
    def _bootstrap(self, check: bool = False) -> Pool:
        with self._bootlock:
            if check:
                self._check_open("submit")
            pool = self._pool
            if pool is None and self._spmd_farm is not None:
                raise RuntimeError("an Executor over several ranks (comm=...) works inside "
                                   "`with` on every rank: `with Executor(comm=comm) as ex: "
                                   "if ex is not None: ...`")
            if self._spmd_left_out:
                raise RuntimeError("max_workers left this rank out of the executor's "
                                   "workers: use the executor where `with` gave one")
            if pool is None:
                pool = _context.shared_pool()
                if pool is not None:   # classes pickled on workers name the main module so
                    sys.modules.setdefault(WORKER_RUN_NAME, sys.modules["__main__"])
                if pool is not None:
                    # its own farm over max_workers of the shared workers, if they can spare
                    # them (see _subset); else it shares them all, as in mpi4py
                    if self._subset and reserve(self._max_workers_asked, pool.num_workers):
                        pool = Pool(None, own=True, start=functools.partial(
                            SubsetFarm, self._max_workers_asked, _submit_shared,
                            self._farm_options))
                elif self._in_process or _context.serving:
                    # asked for, or a task on a worker made an executor: no spawning there
                    pool = Pool(Farm(MPI.COMM_SELF, **self._farm_options), own=True)
                else:
                    n = self._max_workers_asked or max_workers_default()
                    pool = Pool(None, own=True, start=functools.partial(
                        SpawnedFarm, n, self._spawn_options, self._farm_options))
                self._pool = pool
            if self._job is None:
                self._job = SubmitJob(self, self._setup if self._setup.needed else None)
                with pool.lock:
                    pool.add(self._job)
                self._finalizer = weakref.finalize(self, _dropped, pool, self._job)
                self._finalizer.atexit = False   # at exit close_own_pools does it, waiting
            return pool

    def _check_open(self, what: str) -> None:
        if self._broken:
            raise cf.BrokenExecutor(self._broken)
        if self._shutdown:
            raise RuntimeError(f"cannot {what} after shutdown")

    def _mark_broken(self, err) -> None:
        """An initializer failed (pool thread): break this executor, as mpi4py does."""
        with self._job.lock:
            if self._broken is None:
                self._broken = "initializer failed"
                self._broken_cause = user_exception(err)
            if self._job is not None:
                self._job.fail_pending(self._broken_error())
            for m in self._maps:
                m.cancel()

    def _broken_error(self) -> cf.BrokenExecutor:
        err = cf.BrokenExecutor(self._broken)
        err.__cause__ = self._broken_cause
        return err

    def _map(self, fn, iterables, star, timeout, chunksize, buffersize, unordered,
             ranks=None):
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        if buffersize is not None:
            if not isinstance(buffersize, int):
                raise TypeError("buffersize must be an integer or None")
            if buffersize < 1:
                raise ValueError("buffersize must be None or > 0")
            if unordered:
                raise ValueError("buffersize must be None if unordered")
        deadline = None if timeout is None else time.monotonic() + timeout
        if not iterables:
            return iter(())
        lens = [len(it) for it in iterables if hasattr(it, "__len__")]
        total = min(lens) if len(lens) == len(iterables) else None
        fixed = None if chunksize == 1 else int(chunksize)
        if unordered:
            window = None
        else:
            window = DEFAULT_WINDOW if buffersize is None else buffersize * (fixed or 1)
        call = fn if not self._setup.needed else MapCall(self._setup, fn)
        pool = self._bootstrap(check=True)
        job = MapJob(self, call, iterables, star or len(iterables) > 1, total, fixed, window,
                     ranks)
        with pool.lock:
            self._check_open("submit")
            self._maps = [m for m in self._maps if not m.done]
            self._maps.append(job)
            pool.add(job)
        return results(job, unordered, deadline)
