"""Random probes of the huge table: the shared page-cache mapping against a private copy.

    python benchmarks/rubik_probe.py [--probes 8000000] [--repeats 5]

The search waits on table probes (siblings' loads are issued together, so their misses
overlap). This measures exactly that access pattern, side by side in one run: batches of 8
independent random byte loads over the whole table, and, for the latency alone, a chain of
dependent loads; in the memory-mapped cache file (4 KB pages, one copy per node) and in
:func:`apps.rubik.cache.private_copy` (the process's own memory, advised for 2 MB pages).
Reports nanoseconds per load, median [min–max] over ``--repeats`` passes, and the ratio,
plus the seconds the private copy takes to make. Needs the huge table in the cache
(``python -m apps.rubik --build-tables``). Writes ``benchmarks/results/rubik_probe.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
from numba import njit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from rubik_bench import stats  # noqa: E402  (median, min, max and the runs)


@njit(cache=True)
def _batched(tab, idx):
    s = 0
    for i in range(0, idx.size - 7, 8):
        s += (tab[idx[i]] + tab[idx[i + 1]] + tab[idx[i + 2]] + tab[idx[i + 3]]
              + tab[idx[i + 4]] + tab[idx[i + 5]] + tab[idx[i + 6]] + tab[idx[i + 7]])
    return s


@njit(cache=True)
def _chained(tab, idx):
    s = 0
    j = 0
    n = tab.size
    for i in range(idx.size):
        j = tab[(idx[i] + j) % n]       # the next address depends on this load
        s += j
    return s


def _ns_per_load(fn, tab, idx, repeats):
    fn(tab, idx[:1024])                 # compile
    fn(tab, idx)                        # fault the pages in
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(tab, idx)
        out.append((time.perf_counter() - t) / idx.size * 1e9)
    return stats(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probes", type=int, default=8_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "rubik_probe.json"))
    a = ap.parse_args(argv)
    from apps.rubik.cache import huge_page_bytes, private_copy
    from apps.rubik.huge import HugeTables
    try:
        shared = HugeTables.load(a.cache_dir, progress=False, cached_only=True).table
    except LookupError as e:
        raise SystemExit(f"rubik_probe: {e} (python -m apps.rubik --build-tables)")
    idx = np.random.default_rng(1).integers(0, shared.size, a.probes).astype(np.int64)
    before = huge_page_bytes()
    t = time.perf_counter()
    private, advised = private_copy(shared)
    copy_s = time.perf_counter() - t
    after = huge_page_bytes()
    res = {}
    for name, tab in (("shared", shared), ("private", private)):
        res[name] = {"batched_ns": _ns_per_load(_batched, tab, idx, a.repeats),
                     "chained_ns": _ns_per_load(_chained, tab, idx[:a.probes // 4], a.repeats)}
        print(f"{name:8s} batched {res[name]['batched_ns']['median']:.1f} ns/load, "
              f"chained {res[name]['chained_ns']['median']:.1f} ns/load", flush=True)
    ratio = {k: res["shared"][k]["median"] / res["private"][k]["median"]
             for k in ("batched_ns", "chained_ns")}
    print(f"private copy: {copy_s:.2f} s to make, {ratio['batched_ns']:.2f}x faster batched, "
          f"{ratio['chained_ns']:.2f}x chained", flush=True)
    d = {"command": "python benchmarks/rubik_probe.py " + " ".join(argv or sys.argv[1:]),
         "machine": {"host": platform.node(), "cores": os.cpu_count(),
                     "load": os.getloadavg()[0]},
         "table_bytes": int(shared.nbytes), "probes": a.probes, "repeats": a.repeats,
         "huge_pages_advised": advised,
         "huge_page_bytes": None if before is None or after is None else after - before,
         "copy_seconds": copy_s, "results": res, "shared_over_private": ratio}
    with open(a.out, "w") as fh:
        json.dump(d, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
