"""Bring-up / teardown of namespace "nodes" on one machine (root).

Each node is a network + UTS namespace (``<prefix>-<i>``, hostname the same) with a veth
into a bridge (``<prefix>br``) on a private /24 derived from the prefix. Every object is
named with the prefix, so ``down`` and the stale-cleaning ``up`` touch only this test bed's
objects. What each node gets, and how it is made, is recorded in the state file
(``/run/pyfw-testbed/<prefix>.json``) as the ground truth for tests and benchmarks:

* **bandwidth cap** (``links={i: "100mbit"}``): a tc ``tbf`` qdisc on both ends of the
  node's veth, so both directions are capped (``method: "tc tbf"``);
* **link delay** (``delay={i: 0.005}`` seconds, one way): ``netem`` where the kernel has it;
  where it has not (this kernel), the in-process emulation of :mod:`pyfw.linkemu` between
  the node's ranks and every other node's, installed through ``$PYFW_EMULATE_LINKS`` by
  :func:`job_env` (``method`` says which);
* **CPU slowdown** (``slow={i: 3.0}``): the node's processes share ``1/factor`` of one core
  through a cgroup CPU quota (cgroup v2 ``cpu.max`` where the cpu controller is there, else
  v1 ``cpu.cfs_quota_us``; ``cpu_method`` says which, ``cpu_cores`` is the quota);
* **binding**: disabled (``--bind-to none``): nodes share the machine's cores, and Open
  MPI's default binding would pin the first rank of every node to the same core.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import string
import subprocess

from . import lease
from .agent import profile_path, write_profile

__all__ = ["TestBed", "refuse_reason", "subnet_for", "node_index", "up", "down", "status",
           "job_env", "rank_nodes"]

STATE_DIR = lease.STATE_DIR
CG_ROOT = "/sys/fs/cgroup"
CPU_CG = os.path.join(CG_ROOT, "cpu")
CPU_PERIOD_US = 10_000
BINDING = "none (nodes share this machine's cores; per-node binding would stack ranks)"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def subnet_for(prefix: str) -> str:
    """Private /24 derived from the prefix, so two test beds can coexist."""
    h = hashlib.sha1(prefix.encode()).digest()
    return f"10.{200 + h[0] % 50}.{h[1]}"


def refuse_reason() -> str | None:
    """Why namespaces are unavailable here, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the test bed needs root (ip netns, tc, cgroups)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if shutil.which("unshare") is None:
        return "no `unshare` command (util-linux)"
    r = _ip("netns", "list", check=False)
    if r.returncode != 0:
        return f"ip netns unavailable: {r.stderr.strip()}"
    return None


def node_index(spec, nodes: int | None = None) -> int:
    """A node given as a letter (``B``), an index (``1``) or a name (``pfw-1``) -> index."""
    text = str(spec).strip()
    if text.isdigit():
        i = int(text)
    elif len(text) == 1 and text.upper() in string.ascii_uppercase:
        i = string.ascii_uppercase.index(text.upper())
    elif "-" in text and text.rsplit("-", 1)[1].isdigit():
        i = int(text.rsplit("-", 1)[1])
    else:
        raise ValueError(f"bad node {spec!r}: expected a letter (A, B, ...), an index or a "
                         f"node name")
    if nodes is not None and not 0 <= i < nodes:
        raise ValueError(f"node {spec!r} is not one of the {nodes} nodes")
    return i


def _cpu_method() -> str:
    try:
        with open(os.path.join(CG_ROOT, "cgroup.controllers")) as f:
            if "cpu" in f.read().split():
                return "cgroup v2 cpu.max"
    except OSError:
        pass
    if os.path.exists(os.path.join(CPU_CG, "cpu.cfs_quota_us")):
        return "cgroup v1 cpu.cfs_quota_us"
    return ""


def cgroup_dir(name: str) -> str | None:
    """The node's CPU cgroup directory (it may not exist), or None without a CPU controller."""
    method = _cpu_method()
    if method.startswith("cgroup v2"):
        return os.path.join(CG_ROOT, name)
    if method:
        return os.path.join(CPU_CG, name)
    return None


def _has_netem(namespace: str) -> bool:
    """Whether this kernel has the netem qdisc (probed on a node's own loopback)."""
    probe = subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev",
                            "lo", "root", "netem", "delay", "0ms"], capture_output=True)
    if probe.returncode != 0:
        return False
    subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", "lo",
                    "root"], capture_output=True)
    return True


class TestBed:
    """Named nodes ``<prefix>-<i>``, bridge ``<prefix>br``, veth ``<prefix>-<i>h/<prefix>-<i>n``.

    ``with TestBed("pfw") as tb: info = tb.up(nodes=3, slots=2, links={1: "100mbit"},
    slow={2: 3})`` -- torn down on leaving the block, at exit and on SIGTERM/SIGHUP.
    """

    __test__ = False   # not a pytest class

    def __init__(self, prefix: str = "pfw"):
        if not prefix or len(prefix) > 8 or not prefix.isalnum():
            raise ValueError(f"prefix {prefix!r}: 1-8 letters/digits (interface names <= 15)")
        self.prefix = prefix
        self.net = subnet_for(prefix)
        self.state = os.path.join(STATE_DIR, prefix + ".json")
        self._lease = None   # held from up() to down(): see pyfw.testbed.lease

    def node(self, i: int) -> str:
        """Node ``i``'s name (its namespace and hostname)."""
        return f"{self.prefix}-{i}"

    def veth(self, i: int) -> tuple[str, str]:
        """Node ``i``'s veth pair: host end (on the bridge), node end (in its namespace)."""
        return f"{self.prefix}-{i}h", f"{self.prefix}-{i}n"

    def up(self, nodes: int = 2, slots: int = 2, links=None, slow=None, delay=None) -> dict:
        """Create ``nodes`` nodes of ``slots`` ranks each (replacing this prefix's old ones).

        ``links``: node -> tbf rate (``"100mbit"``); ``slow``: node -> CPU slowdown factor;
        ``delay``: node -> one-way delay in seconds added to every link of that node. Nodes
        are given as indices, letters or names. Returns the recorded state (see module doc).
        Refused (:class:`~pyfw.errors.TestBedBusy`) while another process uses this prefix's
        test bed; this object holds a lease on it until :meth:`down`.
        """
        reason = refuse_reason()
        if reason:
            raise RuntimeError(f"pyfw test bed: {reason}")
        if not 1 <= nodes <= 26 or slots < 1:
            raise ValueError(f"need 1..26 nodes and >= 1 slot, got {nodes} x {slots}")
        links = {node_index(k, nodes): v for k, v in (links or {}).items()}
        slow = {node_index(k, nodes): float(v) for k, v in (slow or {}).items()}
        delay = {node_index(k, nodes): float(v) for k, v in (delay or {}).items()}
        if any(f < 1 for f in slow.values()):
            raise ValueError("a slowdown factor must be >= 1")
        with lease.exclusive(self.prefix):
            lease.refuse_if_used(self.prefix, "up")
            self._teardown()
            try:
                info = self._build(nodes, slots, links, slow, delay)
            except BaseException:
                self._teardown()
                raise
            if self._lease is None:
                self._lease = lease.hold(self.prefix)
            return info

    def _build(self, nodes, slots, links, slow, delay) -> dict:
        br = self.prefix + "br"
        _ip("link", "add", br, "type", "bridge")
        _ip("addr", "add", f"{self.net}.254/24", "dev", br)
        _ip("link", "set", br, "up")
        for i in range(nodes):
            name, (h, n) = self.node(i), self.veth(i)
            _ip("netns", "add", name)
            _ip("link", "add", h, "type", "veth", "peer", "name", n)
            _ip("link", "set", n, "netns", name)
            _ip("link", "set", h, "master", br, "up")
            _ip("-n", name, "addr", "add", f"{self.net}.{i + 1}/24", "dev", n)
            _ip("-n", name, "link", "set", n, "up")
            _ip("-n", name, "link", "set", "lo", "up")
        netem = bool(delay) and _has_netem(self.node(0))
        info = {"prefix": self.prefix, "subnet": f"{self.net}.0/24", "slots": slots,
                "binding": BINDING, "bandwidth_method": "tc tbf on both veth ends",
                "delay_method": ("tc netem" if netem else
                                 "in-process (pyfw.linkemu via PYFW_EMULATE_LINKS): this "
                                 "kernel has no netem") if delay else None,
                "cpu_method": _cpu_method() if slow else None, "nodes": []}
        for i in range(nodes):
            name, (h, n) = self.node(i), self.veth(i)
            rate = links.get(i)
            ends = (["tc", "qdisc", "add", "dev", h],
                    ["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", n])
            if rate:
                for cmd in ends:
                    subprocess.run(cmd + ["root", "tbf", "rate", rate, "burst", "64kb",
                                          "latency", "50ms"], check=True, capture_output=True)
            if netem and delay.get(i):
                if rate:
                    raise RuntimeError("netem delay and a tbf cap on one node: not supported")
                for cmd in ends:
                    subprocess.run(cmd + ["root", "netem", "delay",
                                          f"{delay[i] * 1e3:.3f}ms"], check=True)
            info["nodes"].append({
                "name": name, "letter": string.ascii_uppercase[i],
                "addr": f"{self.net}.{i + 1}", "slots": slots,
                "ranks": list(range(i * slots, (i + 1) * slots)),
                "rate": rate, "rate_bytes_per_s": tc_rate_bytes(rate) if rate else None,
                "delay_s": delay.get(i), "slowdown": slow.get(i),
                "cpu_cores": self._slow(name, slow.get(i))})
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(self.state, "w") as f:
            json.dump(info, f, indent=1)
        write_profile(info, job_env(info, {}))   # for pyfw-run --testbed
        return info

    def _slow(self, name: str, factor: float | None) -> float | None:
        """CPU quota of one core / factor for the node's processes; the quota in cores."""
        if not factor or factor == 1:
            return None
        cg = cgroup_dir(name)
        if cg is None:
            raise RuntimeError("no cgroup CPU controller here: cannot slow a node down")
        os.makedirs(cg, exist_ok=True)
        # a short period makes the quota look like a slower core: with the default 100 ms a
        # node ran full speed for 50 ms, then stalled 50 ms (factor 2), and per-step timings
        # of a stencil saw mostly fast steps
        period = CPU_PERIOD_US
        quota = int(period / factor)
        if _cpu_method().startswith("cgroup v2"):
            with open(os.path.join(cg, "cpu.max"), "w") as f:
                f.write(f"{quota} {period}")
        else:
            with open(os.path.join(cg, "cpu.cfs_period_us"), "w") as f:
                f.write(str(period))
            with open(os.path.join(cg, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(quota))
        return quota / period

    def down(self) -> None:
        """Idempotent: removes every netns, link and cpu cgroup of this prefix. Refused
        (:class:`~pyfw.errors.TestBedBusy`) while another process uses the test bed."""
        with lease.exclusive(self.prefix):
            lease.refuse_if_used(self.prefix, "down")
            self._teardown()
        lease.release(self._lease)
        self._lease = None

    def _teardown(self) -> None:
        for base in {CPU_CG, CG_ROOT}:
            if os.path.isdir(base):
                for d in os.listdir(base):
                    if d.startswith(self.prefix + "-"):
                        _kill_cgroup(os.path.join(base, d))
        for line in _ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.prefix + "-"):
                _ip("netns", "del", name, check=False)
        for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
            dev = line.split(":")[1].strip().split("@")[0]
            if owns_link(self.prefix, dev):
                _ip("link", "del", dev, check=False)
        for path in (self.state, os.path.join(STATE_DIR, self.prefix + "-agent.sh"),
                     profile_path(self.prefix)):
            if os.path.exists(path):
                os.remove(path)

    def __enter__(self):
        import atexit
        import signal
        atexit.register(self._down_if_held)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: (self._down_if_held(),
                                                       os._exit(128 + signum)))
        return self

    def __exit__(self, *exc):
        self._down_if_held()

    def _down_if_held(self) -> None:
        # at exit, only a bed this object still holds: once down, the prefix may be another
        # process's bed by now
        if self._lease is not None:
            self.down()

    def status(self) -> dict | None:
        """The recorded state of this test bed, or None when it is not up."""
        if not os.path.exists(self.state):
            return None
        with open(self.state) as f:
            return json.load(f)


def owns_link(prefix: str, dev: str) -> bool:
    """Whether host link ``dev`` belongs to test bed ``prefix``: its bridge or a node's
    host-side veth (``<prefix>-<i>h``), not another test bed's whose prefix starts the same
    (``pfw`` must leave ``pfwc2``'s ``pfwc2-0h`` alone; prefixes are alphanumeric, so the
    dash ends one)."""
    return dev == prefix + "br" or re.fullmatch(re.escape(prefix) + r"-\d+h", dev) is not None


def _kill_cgroup(path: str) -> None:
    """Remove a node's cgroup; processes still in it go back to the root group first."""
    procs = os.path.join(path, "cgroup.procs")
    parent = os.path.join(os.path.dirname(path), "cgroup.procs")
    try:
        with open(procs) as f:
            pids = f.read().split()
        for pid in pids:
            with open(parent, "w") as f:
                f.write(pid)
    except OSError:
        pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def tc_rate_bytes(rate: str) -> float:
    """A tc rate (``100mbit``, ``1gbit``, ``500kbit``, ``10mbps``) in bytes per second."""
    text = rate.strip().lower()
    units = (("gbit", 1e9 / 8), ("mbit", 1e6 / 8), ("kbit", 1e3 / 8), ("gbps", 1e9),
             ("mbps", 1e6), ("kbps", 1e3), ("bit", 1 / 8), ("bps", 1.0))
    for suffix, scale in units:
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * scale
    raise ValueError(f"bad tc rate {rate!r}")


def rank_nodes(info: dict) -> list[int]:
    """Node index of every rank of a job that fills the nodes' slots in order."""
    return [i for i, node in enumerate(info["nodes"]) for _ in range(node["slots"])]


def job_env(info: dict, base: dict | None = None) -> dict:
    """Environment for a job on the test bed: the in-process link delay, where the test bed
    emulates it (netem absent), as ``$PYFW_EMULATE_LINKS`` between the delayed node's ranks
    and every rank of another node."""
    env = dict(os.environ if base is None else base)
    method = info.get("delay_method") or ""
    if not method.startswith("in-process"):
        return env
    nodes = rank_nodes(info)
    delays = [n.get("delay_s") or 0.0 for n in info["nodes"]]
    pairs = []
    for i, ni in enumerate(nodes):
        for j in range(i + 1, len(nodes)):
            nj = nodes[j]
            d = delays[ni] + delays[nj] if ni != nj else 0.0
            if d > 0:
                pairs.append(f"{i}-{j}:{d:g}")
    env["PYFW_EMULATE_LINKS"] = ",".join(pairs)
    return env


def up(prefix: str = "pfw", **kw) -> dict:
    """Bring up a test bed (see :meth:`TestBed.up`)."""
    return TestBed(prefix).up(**kw)


def down(prefix: str = "pfw") -> None:
    """Remove test bed ``prefix`` (see :meth:`TestBed.down`)."""
    TestBed(prefix).down()


def status(prefix: str = "pfw") -> dict | None:
    """The recorded state of test bed ``prefix``, or None."""
    return TestBed(prefix).status()
