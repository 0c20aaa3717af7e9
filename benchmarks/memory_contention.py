"""Does a second busy core slow the first? Random table lookups against pure arithmetic.

    python benchmarks/memory_contention.py [--repeats 3] [--gigabytes 2.47]

A farm of two Rubik workers on a 2-core machine searches at a lower node rate per worker
than one worker alone. This separates what the cores share from what the farm adds: each
kernel runs in one process alone, then in two processes started together, alternating,
``--repeats`` times, and reports the per-process rate (operations per CPU second):

* ``lookups``: random byte reads from a private table of ``--gigabytes`` GB in 2 MB pages
  (the nx table's size and layout: what the search's pruning lookups do);
* ``arithmetic``: a xorshift loop in registers (no memory traffic).

The ratio pair / alone is the share of a core's rate that survives a second busy core:
below 1 for ``lookups`` is memory contention (shared last-level cache, memory bus), which
no scheduling removes. Writes ``benchmarks/results/memory_contention.json``.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import subprocess
import sys
import time

from pyfw.monitor.results import add_output_options, machine, output_dir, write_json
from pyfw.monitor.stats import spread

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
KINDS = ("lookups", "arithmetic")


def _kernels():
    import numpy as np
    from numba import njit

    @njit(cache=True)
    def arithmetic(n):
        x, s = np.uint64(88172645463325252), np.uint64(0)
        for _ in range(n):
            x ^= x << np.uint64(13)
            x ^= x >> np.uint64(7)
            x ^= x << np.uint64(17)
            s += x & np.uint64(255)
        return s

    @njit(cache=True)
    def lookups(table, n):
        x, s, size = np.uint64(88172645463325252), 0, np.uint64(table.size)
        for _ in range(n):
            x ^= x << np.uint64(13)
            x ^= x >> np.uint64(7)
            x ^= x << np.uint64(17)
            s += table[x % size]
        return s

    return arithmetic, lookups


def child(kind, start_at, gigabytes):
    """One measuring process: set up, wait for ``start_at`` (epoch seconds), run, print."""
    import numpy as np
    arithmetic, lookups = _kernels()
    if kind == "lookups":
        size = int(gigabytes * 1e9)
        buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            buf.madvise(mmap.MADV_HUGEPAGE)
        table = np.frombuffer(buf, dtype=np.uint8)
        table[:] = 1
        n, run = 100_000_000, lambda: lookups(table, n)
        lookups(table, 1000)
    else:
        n, run = 1_000_000_000, lambda: arithmetic(n)
        arithmetic(1000)
    time.sleep(max(0.0, start_at - time.time()))
    cpu = time.process_time()
    run()
    print(json.dumps({"kind": kind, "rate": n / (time.process_time() - cpu)}), flush=True)


def measure(kind, processes, gigabytes, setup_seconds):
    """Per-process rates of ``processes`` children of ``kind`` started together."""
    start_at = time.time() + setup_seconds
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", kind,
                               str(start_at), "--gigabytes", str(gigabytes)],
                              stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    rates = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"{kind} child failed ({p.returncode})")
        rates.append(json.loads(out.strip().splitlines()[-1])["rate"])
    return rates


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gigabytes", type=float, default=2.47)
    ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    add_output_options(ap, RESULTS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child[0], float(a.child[1]), a.gigabytes)
    where = output_dir(a)
    setup = 6.0 + 2.5 * a.gigabytes      # time to touch the table before the clock
    t0 = time.time()
    out = {k: {"alone": [], "pair": []} for k in KINDS}
    for rep in range(a.repeats):
        for kind in KINDS:
            out[kind]["alone"] += measure(kind, 1, a.gigabytes, setup)
            out[kind]["pair"] += measure(kind, 2, a.gigabytes, setup)
            print(f"{kind}: alone {out[kind]['alone'][-1] / 1e6:.1f} M/s, pair "
                  + " ".join(f"{r / 1e6:.1f}" for r in out[kind]["pair"][-2:]) + " M/s",
                  flush=True)
    for kind, d in out.items():
        d["median_alone"] = spread(d["alone"])["median"]
        d["median_pair"] = spread(d["pair"])["median"]
        d["pair_over_alone"] = d["median_pair"] / d["median_alone"]
        print(f"{kind}: pair / alone {d['pair_over_alone']:.2f}")
    result = {"command": "python benchmarks/memory_contention.py "
                         + " ".join(argv or sys.argv[1:]),
              "machine": machine(),
              "gigabytes": a.gigabytes, "repeats": a.repeats, "kinds": out,
              "seconds": time.time() - t0}
    write_json(where, "memory_contention.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
