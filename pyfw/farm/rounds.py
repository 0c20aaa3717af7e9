"""Bookkeeping of one round of tasks (private): the ids handed out, done and pending, the
read-ahead from a lazy source, the results waiting to be handed back, the chunks sent out
to workers, and the TaskError a worker's error report becomes. Shared by the parallel and
the serial engine.
"""
from __future__ import annotations

import bisect
import itertools
import pickle
from collections import deque

from ..errors import ConfigurationError, RemoteTraceback, TaskError
from . import _protocol as P
from .policies import Policy

__all__ = ["Chunk", "RoundState", "make_task_error", "WINDOW_SHARE"]

#: an ordered round's chunks take at most ``window / (WINDOW_SHARE x ranks)`` tasks each
#: (:meth:`RoundState.chunk_cap`)
WINDOW_SHARE = 4


def make_task_error(index, rank, info, attempts=1, cls=TaskError) -> TaskError:
    """A TaskError from a worker's :class:`~pyfw.farm._protocol.ErrorInfo`, with the remote
    traceback as cause."""
    info = info if isinstance(info, P.ErrorInfo) else P.ErrorInfo(*info)
    if info.rank is not None:   # raised on a node worker behind a sub-master (hierarchy)
        rank = info.rank
    original = None
    if info.blob is not None:
        try:
            original = pickle.loads(info.blob)
        except Exception:
            original = None
    err = cls(index, rank, info.host, info.exc_type, info.message, original, attempts)
    err.__cause__ = RemoteTraceback(info.traceback)
    err.info = info   # the wire form, which a sub-master forwards as it came
    return err


class DoneIds:
    """The set of finished task ids: everything below ``low``, plus disjoint half-open
    intervals above it (as many as there are out-of-order chunks, so a handful)."""

    __slots__ = ("low", "starts", "stops")

    def __init__(self):
        self.low = 0
        self.starts: list[int] = []
        self.stops: list[int] = []

    def __contains__(self, tid: int) -> bool:
        if tid < self.low:
            return True
        i = bisect.bisect_right(self.starts, tid) - 1
        return i >= 0 and tid < self.stops[i]

    def overlaps(self, a: int, b: int) -> bool:
        """True if any id in [a, b) is done."""
        if a < self.low:
            return True
        i = bisect.bisect_right(self.starts, b - 1) - 1
        return i >= 0 and self.stops[i] > a

    def add_range(self, a: int, b: int) -> None:
        """Mark [a, b) done (it must not overlap what is done already)."""
        starts, stops = self.starts, self.stops
        i = bisect.bisect_left(starts, a)
        if i > 0 and stops[i - 1] == a:          # extends the interval before
            i -= 1
            stops[i] = b
        else:
            starts.insert(i, a)
            stops.insert(i, b)
        if i + 1 < len(starts) and starts[i + 1] == stops[i]:   # meets the one after
            stops[i] = stops.pop(i + 1)
            starts.pop(i + 1)
        if starts and starts[0] == self.low:
            self.low = stops[0]
            del starts[0], stops[0]

    def add(self, tid: int) -> None:
        if tid not in self:
            self.add_range(tid, tid + 1)

    @property
    def high(self) -> int:
        """How many finished ids lie above ``low`` (out of order)."""
        return sum(b - a for a, b in zip(self.starts, self.stops))


class RoundState:
    """One wave of tasks: its source, what is pending, done, and what to hand back.

    Tasks are read from the source in blocks (never more than a chunk's worth ahead of
    dispatch, so a huge or lazy stream costs bounded memory) and keep consecutive ids, so a
    chunk's ids travel as a ``range``.
    """

    READ_AHEAD = 1024

    def observe_task_time(self, rank: int, per_task: float) -> None:
        """Smooth one chunk's time per task on ``rank`` into this round's estimate."""
        before = self.task_time.get(rank)
        self.task_time[rank] = per_task if before is None else 0.7 * before + 0.3 * per_task

    def __init__(self, rid, source, fn, star, total, policy: Policy, name, window=None,
                 skip=None, ranks=None):
        self.rid, self.fn, self.star, self.total = rid, fn, star, total
        self.name = name
        self.source = iter(source)
        self.policy = policy
        self.next_tid = 0                # ids handed to tasks read so far
        self.exhausted = False
        self.buf: list = []              # items read, not yet sent ...
        self.buf_ids = None              # ... their ids (None: consecutive from buf_start)
        self.buf_start = 0
        self.buf_pos = 0
        self.retry: deque = deque()      # (tid, item) to send again first
        self.done = DoneIds()
        self.ndone = 0
        self.outputs: deque = deque()    # records: (ids, values, errors{pos: TaskError}, rank)
        self.task_time: dict = {}        # rank -> smoothed time per task of *this* round's fn
        self.cancelled = False
        self.attempts: dict[int, int] = {}
        self.window = window             # ordered delivery: dispatch only tid < base + window
        self.window_base = 0
        self.skip = skip or {}           # tid -> value already known (journal)
        self.tail_duplication = True     # idle workers may get copies of its last chunks
        self.eager = False               # send as the depth allows, not at the lead time
        # multi-rank tasks: ``ranks`` an int or item -> int (functions are then called as
        # fn(comm, item)); Task items may carry a ``ranks`` attribute of their own
        self.ranks = ranks
        self.wide: deque = deque()       # (tid, item, k): tasks for groups of k > 1 ranks
        self._may_be_wide = fn is None or callable(ranks) or (ranks or 1) > 1
        self.exclusive = False   # every task holds its ranks alone: see hold()
        self.wire_fn = None if fn is None else (fn, star, ranks is not None)

    def hold(self) -> None:
        """Every task of this round holds its worker(s) alone while it runs: it goes to a
        group, even of one, so nothing else is queued behind it (for tasks that run as long
        as something else lives, e.g. a server). Before the round's first dispatch."""
        self.exclusive = True
        self._may_be_wide = True

    def width(self, item) -> int:
        """How many ranks the task ``item`` runs on."""
        ranks = self.ranks
        if ranks is None:
            ranks = getattr(item, "ranks", 1) if self.fn is None else 1
        elif callable(ranks):
            ranks = ranks(item)
        if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
            raise ConfigurationError(f"a task's ranks must be a positive int, got {ranks!r}")
        return ranks

    def requeue(self, pairs, front: bool = True) -> None:
        """Send these ``(tid, item)`` again, first in line (multi-rank tasks to their own
        queue)."""
        narrow, wide = [], []
        for tid, item in pairs:
            k = self.width(item) if self._may_be_wide else 1
            if k > 1 or self.exclusive:
                wide.append((tid, item, k))
            else:
                narrow.append((tid, item))
        if front:
            self.retry.extendleft(reversed(narrow))
            self.wide.extendleft(reversed(wide))
        else:
            self.retry.extend(narrow)
            self.wide.extend(wide)

    # ---------------------------------------------------------------- task supply
    def _refill(self, want: int) -> None:
        """Read the next block of tasks (at least ``want`` if the source has them)."""
        if self.exhausted:
            return
        n_want = max(want, self.READ_AHEAD)
        items = list(itertools.islice(self.source, n_want))
        start = self.next_tid
        self.next_tid += len(items)
        if len(items) < n_want:
            self.exhausted = True
            self.total = self.next_tid   # the truth, whatever a hint said
        self.buf_start, self.buf_pos, self.buf_ids = start, 0, None
        if self.skip:  # results known from the journal are delivered, not sent
            ids, kept = [], []
            for off, item in enumerate(items):
                tid = start + off
                if tid in self.skip:
                    self.deliver([tid], [self.skip.pop(tid)], None, -1)
                else:
                    ids.append(tid)
                    kept.append(item)
            items, self.buf_ids = kept, ids
        if self._may_be_wide and items:
            self._set_aside_wide(start, items)
            return
        self.buf = items

    def _set_aside_wide(self, start: int, items: list) -> None:
        """Move the multi-rank tasks of a block just read to ``wide``; the rest stay."""
        ids = self.buf_ids if self.buf_ids is not None else range(start, start + len(items))
        kept_ids, kept = [], []
        for tid, item in zip(ids, items):
            k = self.width(item)
            if k > 1 or self.exclusive:
                self.wide.append((tid, item, k))
            else:
                kept_ids.append(tid)
                kept.append(item)
        if len(kept) < len(items):
            self.buf_ids = kept_ids
        self.buf = kept

    def _buffered(self) -> int:
        return len(self.buf) - self.buf_pos

    def _next_tid(self) -> int:
        pos = self.buf_pos
        return self.buf_start + pos if self.buf_ids is None else self.buf_ids[pos]

    def remaining(self) -> int:
        """Tasks not yet handed out (exact when the total is known, else read-ahead)."""
        if not self._buffered():
            self._refill(1)
        left = len(self.retry) + len(self.wide) + self._buffered()
        if self.total is not None and not self.exhausted:
            left += max(0, self.total - self.next_tid)
        return left

    def has_pending(self) -> bool:
        """True while tasks remain to be handed out (read ahead, retries or still in the source)."""
        if self.cancelled:
            return False
        if self.retry or self.wide:
            return True
        if not self._buffered():
            self._refill(1)
            if not self._buffered():
                return bool(self.wide)   # the block read may hold only multi-rank tasks
        return self.window is None or self._next_tid() < self.window_base + self.window

    def chunk_cap(self, ranks: int) -> int | None:
        """The most tasks a chunk of this round may take per rank it goes to, so that no
        chunk holds up the others: None without a window, or when every task fits inside
        it. Dispatch runs only ``window`` tasks past the first result not yet handed out,
        so a chunk that takes long holds everything behind it once the other workers have
        run through the window: a factoring-sized first chunk of a large ordered map is
        ``total / (2 x ranks)`` tasks (1,000 tasks of 10 ms, 10 s, for 254,000 tasks on
        127 workers), and the window of 65,536 ran out after 5 s; the workers then waited,
        and idle workers got copies of the chunk in the way (127 workers: 1.39x ideal and
        62,000 tasks run twice, against 1.02x and 249 with no window). With chunks of at
        most ``window / (WINDOW_SHARE x ranks)`` tasks, the chunks in flight (pipelined,
        two or more per worker) cover at most half of the window."""
        if self.window is None or (self.total is not None and self.total <= self.window):
            return None
        return max(1, self.window // (WINDOW_SHARE * max(1, ranks)))

    def take(self, k: int):
        """Up to ``k`` tasks to send: ``(ids, items)``; ids a range when consecutive."""
        if self.retry:
            # a task that has failed before travels alone: if it kills its next worker too,
            # the blame falls on it and not on innocent neighbours of its chunk
            ids, items = [], []
            retry, attempts = self.retry, self.attempts
            while retry and len(ids) < k:
                tid, item = retry[0]
                if tid in self.done:
                    retry.popleft()
                    continue
                if attempts.get(tid) and ids:
                    break
                retry.popleft()
                ids.append(tid)
                items.append(item)
                if attempts.get(tid):
                    break
            return ids, items
        if not self._buffered():
            self._refill(k)
        pos = self.buf_pos
        n = min(k, self._buffered())
        if self.window is not None and n:
            n = max(0, min(n, self.window_base + self.window - self._next_tid()))
        items = self.buf[pos:pos + n]
        if self.buf_ids is None:
            first = self.buf_start + pos
            ids = range(first, first + n)
        else:
            ids = self.buf_ids[pos:pos + n]
        self.buf_pos = pos + n
        if self.buf_pos == len(self.buf):
            self.buf, self.buf_ids, self.buf_pos = [], None, 0
        return ids, items

    def drop_pending(self) -> None:
        """Forget the tasks not handed out yet (the round was cancelled)."""
        self.buf, self.buf_ids, self.buf_pos = [], None, 0
        self.retry.clear()
        self.wide.clear()

    @property
    def finished(self) -> bool:
        """True when every task of the round has a result (or the round was cancelled)."""
        if self.cancelled:
            return True
        return (self.exhausted and not self._buffered() and not self.retry and not self.wide
                and self.total is not None and self.ndone >= self.total)

    # ---------------------------------------------------------------- results
    def deliver(self, ids, values, errors, rank) -> None:
        """Record results (dropping duplicates) and queue them for the consumer."""
        done = self.done
        if isinstance(ids, range):
            fresh = not done.overlaps(ids.start, ids.stop)
            if fresh and len(ids):
                done.add_range(ids.start, ids.stop)
        else:
            fresh = all(t not in done for t in ids)
            if fresh:
                for t in ids:
                    done.add_range(t, t + 1)
        if fresh:
            fresh_ids, fresh_vals, fresh_errs = ids, values, errors
        else:
            fresh_ids, fresh_vals, fresh_errs = [], [], {}
            for pos, t in enumerate(ids):
                if t in done:
                    continue
                done.add_range(t, t + 1)
                if errors and pos in errors:
                    fresh_errs[len(fresh_ids)] = errors[pos]
                fresh_ids.append(t)
                fresh_vals.append(values[pos])
        if not len(fresh_ids):
            return
        self.ndone += len(fresh_ids)
        self.outputs.append((fresh_ids, fresh_vals, fresh_errs or None, rank))


class Chunk:
    """One chunk of a round's tasks sent to one worker, until all its results are back."""

    __slots__ = ("cid", "rnd", "ids", "items", "rank", "t_sent", "t_head", "t_mark", "twin",
                 "left", "tries", "group", "width")

    def __init__(self, cid, rnd, ids, items, rank, now):
        self.cid, self.rnd, self.ids, self.items, self.rank = cid, rnd, ids, items, rank
        # failed attempts already counted for its tasks when it was sent (retries only)
        attempts = rnd.attempts
        self.tries = {t: attempts[t] for t in ids if t in attempts} if attempts else None
        self.left = len(ids)  # tasks whose results have not come back yet
        # t_head: when the worker started it (inf while queued behind another); t_mark:
        # when ``left`` was last counted (its start, then each partial reply), what the
        # forecast of its end counts from
        self.t_sent = self.t_head = self.t_mark = now
        self.twin = None
        self.group = None     # a multi-rank task: its GroupRun (pyfw.farm.groups)
        self.width = 1        # ranks per task (> 1: multi-rank tasks sent to a sub-master)

    def items_of(self, ids) -> list:
        """The tasks with these ``ids`` (some of this chunk's), in that order."""
        own = self.ids
        if isinstance(own, range):
            return [self.items[t - own.start] for t in ids]
        where = {t: pos for pos, t in enumerate(own)}
        return [self.items[where[t]] for t in ids]
