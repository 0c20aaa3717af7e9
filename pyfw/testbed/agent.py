"""The launch side of the test bed: the ssh stand-in that starts Open MPI's daemons inside
each node's namespaces, and the ``mpiexec`` options that use it. Apart from the CLI so that
:mod:`pyfw.launch` (``pyfw-run --testbed``) can read it without a circle back to the CLI,
which itself launches through :mod:`pyfw.launch`."""
from __future__ import annotations

import os
import stat

from .netns import STATE_DIR

__all__ = ["AGENT", "agent_path", "launch_options"]

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
