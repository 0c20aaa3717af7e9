"""Two workers against one on optimal solves of random cubes, side by side.

    python benchmarks/rubik_speedup.py [--seeds 0-19] [--heuristic nx] [--repeat 3]
                                       [--order serial] [--split adaptive]
                                       [--compare largest:2] [--no-inverse] [--no-steal]
                                       [--table-memory private] [--resume]
                                       [--publish | --out DIR]

For every cube ``Cube.random(seed)`` (seeds fixed here) the solve runs on pyfw.farm with
one worker (2 ranks) and with two (3 ranks), one launch each of ``--repeat`` solves (the
medians are compared: a shared machine disturbs single solves by up to 2x), alternating per
cube (and
with ``--compare``, every configuration's launches of a cube together) so that the shared
machine's drift hits both alike; tables are loaded and the JIT is warm before
the clock starts. Reported per cube: solve seconds, nodes generated, and the 2-vs-1 speedup
and nodes ratio; over all cubes: median and geometric mean speedup, the worst cube.
``--compare ORDER:SPLIT[:DEPTH][:nosteal][:shared|private|auto]`` runs a second
configuration the same way (e.g. the previous defaults, ``largest:2``,
``serial:adaptive:nosteal``, or the workers' tables in the shared page-cache mapping,
``serial:adaptive:shared``; the settled comparisons: docs/decisions.md), and reports the
second's solve seconds over the first's per cube (``versus``). Writes
``rubik_speedup.json`` (after every cube, with ``"complete": false`` until the last: a run
stopped early keeps its finished cubes) and ``.png`` to ``--out DIR`` (default
``benchmarks/results/local/``; ``--publish``: the tracked ``benchmarks/results/``);
``--resume`` runs only the cubes such a file does not hold yet, so a long series can be measured over
several idle windows (each cube's launches still run side by side).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

from pyfw.monitor.results import add_output_options, machine, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def seed_range(text):
    """'0-19' -> [0, 1, ..., 19]; '7' -> [7]."""
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def cube_of(seed):
    """``Cube.random(seed)``."""
    from pyfw.apps.rubik import Cube
    return Cube.random(int(seed))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _split(text):
    return text if text == "adaptive" else int(text)


def mpi_solve(heuristic, seed, order, split, depth, inverse=True, steal=True,
              memory="auto", repeat=1):
    """Under mpiexec: ``repeat`` warm solves of ``cube_of(seed)``; rank 0 prints a RESULT
    line with the median solve's figures and every solve's seconds (``runs``)."""
    from pyfw.apps.rubik import Heuristic
    from pyfw.apps.rubik.parallel import preload, solve_parallel
    from pyfw.farm import Farm
    with Farm(None, setup=preload, setup_args=(heuristic, None, None, inverse, memory),
              pipeline_depth=depth) as farm:
        if farm.is_master:
            h = Heuristic(heuristic, progress=False, inverse=inverse, memory=memory)
            solve_parallel("R U F", farm, tables=h, local_nodes=0)   # workers' JIT and tables
            cube = cube_of(seed)
            runs = []
            for _ in range(repeat):
                t, cpu = time.perf_counter(), time.process_time()
                r = solve_parallel(cube, farm, tables=h, order=order, split=split,
                                   steal=steal)
                dt = time.perf_counter() - t
                assert cube.apply(r.solution).is_solved
                # the workers' share of the wall time spent inside their tasks: what the
                # farm lost to idling and messages, apart from a slower search
                busy = [w["seconds"] / (dt * farm.num_workers)
                        for rank, w in r.workers.items() if rank != farm.master]
                runs.append({"seconds": dt, "generated": r.generated,
                             "master_cpu": time.process_time() - cpu,
                             "workers_busy": sum(busy), "length": r.length,
                             "last_bound_nodes": r.iterations[-1].generated,
                             "worker_tables": sorted({w.get("tables", "")
                                                      for w in r.workers.values()})})
            mid = sorted(runs, key=lambda x: x["seconds"])[(len(runs) - 1) // 2]
            print("RESULT " + json.dumps(dict(
                mid, seed=seed, workers=farm.num_workers, order=order, split=split,
                depth=depth, inverse=inverse, steal=steal, table_memory=memory,
                runs=[x["seconds"] for x in runs])), flush=True)


def launch(ranks, heuristic, seed, order, split, depth, timeout, inverse=True, steal=True,
           memory="auto", repeat=1):
    cmd = ["pyfw-run", "-n", str(ranks), "--timeout", str(timeout), "--", sys.executable,
           os.path.abspath(__file__), "--mpi", str(seed), "--heuristic", heuristic,
           "--order", order, "--split", str(split), "--table-memory", memory,
           "--repeat", str(repeat)]
    if depth:
        cmd += ["--pipeline-depth", str(depth)]
    if not inverse:
        cmd += ["--no-inverse"]
    if not steal:
        cmd += ["--no-steal"]
    return run_result(cmd, timeout)


def run_result(cmd, timeout):
    """Run a launch command; the JSON of its rank 0's ``RESULT`` line (exit on failure)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if p.returncode != 0 or not line:
        raise SystemExit(f"launch failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}"
                         f"\n{p.stderr[-2000:]}")
    return json.loads(line[0][7:])


def summarise(cubes):
    sp = [c["speedup"] for c in cubes]
    worst = min(cubes, key=lambda c: c["speedup"])
    return {"cubes": len(cubes), "median_speedup": statistics.median(sp),
            "geomean_speedup": geomean(sp),
            "min_speedup": worst["speedup"], "worst_seed": worst["seed"],
            "max_speedup": max(sp),
            "median_nodes_ratio": statistics.median(c["nodes_ratio"] for c in cubes),
            "median_seconds_2_workers": statistics.median(c["two"]["seconds"] for c in cubes),
            "below_1_3": sum(1 for x in sp if x < 1.3)}


def versus(configs):
    """With two configurations: per cube, the second's solve seconds over the first's, on
    one worker and on two (the geometric mean and the range over the cubes both ran)."""
    if len(configs) != 2:
        return None
    second = {c["seed"]: c for c in configs[1]["cubes"]}
    out = {}
    for key in ("one", "two"):
        r = [second[c["seed"]][key]["seconds"] / c[key]["seconds"]
             for c in configs[0]["cubes"] if c["seed"] in second]
        out[key] = {"cubes": len(r), "geomean": geomean(r) if r else None,
                    "min": min(r, default=None), "max": max(r, default=None),
                    "first_faster": sum(x > 1 for x in r)}
    return out


#: what makes two runs' configurations the same (for --resume)
CONFIG_KEYS = ("order", "split", "pipeline_depth", "inverse", "steal", "table_memory")


def previous_cubes(path, heuristic, configs, repeat=1):
    """The cubes a stopped run of the same heuristic and configurations saved in ``path``
    (one list per configuration), or None where there is no such file; another run's
    file is refused rather than mixed in."""
    try:
        with open(path) as fh:
            d = json.load(fh)
    except FileNotFoundError:
        return None
    old = d.get("configs", [])
    if d.get("heuristic") != heuristic or d.get("repeat", 1) != repeat or len(old) != len(
            configs) or any(
            o.get(k) != c[k] for o, c in zip(old, configs) for k in CONFIG_KEYS):
        raise SystemExit(f"--resume: {path} holds another run (heuristic, repeats or "
                         "configurations differ); name a new --out")
    return [o["cubes"] for o in old]


def run_configs(seeds, heuristic, configs, timeout, on_cube=None, done=None, repeat=1):
    """Every configuration on every cube, cube by cube (all configurations' launches of a
    cube one after the other), so that the machine's drift hits them alike.
    ``on_cube(results)`` is called after each cube (to save what a long run has so far);
    ``done``: per configuration, the cubes an earlier run finished (:func:`previous_cubes`),
    kept, and their seeds not run again. Each launch solves its cube ``repeat`` times;
    the speedup is the ratio of the median solves."""
    done = done or [[] for _ in configs]
    finished = set.intersection(*({c["seed"] for c in d} for d in done)) if done else set()
    results = [dict(cfg, cubes=[c for c in d if c["seed"] in finished])
               for cfg, d in zip(configs, done)]
    for seed in seeds:
        if seed in finished:
            continue
        for res in results:
            args = (heuristic, seed, res["order"], res["split"], res["pipeline_depth"], timeout,
                    res["inverse"], res["steal"], res.get("table_memory", "auto"), repeat)
            one, two = launch(2, *args), launch(3, *args)
            assert one["length"] == two["length"], (one, two)
            c = {"seed": seed, "length": one["length"], "one": one, "two": two,
                 "speedup": one["seconds"] / two["seconds"],
                 "nodes_ratio": two["generated"] / one["generated"]}
            res["cubes"].append(c)
            print(f"{res['order']}/{res['split']}/{res['pipeline_depth']}/"
                  f"{'steal' if res['steal'] else 'no steal'}/{res['table_memory']} tables "
                  f"seed {seed}: {c['length']} moves, "
                  f"1 worker {one['seconds']:.2f} s ({one['generated'] / 1e6:.0f} M nodes), "
                  f"2 workers {two['seconds']:.2f} s ({two['generated'] / 1e6:.0f} M): "
                  f"{c['speedup']:.2f}x, nodes x{c['nodes_ratio']:.2f}"
                  + (f" (solves {_spread(one)} and {_spread(two)} s)" if repeat > 1 else ""),
                  flush=True)
        if on_cube:
            on_cube(results)
    for res in results:
        res["summary"] = summarise(res["cubes"])
    return results


def _spread(res):
    runs = res.get("runs", [res["seconds"]])
    return f"{min(runs):.2f}-{max(runs):.2f}"


def plot(configs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, cfg in enumerate(configs):
        xs = [i + 0.2 * k for i in range(len(cfg["cubes"]))]
        ax.bar(xs, [c["speedup"] for c in cfg["cubes"]], width=0.2 if len(configs) > 1 else 0.6,
               label=f"order={cfg['order']}, split={cfg['split']}"
                     f"{'' if cfg.get('steal', False) else ', no stealing'}"
                     f"{', tables ' + cfg['table_memory'] if 'table_memory' in cfg else ''} "
                     f"(geo-mean {cfg['summary']['geomean_speedup']:.2f}x)")
    ax.axhline(2, c="k", lw=0.8, ls=":")
    ax.axhline(1.3, c="r", lw=0.8, ls=":")
    ax.set_xticks(range(len(configs[0]["cubes"])))
    ax.set_xticklabels([str(c["seed"]) for c in configs[0]["cubes"]], fontsize=7)
    ax.set_xlabel("cube (Cube.random seed, or position)")
    ax.set_ylabel("solve time, 1 worker / 2 workers")
    ax.set_title("optimal solves: 2 workers vs 1 on pyfw.farm")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None):
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--heuristic", default="nx")
    ap.add_argument("--order", default="dense",
                    help="solve_parallel's order (default dense, its default)")
    ap.add_argument("--split", type=_split, default="adaptive")
    ap.add_argument("--pipeline-depth", type=int, default=None,
                    help="chunks in flight per worker (default: the farm's automatic depth)")
    ap.add_argument("--compare", default=None, metavar="ORDER:SPLIT[:DEPTH][:nosteal][:MEMORY]",
                    help="a second configuration, e.g. serial:adaptive:nosteal")
    ap.add_argument("--no-steal", dest="steal", action="store_false",
                    help="no stealing: every piece runs to its end (the default before it)")
    ap.add_argument("--no-inverse", dest="inverse", action="store_false",
                    help="look the tables up on the position only (the heuristic before the "
                         "inverse lookups)")
    ap.add_argument("--table-memory", choices=("auto", "private", "shared"),
                    default="private",
                    help="where the workers keep their tables (apps.rubik --table-memory; "
                         "default private: copied at start-up, before the clock, so the "
                         "times measure the search, as 'auto' did before it waited for a "
                         "long search to pay for the copy: the results of before 2026-11-26 "
                         "say 'auto' and list their workers' tables as private)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="solves per launch (default 3): the speedup is the ratio of the "
                         "medians, so one disturbed solve on a shared machine does not "
                         "decide a cube")
    ap.add_argument("--timeout", type=float, default=900.0, help="per launch, seconds")
    add_output_options(ap, RESULTS)
    ap.add_argument("--resume", action="store_true",
                    help="keep the cubes a stopped run of the same configurations saved in "
                         "the output directory and run only the others (a long series over several "
                         "idle windows)")
    ap.add_argument("--name", default="rubik_speedup",
                    help="base name of the .json and .png written (default rubik_speedup)")
    ap.add_argument("--mpi", type=int, default=None,
                    help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def wanted_configs(a):
    """The configurations to run: the command line's, and ``--compare``'s if given."""
    wanted = [{"order": a.order, "split": a.split, "pipeline_depth": a.pipeline_depth,
               "inverse": a.inverse, "steal": a.steal, "table_memory": a.table_memory}]
    if a.compare:
        order, split, *more = a.compare.split(":")
        memories = [x for x in more if x in ("auto", "private", "shared")]
        wanted.append({"order": order, "split": _split(split),
                       "pipeline_depth": next((int(x) for x in more if x.isdigit()), None),
                       "inverse": a.inverse, "steal": "nosteal" not in more,
                       "table_memory": memories[0] if memories else a.table_memory})
    return wanted


def print_summary(cfg):
    """One line on a configuration's summary over all cubes."""
    s = cfg["summary"]
    print(f"order={cfg['order']} split={cfg['split']} depth={cfg['pipeline_depth']} "
          f"steal={cfg['steal']} tables={cfg['table_memory']}: "
          f"geo-mean {s['geomean_speedup']:.2f}x, "
          f"median {s['median_speedup']:.2f}x, worst {s['min_speedup']:.2f}x (seed "
          f"{s['worst_seed']}), {s['below_1_3']} below 1.3x, median nodes ratio "
          f"{s['median_nodes_ratio']:.2f}, median 2-worker solve "
          f"{s['median_seconds_2_workers']:.1f} s")


def main(argv=None):
    a = parse_args(argv)
    if a.mpi is not None:
        return mpi_solve(a.heuristic, a.mpi, a.order, a.split, a.pipeline_depth, a.inverse,
                         a.steal, a.table_memory, a.repeat)
    seeds = seed_range(a.seeds)
    t0 = time.time()
    wanted = wanted_configs(a)
    out = os.path.join(output_dir(a), a.name)
    done = (previous_cubes(out + ".json", a.heuristic, wanted, a.repeat) if a.resume
            else None)

    def save(configs, complete, vs=None):
        d = {"command": "python benchmarks/rubik_speedup.py " + " ".join(argv or sys.argv[1:]),
             "machine": machine(),
             "heuristic": a.heuristic, "seeds": seeds, "repeat": a.repeat,
             "configs": configs,
             "seconds": time.time() - t0, "complete": complete,
             # cubes kept from the stopped run(s) this one resumed (their own seconds)
             "resumed_cubes": len(done[0]) if done else 0}
        if vs:
            d["versus"] = vs
        with open(out + ".json", "w") as fh:
            json.dump(d, fh, indent=1)

    def partial(results):   # a long run stopped early keeps its finished cubes
        save([dict(r, summary=summarise(r["cubes"])) for r in results], False)

    configs = run_configs(seeds, a.heuristic, wanted, a.timeout, partial, done, a.repeat)
    for cfg in configs:
        print_summary(cfg)
    vs = versus(configs)
    if vs:
        for key, name in (("one", "1 worker"), ("two", "2 workers")):
            v = vs[key]
            print(f"{configs[1]['order']} / {configs[0]['order']} seconds on {name}: "
                  f"geo-mean {v['geomean']:.2f} ({v['min']:.2f}-{v['max']:.2f}), "
                  f"{configs[0]['order']} faster on {v['first_faster']} of {v['cubes']}")
    save(configs, True, vs)
    plot(configs, out + ".png")
    print(f"wrote {out}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
