"""pyfw-cluster up|run|status|down: the test bed from the command line."""
import argparse
import json
import os
import stat
import subprocess
import sys

from .netns import STATE_DIR, TestBed

AGENT = """#!/bin/sh
# ssh stand-in for prterun: drop ssh options, run the command in the node's namespaces
while [ "${1#-}" != "$1" ]; do case "$1" in -o|-p|-l|-i) shift 2;; *) shift;; esac; done
node="$1"; shift
[ -d /sys/fs/cgroup/cpu/$node ] && echo $$ > /sys/fs/cgroup/cpu/$node/cgroup.procs
exec ip netns exec "$node" unshare --uts sh -c "hostname $node; $*"
"""


def agent_path(prefix):
    path = os.path.join(STATE_DIR, prefix + "-agent.sh")
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(path, "w") as f:
        f.write(AGENT)
    os.chmod(path, stat.S_IRWXU)
    return path


def mpiexec_args(tb, info):
    """Open MPI options for a job across the nodes (binding off: every node shares cores)."""
    hosts = ",".join(f"{n['name']}:{n['slots']}" for n in info["nodes"])
    sub = info["subnet"]
    return ["mpiexec", "--allow-run-as-root", "--host", hosts, "--bind-to", "none",
            "--prtemca", "plm_ssh_agent", agent_path(tb.prefix),
            "--prtemca", "oob_tcp_if_include", sub, "--mca", "btl", "self,tcp",
            "--mca", "btl_tcp_if_include", sub, "--mca", "osc", "^ucx",
            "--mca", "pml", "ob1"]


def main(argv=None):
    p = argparse.ArgumentParser(prog="pyfw-cluster")
    p.add_argument("--prefix", default=os.environ.get("PYFW_TESTBED_PREFIX", "pfw"))
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--nodes", type=int, default=2)
    u.add_argument("--slots", type=int, default=2)
    u.add_argument("--link", action="append", default=[], help="NODE_INDEX:RATE, e.g. 1:100mbit")
    u.add_argument("--slow", action="append", default=[], help="NODE_INDEX:FACTOR (cpu quota)")
    sub.add_parser("down")
    sub.add_parser("status")
    r = sub.add_parser("run")
    r.add_argument("--timeout", type=float, default=600)
    r.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    tb = TestBed(a.prefix)
    if a.cmd == "up":
        links = {int(s.split(":")[0]): s.split(":")[1] for s in a.link}
        slow = {int(s.split(":")[0]): float(s.split(":")[1]) for s in a.slow}
        print(json.dumps(tb.up(a.nodes, a.slots, links, slow), indent=1))
    elif a.cmd == "down":
        tb.down()
    elif a.cmd == "status":
        print(json.dumps(tb.status(), indent=1))
    else:
        info = tb.status()
        if info is None:
            sys.exit(f"pyfw-cluster: no test bed with prefix {a.prefix!r}; run `pyfw-cluster up`")
        cmd = [c for c in a.command if c != "--"]
        sys.exit(subprocess.run(mpiexec_args(tb, info) + cmd, timeout=a.timeout).returncode)


if __name__ == "__main__":
    main()
