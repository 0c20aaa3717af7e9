"""Auto-tuner: measure every algorithm (native MPI included), store a decision table, decide.

Measurement (OSU style, paired): per (collective, size) all candidate algorithms, native
included, run **interleaved**: every iteration calls each once, in a random order, with a
barrier before each call (outside the timer), so drift and other jobs hit them alike
(:func:`measure_interleaved`). The iterations form ``rounds``; per round and algorithm the
value is the median over this rank's iterations, then the **maximum over ranks** (a
collective costs its slowest rank). The table keeps per point the per-round values, their
median and min–max.

Table: one JSON file per machine and layout in :func:`cache_dir` (``$PYFW_COLL_CACHE``, else
``$XDG_CACHE_HOME/pyfw/coll`` or ``~/.cache/pyfw/coll``), named ``coll-<key>.json`` where the
key hashes the host names, CPU models and counts, the communicator size and the rank-to-node
map. It holds per collective the measured sizes, per-round times, medians, spreads and a
Hockney fit ``t(n) = α + n/B`` per algorithm, and the per-link latency/bandwidth measured at
tuning time (``links``). A table written for another MPI library version or table schema is
stale. Missing or stale: the dispatch uses native MPI and rank 0 prints one line.

A size's winner among all candidates is measured again alone against native (the two
interleaved): the interleaving of many algorithms changes native's own time (caches, the
shared-memory transport's state), so a win in the crowd must be confirmed one-to-one.

Decision per size bucket (bucket k = messages of ``[2^(k-1), 2^k)`` bytes, bucket 0 = 0 B),
:func:`decide_entry`: a pyfw algorithm replaces native only if it beats native by more than
the margin (``$PYFW_COLL_MARGIN``, default 0.10) and by more than the noise (the spread of
its paired per-round ratios to native), and in every round of the one-to-one measurement; unmeasured buckets use the
Hockney predictions, only inside a measured regime of the same algorithm. Given the link
monitor's current per-link forecasts, every algorithm's time is shifted by the modelled
change of its message schedule's cost since tuning (:mod:`pyfw.coll.model`).
"""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np
from mpi4py import MPI

import mpi4py

from ..monitor.stats import hockney_fit  # noqa: F401 (public here too: the tables' fits)
from ._util import raw
from .plan import ALGORITHMS, COLLECTIVES, NBUCKETS, Bindings, layout  # noqa: F401 (layout: public here too)

__all__ = ["SCHEMA", "cache_dir", "layout", "table_path", "load_table", "save_table",
           "decisions", "decide_entry", "hockney_fit", "predict", "measure",
           "measure_interleaved", "tune", "tune_links", "buffers", "DEFAULT_SIZES"]

SCHEMA = 2  # 2: interleaved rounds and tuning-time links
DEFAULT_MARGIN = 0.10
#: per-rank block sizes (bytes) measured by default: 0 and powers of 4 up to 1 MiB
DEFAULT_SIZES = [0] + [4 ** i for i in range(11)]


def library() -> str:
    """The MPI library and mpi4py versions a tuned table was measured with."""
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
    """The table file for this machine and communicator layout."""
    return os.path.join(directory or cache_dir(), f"coll-{desc['key']}.json")


# ------------------------------------------------------------------ table I/O
def _read(desc: dict) -> tuple[dict | None, str]:
    path = table_path(desc)
    hint = f"(run: pyfw-run -n {desc['size']} -- python -m pyfw.coll.tune)"
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
def predict(fit, n: float) -> float:
    """Predicted time at ``n`` bytes of a :func:`hockney_fit` ``(alpha, beta)``; ``inf``
    where the fit is unknown (NaN: no usable time), so such an algorithm never wins."""
    t = fit[0] + fit[1] * n
    return t if t == t else math.inf


def _round_ratios(entry: dict, alg: str, i: int, d_alg: float = 0.0,
                  d_nat: float = 0.0) -> list[float]:
    """Paired per-round ratios alg / native at measured size index ``i`` (the rounds are
    interleaved, so both saw the same machine state), shifted by modelled link deltas."""
    rounds = entry.get("rounds")
    if not rounds or alg not in rounds or "native" not in rounds:
        return []
    ta, tn = rounds[alg][i], rounds["native"][i]
    return [(x + d_alg) / (y + d_nat) for x, y in zip(ta, tn) if y + d_nat > 0]


def _wins(ratios: list[float], margin: float) -> bool:
    """Paired per-round ratios candidate / native: a win beyond the margin and the noise
    (their spread), and in every round."""
    if not ratios:
        return False
    med = float(np.median(ratios))
    return med < 1.0 - max(margin, max(ratios) - min(ratios)) and max(ratios) < 1.0


def _screen_winner(got: dict, margin: float) -> str | None:
    """The fastest non-native algorithm of one interleaved measurement if it wins against
    native (:func:`_wins`), else None."""
    if "native" not in got:
        return None
    med = {a: float(np.median(v)) for a, v in got.items()}
    best = min(med, key=lambda a: (med[a], a != "native"))
    if best == "native":
        return None
    ratios = [x / y for x, y in zip(got[best], got["native"]) if y > 0]
    return best if _wins(ratios, margin) else None


def _beats_native(entry: dict, best: str, i: int, t: dict, d: dict, margin: float) -> bool:
    """Whether ``best`` wins over native at measured size index ``i`` (see
    :func:`decide_entry`): ``t`` the times with the link shifts ``d`` added."""
    ratios = _round_ratios(entry, best, i, d[best], d["native"])
    conf = (entry.get("confirm") or [None] * len(entry["sizes"]))[i]
    if conf is not None and conf["alg"] == best:  # the one-to-one re-measurement
        ratios = [(x + d[best]) / (y + d["native"])
                  for x, y in zip(conf["rounds"], conf["native"]) if y + d["native"] > 0]
    elif "confirm" in entry and not any(d.values()):
        ratios = []  # the screen found no win at this size (links unchanged)
    if ratios or "confirm" in entry:
        return t[best] < (1.0 - margin) * t["native"] and _wins(ratios, margin)
    ok = t[best] < (1.0 - margin) * t["native"]
    if ok and "max" in entry:
        ok = entry["max"][best][i] + d[best] < t["native"]
    return ok


def decide_entry(entry: dict, margin: float, coll: str | None = None, p: int | None = None,
                 links=None) -> list[str]:
    """Algorithm name per bucket (``NBUCKETS`` of them) for one collective's table entry.

    Measured bucket (the largest measured size in it): the fastest median; a pyfw algorithm
    replaces native only if it is faster by more than ``margin`` *and* by more than the
    noise, i.e. the spread of its paired per-round ratios to native, and its worst round
    still beats native (tables without rounds: its slowest round beats native's median).
    Where the tuner re-measured the screen's winner one-to-one against native
    (``confirm``), those paired rounds decide.
    Unmeasured bucket: the fastest Hockney prediction at the bucket's middle, with the same
    margin, and only inside a regime: the nearest measured buckets on each side chose the
    same algorithm (beyond the last one, that one). Otherwise native.

    ``links``: ``(then, now)`` link matrices (each ``(latency, bandwidth)``); every time gets
    the modelled change of its algorithm between them (:func:`pyfw.coll.model.delta`).
    """
    sizes = entry["sizes"]
    med = entry["median"]
    algs = [a for a in med if a == "native" or a in entry.get("known", med)]
    by_bucket: dict[int, int] = {}
    for i, s in enumerate(sizes):
        by_bucket[int(s).bit_length()] = i  # sizes ascending: keeps the largest

    def shift(a, n):
        if links is None or coll is None or not p:
            return 0.0
        from .model import delta
        return delta(coll, a, p, n, links[0], links[1], entry.get("node_of"))

    out: list = [None] * NBUCKETS
    for k, i in by_bucket.items():
        n = sizes[i]
        d = {a: shift(a, n) for a in algs}
        t = {a: med[a][i] + d[a] for a in algs}
        best = min(t, key=lambda a: (t[a], a != "native"))
        if best != "native" and "native" in t and not _beats_native(entry, best, i, t, d,
                                                                     margin):
            best = "native"
        out[k] = best
    measured = sorted(by_bucket)
    for k in range(NBUCKETS):
        if out[k] is not None:
            continue
        mid = 0.0 if k == 0 else 0.75 * 2.0 ** k
        t = {a: predict(entry["fit"][a], mid) + shift(a, mid) for a in algs}
        best = min(t, key=lambda a: (t[a], a != "native"))
        if best != "native" and "native" in t:
            lo = [out[j] for j in measured if j < k][-1:]
            hi = [out[j] for j in measured if j > k][:1]
            if not t[best] < (1.0 - margin) * t["native"] or any(x != best for x in lo + hi) \
                    or not (lo or hi):
                best = "native"
        out[k] = best
    return out


def decisions(table: dict, size: int | None = None, links=None) -> dict[str, list[str]]:
    """Per collective, the algorithm name for each size bucket. ``links``: the current
    ``(latency, bandwidth)`` matrices (e.g. the link monitor's forecasts): each algorithm's
    times are shifted by the modelled change from the table's links at tuning time."""
    margin = float(table.get("margin", DEFAULT_MARGIN))
    p = size or table.get("layout", {}).get("size")
    pair = None
    if links is not None and p:
        from .model import links_from, uniform_links
        now = links_from(links, p)
        then = table.get("links")
        if then is not None:
            then = links_from((then["latency"], then["bandwidth"]), p)
        else:  # no links recorded: assume a uniform network like the current median link
            off = ~np.eye(p, dtype=bool)
            then = uniform_links(p, float(np.median(now[0][off])),
                                 float(np.median(now[1][off])))
        pair = (then, now)
    node_of = table.get("layout", {}).get("node_of")
    out = {}
    for coll, entry in table.get("collectives", {}).items():
        if coll not in ALGORITHMS:
            continue
        entry = dict(entry, known=[a for a in entry["median"] if a in ALGORITHMS[coll]],
                     node_of=node_of)
        out[coll] = decide_entry(entry, margin, coll, p, pair)
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
    return measure_interleaved(comm, {"x": fn}, args, budget, 1, min_iters, max_iters)["x"][0]


def _calibrate(c, calls, args, budget, min_iters, max_iters) -> int:
    """Warm every function up (lazy set-up happens here, collectively) and return the
    iterations per round that fit ``budget``, the same on every rank."""
    pc = time.perf_counter
    first = []
    for f in calls:
        c.Barrier()
        t0 = pc()
        f(*args)
        first.append(pc() - t0)
    first = c.allreduce(sum(first), op=MPI.MAX)
    iters = int(min(max_iters, max(min_iters, budget / max(first, 1e-7))))
    for _ in range(max(1, iters // 10)):
        for f in calls:
            c.Barrier()
            f(*args)
    return iters


def measure_interleaved(comm, fns: dict, args, budget: float = 0.02, rounds: int = 3,
                        min_iters: int = 5, max_iters: int = 1000,
                        blocks: bool = False) -> dict[str, list[float]]:
    """Times of several ways of doing one collective call, interleaved so that drift and
    other jobs on the machine hit them all alike (collective over ``comm``).

    Each iteration calls every function once, in a random order drawn afresh for every
    iteration with the same seed on every rank (a fixed rotation would make each function
    nearly always follow the same other one), with a barrier before each call (outside the
    timer). Iterations are split in ``rounds``;
    per round and function the value is the median over this rank's iterations, then the
    maximum over ranks. Returns ``{name: [value per round]}``. ``budget`` (seconds) bounds
    one round of all functions together; ``min_iters``..``max_iters`` iterations per round.

    ``blocks=True`` interleaves per round instead of per call: each round runs every
    function's iterations back to back (a barrier before each call still), the functions
    in a fresh random order per round. Calls then see the state their own previous call
    left (as in a user's loop over one collective) rather than another function's; on
    oversubscribed cores per-call interleaving shifts small-message times by several per
    cent depending on which other functions are in the mix, which blocks avoid.
    """
    c = raw(comm)
    names = list(fns)
    calls = [fns[n] for n in names]
    pc = time.perf_counter
    iters = _calibrate(c, calls, args, budget, min_iters, max_iters)
    m = len(calls)
    ts = np.empty((rounds, iters, m))
    barrier = c.Barrier
    # a fresh order every iteration, the same on every rank (fixed seed): each function
    # follows each other one equally often, so no function always runs after the same one
    orders = np.random.default_rng(12345).permuted(
        np.tile(np.arange(m), (rounds * iters, 1)), axis=1).reshape(rounds, iters, m).tolist()
    for rd in range(rounds):
        row = ts[rd]
        if blocks:
            for jj in orders[rd][0]:
                f = calls[jj]
                for it in range(iters):
                    barrier()
                    t0 = pc()
                    f(*args)
                    row[it, jj] = pc() - t0
            continue
        for it, order in enumerate(orders[rd]):
            for jj in order:
                f = calls[jj]
                barrier()
                t0 = pc()
                f(*args)
                row[it, jj] = pc() - t0
    local = np.median(ts, axis=1)  # (rounds, m)
    glob = np.empty_like(local)
    c.Allreduce(local, glob, op=MPI.MAX)
    return {n: [float(x) for x in glob[:, j]] for j, n in enumerate(names)}


def tune_links(comm):
    """Per-link ``(latency, bandwidth)`` at tuning time from a quick ping-pong of every pair
    (:func:`pyfw.monitor.probe_pairs`); ``None`` if it fails. Collective."""
    try:
        from ..monitor import probe_pairs
        m = probe_pairs(comm, sizes=(8, 65536), reps=5, method="median", iters=4)
    except Exception:  # noqa: BLE001 -- the table is still useful without links
        return None
    return {"latency": _jsonable(m.alpha), "bandwidth": _jsonable(m.bandwidth)}


def _jsonable(a) -> list:
    return [[(float(x) if np.isfinite(x) else None) for x in row] for row in np.asarray(a)]


def candidates(plan, coll: str) -> list[str]:
    """Algorithms worth measuring for ``coll`` on ``plan``'s communicator."""
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
    c = raw(comm)
    plan = Bindings(c)
    p, r = plan.size, plan.rank
    sizes = sorted(set(DEFAULT_SIZES if sizes is None else sizes))
    colls = list(collectives or COLLECTIVES)
    table = {"schema": SCHEMA, "library": library(), "layout": plan.layout,
             "created": time.strftime("%Y-%m-%d %H:%M:%S"), "margin": DEFAULT_MARGIN,
             "method": {"rounds": rounds, "budget_s": budget, "stat": "all candidates interleaved per"
                        " iteration; median over iterations, max over ranks, median over"
                        " rounds"},
             "collectives": {}}
    try:
        if p > 1:
            table["links"] = tune_links(c)
        for coll in colls:
            names = candidates(plan, coll)
            if algorithms and coll in algorithms:
                names = ["native"] + [a for a in algorithms[coll] if a in names and
                                      a != "native"]
            vals = {}
            t0 = time.time()
            confirm = []
            for i, b in enumerate(sizes):
                args = buffers(coll, b, p, r)
                fns = {a: plan.algorithm(coll, a) for a in names}
                # all candidates interleaved per iteration: a paired comparison with native
                got = measure_interleaved(c, fns, args, budget * len(names), rounds)
                for a in names:
                    vals.setdefault(a, []).append(got[a])
                # a screen winner must win again alone against native (max over ranks:
                # the same values, hence the same decision, on every rank)
                best = _screen_winner(got, margin=DEFAULT_MARGIN)
                if best is None:
                    confirm.append(None)
                    continue
                two = measure_interleaved(c, {"native": fns["native"], best: fns[best]}, args,
                                          budget * 2 * max(1, len(names) // 2), rounds)
                confirm.append({"alg": best, "native": two["native"], "rounds": two[best]})
            med = {a: [float(np.median(v)) for v in vals[a]] for a in names}
            entry = {"sizes": sizes, "median": med,
                     "min": {a: [float(min(v)) for v in vals[a]] for a in names},
                     "max": {a: [float(max(v)) for v in vals[a]] for a in names},
                     "rounds": vals, "confirm": confirm,
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
