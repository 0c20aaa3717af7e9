"""Rubik: two search configurations on the same cubes and tables in one process, side by
side: by default the ordered iterations (apps/rubik/ordered.py) against one plain search
per bound; with ``--compare ordered,bidir`` a direction picked per node
(apps/rubik/bidir_kernel.py) against forward moves only.

    python benchmarks/rubik_order.py --seeds 0-19
    python benchmarks/rubik_order.py --seeds 0-3 --heuristic phase1
    python benchmarks/rubik_order.py --seeds 0-19 --compare ordered,bidir

``plain``: ``Solver(ordered=False)`` searches each iteration from the cube, its subtrees
in move order. ``ordered``: ``Solver()`` searches every iteration above 4 moves as the
43,254 subtrees 4 moves deep, densest first by the iteration before (vcube's order: see
the module); exhausted iterations cost the same nodes as plain (tested), only the last one
differs. ``bidir``: the ordered search, each node below the leaves expanded by the
position's moves or its inverse's, whichever leaves fewer children (vcube's choice):
every iteration's nodes differ. Per cube, alternating which goes first: each one's
generated nodes (exact, so the node ratio needs no idle machine), solve time and nodes per
second. Reported: the ratio of all nodes, the geometric mean and range of the per-cube
ratios, each one's mean solve time.
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
    ap.add_argument("--compare", default="plain,ordered",
                    help="BASE,NEW among plain, ordered, bidir (default plain,ordered)")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    base, new = a.compare.split(",")
    from pyfw.apps.rubik import Cube, Solver
    from pyfw.apps.rubik.solver import Heuristic
    h = Heuristic(a.heuristic, progress=False, memory="private")
    configs = {"plain": lambda: Solver(tables=h, ordered=False),
               "ordered": lambda: Solver(tables=h),
               "bidir": lambda: Solver(tables=h.variant(bidir=True))}
    if {base, new} - set(configs) or base == new:
        ap.error(f"--compare takes two of {', '.join(configs)}, got {a.compare!r}")
    solvers = {base: configs[base](), new: configs[new]()}
    for s in solvers.values():                                                  # compile
        s.solve(Cube.from_moves("R U F D L B R2 U2 F2 D' L' B'"))
    rows = []
    for k, seed in enumerate(_seeds(a.seeds)):
        cube = Cube.random(seed)
        row = {"seed": seed}
        for name in ((base, new) if k % 2 == 0 else (new, base)):
            r = solvers[name].solve(cube)
            row[name] = {"length": r.length, "generated": r.generated, "seconds": r.seconds,
                         "nodes_per_second": r.generated / r.seconds}
        if row[base]["length"] != row[new]["length"]:
            raise RuntimeError(f"Cube.random({seed}): lengths {row[base]['length']} "
                               f"and {row[new]['length']}")
        row["node_ratio"] = row[new]["generated"] / row[base]["generated"]
        row["time_ratio"] = row[new]["seconds"] / row[base]["seconds"]
        rows.append(row)
        print(f"seed {seed}: {row[base]['length']} moves, {base} "
              f"{row[base]['generated']:,} nodes {row[base]['seconds']:.1f} s, {new} "
              f"{row[new]['generated']:,} {row[new]['seconds']:.1f} s: nodes "
              f"{row['node_ratio']:.2f}, time {row['time_ratio']:.2f}", flush=True)
    nr = [r["node_ratio"] for r in rows]
    tr = [r["time_ratio"] for r in rows]
    res = {"per_cube": rows,
           "node_ratio_all": sum(r[new]["generated"] for r in rows)
           / sum(r[base]["generated"] for r in rows),
           "node_ratio_geomean": _geomean(nr), "node_ratio_min": min(nr),
           "node_ratio_max": max(nr), "time_ratio_geomean": _geomean(tr),
           "mean_seconds": {n: statistics.fmean(r[n]["seconds"] for r in rows)
                            for n in solvers},
           "nodes_per_second": {n: sum(r[n]["generated"] for r in rows)
                                / sum(r[n]["seconds"] for r in rows) for n in solvers}}
    print(f"{new} / {base} nodes: all {res['node_ratio_all']:.2f}, per cube geometric mean "
          f"{res['node_ratio_geomean']:.2f} ({res['node_ratio_min']:.2f}-"
          f"{res['node_ratio_max']:.2f}); mean solve {res['mean_seconds'][base]:.1f} s "
          f"{base}, {res['mean_seconds'][new]:.1f} s {new}; nodes/s "
          f"{res['nodes_per_second'][base] / 1e6:.2f} M and "
          f"{res['nodes_per_second'][new] / 1e6:.2f} M")
    name = "rubik_order.json" if (base, new) == ("plain", "ordered") else \
        f"rubik_order_{base}_{new}.json"
    write_json(output_dir(a), name, {"seeds": a.seeds, "heuristic": a.heuristic,
                                     "compare": [base, new], "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
