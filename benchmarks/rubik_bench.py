"""apps.rubik benchmarks: table builds, the study's 16-move proof, parallel speedup,
subtree sizes with a simulated speedup, random cubes.

    python benchmarks/rubik_bench.py [--repeats 3] [--quick] [--skip korf,random,...]

Sections (each figure: median of repeats with min-max):
  tables    build time of every table (in memory; the cache is not touched)
  proof     T16 = R2 U' F' D2 R F2 R' D2 B' R2 F D2 R U' F' U' (optimal 16): time and nodes
            to prove that no solution of <= 15 moves exists, serial, for each heuristic
  parallel  the same proof on pyfw.farm with 1 and 2 workers (mpiexec -n 2 / -n 3)
  subtrees  sizes of the depth-2 and depth-3 subtrees at bound 15 and the speedup an
            LPT simulation of 4..256 workers predicts from them
  random    random cubes (seeds 0..N-1): time to prove no solution <= 16 (or solve)
Writes benchmarks/results/rubik_bench.json and rubik_*.png.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, ROOT)

T16 = "R2 U' F' D2 R F2 R' D2 B' R2 F D2 R U' F' U'"


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def bench_tables(repeats):
    from apps.rubik import coords, korf, reid
    out = {}
    t = time.perf_counter()
    coords._TABLES.clear()
    coords.move_tables()
    out["move_tables_s"] = time.perf_counter() - t
    for name, fn in (("korf_corners", korf.build_corners),
                     ("korf_edges_a", lambda: korf.build_edges("A")),
                     ("korf_edges_b", lambda: korf.build_edges("B")),
                     ("phase1", reid.build)):
        xs = []
        for _ in range(repeats):
            t = time.perf_counter()
            tab, hist = fn()
            xs.append(time.perf_counter() - t)
            del tab
        out[name] = dict(stats(xs), histogram=hist)
        print(f"table {name}: {out[name]['median']:.2f} s", flush=True)
    return out


def bench_proof(repeats, heuristics):
    from apps.rubik import Heuristic, Solver
    out = {}
    for name in heuristics:
        s = Solver(tables=Heuristic(name, progress=False))
        s.solve("R U")  # warm-up (JIT from cache, page-in)
        xs, rates = [], []
        for _ in range(repeats if name != "korf" else 1):
            t = time.perf_counter()
            r = s.solve(T16, max_length=15)
            xs.append(time.perf_counter() - t)
            rates.append(r.nodes_per_second)
            assert r.solution is None and r.lower_bound == 16
        out[name] = dict(stats(xs), generated=r.generated, expanded=r.expanded,
                         nodes_per_s=stats(rates),
                         per_bound=[(i.bound, i.generated, i.seconds) for i in r.iterations])
        print(f"proof {name}: {out[name]['median']:.2f} s, {r.generated:,} nodes, "
              f"{statistics.median(rates) / 1e6:.1f} M nodes/s", flush=True)
    return out


def mpi_proof(split, heuristic):
    """Run under mpiexec: one T16 proof on the farm; rank 0 prints one JSON line."""
    from apps.rubik import Heuristic
    from apps.rubik.parallel import solve_parallel
    from pyfw.farm import Farm
    with Farm(None) as farm:
        if farm.is_master:
            h = Heuristic(heuristic, progress=False)
            solve_parallel("R U", farm, tables=h)  # warm-up: workers load tables, JIT
            t = time.perf_counter()
            r = solve_parallel(T16, farm, tables=h, max_length=15, split=split)
            dt = time.perf_counter() - t
            print("RESULT " + json.dumps({"seconds": dt, "generated": r.generated,
                                          "workers": r.workers}), flush=True)


def bench_parallel(repeats, heuristic, splits):
    out = {}
    for split in splits:
        for n in (2, 3):
            xs, last = [], None
            for _ in range(repeats):
                cmd = ["pyfw-run", "-n", str(n), "--timeout", "600", "--", sys.executable,
                       os.path.abspath(__file__), "--mpi-proof", str(split), "--heuristic", heuristic]
                p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
                line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
                if not line:
                    raise RuntimeError(p.stdout[-2000:] + p.stderr[-2000:])
                last = json.loads(line[0][7:])
                xs.append(last["seconds"])
            out[f"split{split}_workers{n - 1}"] = dict(stats(xs), generated=last["generated"],
                                                       workers=last["workers"])
            print(f"parallel split={split} workers={n - 1}: {statistics.median(xs):.2f} s", flush=True)
        one = out[f"split{split}_workers1"]["median"]
        two = out[f"split{split}_workers2"]["median"]
        out[f"split{split}_speedup_2_vs_1"] = one / two
    return out


def lpt(sizes, workers):
    import heapq
    loads = [0] * workers
    heapq.heapify(loads)
    for s in sorted(sizes, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + s)
    return sum(sizes) / max(loads)


def bench_subtrees(heuristic):
    from apps.rubik import Heuristic
    from apps.rubik.parallel import solve_parallel
    from pyfw.farm import Farm
    h = Heuristic(heuristic, progress=False)
    out = {}
    with Farm(None) as farm:
        for split in (2, 3):
            r = solve_parallel(T16, farm, tables=h, max_length=15, split=split, record_subtrees=True)
            sizes = sorted(r.subtrees[15].values())
            out[f"depth{split}"] = {
                "count": len(sizes), "min": sizes[0], "median": statistics.median(sizes),
                "max": sizes[-1], "mean": statistics.mean(sizes),
                "max_over_mean": sizes[-1] / statistics.mean(sizes),
                "lpt_speedup": {w: lpt(sizes, w) for w in (2, 4, 8, 16, 32, 64, 128, 256)},
                "sizes": sizes}
            print(f"subtrees depth {split}: {len(sizes)} tasks, max/mean "
                  f"{out[f'depth{split}']['max_over_mean']:.2f}", flush=True)
    return out


def bench_random(n, heuristic, limit):
    from apps.rubik import Cube, Heuristic, Solver
    s = Solver(tables=Heuristic(heuristic, progress=False))
    out = []
    for seed in range(n):
        c = Cube.random(seed)
        t = time.perf_counter()
        r = s.solve(c, max_length=limit)
        dt = time.perf_counter() - t
        out.append({"seed": seed, "seconds": dt, "length": r.length, "lower_bound": r.lower_bound,
                    "generated": r.generated})
        print(f"random {seed}: {dt:.1f} s, length {r.length}, lower bound {r.lower_bound}", flush=True)
    return out


def plots(res):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if "proof" in res:
        names = list(res["proof"])
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        med = [res["proof"][k]["median"] for k in names]
        err = [[m - res["proof"][k]["min"] for k, m in zip(names, med)],
               [res["proof"][k]["max"] - m for k, m in zip(names, med)]]
        ax[0].bar(names, med, yerr=err)
        ax[0].set_ylabel("seconds (1 core)")
        ax[0].set_yscale("log")
        ax[0].set_title("T16: prove no solution <= 15 moves")
        ax[1].bar(names, [res["proof"][k]["generated"] for k in names])
        ax[1].set_yscale("log")
        ax[1].set_ylabel("generated nodes")
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, "rubik_proof.png"), dpi=100)
    if "subtrees" in res:
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        for k, v in res["subtrees"].items():
            ax[0].hist(v["sizes"], bins=40, alpha=0.6, label=f"{k}: {v['count']} subtrees")
            sp = {int(x): y for x, y in v["lpt_speedup"].items()}   # JSON keys are strings
            w = sorted(sp)
            ax[1].plot(w, [sp[x] for x in w], "o-", label=k)
        ax[0].set_xlabel("generated nodes per subtree (bound 15)")
        ax[0].set_yscale("log")
        ax[0].legend()
        ax[1].plot([2, 256], [2, 256], "k:", label="linear")
        ax[1].set_xscale("log")
        ax[1].set_yscale("log")
        ax[1].set_xlabel("workers")
        ax[1].set_ylabel("LPT-simulated speedup")
        ax[1].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, "rubik_subtrees.png"), dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip", default="")
    ap.add_argument("--heuristic", default="phase1")
    ap.add_argument("--random", type=int, default=3)
    ap.add_argument("--mpi-proof", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mpi_proof:
        split = args.mpi_proof if args.mpi_proof == "adaptive" else int(args.mpi_proof)
        return mpi_proof(split, args.heuristic)
    skip = set(args.skip.split(","))
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "rubik_bench.json")
    res = json.load(open(path)) if os.path.exists(path) else {}
    res["machine"] = {"cores": os.cpu_count(), "note": "shared 2-core VM; timings noisy"}
    steps = [("tables", lambda: bench_tables(max(1, args.repeats - 1))),
             ("proof", lambda: bench_proof(args.repeats, ["phase1", "phase1+corners", "korf"]
                                           if "korf" not in skip else ["phase1", "phase1+corners"])),
             ("parallel", lambda: bench_parallel(args.repeats, args.heuristic, [2, "adaptive"])),
             ("subtrees", lambda: bench_subtrees(args.heuristic)),
             ("random", lambda: bench_random(args.random, args.heuristic, 16))]
    for name, fn in steps:
        if name in skip:
            continue
        res[name] = fn()
        with open(path, "w") as f:
            json.dump(res, f, indent=1, default=str)
    plots(res)


if __name__ == "__main__":
    main()
