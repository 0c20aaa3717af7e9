"""Run a job so that it always ends and nothing of it outlives it (for :mod:`pyfw.launch`).

:func:`supervise` starts a command (``mpiexec``, or a batch script that calls it) in a session
of its own, tagged through ``$PYFW_JOB_TAG``, and ends it at its timeout, when this process
gets SIGTERM, SIGINT or SIGHUP (the signal is passed on to the job first, then whatever is
left is killed after a grace), when its stderr says it is ending but mpiexec has not ended
it a grace later (an abort of Open MPI's that hangs), and after it ends by itself (a process
left of it is killed). A job's processes are its session, its process tree and every process
carrying its tag (:func:`job_processes`). Linux (``/proc``); imports nothing of pyfw.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["supervise", "job_processes", "kill_job", "stop_message", "TIMEOUT_STATUS",
           "STOP_GRACE", "END_GRACE", "STOP_SIGNALS", "JOB_TAG", "FATAL_MARKS"]

#: exit status used when the deadline kills the job (the same as coreutils ``timeout``)
TIMEOUT_STATUS = 124
#: seconds a stopped job is given, after the signal is passed on to mpiexec, before every
#: process left of it is killed (mpiexec itself kills its ranks within about 0.5 s)
STOP_GRACE = 3.0
#: seconds a job whose stderr shows it is ending (``ending_marks``) is given to end before it
#: is stopped: Open MPI ends an aborting job in well under a second here, but its abort can
#: race with its own handling of the dead rank and then never end (seen once in CI on the
#: test bed: every survivor printed the fatal-error banner, mpiexec waited for ever)
END_GRACE = 10.0
#: what Open MPI prints when a job is going down: a fatal MPI error, and MPI_Abort
FATAL_MARKS = ("MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort",
               "MPI_ABORT was invoked")
#: the signals that stop a job: passed on to mpiexec, then the job is killed (exit 128 + signum)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: environment variable carrying the tags of the jobs a process belongs to (space-separated,
#: outermost first): every process a job starts inherits it, also one that leaves mpiexec's
#: session or process tree, so a stopped job's leftovers are found (see :func:`job_processes`)
JOB_TAG = "PYFW_JOB_TAG"


class _StopRequests:
    """While installed, :data:`STOP_SIGNALS` no longer end this process: the first one is
    passed on to the job's process group at once and remembered, with the time it came and
    how many came. Installed only in the main thread (Python runs handlers there). An
    ignored SIGHUP stays ignored (``nohup``: the job is to outlive the terminal); an ignored
    SIGINT does not (a shell starts background commands so, and ``kill -INT`` must still
    stop the job, as it stops mpiexec)."""

    def __init__(self):
        self.signum = None      # the first stop signal received
        self.at = None          # when it came (monotonic)
        self.count = 0          # how many came (a second one means: kill now)
        self.group = None       # the job's process group, once it runs
        self._previous = {}

    def install(self) -> "_StopRequests":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if sig != signal.SIGHUP or signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._received)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _received(self, signum, _frame) -> None:
        self.count += 1
        if self.signum is None:
            self.signum, self.at = signum, time.monotonic()
            self.forward()

    def forward(self) -> None:
        """Pass the stop signal on to the job (mpiexec then ends its ranks), if both exist."""
        if self.signum is not None and self.group is not None:
            try:
                os.killpg(self.group, self.signum)
            except (ProcessLookupError, PermissionError):
                pass


def supervise(argv: list[str], env: dict | None = None, *, timeout: float | None = None,
              capture: bool = False, cwd: str | None = None, grace: float = STOP_GRACE,
              watch_stderr: bool = True, reraise: bool = True, ending_marks=(),
              end_grace: float = END_GRACE) -> subprocess.CompletedProcess:
    """Run ``argv`` (mpiexec, or a batch script that calls it) as a job that always ends.

    The job runs in a session of its own, tagged through ``$PYFW_JOB_TAG``. It ends:

    * by itself: its status is returned;
    * at ``timeout``: every process of the job gets SIGTERM, then SIGKILL after ``grace``
      seconds; status :data:`TIMEOUT_STATUS`, ``timed_out`` True;
    * when this process gets SIGTERM, SIGINT or SIGHUP (only when called from the main
      thread): the signal is passed on to the job's process group (mpiexec ends its ranks),
      and after ``grace`` seconds, or at once on a second signal, every process left of the
      job gets SIGKILL. Then, with ``reraise``, the signal is delivered to this process as
      if no job had been running (Ctrl-C raises :class:`KeyboardInterrupt`, an unhandled
      SIGTERM ends it): a program that calls this keeps its own reaction, and orphans no
      job. With ``reraise=False`` (``pyfw-run``) the result is returned: status
      128 + signum, ``stopped_by`` the signal.

    * ``end_grace`` seconds after its stderr first showed one of ``ending_marks`` (strings
      that say the job is going down, e.g. :data:`FATAL_MARKS`), if mpiexec has not ended it
      by then: it is stopped as at a timeout (SIGTERM, SIGKILL after ``grace``), one line
      on our stderr (and in the result's) says so, ``ended_by`` is the mark seen and the
      status is mpiexec's (128 + the signal if one ended it; 1 if it was 0).

    When the job's leader has ended, whatever is left of the job (a rank that lost its
    mpiexec) is killed too, so nothing outlives it. stderr is read (to spot launcher faults
    and ending marks) when ``capture`` or ``watch_stderr`` is set: without ``capture`` it is
    copied to our stderr as it comes (raw chunks, so ``\r`` progress lines are not held
    back), keeping only its last 64 KiB in the result.
    """
    tag = f"{os.getpid()}.{time.monotonic_ns()}"
    env = dict(os.environ if env is None else env)
    env[JOB_TAG] = f"{env.get(JOB_TAG, '')} {tag}".strip()
    stop = _StopRequests().install()
    proc = None
    readers = []
    try:
        if stop.signum is None:   # not asked to stop before it started
            proc = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture or watch_stderr else None,
                cwd=cwd, start_new_session=True)
            stop.group = proc.pid
            stop.forward()   # a stop signal that came while it started
            if proc.stdout is not None:
                readers.append(_StreamReader(proc.stdout, keep_all=True, echo=False))
            if proc.stderr is not None:
                readers.append(_StreamReader(proc.stderr, keep_all=capture, echo=not capture,
                                             marks=ending_marks))
            timed_out, ended_by = _wait(proc, tag, timeout, grace, stop,
                                        readers[-1] if proc.stderr is not None else None,
                                        end_grace)
        else:
            timed_out, ended_by = False, None
    except BaseException:
        if proc is not None:
            kill_job(proc, grace=grace, tag=tag)
        raise
    finally:
        stop.restore()
    if reraise and stop.signum is not None:   # the job is gone: now as if it never ran
        signal.raise_signal(stop.signum)
    for reader in readers:
        reader.join(timeout=10)
    out = readers[0].text(newlines=True) if capture and readers else None
    err = (readers[-1].text(newlines=capture) if proc is not None and proc.stderr is not None
           else None)
    if timed_out:
        status = TIMEOUT_STATUS
    elif stop.signum is not None:
        status = 128 + stop.signum
    elif ended_by is not None:   # never 0; as a shell reports it: 128 + signal for one killed
        status = (proc.returncode if proc.returncode > 0
                  else 128 - proc.returncode if proc.returncode < 0 else 1)
    else:
        status = proc.returncode
    result = subprocess.CompletedProcess(argv, status, out, err)
    result.timed_out = timed_out
    result.stopped_by = None if timed_out or stop.signum is None else signal.Signals(stop.signum)
    result.ended_by = ended_by
    return result


class _StreamReader(threading.Thread):
    """Read one of the job's pipes to its end: keep it all (``keep_all``) or its last 64 KiB,
    copy it to our stderr as it comes (``echo``; raw chunks), and note when one of ``marks``
    first appears (also across chunks)."""

    TAIL = 65536

    def __init__(self, pipe, keep_all: bool, echo: bool, marks=()):
        super().__init__(daemon=True)
        self.pipe, self.keep_all, self.echo = pipe, keep_all, echo
        self.marks = [m.encode() for m in marks]
        self.data = bytearray()
        self.mark_seen = None     # the first mark found
        self.mark_at = None       # when (monotonic)
        self.start()

    def run(self) -> None:
        fd = self.pipe.fileno()
        overlap = max((len(m) for m in self.marks), default=1) - 1
        window = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.data.extend(chunk)
            if not self.keep_all:
                del self.data[:-self.TAIL]
            if self.marks and self.mark_seen is None:
                window = window[-overlap:] + chunk if overlap else chunk
                for mark in self.marks:
                    if mark in window:
                        self.mark_seen, self.mark_at = mark.decode(), time.monotonic()
                        break
            if self.echo:
                _write_stderr(chunk)
        self.pipe.close()

    def note(self, line: str) -> None:
        """A line of ours about the job: on our stderr and kept with the job's."""
        self.data.extend(line.encode())
        _write_stderr(line.encode())

    def text(self, newlines: bool = False) -> str:
        """What was kept, decoded; with ``newlines``, ``\r\n`` and ``\r`` read as ``\n``
        (as a pipe opened in text mode reads them: ranks write through a pty)."""
        text = bytes(self.data).decode(errors="replace")
        return text.replace("\r\n", "\n").replace("\r", "\n") if newlines else text


def _write_stderr(chunk: bytes) -> None:
    sink = getattr(sys.stderr, "buffer", None)
    if sink is not None:
        sink.write(chunk)
        sink.flush()
    else:
        sys.stderr.write(chunk.decode(errors="replace"))
        sys.stderr.flush()


#: how often the supervisor looks at a running job (seconds): how late a stop escalates
POLL = 0.05


def _wait(proc, tag, timeout, grace, stop, stderr_reader, end_grace):
    """Wait for the job's leader to end, enforcing the deadline, any stop request and the
    ending grace, and end whatever is left of the job once the leader has (while its pid is
    still reserved, unreaped, so its session and tree cannot be a newcomer's). Returns
    (timed_out, the ending mark it was stopped for or None)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    ended_by = None
    kill_at = None   # when every process left of the job gets SIGKILL
    while True:
        time.sleep(POLL)
        if _has_ended(proc):
            _end_leftovers(proc.pid, tag, grace, tree=True)
            proc.wait()
            return timed_out, ended_by
        now = time.monotonic()
        if kill_at is None and stop.signum is not None:
            kill_at = stop.at + grace
        if kill_at is None and deadline is not None and now >= deadline:
            timed_out = True
            _signal_all(job_processes(proc.pid, tag), signal.SIGTERM)
            kill_at = now + grace
        if (kill_at is None and stderr_reader is not None
                and stderr_reader.mark_at is not None
                and now >= stderr_reader.mark_at + end_grace):
            ended_by = stderr_reader.mark_seen
            stderr_reader.note(f"pyfw: the job is ending ({ended_by!r} on its stderr) but "
                               f"mpiexec has not ended it {end_grace:g} s later: stopping it\n")
            _signal_all(job_processes(proc.pid, tag), signal.SIGTERM)
            kill_at = now + grace
        if stop.count > 1:
            kill_at = now
        if kill_at is not None and now >= kill_at:
            _signal_all(job_processes(proc.pid, tag), signal.SIGKILL)
            kill_at = now + 1.0   # again, should anything have been starting meanwhile


def _has_ended(proc) -> bool:
    """Whether the job's leader has exited, without reaping it (its pid stays reserved)."""
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _end_leftovers(leader, tag, grace, tree) -> None:
    """After the job's leader ended: SIGTERM to anything left of the job, SIGKILL after
    ``grace``. Normally there is nothing (mpiexec waits for its ranks)."""
    left = job_processes(leader, tag, tree=tree)
    if not left:
        return
    _signal_all(left, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(POLL)
        left = job_processes(leader, tag, tree=tree)
        if not left:
            return
    _signal_all(left, signal.SIGKILL)
    _wait_gone(leader, tag, grace, tree=tree)


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every process (Linux /proc; empty elsewhere)."""
    table = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields after "(comm)": state ppid pgrp session ...; a zombie is gone already
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[3]))
    return table


def _has_tag(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
    except OSError:
        return False
    key = JOB_TAG.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(key):
            return tag.encode() in item[len(key):].split()
    return False


def job_processes(leader: int, tag: str | None = None, tree: bool = True) -> set[int]:
    """Every live process of the job whose leader (started in a session of its own) is
    ``leader``: with ``tree``, the leader, the members of its session and their descendants
    (a test bed node's daemon and its ranks start sessions of their own); with ``tag``, every
    process whose ``$PYFW_JOB_TAG`` holds it (also one that lost its parent). Pass
    ``tree=False`` once the leader is reaped: its pid may then be a newcomer's. Never this
    process."""
    table = _proc_table()
    found = set()
    if tree:
        found = {pid for pid, (_, sid) in table.items() if sid == leader}
        if leader in table:
            found.add(leader)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    if tag:
        found |= {pid for pid in table if pid not in found and _has_tag(pid, tag)}
    found.discard(os.getpid())
    return found


def _signal_all(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(leader: int, tag: str | None, grace: float, tree: bool = True) -> None:
    deadline = time.monotonic() + grace
    while job_processes(leader, tag, tree=tree) and time.monotonic() < deadline:
        time.sleep(POLL)


def kill_job(proc: subprocess.Popen, grace: float = 3.0,
             signals=(signal.SIGTERM, signal.SIGKILL), tag: str | None = None) -> None:
    """Kill a job started with ``start_new_session=True``: mpiexec and every rank.

    Open MPI starts each rank in a process group of its own, so killing mpiexec's group is
    not enough: every process of the job (:func:`job_processes`) gets each of ``signals`` in
    turn, ``grace`` seconds apart unless the job is gone before.
    """
    for sig in signals:
        _signal_all(job_processes(proc.pid, tag) | {proc.pid}, sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        _wait_gone(proc.pid, tag, grace if sig == signals[-1] else min(grace, 0.5))
        if not job_processes(proc.pid, tag):
            return


def stop_message(prog: str, result) -> str | None:
    """The one line a command prints when its job ended by timeout or a stop signal."""
    if getattr(result, "stopped_by", None):
        name = signal.Signals(result.stopped_by).name
        return f"{prog}: {name} received: the job was stopped (exit {result.returncode})"
    return None
