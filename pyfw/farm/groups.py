"""Tasks that run on several ranks at once (private): the master's groups of workers.

A task of width k (``Farm.map(fn, items, ranks=k)``, or a Task with ``ranks = k``) runs on
a *group* of k workers: every member gets the chunk, runs it with the group's communicator
(``fn(comm, item)``, ``ctx.comm``), and the root's return value is the result. To the
scheduler a group is one worker; its members are reserved while it exists.

The rule (docs/farm.md, "Tasks on several ranks"):

* Groups are formed from idle workers, all on one node where one node has enough (the
  node with the fewest idle workers that still fits, so wider tasks find room later), else
  over the nodes with the most idle workers. A group is kept while tasks of its width
  wait, and dissolved when none do: its members then serve alone again.
* Work-conserving: the oldest waiting multi-rank task (the *head*) reserves the workers it
  needs; a reserved worker is given no new work. Every worker not reserved keeps serving
  narrower tasks (single-rank chunks, or later multi-rank tasks that fit in the idle
  unreserved workers).
* No starvation: the head's reservation only grows, so it starts as soon as the workers it
  reserved have finished what they hold.
* A task wider than the live workers fails at once with a clear error, instead of waiting
  for ever.
"""
from __future__ import annotations

import itertools
import os
import socket
import time
import zlib
from typing import Callable

from ..comm import ULFM
from ..errors import ConfigurationError
from . import _protocol as P
from .core import EngineCore, WorkerRecord
from .rounds import Chunk, RoundState, make_task_error

__all__ = ["Group", "GroupRun", "Groups", "pick", "refuse", "STUCK_GRACE"]

#: without ULFM, how long the members of a group whose task raised on one member may take
#: to answer before the job is ended (they may be waiting for it in a collective)
STUCK_GRACE = 20.0
#: group ids, never reused by this process, and unlike any other master's (its host and
#: pid in the high bits): they name a group's communicator in the job and beyond (spawned
#: pools), see pyfw.farm.worker._make_group
_GIDS = itertools.count((zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode()) << 24)
                        + 1)


def refuse(core: EngineCore, rnd: RoundState, tid, k: int, workers: int) -> None:
    """A task wider than the farm fails at once, with an error that says so."""
    err = ConfigurationError(f"task {tid} of {rnd.name} asks for {k} ranks, but the farm has "
                             f"{workers} worker(s) for it: run the job on more ranks")
    info = P.error_info(err, core.master, 0, "master")
    core.deliver(rnd, [tid], [None], {0: make_task_error(tid, core.master, info)},
                 core.master)


class Group:
    """k workers that run multi-rank tasks together (``members``: ranks, root first)."""

    __slots__ = ("gid", "members", "chunk")

    def __init__(self, gid: int, members: list[int]):
        self.gid, self.members = gid, members
        self.chunk: Chunk | None = None    # the task it runs, if any

    @property
    def width(self) -> int:
        return len(self.members)


class GroupRun:
    """The master's account of one multi-rank chunk: who has still to answer, what the
    root returned and which errors came back."""

    __slots__ = ("group", "waiting", "reply", "errors", "released", "t_error")

    def __init__(self, group: Group):
        self.group = group
        self.waiting = set(group.members)
        self.reply = None          # the root's Reply
        self.errors: list = []     # (rank, ErrorInfo) of members that raised on their own
        self.released = False      # a member's task was interrupted by the group's failure
        self.t_error = None        # when the first member's own error came back


def pick(k: int, idle: list[WorkerRecord]) -> list[WorkerRecord] | None:
    """``k`` of the ``idle`` workers for one group, on one host if any host has ``k`` (the
    host with the fewest that fits), else from the hosts with the most; None if fewer."""
    if len(idle) < k:
        return None
    by_host: dict[str, list[WorkerRecord]] = {}
    for w in sorted(idle, key=lambda w: w.rank):
        by_host.setdefault(w.host, []).append(w)
    fits = [ws for ws in by_host.values() if len(ws) >= k]
    if fits:
        return min(fits, key=len)[:k]
    out: list[WorkerRecord] = []
    for ws in sorted(by_host.values(), key=len, reverse=True):
        out.extend(ws[:k - len(out)])
        if len(out) == k:
            break
    return out


class Groups:
    """The groups of an engine and the reservation of its head multi-rank task.

    ``core``: the engine's declared state; ``post(msg, rank)`` sends a control message;
    ``send(group, rnd, ids, items, now)`` sends a chunk to every member of a group;
    ``send_to_node(worker, rnd, ids, items, now, width)`` sends tasks of ``width`` ranks to
    a sub-master as one chunk (two-level farms: it runs them on groups of its node).
    """

    def __init__(self, core: EngineCore, post: Callable, send: Callable,
                 send_to_node: Callable | None = None):
        self.core, self.post, self.send = core, post, send
        self.send_to_node = send_to_node
        #: what becomes of a task wider than the live workers: refused (an error) unless
        #: this is set, ``(rnd, tid, item, k)`` (a sub-master hands it back to the master)
        self.too_wide: Callable | None = None
        self.groups: dict[int, Group] = {}
        self.member_of: dict[int, Group] = {}    # rank -> its group
        self.reserved: set[int] = set()
        #: members of a group that lost a member before they answered for its task: no
        #: work until they do (one may be stuck making the group's communicator, and then
        #: leaves: pyfw.farm.worker._create_watched; a new group with it would lose its
        #: other members too)
        self.settling: set[int] = set()
        #: which workers may join a group (a sub-master of a two-level farm may not)
        self.eligible: Callable[[WorkerRecord], bool] = lambda w: True

    def busy(self, w: WorkerRecord) -> bool:
        """True if ``w`` may not take single-rank work now (in a group, reserved, or not yet
        heard from since its group lost a member)."""
        return w.rank in self.member_of or w.rank in self.reserved or w.rank in self.settling

    def heard_from(self, rank: int) -> None:
        """``rank`` sent a message: it is out of whatever its failed group left it in."""
        self.settling.discard(rank)

    # ---------------------------------------------------------------- dispatch
    def dispatch(self, rounds, now: float) -> bool:
        """Start what multi-rank tasks can start; reserve workers for the head. True if a
        task was sent."""
        sent = False
        head_seen = False
        for rnd in rounds:
            if rnd.cancelled or not rnd.has_pending():
                continue
            queue = rnd.wide
            i = 0
            while i < len(queue):
                tid, item, k = queue[i]
                group = self._group_for(k, head=not head_seen)
                if group is None:
                    node = self._node_for(k)
                    if node is not None:
                        del queue[i]
                        if not head_seen:
                            self.reserved.clear()    # the head went to a node
                        sent = True
                        if self.send_to_node(node, rnd, [tid], [item], now, k) is None:
                            break     # the node died on the way: its task is queued again
                        continue
                    if not head_seen and not self._feasible(k):
                        del queue[i]
                        self._refuse(rnd, tid, item, k)
                        continue
                    head_seen = True
                    i += 1
                    continue
                del queue[i]
                if not head_seen:
                    self.reserved.clear()    # the head got its group
                self.send(group, rnd, [tid], [item], now)
                sent = True
        if not head_seen:
            self.reserved.clear()
        self._dissolve_unneeded(rounds)
        return sent

    def _group_for(self, k: int, head: bool) -> Group | None:
        """An idle group of width ``k``, or a new one from idle free workers (the head may
        use the workers it reserved; others only unreserved ones). Where some node has
        ``k`` workers at all, only such a node's workers make the group, even if that means
        waiting for them. The head reserves what it lacks."""
        for g in self.groups.values():
            if g.chunk is None and g.width == k:
                return g
        free = [w for w in self.core.alive_workers()
                if w.rank not in self.member_of and w.rank not in self.settling
                and self.eligible(w)]
        if any(not w.hello for w in free):
            return None          # where every worker runs is not known yet
        per_host: dict[str, int] = {}
        for w in free:
            per_host[w.host] = per_host.get(w.host, 0) + 1
        local = {h for h, n in per_host.items() if n >= k}
        idle = [w for w in free if not w.inflight and (head or w.rank not in self.reserved)
                and (not local or w.host in local)]
        chosen = pick(k, idle)
        if chosen is not None and (not local or len({w.host for w in chosen}) == 1):
            return self._form([w.rank for w in chosen])
        if head and len(free) >= k:   # else only a node of a two-level farm can take it
            self._reserve(k, [w for w in free if not local or w.host in local])
        return None

    def _node_for(self, k: int) -> WorkerRecord | None:
        """A sub-master (two-level farm) whose node has ``k`` workers not yet held by the
        multi-rank tasks it was sent, the one with the most; None if none has."""
        if self.send_to_node is None:
            return None
        best, room = None, 0
        for w in self.core.alive_workers():
            if self.eligible(w) or w.stats.width <= 1 or not w.hello:
                continue
            free = self._node_room(w)
            if free >= k and free > room:
                best, room = w, free
        return best

    @staticmethod
    def _node_room(w: WorkerRecord) -> int:
        """Workers of a sub-master's node (itself not counted) free of multi-rank tasks."""
        return w.stats.width - 1 - sum(c.width for c in w.inflight if c.width > 1)

    def _reserve(self, k: int, candidates: list[WorkerRecord]) -> None:
        """Hold ``k`` workers for the head, and keep them (so they drain and it starts): on
        the node of those already held if it has ``k``, else on the node with the most idle
        candidates among those with ``k`` (any node when none has), idle ones first, then
        those with the least in flight."""
        held = [w for w in candidates if w.rank in self.reserved]
        if len(held) >= k:
            return
        by_host: dict[str, list[WorkerRecord]] = {}
        for w in candidates:
            by_host.setdefault(w.host, []).append(w)
        roomy = {h: ws for h, ws in by_host.items() if len(ws) >= k}
        if held and held[0].host in roomy:
            pool = roomy[held[0].host]
        elif roomy:
            pool = max(roomy.values(), key=lambda ws: sum(1 for w in ws if not w.inflight))
        else:
            pool = candidates
        for w in sorted(pool, key=lambda w: (len(w.inflight), w.rank)):
            if len(self.reserved) >= k:
                break
            self.reserved.add(w.rank)

    def _feasible(self, k: int) -> bool:
        live = self.core.alive_workers()
        return (k <= len([w for w in live if self.eligible(w)])
                or any(not self.eligible(w) and w.stats.width - 1 >= k for w in live))

    def _refuse(self, rnd: RoundState, tid, item, k: int) -> None:
        if self.too_wide is not None:
            self.too_wide(rnd, tid, item, k)
            return
        refuse(self.core, rnd, tid, k, len(self.core.alive_workers()))

    def _form(self, members: list[int]) -> Group:
        g = Group(next(_GIDS), members)
        self.groups[g.gid] = g
        for r in members:
            self.member_of[r] = g
            self.reserved.discard(r)
            self.post(P.ctrl("group", g.gid, members), r)
        return g

    def _dissolve_unneeded(self, rounds) -> None:
        """Dissolve idle groups whose width no waiting task has."""
        if not self.groups:
            return
        wanted = {k for rnd in rounds if not rnd.cancelled for _, _, k in rnd.wide}
        for g in list(self.groups.values()):
            if g.chunk is None and g.width not in wanted:
                self.dissolve(g)

    def dissolve(self, g: Group, failed: bool = False) -> None:
        """Its members serve alone again (told so: they free the group's communicator, or
        keep it if its task ``failed``)."""
        self.groups.pop(g.gid, None)
        for r in g.members:
            if self.member_of.get(r) is g:
                del self.member_of[r]
                w = self.core.workers.get(r)
                if w is not None and w.alive:
                    self.post(P.ctrl("ungroup", g.gid, failed), r)

    # ---------------------------------------------------------------- replies
    def on_reply(self, chunk: Chunk, src: int, reply: P.Reply) -> bool:
        """Account one member's reply; True once every member has answered (the chunk's
        results are then ``chunk.group.reply`` / ``.errors``)."""
        run: GroupRun = chunk.group
        run.waiting.discard(src)
        if reply.status == P.RELEASED:
            run.released = True
        elif reply.errors:
            run.errors.extend((src, info) for _, info in reply.errors)
            if run.t_error is None:
                run.t_error = time.perf_counter()
        if src == run.group.members[0]:
            run.reply = reply
        return not run.waiting

    def finish(self, chunk: Chunk) -> None:
        """The group's task is over: it is free again (dissolved if it failed: its
        communicator may have been revoked)."""
        run: GroupRun = chunk.group
        g = run.group
        g.chunk = None
        if run.errors or run.released:
            self.dissolve(g, failed=True)

    def stuck(self, now: float) -> Chunk | None:
        """Without ULFM: a group task that raised on a member while others have still not
        answered ``STUCK_GRACE`` seconds later (they wait for it in a collective, and
        nothing can release them); None under ULFM or when there is none."""
        if ULFM:
            return None
        for g in self.groups.values():
            run = None if g.chunk is None else g.chunk.group
            if run is not None and run.t_error is not None and now - run.t_error > STUCK_GRACE:
                return g.chunk
        return None

    def lost(self, rank: int) -> list[Chunk]:
        """A member died: its group is dissolved; returns the group's running chunk (to be
        handled as lost) if any."""
        g = self.member_of.get(rank)
        self.reserved.discard(rank)
        self.settling.discard(rank)
        if g is None:
            return []
        chunk = g.chunk
        g.chunk = None
        if chunk is not None:
            self.settling.update(m for m in chunk.group.waiting if m != rank)
        self.dissolve(g, failed=True)
        return [chunk] if chunk is not None else []
