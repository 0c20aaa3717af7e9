"""Bring-up / teardown of namespace "nodes".  Every object is named with a fixed prefix
so that `down` and a stale-cleaning `up` touch only this test bed's objects."""
import hashlib
import json
import os
import shutil
import subprocess

STATE_DIR = "/run/pyfw-testbed"
CPU_CG = "/sys/fs/cgroup/cpu"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def subnet_for(prefix):
    """Private /24 derived from the prefix, so two test beds can coexist."""
    h = hashlib.sha1(prefix.encode()).digest()
    return f"10.{200 + h[0] % 50}.{h[1]}"


def refuse_reason():
    """Why namespaces are unavailable here, or None."""
    if os.geteuid() != 0:
        return "test bed needs root (ip netns)"
    if shutil.which("ip") is None:
        return "no `ip` command"
    r = _ip("netns", "list", check=False)
    if r.returncode != 0:
        return f"ip netns unavailable: {r.stderr.strip()}"
    return None


class TestBed:
    """Named nodes <prefix>-<i>, bridge <prefix>br, veth <prefix><i>h/<prefix><i>n."""

    def __init__(self, prefix="pfw"):
        if len(prefix) > 8:
            raise ValueError(f"prefix {prefix!r} longer than 8 chars (interface names <= 15)")
        self.prefix = prefix
        self.net = subnet_for(prefix)
        self.state = os.path.join(STATE_DIR, prefix + ".json")

    def node(self, i):
        return f"{self.prefix}-{i}"

    def up(self, nodes=2, slots=2, links=None, slow=None):
        """Create `nodes` namespaces; links maps node index -> tbf rate (e.g. '100mbit')."""
        reason = refuse_reason()
        if reason:
            raise RuntimeError(reason)
        self.down()
        br = self.prefix + "br"
        _ip("link", "add", br, "type", "bridge")
        _ip("addr", "add", f"{self.net}.254/24", "dev", br)
        _ip("link", "set", br, "up")
        info = {"prefix": self.prefix, "subnet": f"{self.net}.0/24", "nodes": []}
        for i in range(nodes):
            name, h, n = self.node(i), f"{self.prefix}{i}h", f"{self.prefix}{i}n"
            _ip("netns", "add", name)
            _ip("link", "add", h, "type", "veth", "peer", "name", n)
            _ip("link", "set", n, "netns", name)
            _ip("link", "set", h, "master", br, "up")
            addr = f"{self.net}.{i + 1}"
            _ip("-n", name, "addr", "add", addr + "/24", "dev", n)
            _ip("-n", name, "link", "set", n, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            rate = (links or {}).get(i)
            if rate:
                for cmd in (["tc", "qdisc", "add", "dev", h], ["ip", "netns", "exec", name,
                                                                 "tc", "qdisc", "add", "dev", n]):
                    subprocess.run(cmd + ["root", "tbf", "rate", rate, "burst", "64kb",
                                          "latency", "50ms"], check=True)
            cpu = self._slow(name, (slow or {}).get(i))
            info["nodes"].append({"name": name, "addr": addr, "slots": slots, "rate": rate,
                                  "cpu_cores": cpu})
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(self.state, "w") as f:
            json.dump(info, f)
        return info

    def _slow(self, name, factor):
        """cgroup v1 cpu quota: the node gets one core / factor (ground truth, in cores)."""
        if not factor:
            return None
        cg = os.path.join(CPU_CG, name)
        os.makedirs(cg, exist_ok=True)
        with open(os.path.join(cg, "cpu.cfs_period_us"), "w") as f:
            f.write("100000")
        with open(os.path.join(cg, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(100000 / float(factor))))
        return 1.0 / float(factor)

    def down(self):
        """Idempotent: removes every netns, link and cpu cgroup of this prefix."""
        if os.path.isdir(CPU_CG):
            for d in os.listdir(CPU_CG):
                if d.startswith(self.prefix + "-"):
                    try:
                        os.rmdir(os.path.join(CPU_CG, d))
                    except OSError:
                        pass
        for line in _ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.prefix + "-"):
                _ip("netns", "del", name, check=False)
        for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
            dev = line.split(":")[1].strip().split("@")[0]
            if dev.startswith(self.prefix) and (dev.endswith("h") or dev == self.prefix + "br"):
                _ip("link", "del", dev, check=False)
        if os.path.exists(self.state):
            os.remove(self.state)

    def __enter__(self):
        """`with TestBed(p) as tb: tb.up(...)`: torn down on exit, SIGTERM and SIGINT."""
        import atexit
        import signal
        atexit.register(self.down)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda *_: (self.down(), os._exit(128 + sig)))
        return self

    def __exit__(self, *exc):
        self.down()

    def status(self):
        if not os.path.exists(self.state):
            return None
        with open(self.state) as f:
            return json.load(f)


def up(prefix="pfw", **kw):
    return TestBed(prefix).up(**kw)


def down(prefix="pfw"):
    TestBed(prefix).down()


def status(prefix="pfw"):
    return TestBed(prefix).status()
