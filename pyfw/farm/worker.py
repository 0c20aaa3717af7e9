"""The worker side of the farm: receive chunks, run them, send results back (private).

A worker keeps a queue of chunks (the master pipelines several), runs them in order, and
answers every chunk with exactly one DONE message, so the master's in-flight accounting is
exact even when chunks are dropped or cancelled. It looks for control messages between
chunks and, at most once per millisecond, between tasks (via ``Context.cancelled``). When it
has nothing to do it sleeps with a capped backoff instead of spinning.
"""
from __future__ import annotations

import contextlib
import enum
import functools
import os
import pickle
import sys
import threading
import time
import traceback
from collections import deque
from typing import NamedTuple

from .. import exitguard
from mpi4py import MPI

from ..comm import ULFM, Backoff, Comm, bound_finalize
from ..errors import PeerFailure, TaskSerializationError
from . import _protocol as P
from ._protocol import error_info
from .task import Context, run_items

__all__ = ["serve", "Stop", "Stopped", "WorkerLoop"]

#: between the tasks of a chunk, messages (cancel, skip, group) are looked for this often
#: (s). A look after a task that slept costs 15 us of CPU at 16 ranks and 47 us at 256 on
#: the 2-core box (cold caches; issue 41). 256 ranks, flat, three alternating launches each:
#: 1 ms tasks 11.1-11.5x ideal against 14.8-17.7x at 20 ms, 10 ms tasks 1.31-1.39 against
#: 1.29-1.56. (At 100 ms, death tests of two-level farms hung in 5 of 46 stressed runs: node
#: workers of another node than the dead rank's did not bound MPI_Finalize; a sub-master
#: passes its master's list of dead ranks on now, and 180 stressed runs passed.) A task that calls
#: ``ctx.cancelled()`` still looks every millisecond.
CHUNK_CHECK_EVERY = 0.1


class Stop(enum.Enum):
    """Why a worker left its serve loop."""
    FINISHED = "finished"            # the master said stop, without an error
    MASTER_ERROR = "master error"    # the master said stop because its program raised
    MASTER_FAILED = "master failed"  # the master's rank died (ULFM)


class Stopped(NamedTuple):
    """What :func:`serve` returns: ``why`` the loop ended and the master's error text
    (``MASTER_ERROR``) or the failed ranks (``MASTER_FAILED``), for the message."""
    why: Stop
    detail: str | None = None


class WorkerLoop:
    """A worker's side of the protocol: its queue of chunks, cancellations and replies.
    ``ctx``: the :class:`Context` to run tasks with (a node worker that goes on serving the
    top master after its sub-master died keeps the state its ``setup`` loaded)."""

    def __init__(self, comm: Comm, master: int, ctx: Context | None = None):
        self.comm, self.master = comm, master
        self.queue: deque = deque()
        self.cancelled_rounds: set[int] = set()
        self.skipped: set[int] = set()
        self.current: tuple[int, int] | None = None  # (cid, rid) of the running chunk
        self.stopped: Stopped | None = None
        self.failed_elsewhere: list[int] = []   # ranks the master's stop named dead
        self.idle = 0.0
        self.batch, self.batch_round = 1, None  # tasks per timed sub-batch (adaptive)
        if ctx is None:
            ctx = Context(comm.rank, comm.size, comm.host)
        ctx._check = self._current_cancelled
        ctx.comm = MPI.COMM_SELF
        self.ctx = ctx
        self.groups: dict[int, MPI.Intracomm | None] = {}   # gid -> the group's communicator

    @property
    def stopping(self) -> bool:
        """True once the loop is to end (the master said stop, or it failed)."""
        return self.stopped is not None

    def close(self) -> None:
        """Leaving the serve loop (a sub-master releases its node here)."""

    # -------------------------------------------------------------- messages
    def drain(self) -> None:
        """Handle every message already waiting from the master."""
        comm = self.comm
        while True:
            got = comm.poll(self.master)
            if got is None:
                return
            msg, _, tag = got
            if tag == P.WORK:
                self.queue.append((P.read_work(msg), time.perf_counter()))
            else:
                self.control(msg)

    def control(self, msg) -> None:
        kind, a = P.read_ctrl(msg)
        if kind == "cancel":
            self.cancelled_rounds.add(a["rid"])
            self.drop(lambda work: work.rid == a["rid"])
        elif kind == "skip":
            cids = set(a["cids"])
            self.skipped |= cids
            self.drop(lambda work: work.cid in cids)
        elif kind == "ping":
            self.comm.isend(P.ctrl("pong", a["t"]), self.master, P.CTRL)
        elif kind == "group":
            self.groups[a["gid"]] = _make_group(self.comm.mpi, a["gid"], a["members"])
        elif kind == "ungroup":
            _free_group(self.groups.pop(a["gid"], None), a["failed"])
        elif kind == "stop":
            reason = a["reason"]
            self.stopped = Stopped(Stop.FINISHED if reason is None else Stop.MASTER_ERROR,
                                   reason)
            if a["failed"]:   # ranks died in this job: finalize may block on them
                self.failed_elsewhere = list(a["failed"])
                bound_finalize()

    def drop(self, match) -> None:
        keep = deque()
        for work, t_got in self.queue:
            if match(work):
                self.reply(work.cid, work.rid, [], [], [], None, P.DROPPED)
            else:
                keep.append((work, t_got))
        self.queue = keep

    def _current_cancelled(self) -> bool:
        try:
            self.drain()
        except PeerFailure as exc:
            self.stopped = Stopped(Stop.MASTER_FAILED, str(exc))
        cur = self.current
        return cur is not None and (cur[0] in self.skipped or cur[1] in self.cancelled_rounds
                                    or self.stopping)

    def reply(self, cid, rid, ids, values, errors, stats: P.Stats | None, status) -> None:
        """Send a DONE message (:class:`pyfw.farm._protocol.Done`)."""
        try:
            data = Comm.dumps(P.pack_done(cid, rid, ids, values, errors, stats, status))
        except Exception:
            values, errors = self._picklable(ids, values, errors)
            data = Comm.dumps(P.pack_done(cid, rid, ids, values, errors, stats, status))
        self.comm.isend_bytes(data, self.master, P.DONE)

    def _picklable(self, ids, values, errors):
        """Replace results that cannot be pickled by a TaskSerializationError."""
        errors = list(errors)
        failed_positions = {pos for pos, _ in errors}
        values = list(values)
        for pos, value in enumerate(values):
            if pos in failed_positions:
                continue
            try:
                pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                err = TaskSerializationError(
                    f"the result of task {ids[pos]} cannot be pickled "
                    f"({type(value).__name__}): {exc}")
                errors.append((pos, error_info(err, self.comm.rank, self.comm.size,
                                               self.comm.host)))
                values[pos] = None
        return values, errors

    # -------------------------------------------------------------- running
    def run_chunk(self, chunk: P.Work, t_got: float) -> None:
        """Run one chunk and reply with its results (in parts while it runs long)."""
        cid, rid, ids = chunk.cid, chunk.rid, chunk.ids
        if rid in self.cancelled_rounds or cid in self.skipped:
            self.reply(cid, rid, [], [], [], None, P.DROPPED)
            return
        if chunk.group is not None:
            self.run_group_chunk(chunk, t_got)
            return
        unpacked = self._unpack(chunk, t_got)
        if unpacked is None:
            return
        fn, items = unpacked
        ctx = self.ctx
        ctx._begin()
        self.current = (cid, rid)
        if rid != self.batch_round:
            self.batch, self.batch_round = 1, rid
        batch = self.batch
        values, errors, failures = [], [], []
        s = s2 = 0.0      # task seconds since the last reply, and their spread
        status = P.OK
        clock = time.perf_counter
        func, star, with_comm = fn if fn is not None else (None, False, False)
        if with_comm:
            func = functools.partial(func, ctx.comm)
        total = len(items)
        pos = part = 0
        t_part = t0 = clock()
        partial_at = t_part + P.PARTIAL_EVERY
        check_at = t_part + CHUNK_CHECK_EVERY   # the loop drained just before this chunk
        # Tasks run in sub-batches timed as a whole: one task at a time while they are long,
        # up to thousands when they take microseconds, so timing and checks cost nothing per
        # task. The loop calls nothing but the tasks: after a long task it runs on cold
        # caches, where each bytecode costs CPU that an oversubscribed node's other ranks
        # want (2 ranks, 10 ms tasks: 112 bytecodes a task against 155 with helper calls
        # per sub-batch; docs/hierarchy.md, "A worker's loop with fewer bytecodes").
        while pos < total:
            end = pos + batch
            run_items(items[pos:end], func, star, ctx, values, failures)
            now = clock()
            if end > total:
                end = total
            dt = now - t0
            t0 = now
            s += dt
            s2 += dt * dt / (end - pos)
            pos = end
            if failures:
                self._record(failures, errors)
            # tasks per sub-batch: doubled below 0.2 ms, halved above 2 ms
            if dt < 2e-4:
                if batch < 8192:
                    batch *= 2
            elif dt > 2e-3 and batch > 1:
                batch //= 2
            if ctx._cancelled:
                status = P.ABORTED
                break
            if now >= check_at and pos < total:
                check_at = now + CHUNK_CHECK_EVERY
                if ctx.cancelled():
                    status = P.ABORTED
                    break
                if now > partial_at:  # a long chunk: hand over what is done
                    self.reply(cid, rid, ids[part:pos], values, errors,
                               P.Stats(pos - part, s, s2, now - t_part, self.idle, t_got,
                                       now),
                               P.PARTIAL)
                    values, errors = [], []
                    s = s2 = 0.0
                    self.idle = 0.0
                    part, t_part, partial_at = pos, now, now + P.PARTIAL_EVERY
                t0 = clock()   # the look and the reply are not the tasks' time
        self.batch = batch
        t_done = clock()
        stats = P.Stats(pos - part, s, s2, t_done - t_part, self.idle, t_got, t_done)
        self.idle = 0.0
        self.current = None
        self.skipped.discard(cid)
        self.reply(cid, rid, ids[part:pos], values, errors, stats, status)

    def run_group_chunk(self, chunk: P.Work, t_got: float) -> None:
        """Run a multi-rank task with the other members of its group, on the group's
        communicator. On a failure here the group's communicator is revoked (ULFM), so
        members waiting for this rank in a collective are released; their error is then
        not the task's (status RELEASED)."""
        cid, rid, ids = chunk.cid, chunk.rid, chunk.ids
        gcomm = self.groups.get(chunk.group)
        unpacked = self._unpack(chunk, t_got)
        if unpacked is None:
            _revoke(gcomm)
            return
        if gcomm is None:      # the group could not be formed (a member died)
            self.reply(cid, rid, [], [], [], None, P.RELEASED)
            return
        fn, items = unpacked
        # with_comm False: a single-rank task of an exclusive round, fn(item) (ctx.comm is
        # its group's communicator all the same)
        func, star, with_comm = fn if fn is not None else (None, False, False)
        ctx = self.ctx
        ctx._begin()
        ctx.comm = gcomm
        self.current = (cid, rid)
        values, failures = [], []
        t0 = time.perf_counter()
        try:
            run_items(items, func, star, ctx, values, failures, with_comm=bool(with_comm))
        finally:
            ctx.comm = MPI.COMM_SELF
            self.current = None
        t1 = time.perf_counter()
        status, errors = P.OK, []
        if failures:
            _revoke(gcomm)
            own = [(pos, exc) for pos, exc in failures if not _released(exc)]
            comm = self.comm
            errors = [(pos, error_info(exc, comm.rank, comm.size, comm.host))
                      for pos, exc in own]
            status = P.OK if own else P.RELEASED
        elif ctx._cancelled:
            status = P.ABORTED
        if status != P.OK:
            ids, values = [], []             # nothing of it counts: it runs again
        elif gcomm.Get_rank() != 0:
            values = [None] * len(values)   # the result is the root's
        dt = t1 - t0
        stats = P.Stats(len(values), dt, dt * dt / max(1, len(values)), dt, self.idle, t_got,
                        t1)
        self.idle = 0.0
        self.skipped.discard(cid)
        self.reply(cid, rid, ids, values, errors, stats, status)

    def _unpack(self, chunk: P.Work, t_got: float):
        """(fn, items) of a chunk; None if they cannot be unpickled here (then every task of
        the chunk has failed with a TaskSerializationError naming why, already replied)."""
        try:
            return pickle.loads(chunk.payload)
        except Exception as exc:
            err = TaskSerializationError(
                f"rank {self.comm.rank} cannot unpickle the tasks it was sent "
                f"({type(exc).__name__}: {exc}); is their module importable on every rank?")
            info = error_info(err, self.comm.rank, self.comm.size, self.comm.host)
            ids = list(chunk.ids)
            self.reply(chunk.cid, chunk.rid, ids, [None] * len(ids),
                       [(p, info) for p in range(len(ids))],
                       P.Stats(0, 0.0, 0.0, 0.0, self.idle, t_got, time.perf_counter()), P.OK)
            return None

    def _record(self, failures: list, errors: list) -> None:
        """Move the tasks that failed (``(position, exception)``, from :func:`run_items`)
        to ``errors`` in wire form."""
        comm = self.comm
        for pos, exc in failures:
            errors.append((pos, error_info(exc, comm.rank, comm.size, comm.host)))
        failures.clear()

    def loop(self) -> None:
        backoff = idle_backoff()
        comm = self.comm
        clock = time.perf_counter
        while self.stopped is None:
            self.drain()
            if self.stopped is not None:
                break
            if self.queue:
                backoff.reset()
                chunk, t_got = self.queue.popleft()
                self.run_chunk(chunk, t_got)
            else:
                comm.progress()
                t0 = clock()
                backoff.sleep()
                self.idle += clock() - t0


#: a group's communicator normally takes about a millisecond: only a call still waiting
#: after this long (s) is watched, then every GROUP_WATCH_S
GROUP_QUIET_S = 1.0
GROUP_WATCH_S = 0.25


def _create_watched(mpi: MPI.Intracomm, sub: MPI.Group, gid: int, members: list[int]):
    """``Create_from_group`` of ``sub`` while a thread watches the members: if one of them
    is known dead before the call returns, the call never will, and this rank leaves the
    farm as a killed rank does (the master runs its tasks elsewhere, and gives a member of
    a failed group no new work before it has answered: pyfw.farm.groups). The watcher
    drives MPI's progress (an ``Iprobe``) so that the failure is learnt while this thread
    is blocked; that needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default), without which the
    call is made unwatched. Open MPI may crash this rank instead (SIGSEGV in
    ``ompi_comm_revoke_local``: it revokes the communicator still being made); either way
    the rank is gone and nothing waits for ever."""
    tag = f"pyfw.farm.{gid}"
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        return MPI.Intracomm.Create_from_group(sub, tag, MPI.INFO_NULL, MPI.ERRORS_RETURN)
    done = threading.Event()

    def dead_members() -> list[int]:
        try:
            mpi.Iprobe(MPI.ANY_SOURCE, P.WATCH)
        except MPI.Exception:
            pass       # a failure not yet acknowledged: Get_failed names it
        failed, everyone = mpi.Get_failed(), mpi.Get_group()
        try:
            n = failed.Get_size()
            known = MPI.Group.Translate_ranks(failed, list(range(n)), everyone) if n else []
        finally:
            failed.Free()
            everyone.Free()
        return sorted(set(members) & set(known))

    def watch():
        if done.wait(GROUP_QUIET_S):
            return
        while not done.wait(GROUP_WATCH_S):
            dead = dead_members()
            if dead and not done.is_set():
                exitguard.leave(f"rank {dead[0]} of group {gid} died before the group's "
                                f"communicator was made, and MPI cannot cancel the call "
                                f"the other members wait in")

    watcher = threading.Thread(target=watch, name=f"pyfw-group-{gid}", daemon=True)
    watcher.start()
    try:
        return MPI.Intracomm.Create_from_group(sub, tag, MPI.INFO_NULL, MPI.ERRORS_RETURN)
    finally:
        done.set()
        watcher.join()


_RELEASE_CLASSES = {getattr(MPI, name) for name in
                    ("ERR_REVOKED", "ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING")
                    if hasattr(MPI, name)}


def _make_group(mpi: MPI.Intracomm, gid: int, members: list[int]) -> MPI.Intracomm | None:
    """The communicator of a group (collective over its members only); None if it cannot be
    made (a member died).

    Under ULFM it is made with ``MPI_Comm_create_from_group`` (PMIx), not
    ``MPI_Comm_create_group`` on the farm's communicator: once a rank knows that any rank of
    a communicator died, Open MPI fails every ``Create_group`` on it with
    ``MPI_ERR_PROC_FAILED``, even for groups without the dead rank. A member that learns of
    a death first then fails at once while the others wait in the call for ever (seen on the
    test bed: survivors of a killed member stuck, or groups formed and refused in a loop).
    ``Create_from_group`` needs only the members; the gid, unique to its master and never
    reused (pyfw.farm.groups), makes its tag unique. But it cannot be cancelled, and it has
    no timeout (PRRTE ignores ``mpi_pmix_connect_timeout`` there): a member that dies before
    it joins leaves the others in the call for ever. :func:`_create_watched` turns that into
    a death of each waiting member, which the farm survives.
    """
    group = mpi.Get_group()
    try:
        sub = group.Incl(members)
        try:
            if ULFM:
                gcomm = _create_watched(mpi, sub, gid, members)
            else:
                gcomm = mpi.Create_group(sub, gid % 32000)
        finally:
            sub.Free()
    except MPI.Exception:
        return None
    finally:
        group.Free()
    gcomm.Set_errhandler(MPI.ERRORS_RETURN)
    return gcomm


#: group communicators whose task failed under ULFM: never freed (see _free_group)
_KEPT: list = []


def _free_group(gcomm, failed: bool = False) -> None:
    """Free a group's communicator, unless its task failed under ULFM: revoke and failure
    notices for it may still be on their way, and Open MPI 5 applies a late one to whatever
    communicator reuses the context id, crashing (SIGSEGV in ompi_comm_revoke_local, seen on
    the test bed) if that one is still being made. A few kept handles per failure cost
    nothing."""
    if gcomm is None:
        return
    if ULFM and (failed or gcomm.Is_revoked()):
        _KEPT.append(gcomm)
        return
    try:
        gcomm.Free()
    except MPI.Exception:
        pass


def _revoke(gcomm) -> None:
    """Release the other members from anything they wait for on ``gcomm`` (ULFM only)."""
    if gcomm is None or gcomm.Get_size() == 1:
        return
    try:
        gcomm.Revoke()
    except (AttributeError, NotImplementedError, MPI.Exception):
        pass


def _released(exc: BaseException) -> bool:
    """True if ``exc`` (or what caused it) is MPI reporting the group revoked or a peer dead:
    this rank was released from its task because another member failed."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, PeerFailure):
            return True
        if isinstance(exc, MPI.Exception) and exc.Get_error_class() in _RELEASE_CLASSES:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


#: how much a worker lowers its priority on an oversubscribed node (PYFW_WORKER_NICE
#: overrides; 0: never)
WORKER_NICE = 10


def ranks_here() -> int | None:
    """Ranks of this job on this node, as the launcher tells (Open MPI's
    ``OMPI_COMM_WORLD_LOCAL_SIZE``); None where it does not."""
    try:
        return int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"])
    except (KeyError, ValueError):
        return None


def oversubscription() -> float | None:
    """Ranks per core on this node where they outnumber its cores (the node's, not the ones
    this rank is bound to: a rank bound to a core of its own is not oversubscribed); None
    where every rank has a core or the launcher does not say."""
    cores, here = os.cpu_count(), ranks_here()
    if here is None or cores is None or here <= cores:
        return None
    return here / cores


#: the longest sleep (s) of an idle worker between looks for work, with a core per rank
IDLE_SLEEP_MAX = 1e-3
#: ... and at most this on an oversubscribed node (see :func:`idle_backoff`)
IDLE_SLEEP_MAX_SHARED = 16e-3


def idle_backoff() -> Backoff:
    """The pause of a worker with nothing to do. Where ranks outnumber the node's cores the
    longest sleep grows with ranks per core (up to IDLE_SLEEP_MAX_SHARED) and there is no
    yield-spin: every look costs CPU that the master and the busy ranks share, and idle
    ranks looking 1,000 times a second took the box (test bed, 8 nodes x 32 ranks on 2
    cores: 255 idle workers, about 5 us a look over TCP, 1.3 cores). A worker mostly has
    its next chunk queued already (the master sends it ahead), so the longer sleep delays
    only its first chunk and the tail's."""
    per_core = oversubscription()
    if per_core is None:
        return Backoff(tmax=IDLE_SLEEP_MAX)
    return Backoff(tmax=min(IDLE_SLEEP_MAX_SHARED, IDLE_SLEEP_MAX * per_core), spin=0.0)


@contextlib.contextmanager
def yield_to_schedulers():
    """Lower this worker's scheduling priority while it serves a flat farm, if its node runs
    more ranks than it has cores. Then the operating system shares the cores evenly among
    every runnable rank, and the master, which every worker waits on, gets a core only as
    often as each of them. Flat farm, 256 ranks on 2 cores, 10 ms tasks
    (benchmarks/farm_scale.py, 4 runs each): 1.99-2.45x the ideal time with the box 83-94 %
    busy, against 1.59-2.14x and 92-94 % busy with the workers at nice 10. Not in two-level
    farms, whose sub-masters would then poll at full priority beside niced node workers:
    node mode (blocks of 32) ran at 23.8 / 3.2 / 1.3x ideal on 1 / 10 / 100 ms tasks with
    them niced, 19.1 / 2.7 / 1.9x without (one run each): no gain to take. Where every rank
    has a core nothing changes (:func:`oversubscription`). Put back afterwards
    where the system allows it (raising a priority needs privileges)."""
    step = int(os.environ.get("PYFW_WORKER_NICE", WORKER_NICE))
    if step <= 0 or oversubscription() is None:
        yield
        return
    os.nice(step)
    try:
        yield
    finally:
        try:
            os.nice(-step)
        except OSError:
            pass     # unprivileged: the rank stays nicer for the rest of its life


def serve(comm: Comm, master: int = 0, setup=None, setup_args=(),
          worker: WorkerLoop | None = None, ctx: Context | None = None) -> Stopped:
    """Serve the master until it says stop (or fails); returns why the loop ended.
    ``worker``: a :class:`WorkerLoop` (sub)class instance to serve with (a sub-master);
    ``ctx``: a context whose ``setup`` has run already (then ``setup`` is not run again)."""
    exitguard.install()   # from here on, an exit of this rank is a death ULFM sees
    w = worker if worker is not None else WorkerLoop(comm, master, ctx)
    setup_error = None
    where = "in setup"
    try:
        if setup is not None and ctx is None:
            try:
                setup(w.ctx, *setup_args)
            except Exception as exc:
                setup_error = error_info(exc, comm.rank, comm.size, comm.host)
        where = "while serving"
        comm.isend(P.ctrl("hello", comm.host, os.getpid(), setup_error), master, P.CTRL)
        w.loop()
    except PeerFailure as exc:
        return Stopped(Stop.MASTER_FAILED, str(exc))
    except (SystemExit, KeyboardInterrupt) as exc:   # outside a task (run_items sees those)
        exitguard.leave(f"{exc!r} {where}")   # the rank leaves, as from a task
    except Exception as exc:  # noqa: BLE001 -- a fault of the loop itself, not of a task
        # Raised on, it would end the script and wait in MPI_Finalize for a master that
        # still counts this rank as a worker: the job would hang. Dying instead is a death
        # the master handles (under --ft its tasks run elsewhere; without, the job ends).
        traceback.print_exc()
        exitguard.leave(f"its worker loop failed {where}: {type(exc).__name__}: {exc}")
    finally:
        w.close()
        comm.flush(timeout=10.0, raise_on_timeout=False)
        sys.stdout.flush()
    return w.stopped
