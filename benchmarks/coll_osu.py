"""OSU-style benchmark of pyfw.coll: every algorithm and the tuned dispatch against native MPI.

``python benchmarks/coll_osu.py`` launches itself at 2, 3 and 4 ranks (``--ranks``). Each job

1. tunes (``pyfw.coll.tuner.tune``: sizes 0 and powers of 4, into a private cache directory),
2. then measures, per collective and size (0 and powers of 2 up to 1 MiB, so half the sizes
   were never measured by the tuner and go through its Hockney predictions), two passes,
   each with its variants **interleaved** (random order, a barrier before every call,
   outside the timer), so drift and the other jobs on the machine hit them alike:

   a. paired: native mpi4py ``c.Allgather(s, r)``, the same again (an A/A control: its
      ratio to native is the measurement's own error), the tuned dispatch
      ``coll.allgather(c, s, r)``, ``coll.bind(c).Allgather(s, r)`` and a one-line Python
      function that only calls native (the cost of any Python frame), each wrapped in one
      lambda frame, on the same buffers; per round the median over iterations, max over
      ranks; the verdict is the per-round ratio to native, median and min–max over rounds.
      Measured twice: with each variant's calls back to back inside a round (the variants
      in a random order per round: calls see the state their own previous call left, as in
      a loop over one collective; the primary verdict), and interleaved per call ("cold":
      each call follows other variants' calls, which on these cores shifts small-message
      ratios by several per cent against whichever variant touches more memory);
   b. every algorithm, native included, and for the all-gather the zero-copy SMP view;

3. measures the per-call overhead the dispatch adds on ``COMM_SELF`` (no communication:
   loops of 10^5 native vs dispatch calls choosing native, interleaved, in ns), on the hot
   path (same buffers) and with a new buffer on every call.

Writes ``benchmarks/results/coll_osu.json`` and ``coll_osu_<collective>.png`` (times, ratio
to native per algorithm, and the paired dispatch/native ratio with its spread, one column per
rank count) and prints the summary: per-call overhead, worst dispatch/native ratio, every
point where the dispatch is > 5 % slower than native, the sizes where the table picks a pyfw
algorithm, and every regime where a pyfw algorithm beats native by more than 5 % in every
round. Run it under ``flock /tmp/pyfw-bench.lock`` on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PUBLISHED = os.path.join(HERE, "results")
#: where this run writes (main sets it): PUBLISHED with --publish, else --out DIR or
#: PUBLISHED/local
RESULTS = os.path.join(PUBLISHED, "local")
DEFAULT_SIZES = [0] + [2 ** i for i in range(21)]


# ----------------------------------------------------------------------- worker (under MPI)
def _wrap_allgather(c, s, r):
    return c.Allgather(s, r)


def _wrap_gather(c, s, r, root):
    return c.Gather(s, r, root)


def _wrap_alltoall(c, s, r):
    return c.Alltoall(s, r)


def _wrap_bcast(c, s, root):
    return c.Bcast(s, root)


def _wrap_allreduce(c, s, r, op):
    return c.Allreduce(s, r, op)


def _wrap_reduce(c, s, r, op, root):
    return c.Reduce(s, r, op, root)


def user_calls(name: str, c, b) -> dict:
    """The ways user code calls one collective, each as one lambda frame around the call as
    written in user code, so the comparison is symmetric: native mpi4py
    (``c.Allgather(s, r)``), the same once more (``native_again``: an A/A control whose
    ratio to native is the measurement's own error), the tuned dispatch
    (``coll.allgather(c, s, r)``), the bound form (``b.Allgather(s, r)``) and ``wrapper``, a
    one-line Python function that only calls native (``_wrap_allgather(c, s, r)``): the cost
    of one Python frame, i.e. of any dispatch written in Python before its savings. Same
    arguments (the same buffers) for all."""
    from pyfw import coll
    if name == "allgather":
        return {"native": lambda s, r: c.Allgather(s, r),
                "native_again": lambda s, r: c.Allgather(s, r),
                "tuned": lambda s, r: coll.allgather(c, s, r),
                "bound": lambda s, r: b.Allgather(s, r),
                "wrapper": lambda s, r: _wrap_allgather(c, s, r)}
    if name == "gather":
        return {"native": lambda s, r, root: c.Gather(s, r, root),
                "native_again": lambda s, r, root: c.Gather(s, r, root),
                "tuned": lambda s, r, root: coll.gather(c, s, r, root),
                "bound": lambda s, r, root: b.Gather(s, r, root),
                "wrapper": lambda s, r, root: _wrap_gather(c, s, r, root)}
    if name == "alltoall":
        return {"native": lambda s, r: c.Alltoall(s, r),
                "native_again": lambda s, r: c.Alltoall(s, r),
                "tuned": lambda s, r: coll.alltoall(c, s, r),
                "bound": lambda s, r: b.Alltoall(s, r),
                "wrapper": lambda s, r: _wrap_alltoall(c, s, r)}
    if name == "bcast":
        return {"native": lambda s, root: c.Bcast(s, root),
                "native_again": lambda s, root: c.Bcast(s, root),
                "tuned": lambda s, root: coll.bcast(c, s, root),
                "bound": lambda s, root: b.Bcast(s, root),
                "wrapper": lambda s, root: _wrap_bcast(c, s, root)}
    if name == "allreduce":
        return {"native": lambda s, r, op: c.Allreduce(s, r, op),
                "native_again": lambda s, r, op: c.Allreduce(s, r, op),
                "tuned": lambda s, r, op: coll.allreduce(c, s, r, op),
                "bound": lambda s, r, op: b.Allreduce(s, r, op),
                "wrapper": lambda s, r, op: _wrap_allreduce(c, s, r, op)}
    if name == "reduce":
        return {"native": lambda s, r, op, root: c.Reduce(s, r, op, root),
                "native_again": lambda s, r, op, root: c.Reduce(s, r, op, root),
                "tuned": lambda s, r, op, root: coll.reduce(c, s, r, op, root),
                "bound": lambda s, r, op, root: b.Reduce(s, r, op, root),
                "wrapper": lambda s, r, op, root: _wrap_reduce(c, s, r, op, root)}
    raise ValueError(name)


#: the paired ratios to native recorded per size: key -> the variant divided by native
PAIRED_RATIOS = (("ratio", "tuned"), ("ratio_bound", "bound"),
                 ("ratio_aa", "native_again"), ("ratio_wrapper", "wrapper"))


def ratio_stats(got: dict, v: str) -> list:
    """Median, min and max over rounds of the per-round ratio of variant ``v`` to native."""
    import numpy as np
    q = [t / n for t, n in zip(got[v], got["native"])]
    return [float(np.median(q)), float(min(q)), float(max(q))]


def measure_paired(name: str, c, bound, a, args, res: dict, pair: dict, cold: dict) -> None:
    """Pass 1 at one size: native/tuned/bound/wrapper paired, per round and per call."""
    import numpy as np

    from pyfw.coll import tuner

    # 1. native vs tuned vs bound vs wrapper, paired. Primary: interleaved per round
    # (each variant's calls back to back, as in a loop over one collective);
    # "cold": interleaved per call (each call follows other variants' calls)
    calls = user_calls(name, c, bound)
    got = tuner.measure_interleaved(c, calls, a, args.pair_budget, args.rounds, 20,
                                    5000, blocks=True)
    for v in ("native", "native_again", "tuned", "bound", "wrapper"):
        x = got[v]
        for key, f in (("median", np.median), ("min", min), ("max", max)):
            res[key].setdefault(v, []).append(float(f(x)))
    for key, v in PAIRED_RATIOS:
        pair[key].append(ratio_stats(got, v))
    got = tuner.measure_interleaved(c, calls, a, args.pair_budget, args.rounds, 20,
                                    5000)
    for key, v in PAIRED_RATIOS:
        cold.setdefault(key, []).append(ratio_stats(got, v))
    cold.setdefault("native", []).append(float(np.median(got["native"])))


def measure_collective(name: str, c, plan, bound, args) -> dict:
    """Both passes over every size of one collective, and the table's choices."""
    import numpy as np

    from pyfw.coll import tuner

    p, r = c.Get_size(), c.Get_rank()
    algs = tuner.candidates(plan, name)
    variants = algs + (["smp_view"] if name == "allgather" and p > 1 else [])
    pair = {"ratio": [], "ratio_bound": [], "ratio_aa": [], "ratio_wrapper": []}
    cold = {}
    res = {"median": {}, "min": {}, "max": {}}
    allv = {v: [] for v in variants}
    for b in args.sizes:
        a = tuner.buffers(name, b, p, r)
        measure_paired(name, c, bound, a, args, res, pair, cold)
        # 2. every algorithm (native included) interleaved per iteration
        fns = {v: plan.algorithm(name, v) for v in algs}
        if "smp_view" in variants:
            view = plan._smp_object("direct").view
            fns["smp_view"] = lambda s, rb_: view(s)
        got = tuner.measure_interleaved(c, fns, a, args.budget * len(fns), args.rounds)
        for v in variants:
            allv[v].append(got[v])
    for v in variants:
        name_v = v if v != "native" else "native_alg"
        for key, f in (("median", np.median), ("min", min), ("max", max)):
            res[key][name_v] = [float(f(x)) for x in allv[v]]
    return dict(sizes=args.sizes, **res, paired=pair, paired_cold=cold,
                choice=[plan.choice[name][b.bit_length()] for b in args.sizes])


def worker(args) -> None:
    """One job under MPI: tune, measure every collective, rank 0 the per-call overhead."""
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
    bound = coll.bind(c)
    out = {"p": p, "tune_seconds": tune_s, "table": table, "collectives": {},
           "load_before": os.getloadavg()}
    for name in colls:
        out["collectives"][name] = measure_collective(name, c, plan, bound, args)
        if r == 0:
            print(f"coll_osu p={p}: {name} done", flush=True)
    out["load_after"] = os.getloadavg()
    if r == 0:
        out["overhead"] = overhead(args.overhead_loops)
        with open(args.worker_out, "w") as f:
            json.dump(out, f)
    comm.Barrier()
    plan.free()
    c.Free()


def overhead(loops: int, reps: int = 15) -> dict:
    """Per-call cost (ns) pyfw adds to native mpi4py, on COMM_SELF (no communication), every
    collective choosing native: ``loops`` calls per run, native and dispatch runs
    interleaved ``reps`` times; medians and min–max of the per-call difference per rep.
    ``hit``: the same buffers every call (the hot path); ``miss``: two buffers alternating,
    so every call resolves the plan and the size bucket."""
    import numpy as np
    from mpi4py import MPI

    from pyfw import coll
    c = MPI.COMM_SELF.Dup()
    coll.plan(c, table={})  # no table: every bucket native
    s, rb = np.ones(8, np.uint8), np.empty(8, np.uint8)
    s2 = np.ones(8, np.uint8)
    S = MPI.SUM
    cases = {
        "allgather": (lambda: c.Allgather(s, rb), lambda: coll.allgather(c, s, rb),
                      lambda x: coll.allgather(c, x, rb)),
        "gather": (lambda: c.Gather(s, rb, 0), lambda: coll.gather(c, s, rb, 0),
                   lambda x: coll.gather(c, x, rb, 0)),
        "alltoall": (lambda: c.Alltoall(s, rb), lambda: coll.alltoall(c, s, rb),
                     lambda x: coll.alltoall(c, x, rb)),
        "bcast": (lambda: c.Bcast(s, 0), lambda: coll.bcast(c, s, 0),
                  lambda x: coll.bcast(c, x, 0)),
        "allreduce": (lambda: c.Allreduce(s, rb, S), lambda: coll.allreduce(c, s, rb, S),
                      lambda x: coll.allreduce(c, rb, x, S)),
        "reduce": (lambda: c.Reduce(s, rb, S, 0), lambda: coll.reduce(c, s, rb, S, 0),
                   lambda x: coll.reduce(c, x, rb, S, 0)),
    }
    res = {}
    pc = time.perf_counter
    for name, (nat, disp, miss) in cases.items():
        tn, td, tm = [], [], []
        for _ in range(reps):
            t0 = pc()
            for _ in range(loops):
                nat()
            tn.append((pc() - t0) / loops * 1e9)
            t0 = pc()
            for _ in range(loops):
                disp()
            td.append((pc() - t0) / loops * 1e9)
            t0 = pc()
            for _ in range(loops // 2):
                miss(s)
                miss(s2)
            tm.append((pc() - t0) / (2 * (loops // 2)) * 1e9)
        dh = [d - n for d, n in zip(td, tn)]
        dm = [m - n for m, n in zip(tm, tn)]
        res[name] = {"native_ns": float(np.median(tn)), "dispatch_ns": float(np.median(td)),
                     "overhead_ns": float(np.median(dh)),
                     "overhead_ns_minmax": [float(min(dh)), float(max(dh))],
                     "miss_overhead_ns": float(np.median(dm)),
                     "miss_overhead_ns_minmax": [float(min(dm)), float(max(dm))]}
    coll.plan(c).free()
    c.Free()
    return res


# ----------------------------------------------------------------------- driver
def run_all(args) -> dict:
    from pyfw import launch
    merged = {"method": {"rounds": args.rounds, "budget_s": args.budget,
                         "pair_budget_s": args.pair_budget,
                         "tune_rounds": args.tune_rounds, "sizes": args.sizes,
                         "stat": "variants interleaved per iteration (rotating order, barrier"
                                 " before each call); per round: median over iterations, max"
                                 " over ranks; tuned/native: median and min-max over rounds of"
                                 " the paired per-round ratio"},
              "host": os.uname().nodename, "cpus": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.ranks:
            out = os.path.join(tmp, f"p{n}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--worker-out", out,
                   "--cache", os.path.join(tmp, "tables"), "--rounds", str(args.rounds),
                   "--tune-rounds", str(args.tune_rounds), "--budget", str(args.budget),
                   "--pair-budget", str(args.pair_budget),
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
    """Worst paired tuned/native ratio, points where it exceeds ``slow``, and regimes (runs
    of consecutive sizes) where a pyfw algorithm is under ``fast``·native (all-algorithms
    pass, native measured in the same interleaved loop)."""
    report = {"tuned_vs_native": {}, "tuned_slow_points": [], "wins": [], "overhead": None,
              "chosen": [], "per_ranks": {}}
    for n, run in sorted(data["runs"].items(), key=lambda x: int(x[0])):
        if "overhead" in run:
            report["overhead"] = run["overhead"]
        report["per_ranks"][n] = per_ranks(run, slow)
        report.setdefault("per_ranks_cold", {})[n] = per_ranks(run, slow, "paired_cold")
        for name, e in run["collectives"].items():
            paired_verdicts(report, name, n, e, slow)
            chosen_points(report, name, n, e)
            winning_regimes(report, name, n, e, fast)
    return report


def paired_verdicts(report: dict, name: str, n: str, e: dict, slow: float) -> None:
    """Into ``report``: worst/best paired ratios and points over ``slow``."""
    sizes = e["sizes"]
    for form, key in (("tuned", "ratio"), ("bound", "ratio_bound")):
        rr = e["paired"][key]
        med = [x[0] for x in rr]
        worst = max(range(len(sizes)), key=lambda i: med[i])
        best = min(range(len(sizes)), key=lambda i: med[i])
        report["tuned_vs_native"][f"{name} p={n} {form}"] = {
            "worst_ratio": round(med[worst], 3), "at_size": sizes[worst],
            "worst_spread": [round(rr[worst][1], 3), round(rr[worst][2], 3)],
            "best_ratio": round(med[best], 3), "at_size_best": sizes[best],
            "choice_at_best": e["choice"][best]}
        if "ratio_aa" in e["paired"]:
            aa = [x[0] for x in e["paired"]["ratio_aa"]]
            report["tuned_vs_native"][f"{name} p={n} {form}"]["aa_worst_dev"] = \
                round(max(abs(x - 1) for x in aa), 3)
        for i, s in enumerate(sizes):
            if med[i] > slow:
                report["tuned_slow_points"].append(
                    {"coll": name, "p": int(n), "form": form, "size": s,
                     "ratio": round(med[i], 3),
                     "ratio_spread": [round(rr[i][1], 3), round(rr[i][2], 3)],
                     "aa": (round(e["paired"]["ratio_aa"][i][0], 3)
                            if "ratio_aa" in e["paired"] else None),
                     "choice": e["choice"][i],
                     "wrapper": (round(e["paired"]["ratio_wrapper"][i][0], 3)
                                 if "ratio_wrapper" in e["paired"] else None),
                     "native_us": round(e["median"]["native"][i] * 1e6, 2),
                     "tuned_us": round(e["median"][form][i] * 1e6, 2)})


def chosen_points(report: dict, name: str, n: str, e: dict) -> None:
    """Into ``report``: the sizes where the tuned table picks a pyfw algorithm."""
    for i, s in enumerate(e["sizes"]):
        if e["choice"][i] not in ("native", "empty"):
            report["chosen"].append({"coll": name, "p": int(n), "size": s,
                                     "choice": e["choice"][i],
                                     "ratio": round(e["paired"]["ratio"][i][0], 3)})


def winning_regimes(report: dict, name: str, n: str, e: dict, fast: float) -> None:
    """Into ``report``: size ranges where a pyfw algorithm beats ``fast``·native."""
    sizes = e["sizes"]
    nat = e["median"]["native_alg"]
    for alg, t in e["median"].items():
        if alg in ("native", "native_again", "tuned", "bound", "wrapper", "native_alg"):
            continue
        run_start = None
        for i in range(len(sizes) + 1):
            win = i < len(sizes) and nat[i] > 0 and t[i] < fast * nat[i] and \
                e["max"][alg][i] < nat[i]
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


def per_ranks(run: dict, slow: float = 1.05, which: str = "paired") -> dict:
    """One rank count's verdict over every collective and size: the worst paired
    dispatch/native and bind()/native ratios (median over rounds, with min-max), how many
    points exceed ``slow``, the A/A control's largest deviation, and the per-call cost on
    this communicator: median over every non-empty size and collective of the paired
    (median) time difference to native, in ns, for the dispatch, bind() and the one-line
    Python wrapper."""
    out = {}
    diffs = {"tuned": [], "bound": [], "wrapper": []}
    worst = {}
    over = {"tuned": 0, "bound": 0}
    npoints = 0
    aa = 0.0
    for name, e in run["collectives"].items():
        pr = e.get(which)
        if not pr:
            continue
        nat = pr["native"] if "native" in pr else e["median"]["native"]
        for i, s in enumerate(e["sizes"]):
            if s == 0:
                continue
            npoints += 1
            if "ratio_aa" in pr:
                aa = max(aa, abs(pr["ratio_aa"][i][0] - 1))
            for form, key in (("tuned", "ratio"), ("bound", "ratio_bound"),
                              ("wrapper", "ratio_wrapper")):
                if key not in pr:
                    continue
                diffs[form].append((pr[key][i][0] - 1) * nat[i] * 1e9)
                x = pr[key][i]
                if form in over and x[0] > slow:
                    over[form] += 1
                if form not in worst or x[0] > worst[form]["ratio"]:
                    worst[form] = {"ratio": round(x[0], 3), "spread": [round(x[1], 3),
                                   round(x[2], 3)], "coll": name, "size": s,
                                   "choice": e["choice"][i],
                                   "native_us": round(nat[i] * 1e6, 2)}
    out["worst"] = worst
    out["points"] = npoints
    out["points_over"] = over
    out["aa_max_dev"] = round(aa, 4)
    out["median_cost_ns"] = {k: round(float(sorted(v)[len(v) // 2]), 1) for k, v in
                             diffs.items() if v}
    return out


def plot(data: dict, outdir: str) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = sorted(data["runs"].items(), key=lambda x: int(x[0]))
    names = list(runs[0][1]["collectives"])
    paths = []
    for name in names:
        fig, axes = plt.subplots(3, len(runs), figsize=(5.2 * len(runs), 10.5), squeeze=False,
                                 sharex=True)
        for j, (n, run) in enumerate(runs):
            e = run["collectives"][name]
            xs = [max(s, 0.5) for s in e["sizes"]]
            nat = e["median"]["native_alg"]
            for alg, t in e["median"].items():
                if alg in ("tuned", "bound", "native", "native_again", "wrapper"):
                    continue
                style = dict(color="k", lw=2.5) if alg == "native_alg" else dict(lw=1,
                                                                                  alpha=0.8)
                lab = "native" if alg == "native_alg" else alg
                axes[0][j].plot(xs, [v * 1e6 for v in t], label=lab, **style)
                axes[1][j].plot(xs, [v / b for v, b in zip(t, nat)], label=lab, **style)
            lo = [v * 1e6 for v in e["min"]["native_alg"]]
            hi = [v * 1e6 for v in e["max"]["native_alg"]]
            axes[0][j].fill_between(xs, lo, hi, color="k", alpha=0.15)
            axes[0][j].set(xscale="log", yscale="log", title=f"{name}, p={n}",
                           ylabel="time per call (µs)")
            axes[1][j].set(xscale="log", yscale="log", ylabel="time / native")
            axes[1][j].axhline(1.0, color="k", lw=0.8)
            for key, lab, col in (("ratio", "tuned dispatch", "r"),
                                  ("ratio_bound", "bind()", "m"),
                                  ("ratio_aa", "native again (A/A control)", "0.5"),
                                  ("ratio_wrapper", "1-line Python wrapper", "c")):
                rr = e["paired"].get(key)
                if rr is None:
                    continue
                axes[2][j].plot(xs, [x[0] for x in rr], color=col, lw=1.8, label=lab)
                axes[2][j].fill_between(xs, [x[1] for x in rr], [x[2] for x in rr],
                                        color=col, alpha=0.15)
            cold = e.get("paired_cold", {}).get("ratio")
            if cold:
                axes[2][j].plot(xs, [x[0] for x in cold], color="r", lw=1, ls="--",
                                label="tuned dispatch, cold (interleaved per call)")
            axes[2][j].axhline(1.05, color="r", lw=0.8, ls=":")
            axes[2][j].axhline(1.0, color="k", lw=0.8)
            axes[2][j].set(xscale="log", ylabel="paired time / native (median, min-max)",
                           xlabel="message size (B; 0 B plotted at 0.5)")
            axes[2][j].legend(fontsize=7)
        axes[0][-1].legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path = os.path.join(outdir, f"coll_osu_{name}.png")
        fig.savefig(path, dpi=80)
        plt.close(fig)
        paths.append(path)
    return paths


def print_report(rep: dict) -> None:
    print("\n== per-call overhead pyfw adds (COMM_SELF, 8 B, native chosen, ns; median "
          "[min-max] over interleaved runs) ==")
    for k, v in (rep["overhead"] or {}).items():
        print(f"  {k:10s} native {v['native_ns']:.0f} ns  dispatch {v['dispatch_ns']:.0f} ns"
              f"  hot path +{v['overhead_ns']:.0f} [{v['overhead_ns_minmax'][0]:.0f}.."
              f"{v['overhead_ns_minmax'][1]:.0f}]  new buffer each call "
              f"+{v['miss_overhead_ns']:.0f} [{v['miss_overhead_ns_minmax'][0]:.0f}.."
              f"{v['miss_overhead_ns_minmax'][1]:.0f}]")
    print("\n== paired dispatch / native (median over rounds), worst and best ==")
    for k, v in rep["tuned_vs_native"].items():
        print(f"  {k:22s} worst {v['worst_ratio']:.3f} {v['worst_spread']} at {v['at_size']} B,"
              f" best {v['best_ratio']:.3f} at {v['at_size_best']} B ({v['choice_at_best']})"
              f"; A/A control: largest |native/native - 1| {v.get('aa_worst_dev')}")
    for title, part in (("each variant's calls back to back per round", "per_ranks"),
                        ("COLD: interleaved per call, each call after other variants' calls",
                         "per_ranks_cold")):
        print_ranks(rep, title, part)
    print(f"\n== points where the dispatch is > 5 % slower than native: "
          f"{len(rep['tuned_slow_points'])} ==")
    for s in rep["tuned_slow_points"]:
        print(f"  {s['coll']} p={s['p']} {s['form']} {s['size']} B: x{s['ratio']} "
              f"{s['ratio_spread']} A/A x{s['aa']} wrapper x{s.get('wrapper')} "
              f"({s['choice']}; native {s['native_us']} µs, "
              f"{s['form']} {s['tuned_us']} µs)")
    print("\n== sizes where the tuned table picks a pyfw algorithm (paired ratio) ==")
    for s in rep["chosen"]:
        print(f"  {s['coll']} p={s['p']} {s['size']} B: {s['choice']} x{s['ratio']}")
    print("\n== regimes where a pyfw algorithm beats native by > 5 % (every round) ==")
    for w in rep["wins"]:
        print(f"  {w['coll']} p={w['p']} {w['algorithm']}: {w['sizes'][0]}..{w['sizes'][1]} B,"
              f" speed-up median x{w['speedup_median']} max x{w['speedup_max']}")


def print_ranks(rep: dict, title: str, part: str) -> None:
    print(f"\n== per rank count ({title}): worst paired ratio to native (median [min-max] "
          "over rounds), points > 5 %, A/A control, median per-call cost on the real "
          "communicator ==")
    for n, v in rep.get(part, {}).items():
        for form in ("tuned", "bound", "wrapper"):
            w = v["worst"].get(form)
            if w is None:
                continue
            over = v["points_over"].get(form)
            print(f"  p={n} {form:8s} worst x{w['ratio']} {w['spread']} at {w['coll']} "
                  f"{w['size']} B ({w['choice']}, native {w['native_us']} µs)"
                  + (f"; {over} of {v['points']} points > 5 %" if over is not None else "")
                  + f"; median cost {v['median_cost_ns'].get(form, float('nan')):+.0f} ns")
        print(f"  p={n} A/A control: largest |native/native - 1| = {v['aa_max_dev']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="2,3,4")
    ap.add_argument("--collectives", default="allgather,gather,alltoall,bcast,allreduce,reduce")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tune-rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.01,
                    help="seconds per algorithm and round in the all-algorithms pass")
    ap.add_argument("--pair-budget", type=float, default=0.05,
                    help="seconds per round of the paired native/A-A/tuned/bound pass")
    ap.add_argument("--overhead-loops", type=int, default=100000)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--report-only", action="store_true",
                    help="re-analyse and re-plot an existing results/coll_osu.json")
    add_output_options(ap, PUBLISHED)
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(args)
        return 0
    global RESULTS
    RESULTS = output_dir(args)
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
