"""Passive profile of a running pyfw job: CPU, memory, traffic per peer, pattern.

Nothing here sends a probe: it reads what the process and :class:`pyfw.comm.Comm` already
know.

* :class:`Profiler` -- start it when the phase of interest starts (or rely on the process
  start); :meth:`Profiler.snapshot` gives this rank's wall and CPU seconds, CPU utilisation
  (CPU / wall), peak resident memory (``getrusage`` ``ru_maxrss``, cross-checked with
  ``VmHWM`` in ``/proc/self/status``) and the messages/bytes sent and received per peer since
  the start (``Comm.traffic()`` minus the baseline).
* :func:`profile` -- collective: every rank's snapshot, the ``p x p`` matrices
  ``bytes[i][j]`` / ``msgs[i][j]`` (sent by i to j) and the communication pattern
  (:func:`classify`). JSON-ready; ``python -m pyfw.monitor report FILE`` views it.
* :func:`classify` -- the NAS-study classes ``none``, ``chain``, ``ring``, ``all-to-all``,
  ``star`` (master-worker), else ``other``, from a traffic matrix. Links carrying less than
  ``threshold`` (default 5 %) of the busiest link's bytes are ignored (control messages).
  Small groups are ambiguous; the rules: 2 communicating ranks are a ``chain``; 3 ranks in a
  triangle are a ``ring`` (``all-to-all`` needs >= 4); a 3-rank path is a ``chain`` when its
  ranks are consecutive in rank order (0-1-2) and a ``star`` otherwise (1-0-2: a master with
  two workers).
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time

import numpy as np

from ..comm import mpi_of

__all__ = ["Profiler", "profile", "classify", "process_usage", "write_json", "PATTERNS"]

PATTERNS = ("none", "chain", "ring", "all-to-all", "star", "other")


def _vm_hwm() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _process_start_wall() -> float | None:
    """Wall-clock time (time.time()) when this process started, from /proc (Linux)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 overall: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        return time.time() - (uptime - start_ticks / ticks)
    except (OSError, ValueError, IndexError):
        return None


def process_usage() -> dict:
    """CPU seconds (user, system) and peak resident bytes of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    peak = ru.ru_maxrss * scale
    hwm = _vm_hwm()
    return {"cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime,
            "peak_rss_bytes": max(peak, hwm or 0)}


class Profiler:
    """Per-rank passive measurements since ``start()`` (called by the constructor).

    ``since_process_start=True`` measures from the start of the process instead (CPU and
    traffic from zero) -- what :func:`profile` uses when no profiler is given.
    """

    def __init__(self, comm, since_process_start: bool = False):
        self.comm = comm
        self.start(since_process_start)

    def start(self, since_process_start: bool = False) -> None:
        """Start counting: CPU, wall time and the communicator's traffic from now."""
        u = process_usage()
        n = self._size()
        if since_process_start:
            self.t0 = _process_start_wall() or time.time()
            self.cpu0 = 0.0
            self.base = {k: [0] * n for k in ("sent_msgs", "sent_bytes", "recv_msgs",
                                              "recv_bytes")}
        else:
            self.t0 = time.time()
            self.cpu0 = u["cpu_user_s"] + u["cpu_sys_s"]
            self.base = self._traffic()

    def _size(self) -> int:
        c = self.comm
        return c.size if hasattr(c, "size") and isinstance(c.size, int) else c.Get_size()

    def _traffic(self) -> dict:
        if hasattr(self.comm, "traffic"):
            t = self.comm.traffic()
            return {k: list(t[k]) for k in ("sent_msgs", "sent_bytes", "recv_msgs",
                                            "recv_bytes")}
        n = self._size()  # a raw mpi4py communicator: no counters
        return {k: [0] * n for k in ("sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes")}

    def snapshot(self) -> dict:
        """This rank's figures since the start (JSON-ready dict)."""
        u = process_usage()
        wall = max(time.time() - self.t0, 1e-9)
        cpu = u["cpu_user_s"] + u["cpu_sys_s"] - self.cpu0
        now = self._traffic()
        traffic = {k: [int(a - b) for a, b in zip(now[k], self.base[k])] for k in now}
        c = self.comm
        rank = c.rank if isinstance(getattr(c, "rank", None), int) else c.Get_rank()
        return {"rank": rank, "host": getattr(c, "host", None) or os.uname().nodename,
                "pid": os.getpid(), "wall_s": wall, "cpu_s": cpu,
                "cpu_util": cpu / wall, "peak_rss_bytes": u["peak_rss_bytes"], **traffic}


def profile(comm, profiler: Profiler | None = None, threshold: float = 0.05,
            root: int | None = None) -> dict | None:
    """Collective passive profile (see the module docstring); on every rank, or only on
    ``root`` (others get None) when ``root`` is given. Uses the underlying communicator's
    ``allgather``, so the profile's own messages are not counted."""
    prof = profiler or Profiler(comm, since_process_start=True)
    snap = prof.snapshot()
    mpi = mpi_of(comm)
    if root is None:
        snaps = mpi.allgather(snap)
    else:
        snaps = mpi.gather(snap, root=root)
        if snaps is None:
            return None
    snaps = sorted(snaps, key=lambda s: s["rank"])
    sent_b = np.array([s["sent_bytes"] for s in snaps], dtype=np.int64)
    sent_m = np.array([s["sent_msgs"] for s in snaps], dtype=np.int64)
    pattern = classify(sent_b, threshold)
    ranks = [{k: v for k, v in s.items() if k not in
              ("sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes")} for s in snaps]
    return {"kind": "profile", "size": len(snaps), "ranks": ranks,
            "bytes": sent_b.tolist(), "msgs": sent_m.tolist(),
            "recv_bytes": [s["recv_bytes"] for s in snaps], "pattern": pattern,
            "time": time.time()}


def _components(n, adj) -> int:
    seen, comps = set(), 0
    for s in range(n):
        if s in seen:
            continue
        comps += 1
        stack = [s]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            stack.extend(adj[v] - seen)
    return comps


def classify(matrix, threshold: float = 0.05) -> dict:
    """Communication pattern of a traffic matrix (``matrix[i][j]``: bytes i sent to j).

    Returns ``{"pattern", "edges", "active", "hub" (star), "order" (chain/ring path)}``; see
    the module docstring for the classes and the small-group rules.
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"need a square matrix, got shape {m.shape}")
    v = m + m.T
    np.fill_diagonal(v, 0.0)
    top = v.max() if v.size else 0.0
    out = {"pattern": "none", "edges": [], "active": [], "hub": None, "order": None,
           "threshold": threshold}
    if top <= 0:
        return out
    p = v.shape[0]
    edges = [(i, j) for i in range(p) for j in range(i + 1, p) if v[i, j] >= threshold * top]
    active = sorted({r for e in edges for r in e})
    idx = {r: k for k, r in enumerate(active)}
    n, e = len(active), len(edges)
    adj = [set() for _ in range(n)]
    for i, j in edges:
        adj[idx[i]].add(idx[j])
        adj[idx[j]].add(idx[i])
    deg = [len(a) for a in adj]
    out.update(edges=[list(x) for x in edges], active=active)
    connected = _components(n, adj) == 1

    def path_order():
        start = next(k for k in range(n) if deg[k] <= 1)
        order, prev = [start], None
        while len(order) < n:
            nxt = [w for w in adj[order[-1]] if w != prev]
            prev = order[-1]
            order.append(nxt[0])
        return [active[k] for k in order]

    if n == 2:
        out.update(pattern="chain", order=active)
    elif connected and e == n * (n - 1) // 2 and n >= 4:
        out["pattern"] = "all-to-all"
    elif connected and e == n and all(d == 2 for d in deg):
        order = [0]
        while len(order) < n:
            order.append(next(w for w in sorted(adj[order[-1]]) if w not in order))
        out.update(pattern="ring", order=[active[k] for k in order])
    elif connected and e == n - 1 and max(deg) == n - 1 and n >= 3 and not (
            n == 3 and _consecutive(path_order())):
        hub = active[deg.index(n - 1)]
        out.update(pattern="star", hub=hub)
    elif connected and e == n - 1 and max(deg) <= 2:
        out.update(pattern="chain", order=path_order())
    else:
        out["pattern"] = "other"
    return out


def _consecutive(order) -> bool:
    return all(abs(a - b) == 1 for a, b in zip(order, order[1:]))


def write_json(path: str, data: dict) -> None:
    """Write a profile or probe result as JSON (creating the directory)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1, allow_nan=False)
