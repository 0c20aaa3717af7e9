"""The user-facing master-worker API: :class:`Farm` and :class:`Round`."""
from __future__ import annotations

import json
import operator
import sys
import time
from typing import Callable, Iterable, Iterator

from .. import observe
from ..comm import Comm, bound_finalize
from ..errors import ConfigurationError, FarmBroken
from .engine import Engine
from .rounds import RoundState
from .serial import SerialEngine
from .journal import Journal
from .ordering import DEFAULT_WINDOW, InOrder, with_errors
from .policies import Pipeline, make_policy
from .progress import Progress, format_summary
from .task import Batch, Done, Task
from . import auto
from .hierarchy import HIERARCHIES, layout, serve_submaster
from .worker import Stop, Stopped, WorkerLoop, serve, yield_to_schedulers

__all__ = ["Farm", "Round", "Batch"]

_ON_ERROR = ("raise", "collect")


class Farm:
    """An adaptive self-scheduling master-worker pool over an MPI communicator.

    Every rank constructs the farm with the same arguments (they are validated on every
    rank before any message is sent); the ``master`` rank (0) hands out work, the others
    serve inside ``with`` until the master leaves it::

        with Farm(comm) as farm:
            if farm.is_master:
                for result in farm.map(tasks): ...

    With a single process (no mpiexec) the master runs the tasks itself: same interface,
    same results.

    Parameters
    ----------
    comm: mpi4py communicator or :class:`pyfw.comm.Comm` (default ``COMM_WORLD``); the farm
        works on a private duplicate.
    policy: chunking policy name (``adaptive`` default, ``static``, ``ss``, ``gss``, ``tss``,
        ``fac2``, ``awf``, ``af``) or a policy object; ``map(chunksize=k)`` forces k.
    setup: ``setup(ctx, *setup_args)`` runs once on every worker before its first task (load
        tables into ``ctx.state``); if it raises, the farm is broken and says where.
    task_timeout: seconds a task may run before a copy is sent to another worker (the first
        result wins); ``None`` disables it.
    max_attempts: a task lost this many times (worker death or timeout) is quarantined and
        reported as :class:`pyfw.TaskQuarantined`.
    retries: how many times a task that raised is run again before its error is reported.
    on_error: ``"raise"`` (the first task error cancels the round and is raised by the
        iterator) or ``"collect"`` (errors are yielded in place of results).
    pipeline_depth: force this many chunks in flight per worker (default: automatic).
    journal: path of an HDF5 result journal; finished tasks are recorded, and a restarted
        job skips them (their results are read back from the journal).
    progress: show a progress bar on the master (default: when stderr is a terminal).
    summary: print the per-worker summary when the farm closes.
    dashboard: serve a live view of the job from the master (see :mod:`pyfw.observe`):
        a port, ``"[HOST:]PORT"`` (only 127.0.0.1 unless a host is given; any other
        address requires a token), ``True`` (port 8787), ``False``, or a
        :class:`pyfw.dashboard.Dashboard`; default ``$PYFW_DASHBOARD`` (``pyfw-run
        --dashboard``). ``$PYFW_REPORT`` names a static HTML report written at the end.
    hierarchy: ``"flat"`` (default: the master talks to every worker), ``"node"`` (one
        sub-master per other node, found with ``COMM_TYPE_SHARED``, pulls work for its node
        and self-schedules its workers; see :mod:`pyfw.farm.hierarchy`) or ``"auto"``
        (on two or more nodes, ``node`` where this program's flat master, measured on an
        earlier run and kept in ``$PYFW_FARM_CACHE``, would be busy 70 % of the time or
        more at this worker count; unmeasured, from 256 workers; see
        :mod:`pyfw.farm.auto`). ``farm.hierarchy`` says which was used,
        ``farm.hierarchy_reason`` why. Every promise of the flat farm holds in both.
    """

    def __init__(self, comm=None, *, policy="adaptive", master: int = 0,
                 setup: Callable | None = None, setup_args: tuple = (),
                 task_timeout: float | None = None, max_attempts: int = 3, retries: int = 0,
                 on_error: str = "raise", pipeline_depth: int | None = None,
                 max_depth: int = 32, journal: str | None = None, progress: bool | None = None,
                 summary: bool = False, tail_duplication: bool = True, dashboard=None,
                 hierarchy: str = "flat"):
        base = comm if isinstance(comm, Comm) else Comm(comm)
        # validate identically on every rank before the first message
        self.policy = make_policy(policy)
        if on_error not in _ON_ERROR:
            raise ConfigurationError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")
        if not 0 <= master < base.size:
            raise ConfigurationError(f"master rank {master} is not in a communicator of "
                                     f"size {base.size}")
        if task_timeout is not None and not task_timeout > 0:
            raise ConfigurationError(f"task_timeout must be > 0 seconds, got {task_timeout}")
        if setup is not None and not callable(setup):
            raise ConfigurationError(f"setup must be callable, got {type(setup).__name__}")
        dashboard = observe.check(dashboard)
        pipeline = Pipeline(max_depth=max_depth, fixed=pipeline_depth)
        if hierarchy not in HIERARCHIES:
            raise ConfigurationError(f"hierarchy must be one of {HIERARCHIES}, got "
                                     f"{hierarchy!r}")
        self.comm = base.dup() if base.size > 1 else base
        self.hierarchy, self._layout, self._node = "flat", None, None
        self.hierarchy_reason = "asked for" if hierarchy == "flat" else "two ranks or fewer"
        self._auto = hierarchy == "auto"
        if hierarchy != "flat" and self.comm.size > 2:
            self.hierarchy, self.hierarchy_reason, self._layout, self._node = layout(
                self.comm, master, hierarchy)
        self._engine_options = dict(policy=policy, pipeline=pipeline, max_attempts=max_attempts,
                                    tail_duplication=tail_duplication)
        self.master = master
        self.rank = self.comm.rank
        self.size = self.comm.size
        self.is_master = self.rank == master
        self.on_error = on_error
        self._setup, self._setup_args = setup, setup_args
        self._closed = False
        self._progress_flag = progress
        self._summary = summary
        self._journal_path = journal
        self.journal = None
        self.engine = None
        if not self.is_master:
            return
        if self.size == 1:
            self.engine = SerialEngine(self.comm, setup=setup, setup_args=setup_args,
                                       retries=retries)
        else:
            self.engine = Engine(self.comm, master, pipeline, task_timeout=task_timeout,
                                 max_attempts=max_attempts, retries=retries,
                                 tail_duplication=tail_duplication,
                                 workers=self._layout.top_widths() if self._layout else None)
            if self._layout is not None:   # groups of direct workers only
                lay = self._layout
                self.engine.groups.eligible = lambda w: lay.role(w.rank) == "worker"
        if journal is not None:
            self.journal = Journal(journal)
        self._ticker = None
        channel = observe.attach(dashboard, "farm", f"farm ({self.size} ranks)")
        if channel is not None:
            from .snapshot import farm_snapshot   # only with a dashboard (dataclasses)
            self._ticker = observe.Ticker(channel, farm_snapshot)
            self.engine.observer = self._ticker

    # ---------------------------------------------------------------- lifetime
    def __enter__(self) -> "Farm":
        if not self.is_master:
            stopped = self._serve()
            self._closed = True
            if stopped.why is Stop.MASTER_FAILED:
                raise FarmBroken(f"rank {self.rank}: the farm stopped because the master "
                                 f"failed ({stopped.detail})")
            if stopped.why is Stop.MASTER_ERROR:
                raise FarmBroken(f"rank {self.rank}: the farm stopped because the master's "
                                 f"program raised: {stopped.detail}")
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.is_master:
            reason = None
            if exc is not None:
                reason = f"{exc_type.__name__}: {exc}"
            self.close(reason)

    def _serve(self) -> Stopped:
        """A worker's part: serve the master, a node's sub-master, or serve as one."""
        role = "worker" if self._layout is None else self._layout.role(self.rank)
        if self._layout is not None:
            # not in two-level farms: no gain measured there (yield_to_schedulers)
            return self._serve_as(role)
        with yield_to_schedulers():
            return self._serve_as(role)

    def _serve_as(self, role: str) -> Stopped:
        if role == "worker":
            return serve(self.comm, self.master, self._setup, self._setup_args)
        node = self._node
        try:
            if role == "submaster":
                return serve_submaster(self.comm, self.master, node, self._node_ranks(),
                                       self._setup, self._setup_args, **self._engine_options)
            loop = WorkerLoop(node, 0)
            stopped = serve(node, 0, self._setup, self._setup_args, worker=loop)
        finally:
            node.free()
        if stopped.why is not Stop.MASTER_FAILED:
            return stopped
        # the sub-master died, the master goes on: serve it directly from now on, with the
        # state the setup loaded (the master re-runs the sub-master's lost chunks)
        loop.ctx.rank, loop.ctx.size = self.rank, self.size
        return serve(self.comm, self.master, ctx=loop.ctx)

    def _node_ranks(self) -> list[int]:
        """Farm rank of every rank of this node's communicator (node ranks follow them)."""
        lay = self._layout
        return lay.members[lay.node_of[self.rank]]

    @property
    def closed(self) -> bool:
        """True once the farm has been closed (its workers released)."""
        return self._closed

    def close(self, reason: str | None = None) -> None:
        """Release the workers (they leave their ``with`` block). Idempotent."""
        if self._closed or not self.is_master:
            return
        self._closed = True
        try:
            self.engine.shutdown(reason, self._orphans())
        finally:
            if self._ticker is not None:
                self._ticker.close(self.engine)
            if self.journal is not None:
                self.journal.close()
            peak = getattr(self.engine, "master_peak", None)
            if self._auto and self.hierarchy == "flat" and peak is not None:
                auto.remember(peak, self.size - 1)   # what the next auto farm decides by
            if self._summary:
                print(format_summary(self.stats()), file=sys.stderr, flush=True)

    def _orphans(self) -> list[int]:
        """Node workers that have not come to serve the master: told to stop too, so one
        whose sub-master dies (even unseen yet, as the master closes) finds the stop
        waiting when it comes; the others leave with their sub-master and never read it."""
        lay, engine = self._layout, self.engine
        if lay is None:
            return []
        return [r for node in sorted(lay.submasters) for r in lay.members[node][1:]
                if r not in engine.workers]

    @property
    def num_workers(self) -> int:
        """Workers currently alive (1 in serial mode: the master itself)."""
        if self.size == 1:
            return 1
        if self.engine is None:
            return self.size - 1
        return len(self.engine.alive_workers())

    # ---------------------------------------------------------------- work
    def open(self, tasks_or_fn, *iterables, star: bool = False, total: int | None = None,
             name: str | None = None, policy=None, chunksize: int | None = None,
             window: int | None = None, tail_duplication: bool | None = None,
             eager: bool = False, ranks=None, exclusive: bool = False) -> "Round":
        """Start a round and return at once: the non-blocking face of the farm.

        The caller drives the farm with :meth:`step`, collects results with
        :meth:`Round.drain` and ends the round with :meth:`Round.close`; the farm itself
        starts no thread. ``star=True`` calls ``fn(*item)``; ``total`` (the number of items,
        when the source has no ``len``) sizes the chunks; ``window`` bounds dispatch to
        ``window`` items past the last one acknowledged with :meth:`Round.release`.
        ``eager=True`` sends this round's chunks as soon as a worker's pipeline depth has
        room, instead of when its queued work runs low: for a caller that bounds the tasks
        it keeps open itself, with task times the farm cannot predict (a worker that
        finishes early would otherwise wait a round trip for its next task). ``ranks``:
        multi-rank tasks, as in :meth:`map`. ``exclusive=True``: each task holds its
        rank(s) alone while it runs, a single-rank one too (nothing is queued behind it on
        its worker): for tasks that last as long as something else does. (In a two-level
        farm a single-rank one sent behind a sub-master is an ordinary task of its node.)
        """
        state = self._start(tasks_or_fn, iterables, name, policy, chunksize, window, star,
                            total, ranks)
        if exclusive:
            state.hold()
        if tail_duplication is not None:
            state.tail_duplication = tail_duplication
        state.eager = bool(eager)
        return Round(state, self.engine, journal=self.journal, on_error=self.on_error,
                     progress=self._progress_flag, is_closed=lambda: self._closed,
                     on_end=self._round_ended)

    def _round_ended(self) -> None:
        if self._ticker is not None:
            self._ticker.flush(self.engine)
        if self.journal is not None:
            self.journal.flush()

    @property
    def in_flight(self) -> int:
        """Chunks handed out and not yet answered (cancelled rounds' included); 0 off the
        master."""
        return len(self.engine.chunks) if self.is_master else 0

    def step(self) -> bool:
        """One turn of the dispatch loop: take in arrived results, hand out work (sleeping a
        capped backoff when nothing happened). True if anything happened. Raises
        :class:`pyfw.FarmBroken` when the farm cannot go on."""
        self._require_master("step")
        return self.engine.step()

    def map(self, tasks_or_fn, *iterables, unordered: bool = False,
            chunksize: int | None = None, name: str | None = None, policy=None,
            window: int | None = None, total: int | None = None, ranks=None) -> Iterator:
        """Run tasks and yield their results.

        ``map(tasks)`` runs Task objects; ``map(fn, xs[, ys...])`` applies a picklable function
        (several iterables are zipped, as in the builtin ``map``). Results come in task order;
        with ``unordered=True`` they come as ``(index, result)`` pairs as soon as they arrive.
        In ordered mode at most ``window`` results (default 65536) wait for an earlier one,
        which bounds the master's memory on huge or lazy task streams; the chunks of a map
        that outgrows its window take at most ``window / (4 x workers)`` tasks each, so
        that none holds up the others. ``total``: the number
        of tasks when the source has no ``len`` (a generator), for the progress line, the
        dashboard's "left" and ETA, and the first chunk sizes (``operator.length_hint`` is
        asked otherwise).

        ``ranks=k`` makes every task an MPI-parallel one: it runs on a group of ``k``
        workers, ``fn(comm, item)`` on each of them with ``comm`` the group's communicator
        (size ``k``), and its result is what the group's rank 0 returns. ``ranks`` may be
        a function of the item (tasks of several widths in one round); Task items may carry
        a ``ranks`` attribute instead and see the communicator as ``ctx.comm``. Groups are
        formed from idle workers, inside one node where they fit (docs/farm.md, "Tasks on
        several ranks").
        """
        return self._map(tasks_or_fn, iterables, unordered, chunksize, name, policy, window,
                         total=total, ranks=ranks)

    def starmap(self, fn, iterable, *, unordered: bool = False, chunksize: int | None = None,
                name: str | None = None, policy=None, window: int | None = None,
                total: int | None = None, ranks=None) -> Iterator:
        """``fn(*args)`` for each ``args`` tuple of ``iterable`` (options as in :meth:`map`;
        with ``ranks``, ``fn(comm, *args)``)."""
        return self._map(fn, (iterable,), unordered, chunksize, name, policy, window,
                         star=True, total=total, ranks=ranks)

    def _map(self, tasks_or_fn, iterables, unordered, chunksize, name, policy, window,
             star=False, total=None, ranks=None) -> Iterator:
        self._require_master("map")
        window = None if unordered else (window or DEFAULT_WINDOW)
        rnd = self.open(tasks_or_fn, *iterables, star=star, total=total, name=name,
                        policy=policy, chunksize=chunksize, window=window, ranks=ranks)
        return self._unordered(rnd) if unordered else self._ordered(rnd)

    def cancel_pending(self) -> None:
        """Cancel every active round (pending and running tasks)."""
        self._require_master("cancel_pending")
        for rnd in list(self.engine.rounds.values()):
            self.engine.cancel_round(rnd)

    # ---------------------------------------------------------------- reporting
    def stats(self) -> dict:
        """End-of-run summary: per-worker tasks, busy/idle seconds, bytes, plus run totals.

        ``tasks`` counts distinct tasks completed; ``executions`` counts task runs on workers,
        which is larger when straggler copies (``duplicates``) or retries (``failures``:
        failed attempts) ran; ``from_journal``: results a resumed run took from its journal
        instead of running them (none of them in ``tasks``). A sub-master's row counts its
        node's tasks (``computed_tasks``: those it ran itself).
        """
        self._require_master("stats", open_only=False)
        eng = self.engine
        workers = eng.worker_summary()
        elapsed = time.perf_counter() - eng.started
        out = {"elapsed_s": round(elapsed, 6), "ranks": self.size,
               "workers": workers, "tasks": eng.completed,
               "executions": sum(w["computed_tasks"] if w.get("role") == "submaster"
                                 else w["tasks"] for w in workers),
               "hierarchy": self.hierarchy, "hierarchy_reason": self.hierarchy_reason,
               "duplicates": eng.duplicates, "failures": eng.failures,
               "from_journal": self.journal.resumed if self.journal is not None else 0,
               "quarantined": [str(q) for q in eng.quarantined],
               "master_idle_s": round(eng.idle_master, 6),
               "master_load": getattr(eng, "master_load", None)}
        if eng.pipeline is not None:
            p = eng.pipeline
            out["pipeline"] = {"rtt_s": p.rtt, "factor": p.factor, "settled": p.settled,
                               "history": p.history, "links": p.forecasts()}
        return out

    def write_stats(self, path: str) -> None:
        """Write :meth:`stats` as JSON."""
        with open(path, "w") as fh:
            json.dump(self.stats(), fh, indent=1)

    # ---------------------------------------------------------------- internals
    def _require_master(self, what: str, open_only: bool = True) -> None:
        if not self.is_master:
            raise RuntimeError(f"Farm.{what}() called on worker rank {self.rank}: guard master "
                               f"code with `if farm.is_master:`")
        if open_only and self._closed:
            raise FarmBroken("the farm is closed")

    def _start(self, tasks_or_fn, iterables, name, policy, chunksize, window,
               star=False, total=None, ranks=None) -> RoundState:
        self._require_master("round")
        if iterables:
            fn = tasks_or_fn
            if not callable(fn):
                raise TypeError(f"map(fn, items): fn must be callable, got "
                                f"{type(fn).__name__}")
            if len(iterables) == 1:
                source = iterables[0]
            else:
                source, star = zip(*iterables), True
            if total is None:
                hints = [operator.length_hint(it, -1) for it in iterables]
                total = min(hints) if hints and min(hints) >= 0 else None
        else:
            fn = None
            if callable(tasks_or_fn) and not isinstance(tasks_or_fn, Task):
                raise TypeError("map(fn) needs the items too: farm.map(fn, items)")
            if total is None:
                hint = operator.length_hint(tasks_or_fn, -1)
                total = hint if hint >= 0 else None
            source = _checked_tasks(tasks_or_fn)
        pol = make_policy(policy if policy is not None else self.policy, chunksize)
        rname = name
        skip = None
        if self.journal is not None:
            rname = name or f"round-{self.journal.next_round()}"
            skip = self.journal.completed(rname)
        return self.engine.start_round(source, fn, star, total, pol, rname, window, skip,
                                       ranks)

    def _ordered(self, rnd: "Round"):
        order = InOrder()
        for ids, values, errors, _ in rnd.records():
            yield from order.feed(ids, with_errors(values, errors))
            rnd.release(order.next)

    def _unordered(self, rnd: "Round"):
        for ids, values, errors, _ in rnd.records():
            yield from zip(ids, with_errors(values, errors))


class Round:
    """One wave of tasks in flight. Iterate it for :class:`Done` items (completion order).

    Made by :meth:`Farm.open` with what it works with: the round's ``state``, the ``engine``
    that runs it, the farm's ``journal`` (every result is recorded there once, when it is
    taken from the round), ``on_error``, the ``progress`` flag, ``is_closed`` (the farm has
    released its workers) and ``on_end`` (called once the round is over).
    """

    def __init__(self, state: RoundState, engine, *, journal=None, on_error: str = "raise",
                 progress: bool | None = None, is_closed: Callable[[], bool] = lambda: False,
                 on_end: Callable[[], None] | None = None):
        self.state, self.engine, self.journal = state, engine, journal
        self.on_error, self.progress = on_error, progress
        self._is_closed, self._on_end = is_closed, on_end
        self._iter = None

    @property
    def name(self) -> str:
        """The round's name (in progress lines, stats and the journal)."""
        return self.state.name

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called or the round was cancelled by an error."""
        return self.state.cancelled

    def records(self) -> Iterator[tuple]:
        """Result records ``(ids, values, errors, rank)`` as they arrive, driving the engine
        until the round is finished; with ``on_error="raise"`` the first task error is
        raised here. Leaving early cancels the round. One iterator per round."""
        if self._iter is None:
            # the iterator holds no reference to this Round: when the Round is dropped,
            # the iterator goes with it at once and its clean-up runs (no cycle for the GC)
            self._iter = _drive(self.state, self.engine, self.journal, self.on_error,
                                self.progress, self._on_end)
        return self._iter

    def __iter__(self) -> Iterator[Done]:
        for ids, values, errors, rank in self.records():
            if errors is None:
                for tid, v in zip(ids, values):
                    yield Done(tid, v, None, rank)
            else:  # with on_error="raise" the records iterator has raised already
                for pos, (tid, v) in enumerate(zip(ids, values)):
                    err = errors.get(pos)
                    yield Done(tid, v, err, rank, 1 if err is None else err.attempts)

    def results(self) -> list:
        """All results in task order (errors in place of results with on_error='collect')."""
        out = {}
        for d in self:
            out[d.index] = d.error if d.error is not None else d.result
        return [out[i] for i in sorted(out)]

    def cancel(self, wait: bool = True) -> None:
        """Cancel pending and running tasks; with ``wait``, return once workers are idle."""
        self.engine.cancel_round(self.state, wait=wait)
        self.records().close()

    # ------------------------------------------- non-blocking use (see Farm.open)
    @property
    def finished(self) -> bool:
        """True once every task has a result (or error), or the round was cancelled."""
        return self.state.finished

    def drain(self) -> list[Batch]:
        """The results that have arrived since the last call, without waiting: a list of
        :class:`Batch` (errors are in the batches, never raised). Needs :meth:`Farm.step`
        to be called for results to arrive."""
        return [Batch(*rec) for rec in _take(self.state, self.journal)]

    def release(self, upto: int | None) -> None:
        """Results below index ``upto`` have been consumed: dispatch may run ``window``
        items past it. ``None`` lifts the window for good."""
        if upto is None:
            self.state.window = None
        else:
            self.state.window_base = upto

    def close(self) -> None:
        """End the round: unfinished tasks are cancelled (without waiting for running ones)
        and the farm forgets it. Idempotent."""
        state, engine = self.state, self.engine
        if not state.finished and not self._is_closed():
            engine.cancel_round(state, wait=False)
        engine.end_round(state)


def _take(state: RoundState, journal) -> Iterator[tuple]:
    """The result records that have arrived in round ``state``, each journaled as it is
    taken: the one place where a result is written to the journal."""
    outputs, name = state.outputs, state.name
    while outputs:
        rec = outputs.popleft()
        if journal is not None:
            journal.record(name, rec)
        yield rec


def _drive(rnd: RoundState, engine, journal, on_error, progress_flag, on_end):
    """Records of ``rnd`` as they arrive, stepping ``engine`` until the round is finished
    (see :meth:`Round.records`); an abandoned round is cancelled."""
    progress = Progress(rnd.name, rnd.total, progress_flag)
    raising = on_error == "raise"
    try:
        while True:
            for rec in _take(rnd, journal):
                progress.update(len(rec[0]))
                if rec[2] and raising:
                    raise rec[2][min(rec[2])]
                yield rec
            if rnd.finished:
                break
            engine.step()
    finally:
        progress.close()
        if not rnd.finished and not rnd.cancelled:
            engine.cancel_round(rnd)
        engine.end_round(rnd)
        if on_end is not None:
            on_end()


def _checked_tasks(tasks: Iterable) -> Iterator:
    for i, t in enumerate(tasks):
        if not isinstance(t, Task):
            raise TypeError(f"item {i} is a {type(t).__name__}, not a pyfw.Task: subclass "
                            f"pyfw.Task, or pass a function: farm.map(fn, items)")
        yield t
