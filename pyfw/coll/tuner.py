"""Auto-tuner: measure every algorithm (native MPI included), store a decision table, decide.

Measurement (OSU style): per (collective, size, algorithm) a timed warm-up call sets the
iteration count from a time budget; then warm-up iterations, then timed iterations each
preceded by a barrier (outside the timed region). A point's value is the **median** over this
rank's iterations, then the **maximum over ranks** (a collective costs its slowest rank).
Algorithms are interleaved in ``rounds`` (rotated order) and the table keeps the median over
rounds with its min–max spread, so native and pyfw are compared in the same run.

Table: one JSON file per machine and layout in :func:`cache_dir` (``$PYFW_COLL_CACHE``, else
``$XDG_CACHE_HOME/pyfw/coll`` or ``~/.cache/pyfw/coll``), named ``coll-<key>.json`` where the
key hashes the host names, CPU models and counts, the communicator size and the rank-to-node
map. It holds per collective the measured sizes, medians, spreads and a Hockney fit
``t(n) = α + n/B`` per algorithm. A table written for another MPI library version or table
schema is stale. Missing or stale: the dispatch uses native MPI and rank 0 prints one line.

Decision per size bucket (bucket k = messages of ``[2^(k-1), 2^k)`` bytes, bucket 0 = 0 B):
the fastest measured algorithm of the largest measured size in the bucket, else the fastest
Hockney prediction at the bucket's middle; a pyfw algorithm replaces native only if it is
faster by more than the margin (``$PYFW_COLL_MARGIN``, default 0.10) and its slowest round
still beats native's median, because a tie costs Python time and noise.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time

import numpy as np
from mpi4py import MPI

import mpi4py

from ._util import raw

__all__ = ["SCHEMA", "cache_dir", "layout", "table_path", "load_table", "save_table",
           "decisions", "hockney_fit", "predict", "measure", "tune", "buffers",
           "DEFAULT_SIZES"]

SCHEMA = 1
DEFAULT_MARGIN = 0.10
#: per-rank block sizes (bytes) measured by default: 0 and powers of 4 up to 1 MiB
DEFAULT_SIZES = [0] + [4 ** i for i in range(11)]
NBUCKETS = 65


# ------------------------------------------------------------------ machine and layout
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def layout(comm) -> dict:
    """Machine and layout description of ``comm`` (collective): host names, CPU models,
    rank-to-node map; ``layout(c)["key"]`` identifies the decision table."""
    c = raw(comm)
    node = c.Split_type(MPI.COMM_TYPE_SHARED, key=c.Get_rank())
    try:
        leader = node.bcast(c.Get_rank(), root=0)
    finally:
        node.Free()
    info = c.allgather((MPI.Get_processor_name(), _cpu_model(), os.cpu_count(), leader))
    leaders = sorted({i[3] for i in info})
    node_of = [leaders.index(i[3]) for i in info]
    machine = sorted({(h, cpu, n) for h, cpu, n, _ in info})
    desc = {"size": c.Get_size(), "nodes": len(leaders), "node_of": node_of,
            "machine": [list(m) for m in machine]}
    desc["key"] = hashlib.sha1(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]
    return desc


def library() -> str:
    return MPI.Get_library_version().splitlines()[0].split(",")[0].strip() + \
        f" / mpi4py {mpi4py.__version__}"


def cache_dir() -> str:
    """Directory of the decision tables (``$PYFW_COLL_CACHE`` overrides)."""
    env = os.environ.get("PYFW_COLL_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pyfw", "coll")


def table_path(desc: dict, directory: str | None = None) -> str:
    return os.path.join(directory or cache_dir(), f"coll-{desc['key']}.json")


# ------------------------------------------------------------------ table I/O
def _read(desc: dict) -> tuple[dict | None, str]:
    path = table_path(desc)
    hint = f"(run: mpiexec -n {desc['size']} python -m pyfw.coll.tune)"
    if not os.path.exists(path):
        return None, f"no tuned table for this machine and layout at {path} {hint}"
    try:
        with open(path) as f:
            table = json.load(f)
    except (OSError, ValueError) as exc:
        return None, f"unreadable tuned table {path}: {exc} {hint}"
    if table.get("schema") != SCHEMA:
        return None, f"stale tuned table {path} (schema {table.get('schema')}) {hint}"
    if table.get("library") != library():
        return None, f"stale tuned table {path} (made with {table.get('library')}) {hint}"
    if table.get("layout", {}).get("key") != desc["key"]:
        return None, f"tuned table {path} is for another layout {hint}"
    return table, ""


def load_table(comm, desc: dict | None = None) -> tuple[dict | None, str]:
    """``(table, why)``: rank 0 reads the table for ``comm``'s layout and broadcasts it
    (collective); ``table`` is None and ``why`` a one-line reason if missing or stale."""
    c = raw(comm)
    desc = desc or layout(c)
    got = None
    if c.Get_rank() == 0:
        table, why = _read(desc)
        if table is not None:
            table["margin"] = float(os.environ.get("PYFW_COLL_MARGIN",
                                                   table.get("margin", DEFAULT_MARGIN)))
        got = (table, why)
    return c.bcast(got, root=0)


def save_table(table: dict, directory: str | None = None) -> str:
    """Write ``table`` atomically into the cache directory; returns the path."""
    path = table_path(table["layout"], directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------ model and decisions
def hockney_fit(sizes, times) -> tuple[float, float]:
    """Least-squares fit of ``t = α + β·n`` in relative error (weights 1/t); α, β ≥ 0."""
    n = np.asarray(sizes, float)
    t = np.asarray(times, float)
    ok = np.isfinite(t) & (t > 0)
    n, t = n[ok], t[ok]
    if n.size == 0:
        return float("inf"), 0.0
    if n.size == 1 or np.ptp(n) == 0:
        return float(t.mean()), 0.0
    w = 1.0 / t
    A = np.stack([w, w * n], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(A, w * t, rcond=None)
    if beta < 0:
        return float(np.median(t)), 0.0
    if alpha < 0:
        beta = float(np.sum(n * t * w * w) / np.sum(n * n * w * w))
        return 0.0, max(beta, 0.0)
    return float(alpha), float(beta)


def predict(fit, n: float) -> float:
    return fit[0] + fit[1] * n


def decide_entry(entry: dict, margin: float) -> list[str]:
    """Algorithm name per bucket (``NBUCKETS`` of them) for one collective's table entry."""
    sizes = entry["sizes"]
    med = entry["median"]
    algs = [a for a in med if a == "native" or a in entry.get("known", med)]
    by_bucket: dict[int, int] = {}
    for i, s in enumerate(sizes):
        by_bucket[int(s).bit_length()] = i  # sizes ascending: keeps the largest
    out = []
    for k in range(NBUCKETS):
        worst = None
        if k in by_bucket:
            i = by_bucket[k]
            t = {a: med[a][i] for a in algs}
            if "max" in entry:
                worst = {a: entry["max"][a][i] for a in algs}
        else:
            mid = 0.0 if k == 0 else 0.75 * 2.0 ** k
            t = {a: predict(entry["fit"][a], mid) for a in algs}
        best = min(t, key=lambda a: (t[a], a != "native"))
        if best != "native" and "native" in t:
            # a win must clear the margin, and even the slowest round must beat native
            if not t[best] < (1.0 - margin) * t["native"] or (
                    worst is not None and not worst[best] < t["native"]):
                best = "native"
        out.append(best)
    return out


def decisions(table: dict, size: int | None = None) -> dict[str, list[str]]:
    """Per collective, the algorithm name for each size bucket."""
    from .dispatch import ALGORITHMS
    margin = float(table.get("margin", DEFAULT_MARGIN))
    out = {}
    for coll, entry in table.get("collectives", {}).items():
        if coll not in ALGORITHMS:
            continue
        entry = dict(entry, known=[a for a in entry["median"] if a in ALGORITHMS[coll]])
        out[coll] = decide_entry(entry, margin)
    return out


# ------------------------------------------------------------------ measurement
def buffers(coll: str, b: int, p: int, rank: int = 0):
    """Arguments (after the communicator) of one ``coll`` call with block size ``b`` bytes
    (per rank for allgather/gather/alltoall, total for bcast/allreduce/reduce)."""
    u8 = np.uint8
    if coll == "allgather":
        return (np.full(b, rank % 251, u8), np.empty(p * b, u8))
    if coll == "gather":
        return (np.full(b, rank % 251, u8), np.empty(p * b, u8), 0)
    if coll == "alltoall":
        return (np.full(p * b, rank % 251, u8), np.empty(p * b, u8))
    if coll == "bcast":
        return (np.full(b, rank % 251, u8), 0)
    if coll == "allreduce":
        return (np.full(b, 1, u8), np.empty(b, u8), MPI.SUM)
    if coll == "reduce":
        return (np.full(b, 1, u8), np.empty(b, u8), MPI.SUM, 0)
    raise ValueError(f"unknown collective {coll!r}")


def measure(comm, fn, args, budget: float = 0.02, min_iters: int = 5,
            max_iters: int = 1000) -> float:
    """OSU-style time of one collective call (seconds): median over this rank's timed
    iterations (barrier before each), maximum over ranks. Collective over ``comm``."""
    c = raw(comm)
    c.Barrier()
    t0 = time.perf_counter()
    fn(*args)
    first = c.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    iters = int(min(max_iters, max(min_iters, budget / max(first, 1e-7))))
    warm = max(1, iters // 10)
    for _ in range(warm):
        c.Barrier()
        fn(*args)
    ts = np.empty(iters)
    pc = time.perf_counter
    for i in range(iters):
        c.Barrier()
        t0 = pc()
        fn(*args)
        ts[i] = pc() - t0
    return c.allreduce(float(np.median(ts)), op=MPI.MAX)


def candidates(plan, coll: str) -> list[str]:
    """Algorithms worth measuring for ``coll`` on ``plan``'s communicator."""
    from .dispatch import ALGORITHMS
    names = list(ALGORITHMS[coll])
    if coll == "allgather" and plan.layout["nodes"] == 1:
        names.remove("smp_bruck")  # identical to "smp" on one node
    if plan.size == 1:
        names = ["native"]
    return names


def tune(comm, collectives=None, sizes=None, rounds: int = 3, budget: float = 0.02,
         algorithms: dict | None = None, log=None) -> dict:
    """Measure and return a decision table for ``comm`` (collective; nothing is written).

    ``algorithms`` optionally restricts the candidates per collective (native is always
    measured). ``log(msg)`` is called on rank 0 with progress lines.
    """
    from .dispatch import COLLECTIVES, Plan
    c = raw(comm)
    plan = Plan(c, table={}, notice=False)
    p, r = plan.size, plan.rank
    sizes = sorted(set(DEFAULT_SIZES if sizes is None else sizes))
    colls = list(collectives or COLLECTIVES)
    table = {"schema": SCHEMA, "library": library(), "layout": plan.layout,
             "created": time.strftime("%Y-%m-%d %H:%M:%S"), "margin": DEFAULT_MARGIN,
             "method": {"rounds": rounds, "budget_s": budget, "stat": "median over iterations,"
                        " max over ranks, median over rounds"},
             "collectives": {}}
    try:
        for coll in colls:
            names = candidates(plan, coll)
            if algorithms and coll in algorithms:
                names = ["native"] + [a for a in algorithms[coll] if a in names and
                                      a != "native"]
            vals = {a: [[] for _ in sizes] for a in names}
            t0 = time.time()
            for i, b in enumerate(sizes):
                args = buffers(coll, b, p, r)
                for rd in range(rounds):
                    k = rd % len(names)
                    for a in names[k:] + names[:k]:
                        vals[a][i].append(measure(c, plan.algorithm(coll, a), args, budget))
            med = {a: [float(np.median(v)) for v in vals[a]] for a in names}
            entry = {"sizes": sizes, "median": med,
                     "min": {a: [float(min(v)) for v in vals[a]] for a in names},
                     "max": {a: [float(max(v)) for v in vals[a]] for a in names},
                     "fit": {a: list(hockney_fit(sizes, med[a])) for a in names}}
            table["collectives"][coll] = entry
            if log and r == 0:
                log(f"{coll}: {len(names)} algorithms x {len(sizes)} sizes "
                    f"in {time.time() - t0:.1f} s")
    finally:
        plan.free()
    return table


def summary(table: dict) -> list[str]:
    """Human-readable decision lines: per collective, size ranges and the chosen algorithm
    with its measured speed-up over native where measured."""
    lines = []
    dec = decisions(table)
    for coll, names in dec.items():
        entry = table["collectives"][coll]
        parts = []
        for i, s in enumerate(entry["sizes"]):
            a = names[int(s).bit_length()]
            tn, ta = entry["median"]["native"][i], entry["median"][a][i]
            parts.append(f"{s}B:{a}" + ("" if a == "native" else f"(x{tn / ta:.2f})"))
        lines.append(f"{coll} p={table['layout']['size']}: " + " ".join(parts))
    return lines
