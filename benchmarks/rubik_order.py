"""Rubik: the ordered iterations (apps/rubik/ordered.py) against one plain search per
bound, the same cubes on the same tables in one process, side by side.

    python benchmarks/rubik_order.py --seeds 0-19
    python benchmarks/rubik_order.py --seeds 0-3 --heuristic phase1

``Solver(ordered=False)`` searches each iteration from the cube, its subtrees in move
order; ``Solver()`` searches every iteration above 4 moves as the 43,254 subtrees 4 moves
deep, densest first by the iteration before (vcube's order: see the module). Exhausted
iterations cost the same nodes in both (tested); only the last one differs. Per cube,
alternating which goes first: each one's generated nodes (exact, so the node ratio needs
no idle machine), solve time and nodes per second. Reported: the ratio of all nodes, the
geometric mean and range of the per-cube ratios, each one's mean solve time.
"""
import argparse
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw.monitor.results import add_output_options, output_dir, write_json
from rubik_vcube import _seeds          # "0-3,7" seed lists, as that benchmark takes them


def _geomean(xs):
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-19", help="Cube.random(seed) for these")
    ap.add_argument("--heuristic", default="nx")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    from pyfw.apps.rubik import Cube, Solver
    from pyfw.apps.rubik.solver import Heuristic
    h = Heuristic(a.heuristic, progress=False, memory="private")
    solvers = {"plain": Solver(tables=h, ordered=False), "ordered": Solver(tables=h)}
    solvers["ordered"].solve(Cube.from_moves("R U F D L B R2 U2 F2 D' L' B'"))   # compile
    rows = []
    for k, seed in enumerate(_seeds(a.seeds)):
        cube = Cube.random(seed)
        row = {"seed": seed}
        for name in (("plain", "ordered") if k % 2 == 0 else ("ordered", "plain")):
            r = solvers[name].solve(cube)
            row[name] = {"length": r.length, "generated": r.generated, "seconds": r.seconds,
                         "nodes_per_second": r.generated / r.seconds}
        if row["plain"]["length"] != row["ordered"]["length"]:
            raise RuntimeError(f"Cube.random({seed}): lengths {row['plain']['length']} "
                               f"and {row['ordered']['length']}")
        row["node_ratio"] = row["ordered"]["generated"] / row["plain"]["generated"]
        row["time_ratio"] = row["ordered"]["seconds"] / row["plain"]["seconds"]
        rows.append(row)
        print(f"seed {seed}: {row['plain']['length']} moves, plain "
              f"{row['plain']['generated']:,} nodes {row['plain']['seconds']:.1f} s, ordered "
              f"{row['ordered']['generated']:,} {row['ordered']['seconds']:.1f} s: nodes "
              f"{row['node_ratio']:.2f}, time {row['time_ratio']:.2f}", flush=True)
    nr = [r["node_ratio"] for r in rows]
    tr = [r["time_ratio"] for r in rows]
    res = {"per_cube": rows,
           "node_ratio_all": sum(r["ordered"]["generated"] for r in rows)
           / sum(r["plain"]["generated"] for r in rows),
           "node_ratio_geomean": _geomean(nr), "node_ratio_min": min(nr),
           "node_ratio_max": max(nr), "time_ratio_geomean": _geomean(tr),
           "mean_seconds": {n: statistics.fmean(r[n]["seconds"] for r in rows)
                            for n in solvers},
           "nodes_per_second": {n: sum(r[n]["generated"] for r in rows)
                                / sum(r[n]["seconds"] for r in rows) for n in solvers}}
    print(f"ordered / plain nodes: all {res['node_ratio_all']:.2f}, per cube geometric mean "
          f"{res['node_ratio_geomean']:.2f} ({res['node_ratio_min']:.2f}-"
          f"{res['node_ratio_max']:.2f}); mean solve {res['mean_seconds']['plain']:.1f} s "
          f"plain, {res['mean_seconds']['ordered']:.1f} s ordered; nodes/s "
          f"{res['nodes_per_second']['plain'] / 1e6:.2f} M and "
          f"{res['nodes_per_second']['ordered'] / 1e6:.2f} M")
    write_json(output_dir(a), "rubik_order.json",
               {"seeds": a.seeds, "heuristic": a.heuristic, "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
