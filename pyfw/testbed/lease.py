"""Who is using a test bed: a shared ``flock`` per prefix, held while a bed is in use.

Every process that uses test bed ``<prefix>`` (the process that brought it up through
:class:`~pyfw.testbed.TestBed`, a ``pyfw-cluster run``/``job``, a ``pyfw-run --testbed``)
holds a shared lock on ``/run/pyfw-testbed/<prefix>.lock`` for as long as it does. ``up``
and ``down`` refuse, naming the holders, while a process other than the caller, its
ancestors and its descendants holds it: two suites (or two users) on one machine with the same prefix used to
tear down each other's nodes mid-job, silently. The kernel drops a dead process's locks, so a
crashed run's leftovers hold nothing and are still replaced.
"""
from __future__ import annotations

import contextlib
import fcntl
import os

from ..errors import TestBedBusy

__all__ = ["hold", "release", "holders", "exclusive", "refuse_if_used", "lock_path"]

STATE_DIR = "/run/pyfw-testbed"


def _path(prefix: str, kind: str) -> str:
    os.makedirs(STATE_DIR, exist_ok=True)
    return os.path.join(STATE_DIR, f"{prefix}.{kind}")


def lock_path(prefix: str) -> str:
    """The file whose shared ``flock`` is the lease on test bed ``prefix``."""
    return _path(prefix, "lock")


def hold(prefix: str) -> int:
    """Take a shared lease on test bed ``prefix``; returns the descriptor (not inherited by
    children). It lasts until :func:`release` or the process ends."""
    fd = os.open(_path(prefix, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def release(fd: int | None) -> None:
    """Give a lease back (``None`` is a no-op)."""
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def exclusive(prefix: str):
    """Serialise ``up``/``down`` of one prefix, so the in-use check and what follows it are
    not interleaved with another process's."""
    fd = os.open(_path(prefix, "mutex"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _ancestry(pid: int) -> set[int]:
    """``pid`` and every ancestor of it."""
    seen = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])   # comm may hold ") "
        except (OSError, IndexError, ValueError):
            break
    return seen


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def holders(prefix: str) -> list[int]:
    """PIDs holding a lease on ``prefix``, from ``/proc/locks`` (empty when none)."""
    path = os.path.join(STATE_DIR, f"{prefix}.lock")
    try:
        st = os.stat(path)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        fields = line.replace("->", " ").split()
        # "1: FLOCK ADVISORY READ <pid> <major>:<minor>:<inode> 0 EOF"
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            same = (int(inode) == st.st_ino and int(major, 16) == os.major(st.st_dev)
                    and int(minor, 16) == os.minor(st.st_dev))
            if same:
                pids.append(int(fields[4]))
        except ValueError:
            continue
    return sorted(set(pids))


def refuse_if_used(prefix: str, action: str) -> None:
    """Raise :class:`~pyfw.errors.TestBedBusy` when a process holds a lease on ``prefix``
    that is neither this one, nor an ancestor of it (a test running README commands), nor a
    descendant (a job this process started and is tearing the bed down under)."""
    me = os.getpid()
    mine = _ancestry(me)
    others = [p for p in holders(prefix) if p not in mine and me not in _ancestry(p)]
    if others:
        who = "; ".join(f"pid {p}: {_command(p)}" for p in others)
        raise TestBedBusy(f"test bed {prefix!r} is in use ({who}): not running `{action}` "
                          f"under it; wait for that job or pick another prefix")
