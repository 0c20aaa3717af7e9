"""The launch side of the test bed: the ssh stand-in that starts Open MPI's daemons inside
each node's namespaces, the ``mpiexec`` options that use it, and the launch profile that
hands both to ``pyfw-run --testbed`` as data (the launcher imports nothing of the test bed;
the test bed launches through :mod:`pyfw.launch`)."""
from __future__ import annotations

import json
import os
import stat

from .lease import STATE_DIR, lock_path

__all__ = ["AGENT", "agent_path", "launch_options", "profile_path", "write_profile"]

AGENT = """#!/bin/sh
# ssh stand-in for prterun: drop ssh's options, run the command in the node's namespaces
# (its own network and hostname) and, if the node is slowed, in its CPU cgroup
while [ "${1#-}" != "$1" ]; do case "$1" in -o|-p|-l|-i|-F) shift 2;; *) shift;; esac; done
node="$1"; shift
for cg in /sys/fs/cgroup/cpu/$node /sys/fs/cgroup/$node; do
  [ -f "$cg/cgroup.procs" ] && echo $$ > "$cg/cgroup.procs" && break
done
exec ip netns exec "$node" unshare --uts sh -c "hostname $node; $*"
"""


def agent_path(prefix: str) -> str:
    """Write the launch agent of test bed ``prefix``; returns its path."""
    path = os.path.join(STATE_DIR, prefix + "-agent.sh")
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(path, "w") as f:
        f.write(AGENT)
    os.chmod(path, stat.S_IRWXU)
    return path


def launch_options(info: dict, hosts: bool = True) -> list[str]:
    """``mpiexec`` options that run a job across the test bed's nodes (no binary, no -n)."""
    sub = info["subnet"]
    opts = []
    if hosts:
        opts += ["--host", ",".join(f"{n['name']}:{n['slots']}" for n in info["nodes"])]
    return opts + [
        "--bind-to", "none",
        "--prtemca", "plm", "ssh", "--prtemca", "ras", "^slurm",
        "--prtemca", "plm_ssh_agent", agent_path(info["prefix"]),
        "--prtemca", "oob_tcp_if_include", sub,
        "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", sub,
        "--mca", "pml", "ob1", "--mca", "osc", "^ucx"]


def profile_path(prefix: str) -> str:
    """Where test bed ``prefix`` keeps its launch profile (``pyfw-run --testbed`` reads it:
    :data:`pyfw.launch.TESTBED_PROFILES`)."""
    return os.path.join(STATE_DIR, prefix + ".launch.json")


def write_profile(info: dict, env: dict) -> str:
    """Write what a job on the test bed needs, as data: ``hosts`` (the ``--host`` option,
    left out when the user gives a hostfile), ``options`` (every other ``mpiexec`` option),
    ``env`` (variables the ranks need, e.g. ``$PYFW_EMULATE_LINKS``) and ``lease`` (the file
    whose shared ``flock`` marks the bed in use). Returns its path."""
    hosts = launch_options(info)[:2]
    profile = {"prefix": info["prefix"], "hosts": hosts,
               "options": launch_options(info, hosts=False), "env": env,
               "lease": lock_path(info["prefix"])}
    path = profile_path(info["prefix"])
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(profile, f, indent=1)
    os.replace(tmp, path)
    return path
