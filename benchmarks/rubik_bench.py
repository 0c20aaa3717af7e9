"""apps.rubik benchmarks: table builds, the study's 16-move proof, parallel speedup,
subtree sizes with a simulated speedup, random cubes.

    python benchmarks/rubik_bench.py [--repeats 3] [--skip huge_build,random,...] [--fresh]
        [--compare-with DIR]

Sections (each figure: median of repeats with min-max):
  tables    build time of the phase-1 table (in memory; the cache is not touched) and of
            the huge table (3.3 GB while building, once, unless --skip huge_build)
  proof     T16 = R2 U' F' D2 R F2 R' D2 B' R2 F D2 R U' F' U' (optimal 16): time and nodes
            to prove that no solution of <= 15 moves exists, serial, for each heuristic
            whose table is cached
  parallel  the same proof on pyfw.farm with 1 and 2 workers (mpiexec -n 2 / -n 3), split
            depth 2, 3 and adaptive, launches alternated, plus two longer proofs
  subtrees  sizes of the depth-2 and depth-3 subtrees at bound 15 and the speedup an
            LPT simulation of 4..256 workers predicts from them
  random    random cubes (Cube.random(seed), seeds 0..N-1) solved optimally on pyfw.farm with
            2 workers (mpiexec -n 3: the whole 2-core machine), default heuristic; time
            includes nothing but the solve (tables loaded, JIT warm)
  compare   (only with --compare-with DIR) the serial kernel of another checkout of the
            code (DIR: e.g. ``git worktree add /tmp/rubik-before HEAD`` before a change)
            against this one, side by side: launches alternate between the two, each
            loads its tables into a private copy, warms up, then times the T16 proof and
            Cube.random(seed) solves (--compare-seeds) per heuristic (--compare-heuristics;
            the random cubes with nx only); nodes, seconds, CPU seconds, nodes/s
Writes benchmarks/results/rubik_bench.json (merged into the file there, or with --fresh only
the sections this run measured) and rubik_*.png.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PUBLISHED = os.path.join(HERE, "results")
#: where this run writes (main sets it): PUBLISHED with --publish, else --out DIR or
#: PUBLISHED/local
RESULTS = os.path.join(PUBLISHED, "local")

T16 = "R2 U' F' D2 R F2 R' D2 B' R2 F D2 R U' F' U'"


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def bench_tables(repeats, with_huge):
    from pyfw.apps.rubik import coords, huge, reid
    out = {}
    t = time.perf_counter()
    coords._TABLES.clear()
    coords.move_tables()
    out["move_tables_s"] = time.perf_counter() - t
    for name, fn in (("phase1", reid.build),):
        xs = []
        for _ in range(repeats):
            t = time.perf_counter()
            tab, hist = fn()
            xs.append(time.perf_counter() - t)
            del tab
        out[name] = dict(stats(xs), histogram=hist)
        print(f"table {name}: {out[name]['median']:.2f} s", flush=True)
    if with_huge:
        huge.class_tables()
        t = time.perf_counter()
        tab, hist = huge.build()
        packed = huge._saturate_pack4(tab, huge.MAX_STORED)
        out["huge"] = dict(stats([time.perf_counter() - t]), histogram=hist,
                           bytes=int(packed.nbytes), note="one build, packing included")
        del tab, packed
        print(f"table huge: {out['huge']['median']:.1f} s", flush=True)
    return out


def bench_proof(repeats, heuristics):
    from pyfw.apps.rubik import Heuristic, Solver
    out = {}
    for name in heuristics:
        try:
            s = Solver(tables=Heuristic(name, progress=False, cached_only=True))
        except LookupError:
            print(f"proof {name}: table not cached, skipped", flush=True)
            continue
        s.solve("R U")  # warm-up (JIT from cache, page-in)
        xs, rates = [], []
        for _ in range(repeats):
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


SPLITS = (2, 3, "adaptive")
#: longer proofs timed once per launch: name -> (Cube.random seed, no solution <= limit)
LONGER = {"medium": (1, 16), "long": (3, 17)}


def mpi_proof(heuristic, rounds, splits=SPLITS, longer=LONGER):
    """Run under mpiexec: T16 proofs on the farm for every split in ``splits``
    (interleaved, ``rounds`` times each), then the ``longer`` proofs once; rank 0 prints
    one JSON line. Startup (farm, table loading on every rank, JIT) is timed separately
    from the proofs."""
    from pyfw.apps.rubik import Cube, Heuristic
    from pyfw.apps.rubik.parallel import preload, solve_parallel
    from pyfw.farm import Farm
    t0 = time.perf_counter()
    with Farm(None, setup=preload, setup_args=(heuristic,)) as farm:
        if farm.is_master:
            h = Heuristic(heuristic, progress=False)
            solve_parallel("R U", farm, tables=h)                 # workers' tables, JIT
            solve_parallel(T16, farm, tables=h, max_length=13, local_nodes=0)
            startup = time.perf_counter() - t0
            out = {"startup_s": startup, "workers": farm.num_workers}
            for _ in range(rounds):
                for split in splits:
                    t = time.perf_counter()
                    c = time.process_time()
                    r = solve_parallel(T16, farm, tables=h, max_length=15, split=split)
                    dt = time.perf_counter() - t
                    assert r.solution is None and r.lower_bound == 16
                    d = out.setdefault(str(split), {"seconds": [], "master_cpu_s": []})
                    d["seconds"].append(dt)
                    d["master_cpu_s"].append(time.process_time() - c)
                    d.update(generated=r.generated, loads=r.workers,
                             per_bound=[(i.bound, i.tasks, i.local, i.seconds)
                                        for i in r.iterations])
            # longer proofs (the T16 proof takes 0.3 s with the default heuristic, so fixed
            # costs weigh on it): complete iterations, so the node counts are deterministic
            for key, (seed, limit) in longer.items():
                c = Cube.random(seed)
                t = time.perf_counter()
                r = solve_parallel(c, farm, tables=h, max_length=limit)
                dt = time.perf_counter() - t
                assert r.solution is None and r.lower_bound == limit + 1
                out[key] = {"seconds": dt, "generated": r.generated}
            print("RESULT " + json.dumps(out), flush=True)


def bench_parallel(repeats, heuristic, splits=SPLITS, longer=LONGER, rounds=2):
    """1 and 2 workers (mpiexec -n 2 / -n 3), launches alternated so that load from other
    jobs on the machine hits both alike; each launch runs every split ``rounds`` times and
    the ``longer`` proofs once."""
    runs = {1: [], 2: []}
    for _ in range(repeats):
        for n in (2, 3):
            cmd = ["pyfw-run", "-n", str(n), "--timeout", "1200", "--", sys.executable,
                   os.path.abspath(__file__), "--mpi-proof", str(rounds), "--heuristic",
                   heuristic, "--splits", ",".join(map(str, splits))]
            if not longer:
                cmd.append("--no-longer")
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                raise RuntimeError(p.stdout[-2000:] + p.stderr[-2000:])
            runs[n - 1].append(json.loads(line[0][7:]))
    out = {"heuristic": heuristic,
           "note": "T16 proof (no solution <= 15) on pyfw.farm; tables loaded and JIT warm "
                   "before timing (startup_s: farm start + every rank loading its tables + "
                   "warm-up solve); split 2 = 243 subtrees, 3 = 3,240, adaptive = 2 then "
                   "split subtrees above 1/(4 workers) of the previous iteration"}
    for w, rs in runs.items():
        out[f"workers{w}_startup_s"] = stats([r["startup_s"] for r in rs])
        for split in splits:
            k = str(split)
            xs = [x for r in rs for x in r[k]["seconds"]]
            out[f"split{k}_workers{w}"] = dict(
                stats(xs), generated=rs[-1][k]["generated"], loads=rs[-1][k]["loads"],
                master_cpu_s=statistics.median(x for r in rs for x in r[k]["master_cpu_s"]),
                per_bound=rs[-1][k]["per_bound"])
    for key, (seed, limit) in longer.items():
        for w, rs in runs.items():
            out[f"{key}_workers{w}"] = dict(stats([r[key]["seconds"] for r in rs]),
                                            generated=rs[-1][key]["generated"],
                                            case=f"Cube.random({seed}): no solution <= {limit}")
        one, two = out[f"{key}_workers1"], out[f"{key}_workers2"]
        out[f"{key}_speedup_2_vs_1"] = one["median"] / two["median"]
        print(f"parallel {key} ({one['case']}, {one['generated']:,} nodes): 1 worker "
              f"{one['median']:.2f} s ({one['min']:.2f}-{one['max']:.2f}), 2 workers "
              f"{two['median']:.2f} s ({two['min']:.2f}-{two['max']:.2f}): "
              f"{one['median'] / two['median']:.2f}x", flush=True)
    for split in splits:
        one, two = out[f"split{split}_workers1"], out[f"split{split}_workers2"]
        out[f"split{split}_speedup_2_vs_1"] = one["median"] / two["median"]
        print(f"parallel {heuristic} split={split}: 1 worker {one['median']:.3f} s "
              f"({one['min']:.3f}-{one['max']:.3f}), 2 workers {two['median']:.3f} s "
              f"({two['min']:.3f}-{two['max']:.3f}): {one['median'] / two['median']:.2f}x",
              flush=True)
    return out


#: random cubes of the compare section: their serial nx solves take 0.7-7 s each
COMPARE_SEEDS = (1, 2, 11, 16, 19)


def kernel_run(root, heuristic, seeds):
    """Run in a child process: the serial solves of the compare section with the code of
    checkout ``root``; prints one RESULT line."""
    import apps.rubik as rubik    # root's: the parent puts it first on PYTHONPATH
    if not os.path.abspath(rubik.__file__).startswith(os.path.abspath(root) + os.sep):
        raise RuntimeError(f"imported {rubik.__file__}, not the code of {root}")
    from apps.rubik import Cube, Heuristic, Solver
    t = time.perf_counter()
    s = Solver(tables=Heuristic(heuristic, progress=False, memory="private",
                                cached_only=True))
    load = time.perf_counter() - t
    s.solve("R U")   # warm-up (numba cache, page-in)
    cases = [("T16", T16, 15)] + [(f"random{k}", Cube.random(k), None) for k in seeds]
    out = {"load_s": load, "root": root, "cases": {}}
    for name, cube, limit in cases:
        t, c = time.perf_counter(), time.process_time()
        r = s.solve(cube, max_length=limit)
        out["cases"][name] = {"seconds": time.perf_counter() - t,
                              "cpu_s": time.process_time() - c, "generated": r.generated,
                              "length": r.length, "lower_bound": r.lower_bound,
                              "nodes_per_s": r.nodes_per_second}
    print("RESULT " + json.dumps(out), flush=True)


def bench_compare(before, heuristics, seeds, repeats):
    """The serial search of checkout ``before`` against this one's (see the module
    docstring): per heuristic, ``repeats`` pairs of launches, the order alternating."""
    trees = {"before": os.path.abspath(before), "after": ROOT}
    out = {"before": trees["before"], "note": "serial solves, tables in a private copy, "
           "launches alternating before/after; seconds and nodes/s are medians over the "
           "launches, ratio = after / before (nodes/s: > 1 is faster); nodes per CPU "
           "second is the steadier figure on a shared machine"}
    for h in heuristics:
        runs = {"before": [], "after": []}
        for k in range(repeats):
            for which in (("before", "after") if k % 2 == 0 else ("after", "before")):
                cmd = [sys.executable, os.path.abspath(__file__), "--kernel-run",
                       trees[which], "--heuristic", h, "--compare-seeds",
                       ",".join(map(str, seeds if h == "nx" else ()))]
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                    filter(None, [trees[which], os.environ.get("PYTHONPATH")])))
                p = subprocess.run(cmd, capture_output=True, text=True, cwd="/", env=env,
                                   timeout=1800)
                line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
                if not line:
                    raise RuntimeError(p.stdout[-2000:] + p.stderr[-2000:])
                runs[which].append(json.loads(line[0][7:]))
        res = {"runs": runs, "cases": {}}
        for case in runs["before"][0]["cases"]:
            row = {}
            for which in ("before", "after"):
                cs = [r["cases"][case] for r in runs[which]]
                row[which] = {"seconds": stats([c["seconds"] for c in cs]),
                              "cpu_s": stats([c["cpu_s"] for c in cs]),
                              "nodes_per_s": stats([c["nodes_per_s"] for c in cs]),
                              "nodes_per_cpu_s": stats([c["generated"] / c["cpu_s"]
                                                        for c in cs]),
                              "generated": cs[0]["generated"], "length": cs[0]["length"],
                              "lower_bound": cs[0]["lower_bound"]}
            b, a = row["before"], row["after"]
            row["same_nodes"] = b["generated"] == a["generated"]
            row["seconds_ratio"] = a["seconds"]["median"] / b["seconds"]["median"]
            row["nodes_per_s_ratio"] = a["nodes_per_s"]["median"] / b["nodes_per_s"]["median"]
            row["nodes_per_cpu_s_ratio"] = (a["nodes_per_cpu_s"]["median"]
                                            / b["nodes_per_cpu_s"]["median"])
            # the best launch of each: other jobs on the machine only ever slow a launch
            row["best_nodes_per_cpu_s_ratio"] = (a["nodes_per_cpu_s"]["max"]
                                                 / b["nodes_per_cpu_s"]["max"])
            res["cases"][case] = row
            print(f"compare {h} {case}: {b['generated']:,} -> {a['generated']:,} nodes, "
                  f"{b['seconds']['median']:.2f} -> {a['seconds']['median']:.2f} s, "
                  f"{b['nodes_per_s']['median'] / 1e6:.2f} -> "
                  f"{a['nodes_per_s']['median'] / 1e6:.2f} M nodes/s "
                  f"(x{row['nodes_per_s_ratio']:.3f}), per CPU second "
                  f"{b['nodes_per_cpu_s']['median'] / 1e6:.2f} -> "
                  f"{a['nodes_per_cpu_s']['median'] / 1e6:.2f} M "
                  f"(x{row['nodes_per_cpu_s_ratio']:.3f}; best launches "
                  f"x{row['best_nodes_per_cpu_s_ratio']:.3f})", flush=True)
        out[h] = res
    return out


def lpt(sizes, workers):
    import heapq
    loads = [0] * workers
    heapq.heapify(loads)
    for s in sorted(sizes, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + s)
    return sum(sizes) / max(loads)


def bench_subtrees(heuristic):
    from pyfw.apps.rubik import Heuristic
    from pyfw.apps.rubik.parallel import solve_parallel
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


def mpi_random(heuristic, seeds, limit):
    """Run under mpiexec: optimal solves of Cube.random(seed) on the farm; rank 0 prints
    one RESULT line per cube (so a time-out keeps the cubes already solved)."""
    from pyfw.apps.rubik import Cube, Heuristic
    from pyfw.apps.rubik.parallel import preload, solve_parallel
    from pyfw.farm import Farm
    with Farm(None, setup=preload, setup_args=(heuristic,)) as farm:
        if farm.is_master:
            h = Heuristic(heuristic, progress=False)
            solve_parallel("R U", farm, tables=h)                 # workers' tables, JIT
            for seed in seeds:
                c = Cube.random(seed)
                t = time.perf_counter()
                r = solve_parallel(c, farm, tables=h, max_length=limit)
                dt = time.perf_counter() - t
                assert r.solution is None or c.apply(r.solution).is_solved
                print("RESULT " + json.dumps({
                    "seed": seed, "seconds": dt, "length": r.length,
                    "lower_bound": r.lower_bound, "moves": r.moves, "generated": r.generated,
                    "nodes_per_s": r.generated / dt, "workers": farm.num_workers,
                    "per_bound": [(i.bound, i.generated, i.seconds) for i in r.iterations]}),
                    flush=True)


def bench_random(n, heuristic, limit, timeout):
    """Random cubes (Cube.random(seed), seeds 0..n-1) solved optimally (or proven to need
    more than ``limit`` moves) on the farm with 2 workers, one launch for all cubes."""
    cmd = ["pyfw-run", "-n", "3", "--timeout", str(timeout), "--", sys.executable,
           os.path.abspath(__file__), "--mpi-random", str(n), "--heuristic", heuristic,
           "--random-limit", str(limit)]
    cubes = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT) as p:
        for line in p.stdout:
            if line.startswith("RESULT "):
                c = json.loads(line[7:])
                cubes.append(c)
                print(f"random {c['seed']}: {c['seconds']:.1f} s, length {c['length']}, "
                      f"{c['generated']:,} nodes, {c['nodes_per_s'] / 1e6:.1f} M nodes/s",
                      flush=True)
    solved = [c for c in cubes if c["length"] is not None]
    out = {"limit": limit, "heuristic": heuristic, "workers": 2, "cubes": cubes,
           "attempted": n, "solved": len(solved),
           "note": "seeds without a RESULT ran out of the launch's time limit"}
    if solved:
        out["solved_seconds"] = stats([c["seconds"] for c in solved])
        out["solved_length"] = stats([c["length"] for c in solved])
        print(f"random: {len(solved)}/{n} solved, median {out['solved_seconds']['median']:.1f} s "
              f"(max {out['solved_seconds']['max']:.1f} s), lengths "
              f"{sorted(c['length'] for c in solved)}", flush=True)
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
    ap.add_argument("--heuristic", default=None,
                    help="heuristic of the parallel, subtree and random sections (default: "
                         "the solver's default)")
    ap.add_argument("--random", type=int, default=9, help="number of random cubes")
    ap.add_argument("--random-limit", type=int, default=20,
                    help="prove no solution <= this many moves (or solve); 20 = full solves")
    ap.add_argument("--random-timeout", type=float, default=3600,
                    help="time limit of the launch that solves all random cubes")
    ap.add_argument("--mpi-proof", help=argparse.SUPPRESS)
    ap.add_argument("--mpi-random", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--splits", default="2,3,adaptive", help=argparse.SUPPRESS)
    ap.add_argument("--no-longer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--compare-with", metavar="DIR",
                    help="the compare section: another checkout's serial search against "
                         "this one's (e.g. a git worktree of the code before a change)")
    ap.add_argument("--compare-heuristics", default="nx,phase1",
                    help="heuristics of the compare section (their tables must be cached)")
    ap.add_argument("--compare-seeds", default=",".join(map(str, COMPARE_SEEDS)),
                    help="Cube.random seeds of the compare section (nx only)")
    ap.add_argument("--kernel-run", help=argparse.SUPPRESS)
    ap.add_argument("--fresh", action="store_true",
                    help="write only the sections this run measures (default: merge them "
                         "into the results file already there)")
    add_output_options(ap, PUBLISHED)
    args = ap.parse_args()
    if args.mpi_proof:
        splits = [x if x == "adaptive" else int(x) for x in args.splits.split(",")]
        return mpi_proof(args.heuristic, int(args.mpi_proof), splits,
                         {} if args.no_longer else LONGER)
    if args.mpi_random:
        return mpi_random(args.heuristic, range(args.mpi_random), args.random_limit)
    seeds = [int(x) for x in args.compare_seeds.split(",") if x]
    if args.kernel_run:
        return kernel_run(args.kernel_run, args.heuristic, seeds)
    # not at the top: a --kernel-run child imports the rubik code of the checkout it times
    from pyfw.apps.rubik.solver import DEFAULT_HEURISTIC
    args.heuristic = args.heuristic or DEFAULT_HEURISTIC
    global RESULTS
    RESULTS = output_dir(args)
    skip = set(args.skip.split(","))
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "rubik_bench.json")
    res = json.load(open(path)) if os.path.exists(path) and not args.fresh else {}
    res["machine"] = {"cores": os.cpu_count(), "note": "shared 2-core VM; timings noisy"}
    from pyfw.apps.rubik.solver import HEURISTICS
    proof_names = [k for k in HEURISTICS if k not in skip]
    steps = [("tables", lambda: bench_tables(max(1, args.repeats - 1), "huge_build" not in skip)),
             ("proof", lambda: bench_proof(args.repeats, proof_names)),
             ("parallel", lambda: bench_parallel(args.repeats, args.heuristic)),
             ("subtrees", lambda: bench_subtrees(args.heuristic)),
             ("random", lambda: bench_random(args.random, args.heuristic, args.random_limit,
                                             args.random_timeout)),
             ("compare", lambda: bench_compare(args.compare_with,
                                               args.compare_heuristics.split(","), seeds,
                                               args.repeats))]
    for name, fn in steps:
        if name in skip or (name == "compare" and not args.compare_with):
            continue
        res[name] = fn()
        with open(path, "w") as f:
            json.dump(res, f, indent=1, default=str)
    plots(res)


if __name__ == "__main__":
    main()
