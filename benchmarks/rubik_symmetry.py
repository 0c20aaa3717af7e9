"""Symmetric positions: the search that drops equivalent subtrees against the full search.

    python benchmarks/rubik_symmetry.py [--heuristic huge] [--ranks 3] [--below 3]
                                        [--repeats 3] [--only NAME]

For every position below (superflip, superflip composed with four spot, and positions
with one symmetry besides the identity from ``random_symmetric``, seeds fixed here) one launch on
pyfw.farm (``--ranks``, default 3: two workers) solves it optimally with symmetry pruning
(the default), then proves that no solution of ``length - below`` moves or fewer exists
(``BELOW`` for some; at least its heuristic value, so that a bound is searched),
with and without the pruning, alternating, ``--repeats`` times each (both searches walk the
same bounds, so the ratio is that of the subtrees dropped). Tables are loaded and the JIT
is warm before the clock starts. Reported per position: the order of its symmetry group,
the optimal length and solve time, and for the proof the median seconds (min-max) and
nodes of both searches and their ratios. Writes ``benchmarks/results/rubik_symmetry.json``
and ``.png``.
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
sys.path.insert(0, HERE)
from rubik_speedup import run_result  # noqa: E402

SUPERFLIP = "U R2 F B R B2 R U2 L B2 R U' D' R2 F R' L B2 U2 F2"
FOUR_SPOT = "F2 B2 U D' R2 L2 U D'"
#: name -> how to build it: a move string, a product of two, or random_symmetric arguments
POSITIONS = {
    "superflip": SUPERFLIP,
    "superflip*fourspot": (SUPERFLIP, FOUR_SPOT),
    # order 2 (one symmetry besides the identity); 40 blocks: more than 15 moves from solved
    "sym-seed0": {"seed": 0, "blocks": 40, "generators": 1},
    "sym-seed3": {"seed": 3, "blocks": 40, "generators": 1},
    "sym-seed7": {"seed": 7, "blocks": 40, "generators": 1},
}
#: proofs this many moves below the optimum instead of --below (their searches are small)
BELOW = {"sym-seed0": 2, "sym-seed3": 2, "sym-seed7": 2}


def position(name):
    """The Cube named in :data:`POSITIONS`."""
    from apps.rubik import Cube
    from apps.rubik.position_symmetry import random_symmetric
    spec = POSITIONS[name]
    if isinstance(spec, str):
        return Cube.from_moves(spec)
    if isinstance(spec, tuple):
        return Cube.from_moves(spec[0]) * Cube.from_moves(spec[1])
    return random_symmetric(**spec)[1]


def mpi_run(name, heuristic, below, repeats):
    """Under mpiexec: rank 0 prints one RESULT line for the position ``name``."""
    from apps.rubik import Heuristic
    from apps.rubik.parallel import preload, solve_parallel
    from pyfw.farm import Farm
    with Farm(None, setup=preload, setup_args=(heuristic, None, None, True)) as farm:
        if not farm.is_master:
            return
        h = Heuristic(heuristic, progress=False)
        solve_parallel("R U F", farm, tables=h, local_nodes=0)    # workers' JIT and tables
        cube = position(name)
        t = time.perf_counter()
        r = solve_parallel(cube, farm, tables=h)
        solve_s = time.perf_counter() - t
        assert cube.apply(r.solution).is_solved
        # a proof below the heuristic's value would search nothing: at least one bound
        depth = min(max(r.length - below, h.h(cube)), r.length - 1)
        runs = {"pruned": [], "full": []}
        for _ in range(repeats):
            for kind in runs:
                t = time.perf_counter()
                p = solve_parallel(cube, farm, tables=h, max_length=depth,
                                   symmetry=kind == "pruned")
                runs[kind].append({"seconds": time.perf_counter() - t,
                                   "generated": p.generated})
                assert p.solution is None and p.lower_bound == depth + 1
        print("RESULT " + json.dumps({
            "name": name, "symmetries": r.symmetries, "length": r.length,
            "solve_seconds": solve_s, "solve_generated": r.generated,
            "solve_bounds": [(i.bound, i.generated, i.seconds) for i in r.iterations],
            "proof_depth": depth, "runs": runs, "workers": farm.num_workers}), flush=True)


def launch(name, ranks, heuristic, below, repeats, timeout):
    cmd = ["pyfw-run", "-n", str(ranks), "--timeout", str(timeout), "--", sys.executable,
           os.path.abspath(__file__), "--mpi", name, "--heuristic", heuristic,
           "--below", str(below), "--repeats", str(repeats)]
    return run_result(cmd, timeout)


def summarise(res):
    """Medians with min-max of each kind of proof, and the full/pruned ratios."""
    out = {}
    for kind, runs in res["runs"].items():
        secs = [x["seconds"] for x in runs]
        out[kind] = {"median_seconds": statistics.median(secs), "min_seconds": min(secs),
                     "max_seconds": max(secs), "generated": runs[0]["generated"]}
    out["time_ratio"] = out["full"]["median_seconds"] / out["pruned"]["median_seconds"]
    out["nodes_ratio"] = (out["full"]["generated"] / out["pruned"]["generated"]
                          if out["pruned"]["generated"] else None)
    return out


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r["name"] for r in results]
    xs = range(len(results))
    ax.bar([x - 0.2 for x in xs], [r["summary"]["nodes_ratio"] for r in results], 0.4,
           label="nodes, full / pruned")
    ax.bar([x + 0.2 for x in xs], [r["summary"]["time_ratio"] for r in results], 0.4,
           label="seconds, full / pruned (median)")
    ax.plot(list(xs), [r["symmetries"] for r in results], "k_", ms=20,
            label="order of the symmetry group")
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=20, fontsize=8)
    ax.set_ylabel("ratio (log)")
    ax.set_title("proofs on symmetric positions: full search / symmetry-pruned search")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heuristic", default="huge")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--below", type=int, default=3,
                    help="the proofs: no solution of (optimal length - BELOW) moves or fewer")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", action="append", choices=sorted(POSITIONS),
                    help="only these positions (repeatable)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per launch, seconds")
    ap.add_argument("--out", default=os.path.join(RESULTS, "rubik_symmetry"))
    ap.add_argument("--mpi", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.mpi is not None:
        return mpi_run(a.mpi, a.heuristic, a.below, a.repeats)
    t0 = time.time()
    results = []
    for name in a.only or POSITIONS:
        r = launch(name, a.ranks, a.heuristic, BELOW.get(name, a.below), a.repeats, a.timeout)
        r["summary"] = s = summarise(r)
        results.append(r)
        print(f"{name}: {r['symmetries']} symmetries, {r['length']} moves in "
              f"{r['solve_seconds']:.1f} s; proof <= {r['proof_depth']}: pruned "
              f"{s['pruned']['median_seconds']:.2f} s ({s['pruned']['generated'] / 1e6:.2f} M "
              f"nodes), full {s['full']['median_seconds']:.2f} s "
              f"({s['full']['generated'] / 1e6:.2f} M): {s['time_ratio']:.1f}x time, "
              f"{s['nodes_ratio'] or 0:.1f}x nodes", flush=True)
    d = {"command": "python benchmarks/rubik_symmetry.py " + " ".join(argv or sys.argv[1:]),
         "machine": {"host": platform.node(), "cores": os.cpu_count(),
                     "load": os.getloadavg()[0]},
         "heuristic": a.heuristic, "ranks": a.ranks, "below": a.below, "repeats": a.repeats,
         "results": results, "seconds": time.time() - t0}
    with open(a.out + ".json", "w") as fh:
        json.dump(d, fh, indent=1)
    plot(results, a.out + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
