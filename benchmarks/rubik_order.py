"""Rubik: vcube's ordered last iterations tried on our search (a prototype of the order,
node counts only), against our serial order on the same cubes.

    python benchmarks/rubik_order.py --seeds 0-19            # from bound 14, as vcube
    python benchmarks/rubik_order.py --seeds 0-3 --from-bound 15

vcube (see rubik_vcube.py) searches its iterations from bound 14 on as the subtrees 4 moves
below the cube, densest first: each subtree's node count in the previous iteration, scaled
by sqrt(3/2) where its last move turns U, R or F (more canonical successors). Built without
that order it took 1.30x longer on Cube.random(0..19). Here the same order runs on our
kernel: below the bound, one plain search from the root; from it, the frontier 4 moves deep
(``Frontier(split=4)``, pruned as the farm's master prunes it), leaf by leaf in that order,
stopping at the first solution. The serial order's counts come from one plain search per
bound. Node counts are exact, so the comparison needs no idle machine; the times are
reported as measured (the leaves' Python set-up included).
"""
import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw.monitor.results import add_output_options, output_dir, write_json
from rubik_vcube import _seeds          # "0-3,7" seed lists, as that benchmark takes them

#: vcube's weight of a subtree whose last move turns U, R or F (15 canonical successors
#: against 12): its 58206:47525, about sqrt(3):sqrt(2)
URF_WEIGHT = 58206 / 47525


def serial_solve(h, cube):
    """(length, generated nodes): one plain search per bound, as the serial solver."""
    from pyfw.apps.rubik.status import FOUND
    gen, bound = 0, h.h(cube)
    while True:
        s = h.subtree(cube, [], bound)
        status = s.run()
        gen += s.generated
        if status == FOUND:
            return bound, gen
        bound += 1


def ordered_solve(h, cube, from_bound):
    """(length, generated nodes) with the iterations from ``from_bound`` on ordered."""
    from pyfw.apps.rubik.frontier import Frontier
    from pyfw.apps.rubik.status import FOUND
    gen, prev = 0, {}
    frontier = Frontier(h, cube, 4)
    bound = h.h(cube)
    while True:
        if bound < from_bound:
            s = h.subtree(cube, [], bound)
            status = s.run()
            gen += s.generated
            if status == FOUND:
                return bound, gen
        else:
            leaves, g, _ = frontier.leaves(bound)
            gen += g

            def density(p):
                return prev.get(tuple(p), 0) * (URF_WEIGHT if p[-1] // 3 < 3 else 1.0)
            leaves.sort(key=density, reverse=True)
            cur = {}
            for p in leaves:
                s = h.subtree(cube, p, bound)
                status = s.run()
                gen += s.generated
                cur[tuple(p)] = s.generated
                if status == FOUND:
                    return bound, gen
            prev = cur
        bound += 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-19", help="Cube.random(seed) for these")
    ap.add_argument("--from-bound", type=int, default=14, help="first ordered bound (14)")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    from pyfw.apps.rubik import Cube
    from pyfw.apps.rubik.solver import Heuristic
    h = Heuristic("nx", progress=False, memory="private")
    rows = []
    for seed in _seeds(a.seeds):
        cube = Cube.random(seed)
        t0 = time.perf_counter()
        length, serial = serial_solve(h, cube)
        t1 = time.perf_counter()
        olength, ordered = ordered_solve(h, cube, a.from_bound)
        t2 = time.perf_counter()
        if olength != length:
            raise RuntimeError(f"Cube.random({seed}): lengths {length} and {olength}")
        rows.append({"seed": seed, "length": length, "serial_generated": serial,
                     "ordered_generated": ordered, "ratio": ordered / serial,
                     "serial_seconds": t1 - t0, "ordered_seconds": t2 - t1})
        print(f"seed {seed}: {length} moves, serial {serial:,} nodes ({t1 - t0:.1f} s), "
              f"ordered {ordered:,} ({t2 - t1:.1f} s): {ordered / serial:.2f}", flush=True)
    ratios = [r["ratio"] for r in rows]
    res = {"per_cube": rows,
           "total_ratio": sum(r["ordered_generated"] for r in rows)
           / sum(r["serial_generated"] for r in rows),
           "geomean_ratio": math.exp(statistics.fmean(math.log(x) for x in ratios)),
           "min_ratio": min(ratios), "max_ratio": max(ratios)}
    print(f"ordered / serial nodes: in all {res['total_ratio']:.2f}, per cube geometric mean "
          f"{res['geomean_ratio']:.2f} ({res['min_ratio']:.2f}-{res['max_ratio']:.2f})")
    write_json(output_dir(a), "rubik_order.json",
               {"seeds": a.seeds, "from_bound": a.from_bound, "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
