"""Wire format of the master-worker runtime (private).

All messages are pickled tuples sent through :class:`pyfw.comm.Comm` on the farm's own
duplicated communicator; tags are fixed, identifiers ride in the payload.

master -> worker, tag WORK:
    (cid, rid, ids, payload, group)     a chunk; ``ids`` a range or list, ``payload`` the
                                        pickled ``(fn, items)``: ``fn`` is None for Task items,
                                        else ``(function, star, with_comm)`` applied to each
                                        item (``with_comm``: called as fn(comm, item); to a
                                        sub-master, an int k > 1: each item is a task on k
                                        ranks of its node).
                                        ``group``: None, or the id of the group of ranks that
                                        runs this chunk together (every member gets it). The
                                        payload is unpickled apart so that a task whose class
                                        cannot be imported on the worker fails alone, with
                                        an error the master can attribute, and never hangs
master -> worker, tag CTRL:
    ("cancel", rid)                     drop queued chunks of round rid, flag the running one
    ("skip", [cid, ...])                drop (or stop) these chunks: their twins finished
    ("ping", t)                         answer with ("pong", t)
    ("stop", reason or None, failed)    leave the serve loop (reason: the master's error;
                                        failed: ranks known dead, so the worker bounds its
                                        MPI_Finalize, see pyfw.comm.bound_finalize; from a
                                        sub-master: its node's dead, or else those its own
                                        master named, in that master's numbering)
    ("group", gid, members)             make the group's communicator (members: farm ranks,
                                        the root first; collective over the members)
    ("ungroup", gid, failed)            the rank serves alone again; it frees the group's
                                        communicator unless its task failed (ULFM: a late
                                        revoke must never meet a reused context id)
worker -> master, tag DONE:
    (cid, rid, ids, values, errors, stats, status)
        ids/values: the tasks completed, ids ascending (the master's in-order delivery
        relies on it); errors: [(position, error_info), ...]
        stats: (ntasks, sum_t, sum_t2, busy_s, idle_s, t_got, t_done) (worker clock)
        status: "ok", "aborted" (cancelled part-way), "dropped" (never started),
        "partial" (results so far of a long chunk, sent every PARTIAL_EVERY seconds so
        results and speed estimates keep flowing; the chunk stays in flight) or, from a
        member of a group, "released" (its task was interrupted because another member
        failed: its error is not the task's). A group's members all reply; the values
        are the root's (the others send None).
worker -> master, tag CTRL:
    ("hello", host, pid, setup_error)   once, after the setup function ran
    ("pong", t)
    ("substats", rows, own)             a sub-master's node workers' stats and its own
                                        work (pyfw.farm.hierarchy)
    ("width", ranks)                    a sub-master's node has this many live ranks now
                                        (itself included): its multi-rank tasks fit them
error_info: :class:`ErrorInfo` (exc_type, message, traceback, host, pickled exception or
None, and the rank that raised when it is not the sender's: a node worker behind a
sub-master).

Messages are built and read only through the functions and named tuples below: the
runtimes never index a message by position, and never pass a tuple literal to a send
(``tests/test_farm_protocol.py`` checks the source).
"""
import os
import pickle
import traceback
from typing import Any, NamedTuple

WORK = 11
CTRL = 12
DONE = 13
#: never sent: a worker probes for it only to make MPI progress (worker._create_watched)
WATCH = 14

OK, ABORTED, DROPPED, PARTIAL, RELEASED = "ok", "aborted", "dropped", "partial", "released"
#: how often a long chunk's results so far go back (s). Each partial reply costs a worker
#: about 100 us of CPU on a busy node (pickling, the send) and the master one message: at
#: 256 ranks on 2 cores, 10 ms tasks, 0.05 s took 1.61-1.70x the ideal time and 116-121 us
#: of CPU a task, 0.2 s 1.24-1.56x and 76-101 us (benchmarks/farm_scale.py, side by side)
PARTIAL_EVERY = 0.2


class ErrorInfo(NamedTuple):
    """What a worker reports about an exception a task (or the setup) raised."""
    exc_type: str
    message: str
    traceback: str
    host: str
    blob: bytes | None              # the pickled exception, None if it does not pickle
    rank: int | None = None         # the rank that raised, if not the sender


def error_info(exc: BaseException, rank: int, size: int, host: str) -> ErrorInfo:
    """The picklable description of an exception raised on this rank."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    text = f"\n### Worker rank {rank} of {size} on {host} (pid {os.getpid()})\n{tb}"
    try:
        blob = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(blob)
    except Exception:
        blob = None
    return ErrorInfo(type(exc).__name__, str(exc), text, host, blob)


class Work(NamedTuple):
    """master -> worker, tag WORK."""
    cid: int
    rid: int
    ids: Any              # a range or a list of task ids
    payload: bytes        # pickled (fn, items)
    group: int | None = None   # the group that runs it together, if any


class Stats(NamedTuple):
    """A chunk's timing on the worker's clock."""
    ntasks: int
    sum_t: float
    sum_t2: float
    busy_s: float
    idle_s: float
    t_got: float
    t_done: float


class Reply(NamedTuple):
    """worker -> master, tag DONE: a chunk's results (or part of them)."""
    cid: int
    rid: int
    ids: Any
    values: list
    errors: list          # [(position, ErrorInfo), ...]
    stats: Stats | None
    status: str


def pack_done(cid, rid, ids, values, errors, stats: Stats | None, status) -> tuple:
    """A DONE message for the wire (plain tuples, stats included: the cheapest to pickle)."""
    return (cid, rid, ids, values, errors, None if stats is None else tuple(stats), status)


def pack_work(cid, rid, ids, payload, group=None) -> tuple:
    """A WORK message for the wire."""
    return (cid, rid, ids, payload, group)


def pack_payload(fn, items) -> tuple:
    """A WORK message's payload before it is pickled apart: ``fn`` (None for Task items, else
    ``(function, star, with_comm)``) and the chunk's items."""
    return (fn, items)


def read_done(msg) -> Reply:
    """A DONE message as named fields (the wire keeps the plain tuple)."""
    return Reply._make(msg)


def read_work(msg) -> Work:
    """A WORK message as named fields."""
    return Work._make(msg)


def read_stats(stats) -> Stats | None:
    """A DONE message's chunk timing as named fields (None: no timing sent)."""
    return None if stats is None else Stats._make(stats)


# ------------------------------------------------------------------ control messages
class Ctrl(NamedTuple):
    """A control message read from the wire: its kind and its arguments by name."""
    kind: str
    args: dict


_CTRL_FIELDS = {
    "cancel": ("rid",), "skip": ("cids",), "ping": ("t",), "pong": ("t",),
    "stop": ("reason", "failed"), "hello": ("host", "pid", "setup_error"),
    "group": ("gid", "members"), "ungroup": ("gid", "failed"),
    "substats": ("rows", "own"), "width": ("ranks",),
}


def ctrl(kind: str, *args) -> tuple:
    """Build a control message (see the module docstring for the kinds)."""
    if len(args) != len(_CTRL_FIELDS[kind]):
        raise TypeError(f"control message {kind!r} takes {_CTRL_FIELDS[kind]}, got {args!r}")
    return (kind, *args)


def read_ctrl(msg) -> Ctrl:
    """A control message as its kind and named arguments (missing trailing ones: None)."""
    kind, *args = msg
    fields = _CTRL_FIELDS.get(kind, ())
    return Ctrl(kind, dict(zip(fields, args + [None] * (len(fields) - len(args)))))
