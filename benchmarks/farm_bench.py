"""Master-worker benchmarks: pyfw.farm against mpi4py.futures, side by side in one run.

    python benchmarks/farm_bench.py [--repeats 5] [--quick] [--only throughput|imbalance]
                                    [--publish | --out DIR]

1. throughput (2 and 4 ranks): tasks/s for empty tasks and ~100 us tasks;
   pyfw Farm.map and pyfw Executor.map at their defaults, against mpi4py.futures
   (MPICommExecutor, the SPMD form of MPIPoolExecutor) at chunksize 1 and at its best
   hand-tuned chunksize; plus pipelining: pyfw with one task in flight vs automatic depth.
2. imbalance (4 ranks: 3 workers, one 3x slower): makespan of every policy on tasks of
   varied duration, against the ideal lower bound total work / total speed.

Every figure is the median of ``--repeats`` runs with the min-max spread. Writes
farm_throughput.json, farm_imbalance.json and PNG plots to ``--out DIR`` (default
benchmarks/results/local/; ``--publish``: the tracked benchmarks/results/).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from pyfw.monitor.results import add_output_options, machine, output_dir
from pyfw.monitor.stats import spread

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# ------------------------------------------------------------------ task bodies
def empty(x):
    return x


def busy_100us(x):
    end = time.perf_counter() + 100e-6
    while time.perf_counter() < end:
        pass
    return x


SLOW_RANK = 1       # this worker runs every task SLOWDOWN times longer
SLOWDOWN = 3.0


def timed_sleep(seconds):
    """A task of known duration; the worker on SLOW_RANK is SLOWDOWN times slower."""
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == SLOW_RANK:
        seconds *= SLOWDOWN
    time.sleep(seconds)
    return seconds


def summarize(samples):
    return dict(spread(samples), samples=samples)


# ------------------------------------------------------------------ child jobs (under mpiexec)
def child_throughput(repeats: int, quick: bool) -> dict | None:
    from mpi4py import MPI
    from mpi4py.futures import MPICommExecutor

    from pyfw import Farm
    from pyfw.futures import Executor

    comm = MPI.COMM_WORLD
    n_empty = 50_000 if quick else 200_000
    n_cs1 = 5_000 if quick else 10_000
    n_busy = 5_000 if quick else 20_000
    cases = []   # (label, kind, fn, n, options)
    for fn, n, kind in ((empty, n_empty, "empty"), (busy_100us, n_busy, "100us")):
        cases.append(("pyfw Farm.map default", kind, fn, n, {"impl": "farm"}))
        cases.append(("pyfw Executor.map default", kind, fn, n, {"impl": "executor"}))
        cases.append(("mpi4py.futures chunksize=1", kind, fn, n_cs1 if kind == "empty" else n,
                      {"impl": "mpi4py", "chunksize": 1}))
        for cs in (10, 100, 1000) if kind == "empty" else (10, 100):
            cases.append((f"mpi4py.futures chunksize={cs}", kind, fn, n,
                          {"impl": "mpi4py", "chunksize": cs}))
    # pipelining: one task per message, 1 in flight vs automatic depth
    cases.append(("pyfw ss depth=1", "100us", busy_100us, n_busy,
                  {"impl": "farm", "policy": "ss", "depth": 1}))
    cases.append(("pyfw ss depth=auto", "100us", busy_100us, n_busy,
                  {"impl": "farm", "policy": "ss"}))
    out = {}
    for rep in range(repeats):
        for label, kind, fn, n, opt in cases:
            comm.Barrier()
            rate = None
            if opt["impl"] == "farm":
                with Farm(comm, policy=opt.get("policy", "adaptive"),
                          pipeline_depth=opt.get("depth")) as farm:
                    if farm.is_master:
                        t0 = time.perf_counter()
                        for _ in farm.map(fn, range(n)):
                            pass
                        rate = n / (time.perf_counter() - t0)
            elif opt["impl"] == "executor":
                with Executor(comm=comm) as ex:
                    if ex is not None:
                        t0 = time.perf_counter()
                        for _ in ex.map(fn, range(n)):
                            pass
                        rate = n / (time.perf_counter() - t0)
            else:
                with MPICommExecutor(comm, root=0) as ex:
                    if ex is not None:
                        t0 = time.perf_counter()
                        for _ in ex.map(fn, range(n), chunksize=opt["chunksize"]):
                            pass
                        rate = n / (time.perf_counter() - t0)
            if comm.rank == 0:
                out.setdefault(f"{kind}|{label}", []).append(rate)
    if comm.rank != 0:
        return None
    return {k: summarize(v) for k, v in out.items()}


def child_imbalance(repeats: int, quick: bool) -> dict | None:
    import numpy as np
    from mpi4py import MPI
    from mpi4py.futures import MPICommExecutor

    from pyfw import Farm
    from pyfw.farm import POLICIES

    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(7)
    n = 300 if quick else 600
    durations = np.clip(rng.lognormal(np.log(4e-3), 0.8, n), 5e-4, 0.05).tolist()
    workers = comm.size - 1
    speeds = [1.0 / SLOWDOWN if r == SLOW_RANK else 1.0 for r in range(1, comm.size)]
    ideal = sum(durations) / sum(speeds)
    labels = sorted(POLICIES) + ["mpi4py.futures chunksize=1",
                                 f"mpi4py.futures chunksize={max(1, n // (4 * workers))}"]
    out = {}
    for rep in range(repeats):
        for label in labels:
            comm.Barrier()
            span = None
            if label.startswith("mpi4py"):
                cs = int(label.split("=")[1])
                with MPICommExecutor(comm, root=0) as ex:
                    if ex is not None:
                        t0 = time.perf_counter()
                        list(ex.map(timed_sleep, durations, chunksize=cs))
                        span = time.perf_counter() - t0
            else:
                with Farm(comm, policy=label) as farm:
                    if farm.is_master:
                        t0 = time.perf_counter()
                        list(farm.map(timed_sleep, durations))
                        span = time.perf_counter() - t0
            if comm.rank == 0:
                out.setdefault(label, []).append(span)
    if comm.rank != 0:
        return None
    return {"ideal_s": ideal, "tasks": n, "workers": workers, "slowdown": SLOWDOWN,
            "total_work_s": sum(durations),
            "makespan": {k: summarize(v) for k, v in out.items()},
            "ratio_to_ideal": {k: statistics.median(v) / ideal for k, v in out.items()}}


# ------------------------------------------------------------------ driver
def launch_child(kind: str, nprocs: int, repeats: int, quick: bool, where: str) -> dict:
    from pyfw import launch
    out = os.path.join(where, f".farm_{kind}_{nprocs}.tmp.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--child-out", out,
           "--repeats", str(repeats)] + (["--quick"] if quick else [])
    res = launch.run(nprocs, cmd, timeout=3000, capture=True)
    if res.returncode != 0:
        raise SystemExit(f"{kind} at {nprocs} ranks failed:\n{res.stdout}\n{res.stderr}")
    with open(out) as fh:
        data = json.load(fh)
    os.remove(out)
    return data


def plot_throughput(data: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, kind in zip(axes, ("empty", "100us")):
        labels, meds, lo, hi, colors = [], [], [], [], []
        for nprocs, res in sorted(data["runs"].items()):
            for key, s in res.items():
                k, label = key.split("|", 1)
                if k != kind:
                    continue
                labels.append(f"{label} ({nprocs} ranks)")
                meds.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
                colors.append("tab:blue" if label.startswith("pyfw") else "tab:gray")
        y = range(len(labels))
        ax.barh(y, meds, xerr=[lo, hi], color=colors)
        ax.set_yticks(list(y), labels, fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("tasks/s (median, min-max)")
        ax.set_title(f"{kind} tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_imbalance(data: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    items = sorted(data["ratio_to_ideal"].items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.barh([k for k, _ in items], [v for _, v in items],
            color=["tab:blue" if not k.startswith("mpi4py") else "tab:gray" for k, _ in items])
    ax.axvline(1.0, color="k", lw=1)
    ax.axvline(1.1, color="tab:red", ls="--", lw=1, label="ideal + 10 %")
    ax.set_xlabel("makespan / ideal (total work / total speed), median")
    ax.set_title(f"{data['tasks']} varied tasks, {data['workers']} workers, one "
                 f"{data['slowdown']:g}x slower")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller task counts")
    parser.add_argument("--child", choices=("throughput", "imbalance"), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=("throughput", "imbalance"))
    add_output_options(parser, RESULTS)
    args = parser.parse_args()
    if args.child:
        fn = child_throughput if args.child == "throughput" else child_imbalance
        data = fn(args.repeats, args.quick)
        if data is not None:
            with open(args.child_out, "w") as fh:
                json.dump(data, fh)
        return 0
    out = output_dir(args)
    meta = dict(machine(), date=time.strftime("%Y-%m-%d %H:%M"), repeats=args.repeats,
                quick=args.quick)
    if args.only in (None, "throughput"):
        runs = {n: launch_child("throughput", n, args.repeats, args.quick, out) for n in (2, 4)}
        ratios = {}
        for n, res in runs.items():
            for kind in ("empty", "100us"):
                ours = res[f"{kind}|pyfw Farm.map default"]["median"]
                ex = res[f"{kind}|pyfw Executor.map default"]["median"]
                cs1 = res[f"{kind}|mpi4py.futures chunksize=1"]["median"]
                best_label, best = max(((k, v["median"]) for k, v in res.items()
                                        if k.startswith(f"{kind}|mpi4py")), key=lambda kv: kv[1])
                ratios[f"{n} ranks, {kind}"] = {
                    "farm_vs_mpi4py_default": ours / cs1, "farm_vs_mpi4py_best": ours / best,
                    "executor_vs_mpi4py_default": ex / cs1, "executor_vs_mpi4py_best": ex / best,
                    "mpi4py_best": best_label.split("|")[1]}
            ratios[f"{n} ranks, pipelining (100us, ss)"] = {
                "auto_vs_depth1": res["100us|pyfw ss depth=auto"]["median"]
                / res["100us|pyfw ss depth=1"]["median"]}
        data = {"meta": meta, "runs": runs, "ratios": ratios}
        with open(os.path.join(out, "farm_throughput.json"), "w") as fh:
            json.dump(data, fh, indent=1)
        plot_throughput(data, os.path.join(out, "farm_throughput.png"))
        print(json.dumps(ratios, indent=1))
    if args.only in (None, "imbalance"):
        data = launch_child("imbalance", 4, args.repeats, args.quick, out)
        data["meta"] = meta
        with open(os.path.join(out, "farm_imbalance.json"), "w") as fh:
            json.dump(data, fh, indent=1)
        plot_imbalance(data, os.path.join(out, "farm_imbalance.png"))
        print(json.dumps(data["ratio_to_ideal"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
