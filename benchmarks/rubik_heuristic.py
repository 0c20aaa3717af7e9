"""The huge table's search with and without one of its refinements, or against the nx
table, on the same cubes.

    python benchmarks/rubik_heuristic.py [--seeds 0-19] [--heuristic huge] [--compare inverse]
    python benchmarks/rubik_heuristic.py --compare tight --seeds 10-17 --out RESULT_STEM
    python benchmarks/rubik_heuristic.py --compare nx --seeds 0-19 --out RESULT_STEM

``--compare inverse``: the table looked up on the position only (``inverse=False``)
against the position and its inverse (the default). ``--compare tight``: with the inverse
lookups, the search expanding every node by all its moves (``tight=False``) against
skipping the moves that tight inverse values rule out (the default; see
``apps.rubik.search.SubtreeSearch``). ``--compare nx``: the huge table against the nx
table (``apps.rubik.nx``), both with inverse lookups and tight moves. Every cube ``Cube.random(seed)`` is solved optimally
in one process by both, alternating which goes first from cube to cube so that the shared
machine's drift hits both alike. Tables are loaded and the JIT is warm before the clock
starts. Reported per cube: length, nodes generated, wall and CPU seconds of each; over all
cubes: medians, the nodes and time ratios (median and geometric mean) and the slowest cube
of each. Writes ``<out>.json`` and ``.png`` (default ``benchmarks/results/rubik_heuristic``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, ROOT)
from rubik_speedup import geomean, seed_range  # noqa: E402  (this directory is on sys.path)


def solve(h, cube):
    """One optimal solve: a dict of its figures."""
    from apps.rubik import Solver
    t, c = time.perf_counter(), time.process_time()
    r = Solver(tables=h).solve(cube)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    assert cube.apply(r.solution).is_solved
    return {"length": r.length, "generated": r.generated, "seconds": wall, "cpu_seconds": cpu,
            "nodes_per_second": r.generated / wall}


#: --compare -> (the two sides' keys, their labels, Heuristic settings of each)
COMPARISONS = {
    "inverse": (("direct", "inverse"), ("position only", "with inverse"),
                (dict(inverse=False), dict(inverse=True))),
    "tight": (("loose", "tight"), ("every move", "tight moves skipped"),
              (dict(inverse=True, tight=False), dict(inverse=True, tight=True))),
    "nx": (("huge", "nx"), ("huge table", "nx table"),
           (dict(name="huge"), dict(name="nx"))),
}


def summarise(cubes, sides=("direct", "inverse")):
    def side(k):
        secs = [c[k]["seconds"] for c in cubes]
        slow = max(cubes, key=lambda c: c[k]["seconds"])
        return {"median_seconds": statistics.median(secs), "max_seconds": max(secs),
                "slowest_seed": slow["seed"],
                "median_nodes": statistics.median(c[k]["generated"] for c in cubes),
                "median_nodes_per_second": statistics.median(c[k]["nodes_per_second"]
                                                             for c in cubes)}
    nodes = [c["nodes_ratio"] for c in cubes]
    times = [c["time_ratio"] for c in cubes]
    return {"cubes": len(cubes), sides[0]: side(sides[0]), sides[1]: side(sides[1]),
            "median_nodes_ratio": statistics.median(nodes), "geomean_nodes_ratio": geomean(nodes),
            "min_nodes_ratio": min(nodes), "max_nodes_ratio": max(nodes),
            "median_time_ratio": statistics.median(times), "geomean_time_ratio": geomean(times),
            "min_time_ratio": min(times), "max_time_ratio": max(times),
            "lengths": {str(n): sum(1 for c in cubes if c["length"] == n)
                        for n in sorted({c["length"] for c in cubes})}}


def plot(cubes, path, sides=("direct", "inverse"), labels=("position only", "with inverse")):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = [c["seed"] for c in cubes]
    ax.bar([x - 0.2 for x in xs], [c[sides[0]]["seconds"] for c in cubes], width=0.4,
           label=labels[0])
    ax.bar([x + 0.2 for x in xs], [c[sides[1]]["seconds"] for c in cubes], width=0.4,
           label=labels[1])
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{c['seed']}\n{c['length']} mv" for c in cubes], fontsize=8)
    ax.set_xlabel("cube (Cube.random seed, optimal length)")
    ax.set_ylabel("serial optimal solve, s")
    ax.set_title(f"one process: {labels[0]} against {labels[1]}")
    ax.set_ylim(top=3 * max(c[sides[0]]["seconds"] for c in cubes))   # room for the legend
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--heuristic", default="huge", choices=("huge", "phase1"))
    ap.add_argument("--compare", default="inverse", choices=sorted(COMPARISONS))
    ap.add_argument("--cache-dir", default=None,
                    help="table cache (default: the solver's, PYFW_RUBIK_CACHE)")
    ap.add_argument("--out", default=os.path.join(RESULTS, "rubik_heuristic"))
    a = ap.parse_args(argv)
    from apps.rubik import Cube, Heuristic
    sides, labels, settings = COMPARISONS[a.compare]
    seeds = seed_range(a.seeds)
    t0 = time.time()
    heur = {k: Heuristic(kw.get("name", a.heuristic), a.cache_dir, progress=False,
                         **{x: v for x, v in kw.items() if x != "name"})
            for k, kw in zip(sides, settings)}
    for h in heur.values():                                      # JIT and first page-ins
        solve(h, Cube.from_moves("R U F D' L2 B"))
    cubes = []
    for k, seed in enumerate(seeds):
        cube = Cube.random(seed)
        runs = {}
        for name in sides[::1 if k % 2 == 0 else -1]:
            runs[name] = solve(heur[name], cube)
        d, i = runs[sides[0]], runs[sides[1]]
        assert d["length"] == i["length"], (seed, d, i)
        c = {"seed": seed, "length": d["length"], sides[0]: d, sides[1]: i,
             "nodes_ratio": d["generated"] / i["generated"],
             "time_ratio": d["seconds"] / i["seconds"]}
        cubes.append(c)
        print(f"seed {seed}: {c['length']} moves, {labels[0]} {d['seconds']:.1f} s "
              f"({d['generated'] / 1e6:.0f} M nodes), {labels[1]} {i['seconds']:.1f} s "
              f"({i['generated'] / 1e6:.0f} M): nodes /{c['nodes_ratio']:.2f}, "
              f"time /{c['time_ratio']:.2f}", flush=True)
    s = summarise(cubes, sides)
    print(f"median solve {s[sides[0]]['median_seconds']:.1f} s -> "
          f"{s[sides[1]]['median_seconds']:.1f} s; nodes / {s['median_nodes_ratio']:.2f} "
          f"(geo-mean {s['geomean_nodes_ratio']:.2f}), time / {s['median_time_ratio']:.2f} "
          f"(geo-mean {s['geomean_time_ratio']:.2f}); slowest "
          f"{s[sides[0]]['max_seconds']:.0f} s -> {s[sides[1]]['max_seconds']:.0f} s")
    d = {"command": "python benchmarks/rubik_heuristic.py " + " ".join(argv or sys.argv[1:]),
         "machine": {"host": platform.node(), "cores": os.cpu_count(),
                     "load": os.getloadavg()[0]},
         "heuristic": a.heuristic, "compare": a.compare, "sides": list(sides),
         "labels": list(labels), "seeds": seeds, "cubes": cubes, "summary": s,
         "seconds": time.time() - t0}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out + ".json", "w") as fh:
        json.dump(d, fh, indent=1)
    plot(cubes, a.out + ".png", sides, labels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
