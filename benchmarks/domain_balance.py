"""Uneven ranks: one rank emulated ``--slow`` times slower (calibrated artificial load: it
sleeps (slow - 1) x its own measured compute time after every update, so it is exactly that
much slower whatever the machine), knee kernel on the 1 mm phantom.

Modes, each measured over ``--steps`` steps after warm-up (median step time, min-max):
* even: equal slabs, no balancing;
* balanced: pyfw's Balancer on (measured times, EMA, cost/benefit trigger); timed after it
  settled (the balancing steps are reported separately);
* ideal: total planes / sum of the ranks' measured speeds (planes per compute-second).
Also the halo overlap on/off step time on equal ranks.

    pyfw-run -n 2 -- python benchmarks/domain_balance.py [--shape 200 160 160] [--slow 3]
Writes benchmarks/results/domain_balance_n<ranks>.json and .png (rank 0).
"""
import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI

from pyfw.apps.knee.model import KneeRun, Params
from pyfw.comm import Comm

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))


def make(comm, shape, slow, balance, overlap=True):
    run = KneeRun(comm, Params(shape=shape, length_mm=min(120.0, shape[0] - 10.0)),
                  balance=balance, overlap=overlap, balance_every=10,
                  slowdown=slow if comm.rank == comm.size - 1 else 1.0, log=lambda *a: None)
    run._fill("steady")
    run.start_cooling()
    return run


def measure(run, steps):
    """Per-step wall times (max over ranks, barrier-separated) and per-rank compute times."""
    comm = run.dom.comm.mpi
    wall, comp = [], []
    for _ in range(steps):
        comm.Barrier()
        t0 = MPI.Wtime()
        run.solver.advance(1)
        wall.append(comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX))
        comp.append(run.dom.compute_time)
    return np.array(wall), np.array(comp)


def st(a):
    return {"median": float(np.median(a)), "min": float(np.min(a)), "max": float(np.max(a))}


def parse_args():
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=(200, 160, 160))
    ap.add_argument("--slow", type=float, default=3.0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--settle", type=int, default=60)
    add_output_options(ap, os.path.join(HERE, "results"))
    return ap.parse_args()


def run_even(comm, shape, args):
    """Equal slabs, no balancing: the step time after warm-up, and the cuts."""
    run = make(comm, shape, args.slow, balance=False)
    measure(run, 3)
    w_even, c_even = measure(run, args.steps)
    return {"step_s": st(w_even), "cuts": run.dom.cuts.tolist()}


def run_balanced(comm, shape, args):
    """Balancer on: settle, then time the frozen cuts; the ideal from its speeds."""
    res = {}
    run = make(comm, shape, args.slow, balance=True)
    t0 = time.perf_counter()
    measure(run, args.settle)
    res["balance_phase_s"] = time.perf_counter() - t0
    res["moves"] = run.dom.moves
    res["balancer_log"] = [{k: h[k] for k in ("step", "imbalance", "loss", "move_cost",
                                               "gain", "moved")} for h in run.balancer.history]
    run.solver.balancer = None  # freeze the settled cuts for the timing
    w_bal, c_bal = measure(run, args.steps)
    res["balanced"] = {"step_s": st(w_bal), "cuts": run.dom.cuts.tolist()}
    # ideal from the measured speeds (planes per compute second) of the balanced run
    speeds = comm.mpi.allgather(run.dom.n / float(np.median(c_bal)))
    res["speeds_planes_per_s"] = speeds
    res["ideal"] = {"step_s": shape[0] / float(np.sum(speeds))}
    return res


def run_overlap(comm, shape, args):
    """Equal ranks, no balancer: step time with the halo overlap on and off."""
    over = {}
    for ov in (True, False):
        run = make(comm, shape, 1.0, balance=False, overlap=ov)
        measure(run, 3)
        w, _ = measure(run, args.steps)
        over["on" if ov else "off"] = st(w)
    return over


def plot(res, ranks, slow, shape, out):
    """``out``.png: even, balanced and ideal step times; overlap on and off."""
    ideal = res["ideal"]["step_s"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        names = ["even", "balanced", "ideal"]
        med = [res["even"]["step_s"]["median"], res["balanced"]["step_s"]["median"], ideal]
        lo = [res["even"]["step_s"]["min"], res["balanced"]["step_s"]["min"], ideal]
        hi = [res["even"]["step_s"]["max"], res["balanced"]["step_s"]["max"], ideal]
        a1.bar(names, [m * 1e3 for m in med],
               yerr=[[1e3 * (m - x) for m, x in zip(med, lo)],
                     [1e3 * (x - m) for m, x in zip(med, hi)]],
               color=["tab:red", "tab:green", "tab:gray"])
        a1.set_ylabel("step time (ms)")
        a1.set_title(f"{ranks} ranks, last one {slow:g}x slower")
        o = res["overlap_equal_ranks_step_s"]
        a2.bar(["overlap on", "overlap off"],
               [o["on"]["median"] * 1e3, o["off"]["median"] * 1e3],
               yerr=[[1e3 * (o[k]["median"] - o[k]["min"]) for k in ("on", "off")],
                     [1e3 * (o[k]["max"] - o[k]["median"]) for k in ("on", "off")]])
        a2.set_ylabel("step time (ms)")
        a2.set_title("halo overlap, equal ranks")
        fig.suptitle(f"knee kernel, grid {shape}")
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=110)
    except ImportError:
        pass


def main():
    args = parse_args()
    comm = Comm(MPI.COMM_WORLD)
    shape = tuple(args.shape)
    res = {"ranks": comm.size, "shape": shape, "slow": args.slow, "steps": args.steps}

    res["even"] = run_even(comm, shape, args)
    res.update(run_balanced(comm, shape, args))
    ideal = res["ideal"]["step_s"]
    res["even_over_ideal"] = res["even"]["step_s"]["median"] / ideal
    res["balanced_over_ideal"] = res["balanced"]["step_s"]["median"] / ideal

    res["overlap_equal_ranks_step_s"] = run_overlap(comm, shape, args)

    if comm.rank == 0:
        out = os.path.join(output_dir(args), f"domain_balance_n{comm.size}")
        with open(out + ".json", "w") as f:
            json.dump(res, f, indent=1)
        print(json.dumps({k: v for k, v in res.items() if k != "balancer_log"}, indent=1))
        plot(res, comm.size, args.slow, shape, out)


if __name__ == "__main__":
    main()
