"""``pyfw-cluster``: the multi-node test bed from the command line (root).

::

    pyfw-cluster up --nodes 3 --slots 2 --link B:100mbit --slow C:3 [--delay B:0.005]
    pyfw-cluster status                    # the recorded ground truth, as JSON
    pyfw-cluster run -- python -m pyfw.farm.demo
    pyfw-cluster job --scheduler slurm jobs/farm.slurm   # a batch template, unchanged
    pyfw-cluster down

Nodes are named by letter (A, B, C, ...; an index or the node name also works). ``run``
launches Open MPI across the nodes: one ``prted`` daemon per node, started inside the node's
namespaces by an ssh stand-in (the launch agent), TCP only over the test bed's subnet,
binding disabled (see :mod:`pyfw.testbed.netns`). ``pyfw-run --testbed PREFIX`` does the
same for any job. ``job`` runs a Slurm or PBS batch script under a faked scheduler
environment (``SLURM_JOB_NODELIST``/``SLURM_NTASKS`` or ``PBS_NODEFILE``) whose ``mpiexec``
and ``srun`` land on the test bed.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import fcntl
import shutil
import stat
import sys
import tempfile
import time

from ..errors import TestBedBusy
from . import lease
from .agent import agent_path, launch_options
from .netns import STATE_DIR, TestBed, job_env, node_index, refuse_reason

__all__ = ["launch_options", "mpiexec_args", "agent_path", "main"]

def mpiexec_args(tb: TestBed, info: dict) -> list[str]:
    """The whole ``mpiexec`` prefix for a job on every slot of the test bed."""
    from ..launch import find_mpiexec
    argv = [find_mpiexec()]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv + launch_options(info)


def _node_map(items: list[str], nodes: int, what: str, convert) -> dict:
    out = {}
    for item in items:
        node, sep, value = item.partition(":")
        if not sep:
            raise SystemExit(f"pyfw-cluster: --{what} {item!r}: expected NODE:VALUE, "
                             f"e.g. B:{'100mbit' if what == 'link' else '3'}")
        try:
            out[node_index(node, nodes)] = convert(value)
        except ValueError as exc:
            raise SystemExit(f"pyfw-cluster: --{what} {item!r}: {exc}")
    return out


def _required(tb: TestBed) -> dict:
    info = tb.status()
    if info is None:
        raise SystemExit(f"pyfw-cluster: no test bed with prefix {tb.prefix!r} is up; run "
                         f"`pyfw-cluster up` first")
    return info


def _shim_dir(prefix: str, info: dict) -> str:
    """A directory with ``mpiexec``, ``srun``, ``python`` and ``activate`` for batch
    templates: their launch lines then land on the test bed."""
    d = tempfile.mkdtemp(prefix=f"pyfw-cluster-{prefix}-")
    bindir = os.path.join(d, "bin")
    os.makedirs(bindir)
    from ..launch import find_mpiexec
    me = f"{shlex.quote(sys.executable)} -m pyfw.testbed.cli --prefix {prefix}"
    # the real mpiexec, found now: inside the job this directory comes first on PATH, and
    # where no mpiexec sits beside Python (a venv over a system Open MPI) the shim would
    # find itself there and call itself until the job's timeout
    real = f'export PYFW_MPIEXEC="${{PYFW_MPIEXEC:-{find_mpiexec()}}}"\n'
    scripts = {"mpiexec": f"#!/bin/sh\n{real}exec {me} _mpiexec \"$@\"\n",
               "mpirun": f"#!/bin/sh\n{real}exec {me} _mpiexec \"$@\"\n",
               "srun": f"#!/bin/sh\nexec {me} _srun \"$@\"\n",
               "python": f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n",
               "activate": f"export PATH={shlex.quote(bindir)}:$PATH\n"}
    for name, text in scripts.items():
        path = os.path.join(bindir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, stat.S_IRWXU)
    os.symlink(os.path.join(bindir, "python"), os.path.join(bindir, "python3"))
    return d


JOB_IDS = os.path.join(STATE_DIR, "job-ids")


def next_job_id() -> int:
    """A job id no earlier batch job on this machine got (so ``stats-<id>.json`` and the
    like are never overwritten): a counter shared by every test bed, seeded from the clock
    so that ids keep rising after a reboot empties ``/run``."""
    os.makedirs(STATE_DIR, exist_ok=True)
    fd = os.open(JOB_IDS, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = os.read(fd, 64).decode().strip()
        last = int(text) if text.isdigit() else 0
        job_id = max(last + 1, int(time.time()) - 1_700_000_000)
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{job_id}\n".encode())
        return job_id
    finally:
        os.close(fd)


def scheduler_env(info: dict, scheduler: str, workdir: str, envdir: str,
                  job_id: int | None = None) -> dict:
    """A faked Slurm or PBS job environment over the test bed's nodes (job id ``job_id``,
    default :func:`next_job_id`)."""
    job_id = next_job_id() if job_id is None else job_id
    env = job_env(info)
    names = [n["name"] for n in info["nodes"]]
    ntasks = sum(n["slots"] for n in info["nodes"])
    env.update(PYFW_ENV=envdir, PATH=os.path.join(envdir, "bin") + os.pathsep + env["PATH"])
    if scheduler == "slurm":
        prefix = info["prefix"]
        env.update(SLURM_JOB_ID=str(job_id), SLURM_JOBID=str(job_id), SLURM_NTASKS=str(ntasks),
                   SLURM_NPROCS=str(ntasks), SLURM_NNODES=str(len(names)),
                   SLURM_JOB_NUM_NODES=str(len(names)),
                   SLURM_JOB_NODELIST=f"{prefix}-[0-{len(names) - 1}]",
                   SLURM_NODELIST=f"{prefix}-[0-{len(names) - 1}]",
                   SLURM_TASKS_PER_NODE=f"{info['slots']}(x{len(names)})",
                   SLURM_SUBMIT_DIR=workdir, SLURM_JOB_NAME="pyfw-testbed")
    else:
        nodefile = os.path.join(envdir, "nodefile")
        with open(nodefile, "w") as f:
            for n in info["nodes"]:
                f.write((n["name"] + "\n") * n["slots"])
        env.update(PBS_NODEFILE=nodefile, PBS_O_WORKDIR=workdir, PBS_JOBID=f"{job_id}.testbed",
                   PBS_JOBNAME="pyfw-testbed", PBS_ENVIRONMENT="PBS_BATCH")
    return env


def _shim_mpiexec(info: dict, args: list[str]) -> int:
    """``mpiexec`` of a batch template: the real one, with the test bed's options (its own
    ``--host``/``--hostfile`` kept when it gives one)."""
    from ..launch import find_mpiexec, mpi_env
    placed = any(a in ("--host", "-H", "--hostfile", "--machinefile") for a in args)
    argv = [find_mpiexec()]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += launch_options(info, hosts=not placed) + args
    # become mpiexec: the job's stop signal (see pyfw.launch.supervise) reaches it directly
    os.execve(argv[0], argv, mpi_env(job_env(info), 1, local=False))


def _shim_srun(info: dict, args: list[str]) -> int:
    """``srun`` of a batch template: its task and node counts become an mpiexec launch."""
    ntasks = sum(n["slots"] for n in info["nodes"])
    nodes = len(info["nodes"])
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt, eq, val = args[i].partition("=")
        if not eq and opt in ("-n", "-N", "--ntasks", "--nodes", "-c", "--cpus-per-task",
                              "-J", "--job-name", "-o", "--output", "-t", "--time"):
            i += 1
            val = args[i]
        if opt in ("-n", "--ntasks"):
            ntasks = int(val)
        elif opt in ("-N", "--nodes"):
            nodes = int(val.split("-")[0])
        i += 1
    chosen = info["nodes"][:max(1, nodes)]
    hosts = ",".join(f"{n['name']}:{n['slots']}" for n in chosen)
    return _shim_mpiexec(info, ["--host", hosts, "-n", str(ntasks)] + args[i:])


def build_parser() -> argparse.ArgumentParser:
    """The ``pyfw-cluster`` command line."""
    p = argparse.ArgumentParser(
        prog="pyfw-cluster", description="A multi-node test bed on one machine (root): "
        "network + UTS namespaces as nodes, real Open MPI daemons per node, tc caps, CPU "
        "quotas.")
    p.add_argument("--prefix", default=os.environ.get("PYFW_TESTBED", "pfw"),
                   help="names of this test bed's objects (default: $PYFW_TESTBED or pfw)")
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="create the nodes (replacing this prefix's old ones)")
    u.add_argument("--nodes", type=int, default=2, help="number of nodes (A, B, ...)")
    u.add_argument("--slots", type=int, default=2, help="ranks per node")
    u.add_argument("--link", action="append", default=[], metavar="NODE:RATE",
                   help="cap the node's link both ways with tc tbf, e.g. B:100mbit")
    u.add_argument("--slow", action="append", default=[], metavar="NODE:FACTOR",
                   help="give the node's processes 1/FACTOR of a core (cgroup quota), "
                        "e.g. C:3")
    u.add_argument("--delay", action="append", default=[], metavar="NODE:SECONDS",
                   help="one-way delay on every link of the node (netem if the kernel has "
                        "it, else emulated in-process by pyfw; status says which)")
    sub.add_parser("down", help="remove every object of this test bed")
    sub.add_parser("status", help="print the test bed's state (ground truth) as JSON")
    r = sub.add_parser("run", help="run a command on every slot: run -- CMD ...")
    r.add_argument("--timeout", type=float, default=600, help="kill the job after S seconds")
    r.add_argument("-n", type=int, default=None, help="ranks (default: every slot)")
    r.add_argument("command", nargs=argparse.REMAINDER)
    j = sub.add_parser("job", help="run a Slurm/PBS batch script unchanged on the test bed")
    j.add_argument("--scheduler", choices=("slurm", "pbs"), required=True)
    j.add_argument("--timeout", type=float, default=600, help="kill the job after S seconds")
    j.add_argument("script")
    return p


_SHIMS = {"_mpiexec": _shim_mpiexec, "_srun": _shim_srun}


def main(argv: list[str] | None = None) -> int:
    """The ``pyfw-cluster`` entry point."""
    try:
        return _main(argv)
    except KeyboardInterrupt:   # Ctrl-C outside a job (a job handles it itself)
        print("pyfw-cluster: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 3 and argv[0] == "--prefix" and argv[2] in _SHIMS:
        # a batch template's mpiexec/srun (see _shim_dir): its arguments are not ours
        return _SHIMS[argv[2]](_required(TestBed(argv[1])), argv[3:])
    a = build_parser().parse_args(argv)
    tb = TestBed(a.prefix)
    if a.cmd == "up":
        reason = refuse_reason()
        if reason:
            raise SystemExit(f"pyfw-cluster: {reason}")
        links = _node_map(a.link, a.nodes, "link", str)
        slow = _node_map(a.slow, a.nodes, "slow", float)
        delay = _node_map(a.delay, a.nodes, "delay", float)
        try:
            print(json.dumps(tb.up(a.nodes, a.slots, links, slow, delay), indent=1))
        except TestBedBusy as e:
            raise SystemExit(f"pyfw-cluster: {e}") from None
        return 0
    if a.cmd == "down":
        try:
            tb.down()
        except TestBedBusy as e:
            raise SystemExit(f"pyfw-cluster: {e}") from None
        return 0
    if a.cmd == "status":
        info = tb.status()
        if info is None:
            print(f"pyfw-cluster: no test bed with prefix {a.prefix!r} is up", file=sys.stderr)
            return 1
        print(json.dumps(info, indent=1))
        return 0
    lease.hold(a.prefix)   # for the job's life: up/down elsewhere refuse meanwhile
    info = _required(tb)
    from ..launch import mpi_env, run
    if a.cmd == "run":
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        if not cmd:
            raise SystemExit("pyfw-cluster run: no command given (run -- CMD ...)")
        n = a.n or sum(node["slots"] for node in info["nodes"])
        res = run(n, cmd, timeout=a.timeout, extra=launch_options(info), env=job_env(info),
                  reraise=False)
        _say_how_it_ended("pyfw-cluster run", res, a.timeout)
        return res.returncode
    envdir = _shim_dir(a.prefix, info)   # job
    try:
        env = scheduler_env(info, a.scheduler, os.getcwd(), envdir)
        return _run_job(a.script, a.timeout, mpi_env(env, 1, local=False), info)
    finally:
        shutil.rmtree(envdir, ignore_errors=True)   # the shims die with the job


def _run_job(script: str, timeout: float, env: dict, info: dict) -> int:
    """Run a batch script under ``env`` as one job (see :func:`pyfw.launch.supervise`): a
    timeout or a stop signal ends the script, its mpiexec and every rank.

    The script runs on the allocation's first node (in its namespaces, under its hostname),
    as Slurm and PBS run a batch script: its ``mpiexec`` is then on a node of the job, not
    beside them. Run from outside the nodes, Open MPI 5.0's runtime lost a daemon in about
    one spawn-mode job in six on two nodes ("PRTE has lost communication with a remote
    daemon", the job ended with status 0 and no output) and once hung in ``MPI_Comm_spawn``."""
    from ..launch import supervise
    node = info["nodes"][0]["name"]
    command = [agent_path(info["prefix"]), node, "bash", shlex.quote(script)]
    res = supervise(command, env, timeout=timeout, watch_stderr=False, reraise=False)
    _say_how_it_ended("pyfw-cluster job", res, timeout)
    return res.returncode


def _say_how_it_ended(prog: str, res, timeout: float) -> None:
    from ..launch import stop_message
    if res.timed_out:
        print(f"{prog}: killed after {timeout:g} s", file=sys.stderr)
    elif res.stopped_by:
        print(stop_message(prog, res), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
