"""The two-level farm (private): one sub-master per node between the master and the node's
workers (``Farm(hierarchy="node")``).

Roles, found collectively when the farm is built (:func:`layout`):

* the **master** drives an :class:`~pyfw.farm.engine.Engine` whose workers are the other
  ranks of its own node (served directly: no extra hop on shared memory) and one
  **sub-master** per other node (its lowest rank); a node with a single rank is a direct
  worker;
* a **sub-master** (:class:`SubMaster`) is a worker to the master -- it pulls chunks, which
  the master's policy sizes by the node's aggregate speed and the pipelining rule sizes by
  the link to the top -- and a master to its node: each chunk becomes a round of its own
  engine (the same scheduler, policies, failure handling), self-scheduled over the node's
  workers and itself (it runs ~2 ms pieces between scheduling turns, so no core of the node
  idles), whose results go back in batches (partial replies every ``PARTIAL_EVERY``);
* a **node worker** serves its sub-master over the node's communicator, as any worker.

Failures: a node worker that dies is handled inside its node (its tasks run again on the
node's other workers); a sub-master that dies is a dead worker to the master, whose chunks
run again elsewhere (the master's bookkeeping of finished ids keeps every result exactly
once); its node's workers see their master gone and leave. The master's statistics list
every worker: sub-masters forward their node's per-worker figures (``("substats", rows)``).

Wire (beyond :mod:`pyfw.farm._protocol`): sub-master -> master, tag CTRL:
``("substats", [row, ...], own)`` with rows as in ``Engine.worker_summary`` plus ``via``,
and ``own`` the tasks and busy seconds the sub-master computed itself. A task's
:class:`~pyfw.farm._protocol.ErrorInfo` carries ``rank``, the worker that raised it.
"""
from __future__ import annotations

import os
import pickle
import signal
import time

from mpi4py import MPI

from ..comm import Backoff, Comm
from ..errors import ConfigurationError, FarmBroken
from . import _protocol as P
from . import auto
from .engine import Engine
from .policies import make_policy
from ._protocol import error_info
from .task import run_items
from .worker import Stopped, WorkerLoop, serve

__all__ = ["HIERARCHIES", "layout", "Layout", "SubMaster", "AUTO_MIN_WORKERS"]

HIERARCHIES = ("flat", "node", "auto")

#: ``hierarchy="auto"`` on a program whose flat master was never measured (see
#: :mod:`pyfw.farm.auto`) goes two-level from this many workers on >= 2 nodes: a flat master
#: spends 4.5-28 us of CPU per result on 1 ms tasks at 16-256 ranks (benchmarks/farm_scale.py,
#: docs/hierarchy.md), so 1 ms tasks saturate it from about 36-220 workers, longer ones later
AUTO_MIN_WORKERS = 256

#: a sub-master computes too, in chunks of about this long between its scheduling turns
LOCAL_CHUNK_S = 2e-3

#: testing: group ranks into "nodes" of this many consecutive ranks instead of by shared
#: memory (one machine then shows the two-level layout)
NODE_SIZE_ENV = "PYFW_FARM_NODE_SIZE"


class Layout:
    """Who does what in a two-level farm (the same on every rank)."""

    def __init__(self, node_of: list[int], master: int):
        self.node_of = node_of                         # farm rank -> node id (its lowest rank)
        self.master = master
        members: dict[int, list[int]] = {}
        for r, node in enumerate(node_of):
            members.setdefault(node, []).append(r)
        self.members = members
        home = node_of[master]
        self.submasters = {node: ranks[0] for node, ranks in members.items()
                           if node != home and len(ranks) > 1}
        self.top_workers = sorted(
            [r for r in members[home] if r != master]
            + [ranks[0] for node, ranks in members.items() if node != home])

    def top_widths(self) -> dict[int, int]:
        """The master's workers, each with the ranks it stands for (a sub-master: its
        node's, itself included; a direct worker: 1)."""
        return {r: len(self.members[self.node_of[r]]) if r in self.submasters.values()
                else 1 for r in self.top_workers}

    def role(self, rank: int) -> str:
        """The role of farm rank ``rank``: master, worker, submaster or node-worker."""
        if rank == self.master:
            return "master"
        node = self.node_of[rank]
        if node not in self.submasters:
            return "worker"
        return "submaster" if self.submasters[node] == rank else "node-worker"


def _node_ids(mpi: MPI.Intracomm) -> list[int]:
    """Node id (lowest farm rank on the same node) of every rank; collective."""
    size_env = os.environ.get(NODE_SIZE_ENV)
    rank = mpi.Get_rank()
    if size_env:
        k = max(1, int(size_env))
        return [(r // k) * k for r in range(mpi.Get_size())]
    shared = mpi.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    lowest = shared.allreduce(rank, op=MPI.MIN)
    shared.Free()
    return mpi.allgather(lowest)


def resolve(hierarchy: str, node_of: list[int], master: int,
            record: dict | None = None) -> tuple[str, str]:
    """``(flat or node, why)`` for a requested ``hierarchy`` on this layout; ``auto`` decides
    by ``record``, the program's measured flat-master load (:func:`pyfw.farm.auto.choose`)."""
    if hierarchy not in HIERARCHIES:
        raise ConfigurationError(f"hierarchy must be one of {HIERARCHIES}, got {hierarchy!r}")
    if hierarchy != "auto":
        return hierarchy, "asked for"
    return auto.choose(len(node_of) - 1, len(set(node_of)), record, AUTO_MIN_WORKERS)


def layout(comm: Comm, master: int, hierarchy: str):
    """Collective: ``(mode, why, Layout or None, node Comm or None)`` for this rank."""
    node_of = _node_ids(comm.mpi)
    record = None
    if hierarchy == "auto":   # the master reads the record, so every rank decides alike
        record = comm.mpi.bcast(auto.lookup() if comm.rank == master else None, root=master)
    mode, why = resolve(hierarchy, node_of, master, record)
    if mode == "flat":
        return mode, why, None, None
    lay = Layout(node_of, master)
    role = lay.role(comm.rank)
    color = lay.node_of[comm.rank] if role in ("submaster", "node-worker") else MPI.UNDEFINED
    node_mpi = comm.mpi.Split(color, comm.rank)
    node = Comm(node_mpi) if node_mpi != MPI.COMM_NULL else None
    return mode, why, lay, node


class _Forward:
    """One chunk of the master's, running as a round of the node's engine."""

    __slots__ = ("cid", "rid", "ids", "t_got", "rnd", "values", "errors", "pending",
                 "t_part", "sent")

    def __init__(self, cid, rid, ids, t_got, rnd):
        self.cid, self.rid, self.ids, self.t_got, self.rnd = cid, rid, list(ids), t_got, rnd
        self.pending: list[tuple[int, object, tuple | None]] = []   # (pos, value, info)
        self.t_part = t_got
        self.sent = 0


class SubMaster(WorkerLoop):
    """A node's sub-master: a worker to the master over ``top``, a master to its node."""

    STATS_EVERY = 0.5

    def __init__(self, top: Comm, master: int, node: Comm, world_of: list[int], *,
                 policy="adaptive", pipeline=None, max_attempts=3, tail_duplication=True):
        super().__init__(top, master)
        self.node = node
        self.world_of = world_of                  # node rank -> farm rank
        self.policy = policy
        self.engine = Engine(node, 0, pipeline, max_attempts=max_attempts,
                             tail_duplication=tail_duplication)
        self.engine.recovery.label = lambda r: f"{world_of[r]} (behind sub-master {top.rank})"
        self.forwards: dict[int, _Forward] = {}
        self._stats_at = 0.0
        self.local_k = 1          # tasks per chunk run here (grown to ~LOCAL_CHUNK_S)
        self.local_per = None     # the last piece's time per task here (s)
        self.local_tasks, self.local_busy = 0, 0.0
        # master round -> the node's task times in it, shared by the rounds its chunks
        # become (a chunk is a round here: without this every chunk would start unmeasured,
        # one task per worker); the last few rounds only
        self.round_times: dict[int, dict] = {}
        self.margin = self.engine.pipeline.margin
        # multi-rank tasks too wide for the node's live workers go back to the master, which
        # learns the node's width from ("width", n) whenever a node worker dies
        self.engine.groups.too_wide = self._hand_back
        self.handed_back: set[int] = set()      # node rounds to answer DROPPED
        self.width_sent = node.size

    # ------------------------------------------------------------------ chunks in
    def _accept(self) -> bool:
        took = False
        while self.queue:
            work, t_got = self.queue.popleft()
            cid, rid, ids, payload = work.cid, work.rid, work.ids, work.payload
            took = True
            if rid in self.cancelled_rounds or cid in self.skipped:
                self.reply(cid, rid, [], [], [], None, P.DROPPED)
                continue
            try:
                fn, items = pickle.loads(payload)
            except Exception as exc:
                info = error_info(exc, self.comm.rank, self.comm.size, self.comm.host)
                ids = list(ids)
                self.reply(cid, rid, ids, [None] * len(ids),
                           [(p, info) for p in range(len(ids))],
                           P.Stats(0, 0.0, 0.0, 0.0, 0.0, t_got, time.perf_counter()), P.OK)
                continue
            func, star, with_comm = fn if fn is not None else (None, False, False)
            if with_comm > 1 and with_comm > len(self.engine.alive_workers()):
                self._tell_width()
                self.reply(cid, rid, [], [], [], None, P.DROPPED)   # it runs elsewhere
                continue
            rnd = self.engine.start_round(items, fn=func, star=star, total=len(items),
                                          policy=make_policy(self.policy),
                                          name=f"chunk-{cid}",
                                          ranks=int(with_comm) if with_comm else None)
            rnd.tail_duplication = self.engine.tail_duplication
            times = self.round_times.pop(rid, None)
            if times is not None:
                rnd.task_time = times
            self.round_times[rid] = rnd.task_time        # now the newest
            while len(self.round_times) > 8:
                del self.round_times[next(iter(self.round_times))]
            self.forwards[rnd.rid] = _Forward(cid, rid, ids, t_got, rnd)
        return took

    # ------------------------------------------------------------------ results out
    def _collect(self, f: _Forward) -> None:
        outputs = f.rnd.outputs
        while outputs:
            ids, values, errs, rank = outputs.popleft()
            world = self.world_of[rank] if 0 <= rank < len(self.world_of) else self.comm.rank
            for k, (pos, value) in enumerate(zip(ids, values)):
                err = errs.get(k) if errs else None
                f.pending.append((pos, value, None if err is None else
                                  err.info._replace(rank=world)))

    def _send(self, f: _Forward, status: str, now: float) -> None:
        batch, f.pending = f.pending, []
        # the wire's ids go up within a reply, as a worker's do (the master's in-order
        # delivery takes a block whose first and last ids fit as consecutive): results
        # of the node's workers arrive in any order
        batch.sort(key=lambda rec: rec[0])
        ids = [f.ids[pos] for pos, _, _ in batch]
        values = [v for _, v, _ in batch]
        errors = [(k, info) for k, (_, _, info) in enumerate(batch) if info is not None]
        # the master sizes this node's chunks and times its next one by the node's rate:
        # report the node's time per task, not the wall time since the last reply (several
        # chunks run at once on the node, and a partial reply may hold one task)
        per = self._node_task_time(f.rnd)
        busy = now - f.t_part if per is None else per * len(batch)
        stats = P.Stats(len(batch), busy, busy * busy / max(1, len(batch)), busy, 0.0, f.t_got,
                        now)
        f.t_part = now
        f.sent += len(batch)
        self.reply(f.cid, f.rid, ids, values, errors, stats if batch else None, status)

    def _forward(self) -> bool:
        now = time.perf_counter()
        moved = False
        for rid, f in list(self.forwards.items()):
            self._collect(f)
            if f.rid in self.cancelled_rounds or f.cid in self.skipped:
                status = P.ABORTED
            elif rid in self.handed_back:    # the master sends what did not run elsewhere
                self.handed_back.discard(rid)
                status = P.DROPPED
            elif f.rnd.finished:
                status = P.OK
            else:
                if f.pending and now - f.t_part >= P.PARTIAL_EVERY:
                    self._send(f, P.PARTIAL, now)
                    moved = True
                continue
            if len(self.forwards) == 1:
                # the node goes idle: the master may be about to read its stats (also after
                # a cancelled or skipped chunk, such as a tail copy whose original won)
                self._stats_at = 0.0
                self._substats(now)
            if status != P.OK:
                self.engine.cancel_round(f.rnd, wait=False)
            self._send(f, status, now)
            self.engine.end_round(f.rnd)
            self.skipped.discard(f.cid)
            del self.forwards[rid]
            moved = True
        return moved

    def _hand_back(self, rnd, tid, item, k: int) -> None:
        """A multi-rank task wider than the node's live workers: back to the master."""
        self.handed_back.add(rnd.rid)

    def _tell_width(self) -> None:
        """Tell the master how many ranks the node has left, once a node worker died."""
        width = self.node.size - len(self.node.failed)
        if width != self.width_sent:
            self.width_sent = width
            self.comm.isend(P.ctrl("width", width), self.master, P.CTRL)
            self._stats_at = 0.0   # and its statistics at once: they list the dead worker

    def _node_task_time(self, rnd) -> float | None:
        """The node's time per task in ``rnd`` with all its ranks at work: 1 / the sum of
        every rank's rate (an unmeasured rank counted at the measured ranks' mean, the
        sub-master as one more rank at the time its pieces took). None until a rank is
        measured."""
        times = []
        for r, w in self.engine.workers.items():
            if w.alive:
                t = rnd.task_time.get(r, w.stats.mean_recent)
                times.append(t)
        if self.local_tasks:
            times.append(self.local_busy / self.local_tasks)
        known = [t for t in times if t]
        if not known:
            return None
        typical = sum(known) / len(known)
        return 1.0 / sum(1.0 / (t or typical) for t in times)

    def _substats(self, now: float) -> None:
        if now - self._stats_at < self.STATS_EVERY:
            return
        self._stats_at = now
        rows = self.engine.worker_summary()
        for row in rows:
            row["rank"] = self.world_of[row["rank"]]
            row["via"] = self.comm.rank
        own = {"tasks": self.local_tasks, "busy_s": round(self.local_busy, 6)}
        self.comm.isend(P.ctrl("substats", rows, own), self.master, P.CTRL)

    def _node_lost(self) -> None:
        """The node's engine cannot go on: a worker's setup failed (tell the master, which
        stops the farm with that error) or every worker died (die too: to the master this
        rank is then a dead worker, whose chunks run elsewhere under ULFM)."""
        err = self.engine.setup_error
        if err is not None:
            self.forwards.clear()
            self.comm.isend(P.ctrl("hello", self.comm.host, os.getpid(),
                                   err.info._replace(rank=self.world_of[err.rank])),
                            self.master, P.CTRL)
            self.comm.flush(timeout=5.0, raise_on_timeout=False)
            while not self.stopping:
                self.drain()
                time.sleep(0.01)
            return
        os.kill(os.getpid(), signal.SIGKILL)

    def _work_locally(self) -> bool:
        """Run one small chunk of a forwarded round here: a sub-master that only scheduled
        would leave one core of its node idle (a third of a 3-rank node). Chunks last about
        ``LOCAL_CHUNK_S`` so the master's and the node's messages wait no longer. A piece
        of tasks longer than that (one task: 100 ms) runs only while every worker of the
        node has work queued past its end: nothing is dispatched while it runs, and at 256
        ranks in blocks of 32 on 100 ms tasks the node's workers otherwise waited for it
        and ran dry, most at a map's end (issue 41)."""
        for f in self.forwards.values():
            rnd = f.rnd
            if rnd.cancelled or not rnd.has_pending():
                continue
            # the piece's length: by this round's task times on the node's workers when
            # measured (the last piece here may have been of another map's tasks)
            times = rnd.task_time
            per = sum(times.values()) / len(times) if times else self.local_per
            if per and self.local_k * per > LOCAL_CHUNK_S and \
                    not self.engine.all_busy_for(self.local_k * per):
                return False
            ids, items = rnd.take(self.local_k)
            if not len(ids):
                continue
            values, failures = [], []
            t0 = time.perf_counter()
            run_items(items, rnd.fn, rnd.star, self.ctx, values, failures,
                      with_comm=rnd.ranks is not None)
            dt = time.perf_counter() - t0
            comm = self.comm
            failed = {pos: error_info(exc, comm.rank, comm.size, comm.host)
                      for pos, exc in failures}
            self.local_tasks += len(ids)
            self.local_busy += dt
            per = self.local_per = dt / len(ids)
            # while a piece runs here nothing is dispatched: the node's workers get their
            # next chunk that much earlier (a piece is one task when tasks are long)
            self.engine.pipeline.margin = max(self.margin, dt)
            self.local_k = max(1, min(4096, int(LOCAL_CHUNK_S / per) if per > 0 else 4096))
            errs = None
            if failed:
                ids, values, errs = self.engine.settle_failures(rnd, ids, values, failed, 0,
                                                                items)
            self.engine.deliver(rnd, ids, values, errs, 0)
            return True
        return False

    def close(self) -> None:
        """Leaving the serve loop: the node's workers are told to stop too, and of the
        deaths the master knew of: a node worker that never talked to a dead rank must
        still bound its MPI_Finalize (it waits for every rank of the job)."""
        try:
            stopped = self.stopped
            self.engine.shutdown(None if stopped is None else stopped.detail,
                                 failed_elsewhere=self.failed_elsewhere)
        except Exception:
            pass

    # ------------------------------------------------------------------ loop
    def loop(self) -> None:
        """Serve the master: take chunks, run them as rounds of the node, send results back."""
        backoff = Backoff()
        engine = self.engine
        while not self.stopping:
            self.drain()
            if self.stopping:
                break
            moved = self._accept()
            if self.forwards:
                try:
                    engine.step(wait=False)     # dispatch to the node's workers first
                    # then a piece here while they are busy with theirs; only with none
                    # to run here may the next turn sleep (an idle step sleeps its backoff)
                    local = self._work_locally()
                    engine.step(wait=not local)  # take in what came back meanwhile
                    moved = local or moved
                except FarmBroken:
                    self._node_lost()
                    continue
                self._tell_width()
                moved = self._forward() or moved
            self._substats(time.perf_counter())
            if moved or self.forwards:
                backoff.reset()
            else:
                self.comm.progress()
                t0 = time.perf_counter()
                backoff.sleep()
                self.idle += time.perf_counter() - t0
        self._stats_at = 0.0
        self._substats(time.perf_counter())


def serve_submaster(top: Comm, master: int, node: Comm, world_of: list[int], setup=None,
                    setup_args=(), **engine_kwargs) -> Stopped:
    """Serve the master as a node's sub-master until it says stop (see :class:`SubMaster`);
    it runs the workers' ``setup`` too, since it computes between scheduling turns."""
    sub = SubMaster(top, master, node, world_of, **engine_kwargs)
    return serve(top, master, setup, setup_args, worker=sub)
