"""Timer slack for the start of a job whose ranks far outnumber the cores.

While ``MPI_Init`` waits for the other ranks (the PMIx fences of Open MPI 5), every rank loops
on ``opal_progress(); usleep(100)``: ten thousand wake-ups a second per rank. With 256 ranks on
two cores those wake-ups take most of the CPU that the work of the start-up needs, so each
rank's wait grows with the others' waits (measured: ``MPI_Init`` took 0.33 s of CPU per rank
and 46 s in all at 256 ranks, against 0.02 s per rank at 32).

The kernel's timer slack (``prctl(PR_SET_TIMERSLACK)``, per thread, inherited across fork and
exec) lets such a sleep end up to ``slack`` late, so the loop wakes a few hundred times a
second instead. :func:`raised_for_start` gives the job a slack of
:data:`START_SLACK_NS` when the ranks outnumber the launching machine's cores
:data:`MIN_RANKS_PER_CORE` to one or more (256 ranks on two cores: ``MPI_Init`` 0.14 s of CPU per
rank and 22 s in all); :func:`restore` puts a rank's thread back to the launcher's own slack
as soon as MPI is up (:mod:`pyfw.comm` calls it), so the tasks' sleeps and the runtimes'
waits keep their precision. A program that never imports pyfw keeps the coarse slack: its
sleeps may end up to 5 ms late (on a node this oversubscribed, the scheduler's time slices
are of that order already).

``$PYFW_START_TIMER_SLACK_NS`` sets the slack (``0``: leave it alone). Linux only; elsewhere
nothing changes.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys

__all__ = ["START_SLACK_NS", "MIN_RANKS_PER_CORE", "RESTORE_ENV", "current", "set_slack",
           "wanted", "raised_for_start", "restore"]

#: the slack a job starts with when it is that oversubscribed (a plateau: 1 ms gave 0.17 s of
#: CPU per rank at 256 ranks, 5 and 20 ms 0.13-0.14 s)
START_SLACK_NS = 5_000_000
#: ranks per core from which the start gains (measured on 2 cores: none at 32 ranks, a sixth
#: of MPI_Init's CPU at 64, a third at 128, nearly two thirds at 256)
MIN_RANKS_PER_CORE = 16
#: environment variable carrying the launcher's own slack to the ranks
RESTORE_ENV = "PYFW_TIMER_SLACK_NS"
_USER_ENV = "PYFW_START_TIMER_SLACK_NS"
_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def current() -> int | None:
    """The calling thread's timer slack in nanoseconds (None where it cannot be read)."""
    libc = _libc()
    if libc is None:
        return None
    value = libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
    return value if value > 0 else None


def set_slack(ns: int) -> bool:
    """Set the calling thread's timer slack (and that of the processes it starts from now)."""
    libc = _libc()
    return libc is not None and libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0) == 0


def wanted(nprocs: int, env: dict | None = None) -> int:
    """The slack a job of ``nprocs`` ranks started here should have (0: none)."""
    env = os.environ if env is None else env
    given = env.get(_USER_ENV, "").strip()
    if given:
        try:
            return max(0, int(given))
        except ValueError:
            raise ValueError(f"${_USER_ENV}={given!r}: expected nanoseconds, e.g. 5000000 "
                             f"(0 leaves the slack alone)") from None
    cores = os.cpu_count() or 1
    return START_SLACK_NS if nprocs >= MIN_RANKS_PER_CORE * cores else 0


@contextlib.contextmanager
def raised_for_start(nprocs: int, env: dict):
    """Within the block, processes started by this thread get the start-up slack (when the
    job is that oversubscribed); ``env`` (the job's environment, changed in place) tells its
    ranks which slack to return to. This thread's own slack is put back after the block."""
    slack = wanted(nprocs, env)
    before = current() if slack else None
    if not slack or before is None or not set_slack(slack):
        yield
        return
    env[RESTORE_ENV] = str(before)
    try:
        yield
    finally:
        set_slack(before)


_pending = RESTORE_ENV in os.environ


def restore() -> None:
    """In a rank: once MPI is initialized, put this thread back to the slack the launcher
    had (once; cheap to call again)."""
    global _pending
    if not _pending:
        return
    from mpi4py import MPI
    if not MPI.Is_initialized():
        return   # MPI_Init still to come (mpi4py.rc.initialize = False): the next call
    _pending = False
    try:
        set_slack(int(os.environ[RESTORE_ENV]))
    except (KeyError, ValueError):
        pass
