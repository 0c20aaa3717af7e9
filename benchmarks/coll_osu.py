"""OSU-style benchmark of pyfw.coll: every algorithm and the tuned dispatch against native MPI.

``python benchmarks/coll_osu.py`` launches itself at 2, 3 and 4 ranks (``--ranks``). Each job

1. tunes (``pyfw.coll.tuner.tune``: sizes 0 and powers of 4, into a private cache directory),
2. then measures, per collective and size (0 and powers of 2 up to 1 MiB, so half the sizes
   were never measured by the tuner and go through its Hockney predictions): native MPI,
   every pyfw algorithm, the tuned dispatch ``pyfw.coll.<coll>(comm, ...)`` and, for the
   all-gather, the zero-copy SMP view; interleaved in rounds (rotated order), each point
   the median over timed iterations (barrier before each call, outside the timer), max over
   ranks, then median over rounds with the min-max spread;
3. measures the per-call Python overhead of the dispatch on ``COMM_SELF`` (no communication:
   tight loops of ``comm.Allgather`` vs ``pyfw.coll.allgather`` choosing native).

Writes ``benchmarks/results/coll_osu.json`` and ``coll_osu_<collective>.png`` (time and ratio
to native per size, one column per rank count) and prints the summary: worst tuned/native
ratio, every point where the dispatch is > 5 % slower than native, and every regime where a
pyfw algorithm beats native by more than 5 %.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

RESULTS = os.path.join(HERE, "results")
DEFAULT_SIZES = [0] + [2 ** i for i in range(21)]


# ----------------------------------------------------------------------- worker (under MPI)
def worker(args) -> None:
    import numpy as np
    from mpi4py import MPI

    from pyfw import coll
    from pyfw.coll import tuner

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    os.environ["PYFW_COLL_CACHE"] = args.cache
    colls = args.collectives.split(",")
    t0 = time.time()
    table = tuner.tune(comm, colls, rounds=args.tune_rounds, budget=args.budget)
    if r == 0:
        tuner.save_table(table)
    comm.Barrier()
    tune_s = time.time() - t0
    c = comm.Dup()
    plan = coll.plan(c)  # loads the table just written
    dispatch = {"allgather": coll.allgather, "gather": coll.gather, "alltoall": coll.alltoall,
                "bcast": coll.bcast, "allreduce": coll.allreduce, "reduce": coll.reduce}
    out = {"p": p, "tune_seconds": tune_s, "table": table, "collectives": {}}
    for name in colls:
        algs = tuner.candidates(plan, name)
        variants = algs + ["tuned", "bound"] + (["smp_view"] if name == "allgather" and p > 1
                                                 else [])
        bound = getattr(coll.bind(c), name.capitalize())
        vals = {v: [[] for _ in args.sizes] for v in variants}
        for i, b in enumerate(args.sizes):
            a = tuner.buffers(name, b, p, r)
            fns = {v: plan.algorithm(name, v) for v in algs}
            # native and tuned both behind one lambda layer, so the comparison is fair
            fns["native"] = (lambda f: (lambda *x: f(*x)))(fns["native"])
            fns["tuned"] = (lambda f: (lambda *x: f(c, *x)))(dispatch[name])
            fns["bound"] = (lambda f: (lambda *x: f(*x)))(bound)
            if "smp_view" in variants:
                view = plan._smp_object("direct").view
                fns["smp_view"] = lambda s, rb: view(s)
            for rd in range(args.rounds):
                k = rd % len(variants)
                for v in variants[k:] + variants[:k]:
                    vals[v][i].append(tuner.measure(c, fns[v], a, args.budget))
        out["collectives"][name] = {
            "sizes": args.sizes,
            "median": {v: [float(np.median(x)) for x in vals[v]] for v in variants},
            "min": {v: [float(min(x)) for x in vals[v]] for v in variants},
            "max": {v: [float(max(x)) for x in vals[v]] for v in variants},
            "choice": [plan.choice[name][b.bit_length()] for b in args.sizes]}
        if r == 0:
            print(f"coll_osu p={p}: {name} done", flush=True)
    if r == 0:
        out["overhead"] = overhead(args.overhead_loops)
        with open(args.out, "w") as f:
            json.dump(out, f)
    comm.Barrier()
    plan.free()
    c.Free()


def overhead(loops: int) -> dict:
    """Per-call cost (µs) of native vs dispatch on COMM_SELF: medians of 7 interleaved runs."""
    import numpy as np
    from mpi4py import MPI

    from pyfw import coll
    c = MPI.COMM_SELF.Dup()
    coll.plan(c, table={})  # no table: every bucket native
    s, rb = np.ones(8, np.uint8), np.empty(8, np.uint8)
    cases = {
        "allgather": (lambda: c.Allgather(s, rb), lambda: coll.allgather(c, s, rb)),
        "bcast": (lambda: c.Bcast(s, 0), lambda: coll.bcast(c, s, 0)),
        "allreduce": (lambda: c.Allreduce(s, rb, MPI.SUM),
                      lambda: coll.allreduce(c, s, rb, MPI.SUM)),
    }
    res = {}
    pc = time.perf_counter
    for name, (nat, disp) in cases.items():
        tn, td = [], []
        for _ in range(7):
            for f, acc in ((nat, tn), (disp, td)):
                t0 = pc()
                for _ in range(loops):
                    f()
                acc.append((pc() - t0) / loops * 1e6)
        res[name] = {"native_us": float(np.median(tn)), "dispatch_us": float(np.median(td)),
                     "overhead_us": float(np.median(td) - np.median(tn))}
    coll.plan(c).free()
    c.Free()
    return res


# ----------------------------------------------------------------------- driver
def run_all(args) -> dict:
    from pyfw import launch
    merged = {"method": {"rounds": args.rounds, "budget_s": args.budget,
                         "tune_rounds": args.tune_rounds, "sizes": args.sizes,
                         "stat": "median over iterations (barrier before each), max over ranks,"
                                 " median over interleaved rounds; min/max over rounds"},
              "host": os.uname().nodename, "cpus": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.ranks:
            out = os.path.join(tmp, f"p{n}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--out", out,
                   "--cache", os.path.join(tmp, "tables"), "--rounds", str(args.rounds),
                   "--tune-rounds", str(args.tune_rounds), "--budget", str(args.budget),
                   "--collectives", args.collectives, "--overhead-loops",
                   str(args.overhead_loops), "--sizes", ",".join(map(str, args.sizes))]
            t0 = time.time()
            res = launch.run(n, cmd, timeout=args.timeout, capture=True, cwd=ROOT)
            print(f"coll_osu: p={n} exit {res.returncode} in {time.time() - t0:.0f} s",
                  flush=True)
            if res.returncode != 0 or not os.path.exists(out):
                sys.stderr.write((res.stdout or "")[-3000:] + (res.stderr or "")[-3000:])
                raise SystemExit(f"coll_osu: the {n}-rank job failed")
            with open(out) as f:
                merged["runs"][str(n)] = json.load(f)
    return merged


def analyse(data: dict, slow: float = 1.05, fast: float = 0.95) -> dict:
    """Worst tuned/native ratio, points where tuned is slower than ``slow``·native, and
    regimes (runs of consecutive sizes) where a pyfw algorithm is under ``fast``·native."""
    report = {"tuned_vs_native": {}, "tuned_slow_points": [], "wins": [], "overhead": None}
    for n, run in sorted(data["runs"].items(), key=lambda x: int(x[0])):
        if "overhead" in run:
            report["overhead"] = run["overhead"]
        for name, e in run["collectives"].items():
            med, sizes = e["median"], e["sizes"]
            nat = med["native"]
            for form in ("tuned", "bound"):
                ratios = [t / b if b > 0 else 1.0 for t, b in zip(med[form], nat)]
                worst = max(range(len(sizes)), key=lambda i: ratios[i])
                best = min(range(len(sizes)), key=lambda i: ratios[i])
                report["tuned_vs_native"][f"{name} p={n} {form}"] = {
                    "worst_ratio": round(ratios[worst], 3), "at_size": sizes[worst],
                    "best_ratio": round(ratios[best], 3), "at_size_best": sizes[best]}
                for i, s in enumerate(sizes):
                    if ratios[i] > slow:
                        report["tuned_slow_points"].append(
                            {"coll": name, "p": int(n), "form": form, "size": s,
                             "ratio": round(ratios[i], 3), "choice": e["choice"][i],
                             "native_us": round(nat[i] * 1e6, 2),
                             "tuned_us": round(med[form][i] * 1e6, 2),
                             "native_spread_us": [round(e["min"]["native"][i] * 1e6, 2),
                                                  round(e["max"]["native"][i] * 1e6, 2)]})
            for alg, t in med.items():
                if alg in ("native", "tuned", "bound"):
                    continue
                run_start = None
                for i in range(len(sizes) + 1):
                    win = i < len(sizes) and nat[i] > 0 and t[i] < fast * nat[i]
                    if win and run_start is None:
                        run_start = i
                    if not win and run_start is not None:
                        js = range(run_start, i)
                        report["wins"].append({
                            "coll": name, "p": int(n), "algorithm": alg,
                            "sizes": [sizes[run_start], sizes[i - 1]],
                            "speedup_median": round(float(sorted(nat[j] / t[j] for j in js)[
                                len(js) // 2]), 2),
                            "speedup_max": round(max(nat[j] / t[j] for j in js), 2)})
                        run_start = None
    return report


def plot(data: dict, outdir: str) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = sorted(data["runs"].items(), key=lambda x: int(x[0]))
    names = list(runs[0][1]["collectives"])
    paths = []
    for name in names:
        fig, axes = plt.subplots(2, len(runs), figsize=(5.2 * len(runs), 7.5), squeeze=False,
                                 sharex=True)
        for j, (n, run) in enumerate(runs):
            e = run["collectives"][name]
            xs = [max(s, 0.5) for s in e["sizes"]]
            nat = e["median"]["native"]
            for alg, t in e["median"].items():
                style = {"native": dict(color="k", lw=2.5), "tuned": dict(color="r", lw=2,
                                                                          ls="--"),
                         "bound": dict(color="m", lw=2, ls=":")}.get(
                    alg, dict(lw=1, alpha=0.8))
                axes[0][j].plot(xs, [v * 1e6 for v in t], label=alg, **style)
                axes[1][j].plot(xs, [v / b for v, b in zip(t, nat)], label=alg, **style)
            lo = [v * 1e6 for v in e["min"]["native"]]
            hi = [v * 1e6 for v in e["max"]["native"]]
            axes[0][j].fill_between(xs, lo, hi, color="k", alpha=0.15)
            axes[0][j].set(xscale="log", yscale="log", title=f"{name}, p={n}",
                           ylabel="time per call (µs)")
            axes[1][j].set(xscale="log", yscale="log", ylabel="time / native",
                           xlabel="message size (B; 0 B plotted at 0.5)")
            axes[1][j].axhline(1.05, color="r", lw=0.8, ls=":")
            axes[1][j].axhline(1.0, color="k", lw=0.8)
        axes[0][-1].legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path = os.path.join(outdir, f"coll_osu_{name}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def print_report(rep: dict) -> None:
    print("\n== per-call overhead of the dispatch (COMM_SELF, 8 B, no communication) ==")
    for k, v in (rep["overhead"] or {}).items():
        print(f"  {k:10s} native {v['native_us']:.3f} µs  dispatch {v['dispatch_us']:.3f} µs"
              f"  overhead {v['overhead_us']:+.3f} µs")
    print("\n== tuned (function) and bound (coll.bind) dispatch / native, worst and best ==")
    for k, v in rep["tuned_vs_native"].items():
        print(f"  {k:22s} worst {v['worst_ratio']:.3f} at {v['at_size']} B, "
              f"best {v['best_ratio']:.3f} at {v['at_size_best']} B")
    print(f"\n== points where the dispatch is > 5 % slower than native: "
          f"{len(rep['tuned_slow_points'])} ==")
    for s in rep["tuned_slow_points"]:
        print(f"  {s['coll']} p={s['p']} {s['form']} {s['size']} B: x{s['ratio']} ({s['choice']}; native "
              f"{s['native_us']} µs, spread {s['native_spread_us']}, tuned {s['tuned_us']} µs)")
    print("\n== regimes where a pyfw algorithm beats native by > 5 % ==")
    for w in rep["wins"]:
        print(f"  {w['coll']} p={w['p']} {w['algorithm']}: {w['sizes'][0]}..{w['sizes'][1]} B,"
              f" speed-up median x{w['speedup_median']} max x{w['speedup_max']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="2,3,4")
    ap.add_argument("--collectives", default="allgather,gather,alltoall,bcast,allreduce,reduce")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tune-rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--overhead-loops", type=int, default=100000)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="re-analyse and re-plot an existing results/coll_osu.json")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(args)
        return 0
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, "coll_osu.json")
    if args.report_only:
        with open(path) as f:
            data = json.load(f)
    else:
        args.ranks = [int(x) for x in args.ranks.split(",")]
        data = run_all(args)
    data["report"] = analyse(data)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    for p in plot(data, RESULTS):
        print(f"coll_osu: wrote {os.path.relpath(p, ROOT)}")
    print(f"coll_osu: wrote {os.path.relpath(path, ROOT)}")
    print_report(data["report"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
