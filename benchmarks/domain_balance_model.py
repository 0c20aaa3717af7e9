"""Uneven ranks with a *modelled* compute: the balancing runtime measured against an exact ideal
at more ranks than cores.

Why: ``domain_balance.py`` runs the real knee kernel; at more ranks than the machine's cores
the ranks contend for cores, a rank's speed depends on whether its core-mate sleeps, and the
ideal is not known. Here (the issue allows a calibrated artificial load) each rank's compute
for its slab is a **sleep** of ``slab plane cost x --sec-per-plane / speed_r`` (the last rank,
or ``--slow-rank``, has speed ``1 / --slow``; the others 1). Sleeping ranks do not contend
for cores, so ``ideal = total cost x sec_per_plane / sum(speeds)`` is exact. Everything else
is the real runtime, unchanged: ``SlabDomain.step`` (halo posted, interior updated in chunks
while the exchange is progressed, boundary planes last; its compute time measured with
``perf_counter`` around the update calls, so sleep overshoot shows up as noise as it would on a
real machine), the :class:`~pyfw.domain.Balancer` fed by the online monitor's forecast speeds,
the non-blocking monitor exchanges, and the data moves of ``repartition`` on four fields of a
realistic 160 x 160 plane (like the knee: T, Tn, P float64 and tid uint8, 616 KiB per plane).
The hook is the ``update`` function passed to ``SlabDomain.step``: nothing in ``pyfw`` knows the
compute is modelled. The field ``T`` holds each plane's global index, so after every run the
benchmark checks that every plane (and ghost plane) arrived where the cuts say.

The modelled update sleeps to a running deadline (``owed - slept``): the overshoot of one chunk's
sleep is taken off the next chunk's, so it does not add up over the ~n/8 chunks of a step.

Modes (each: ``--steps`` steps, barrier-separated, step time = max over ranks; median, min-max;
plus the throughput of ``--steps`` steps without barriers):
* even: equal slabs, no balancer;
* oracle: the cuts :func:`pyfw.domain.partition.partition` gives for the true speeds, no balancer
  (the best the partition can do: what is left is runtime overhead and one-plane granularity);
* balanced: starts from the even cuts with the Balancer on (``--every``), ``--settle`` steps to
  settle (moves and the step of the last move recorded), then timed with the balancer still on
  (its checks and the monitor's exchanges are part of the cost); repeated ``--repeats`` times;
* swap (after the balanced timing, same run): the slow rank becomes rank ``slow + P/2``;
  ``--swap-settle`` steps show how many moves and steps the cuts need to follow;
* ideal: the continuous ideal (above) and the discrete optimum (smallest bottleneck over all
  cuts, whole planes) -- both exact, no measurement.

    flock /tmp/pyfw-bench.lock pyfw-run -n 8 --timeout 900 -- \
        python benchmarks/domain_balance_model.py [--sec-per-plane 4e-4] [--slow 3]
    python benchmarks/domain_balance_model.py --plot   # summary PNG from the JSON files

Writes benchmarks/results/domain_balance_model_n<ranks>.json (rank 0); ``--plot`` writes
benchmarks/results/domain_balance_summary.png from every domain_balance*_n*.json present.
"""
import argparse
import glob
import json
import os
import time
from types import SimpleNamespace

import numpy as np
from mpi4py import MPI

from pyfw.comm import Backoff, Comm
from pyfw.domain import Balancer, SlabDomain
from pyfw.domain import partition as part

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = os.path.join(HERE, "results")
#: where this run writes (main sets it): PUBLISHED with --publish, else --out DIR or
#: PUBLISHED/local
RESULTS = os.path.join(PUBLISHED, "local")
FIELDS = (("T", np.float64), ("Tn", np.float64), ("P", np.float64), ("tid", np.uint8))


class ModelledCompute:
    """``update(k0, k1)`` for :meth:`SlabDomain.step`: sleeps ``cost x spp / speed`` for local
    planes ``k0:k1``, to a running deadline so sleep overshoot does not accumulate over the
    chunks of a step. Call :meth:`reset` before each step."""

    def __init__(self, dom, sec_per_plane: float, speed: float):
        self.dom, self.spp, self.speed = dom, float(sec_per_plane), float(speed)
        self.reset()

    def reset(self) -> None:
        self.owed = 0.0
        self.slept = 0.0

    def __call__(self, k0: int, k1: int) -> None:
        d = self.dom
        lo = d.lo
        self.owed += float(d.cost[lo + k0 - 1:lo + k1 - 1].sum()) * self.spp / self.speed
        dt = self.owed - self.slept
        if dt > 0:
            t0 = time.perf_counter()
            time.sleep(dt)
            self.slept += time.perf_counter() - t0


def sleepy_barrier(mpi) -> None:
    """Barrier that polls with a capped backoff (no spinning rank steals a core from a rank
    that is waking up: 8 ranks share 2 cores)."""
    req = mpi.Ibarrier()
    b = Backoff(1e-6, 1e-4)
    while not req.Test():
        b.sleep()


def optimal_bottleneck(cost, speeds, min_planes: int = 1) -> float:
    """Smallest possible step time over all contiguous cuts (ranks in order, whole planes):
    bisection on the bottleneck with a greedy feasibility test, then the achieved value."""
    cost = np.asarray(cost, float)
    speeds = np.asarray(speeds, float)
    W = np.concatenate(([0.0], np.cumsum(cost)))
    n, p = cost.size, speeds.size

    def greedy(T):
        cuts, z = [0], 0
        for i in range(p):
            rest = (p - 1 - i) * min_planes
            # furthest plane boundary with cost within T * speed (at least min_planes)
            k = int(np.searchsorted(W, W[z] + T * speeds[i] * (1 + 1e-12), side="right")) - 1
            k = max(min(k, n - rest), z + min_planes)
            cuts.append(k)
            z = k
        return np.array(cuts) if z >= n else None

    lo, hi = 0.0, float(W[-1] / speeds.min())
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if greedy(mid) is None:
            lo = mid
        else:
            hi = mid
    cuts = greedy(hi)
    cuts[-1] = n
    return part.bottleneck(cost, speeds, cuts), cuts


def make_cost(kind: str, nz: int) -> np.ndarray:
    if kind == "uniform":
        return np.ones(nz)
    if kind == "bump":  # heavier in the middle (e.g. tissue vs air), mean 1
        z = (np.arange(nz) + 0.5) / nz
        c = 0.4 + 1.6 * np.sin(np.pi * z) ** 2
        return c / c.mean()
    raise SystemExit(f"unknown --cost {kind!r}")


def build(mpi, shape, cost, cuts, spp, speeds):
    dom = SlabDomain(Comm(mpi), shape, cuts=cuts, cost=cost)
    for name, dt in FIELDS:
        dom.add(name, dt)
    # T = global plane index (checked after the run: the moves and halos are real)
    dom.interior("T")[:] = np.arange(dom.lo, dom.hi, dtype=np.float64)[:, None, None]
    dom.interior("tid")[:] = (np.arange(dom.lo, dom.hi) % 7).astype(np.uint8)[:, None, None]
    dom.exchange([n for n, _ in FIELDS])
    return dom, ModelledCompute(dom, spp, speeds[dom.rank])


def check_data(dom) -> bool:
    T = dom["T"]
    ok = np.array_equal(T[1:-1, 0, 0], np.arange(dom.lo, dom.hi, dtype=np.float64))
    ok &= bool(np.all(T[1:-1] == T[1:-1, :1, :1]))
    ok &= np.array_equal(dom["tid"][1:-1, 0, 0], np.arange(dom.lo, dom.hi) % 7)
    if dom.rank > 0:
        ok &= T[0, 0, 0] == dom.lo - 1
    if dom.rank < dom.size - 1:
        ok &= T[-1, 0, 0] == dom.hi
    return bool(dom.comm.mpi.allreduce(bool(ok), op=MPI.LAND))


def run_steps(dom, model, bal, steps, names=("T",)):
    """``steps`` barrier-separated steps; per-step wall (max over ranks) and compute times."""
    mpi = dom.comm.mpi
    wall = np.empty(steps)
    comp = np.empty(steps)
    for i in range(steps):
        sleepy_barrier(mpi)
        t0 = time.perf_counter()
        model.reset()
        spent = dom.step(model, list(names))
        if bal is not None:
            bal.record(spent)
            bal.check()
        wall[i] = time.perf_counter() - t0
        comp[i] = spent
    out = np.empty_like(wall)
    mpi.Allreduce(wall, out, op=MPI.MAX)
    return out, comp


def throughput(dom, model, bal, steps, names=("T",)) -> float:
    """Seconds per step over ``steps`` steps with no barrier between them."""
    mpi = dom.comm.mpi
    sleepy_barrier(mpi)
    t0 = time.perf_counter()
    for _ in range(steps):
        model.reset()
        spent = dom.step(model, list(names))
        if bal is not None:
            bal.record(spent)
            bal.check()
    sleepy_barrier(mpi)
    return mpi.allreduce(time.perf_counter() - t0, op=MPI.MAX) / steps


def st(a):
    a = np.asarray(a, float)
    return {"median": float(np.median(a)), "min": float(np.min(a)), "max": float(np.max(a))}


def parse_args():
    """The command line (the modes and their step counts: see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=(200, 160, 160))
    ap.add_argument("--slow", type=float, default=3.0)
    ap.add_argument("--slow-rank", type=int, default=-1, help="default: the last rank")
    ap.add_argument("--sec-per-plane", type=float, default=4e-4)
    ap.add_argument("--cost", default="uniform", choices=("uniform", "bump"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--settle", type=int, default=150)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--swap-settle", type=int, default=150,
                    help="after the timed steps the slow rank becomes rank slow+P/2: steps "
                         "run to follow it (0: skip)")
    ap.add_argument("--tag", default="", help="suffix of the JSON name")
    ap.add_argument("--plot", action="store_true", help="summary PNG from the JSON files")
    add_output_options(ap, PUBLISHED)
    return ap.parse_args()


def make_case(args, p):
    """The case every mode runs: grid, plane costs, true speeds, exact ideal, oracle cuts."""
    shape = tuple(args.shape)
    spp = args.sec_per_plane
    cost = make_cost(args.cost, shape[0])
    speeds = np.ones(p)
    slow_rank = args.slow_rank % p
    speeds[slow_rank] = 1.0 / args.slow
    ideal = float(cost.sum()) * spp / speeds.sum()
    return SimpleNamespace(p=p, shape=shape, spp=spp, cost=cost, speeds=speeds,
                           slow_rank=slow_rank, ideal=ideal,
                           oracle_cuts=part.partition(cost, speeds))


def header(args, case):
    """The result's settings and the exact (unmeasured) ideal, discrete optimum and oracle."""
    shape, spp = case.shape, case.spp
    opt, opt_cuts = optimal_bottleneck(case.cost, case.speeds)
    return {"ranks": case.p, "cores": os.cpu_count(), "shape": shape, "slow": args.slow,
            "slow_rank": case.slow_rank, "sec_per_plane": spp, "cost": args.cost,
            "steps": args.steps, "settle": args.settle, "every": args.every,
            "plane_bytes": int(np.prod(shape[1:])) * sum(np.dtype(t).itemsize
                                                           for _, t in FIELDS),
            "load_avg_start": os.getloadavg(),
            "ideal": {"step_s": case.ideal, "discrete_opt_s": opt * spp,
                      "discrete_opt_cuts": opt_cuts.tolist()},
            "oracle_cuts": case.oracle_cuts.tolist(),
            "oracle_pred_s": part.bottleneck(case.cost, case.speeds, case.oracle_cuts) * spp}


def log(*a):
    """Print on rank 0 only."""
    if MPI.COMM_WORLD.rank == 0:
        print(*a, flush=True)


def fixed_run(mpi, args, case, name, cuts):
    """Mode ``name`` on fixed ``cuts``, no balancer: step times, throughput, data check."""
    dom, model = build(mpi, case.shape, case.cost, cuts, case.spp, case.speeds)
    run_steps(dom, model, None, 3)
    w, c = run_steps(dom, model, None, args.steps)
    tp = throughput(dom, model, None, args.steps)
    comp = mpi.allgather(float(np.median(c)))
    out = {"step_s": st(w), "throughput_s": tp, "cuts": dom.cuts.tolist(),
           "pred_s": part.bottleneck(case.cost, case.speeds, dom.cuts) * case.spp,
           "compute_median_s": comp, "data_ok": check_data(dom)}
    ideal = case.ideal
    log(f"{name}: median {st(w)['median'] * 1e3:.2f} ms ({w.min() * 1e3:.2f}-"
        f"{w.max() * 1e3:.2f}), throughput {tp * 1e3:.2f} ms, ideal {ideal * 1e3:.2f} ms")
    dom.close()
    return out


def balanced_run(mpi, args, case, rep):
    """Balanced run ``rep`` from even cuts: settle, timed steps and throughput, swap."""
    cost, speeds, spp = case.cost, case.speeds, case.spp
    dom, model = build(mpi, case.shape, cost, part.even_cuts(case.shape[0], case.p), spp,
                       speeds)
    bal = Balancer(dom, every=args.every)
    t0 = time.perf_counter()
    w_settle, _ = run_steps(dom, model, bal, args.settle)
    settle_s = mpi.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    moved = [h for h in bal.history if h["moved"]]
    moves_settle = dom.moves
    w, c = run_steps(dom, model, bal, args.steps)
    tp = throughput(dom, model, bal, args.steps)
    comp = mpi.allgather(float(np.median(c)))
    cuts = dom.cuts.tolist()
    moves_timed = dom.moves - moves_settle
    pred = part.bottleneck(cost, speeds, dom.cuts) * spp   # before the swap below
    plane_diff = int(np.abs(dom.cuts - case.oracle_cuts).max())
    swap = None
    if args.swap_settle > 0:   # the slow rank changes mid-run: how fast do cuts follow?
        swap = swap_run(mpi, args, case, dom, model, bal)
    r = {"step_s": st(w), "throughput_s": tp, "cuts": cuts, "pred_s": pred,
         "cuts_equal_oracle": cuts == case.oracle_cuts.tolist(),
         "max_plane_diff_vs_oracle": plane_diff,
         "moves_settle": moves_settle, "moves_timed": moves_timed,
         "last_move_step": moved[-1]["step"] if moved else None,
         "move_seconds": [h["seconds"] for h in moved],
         "settle_s": settle_s, "settle_step_s": w_settle.tolist(),
         "speeds_forecast": (dom.monitor.speeds() * spp).tolist(),
         "compute_median_s": comp, "checks": len(bal.history),
         "monitor_overhead": mpi.allreduce(dom.monitor.overhead(), op=MPI.MAX),
         "data_ok": check_data(dom), "swap": swap,
         "log": [{k: h.get(k) for k in ("step", "cuts", "proposed", "stale", "imbalance", "loss",
                                        "move_cost", "gain", "moved", "seconds")}
                 for h in bal.history]}
    log_balanced(rep, r, case)
    dom.close()
    return r


def swap_run(mpi, args, case, dom, model, bal):
    """Move the slow rank to ``slow + P/2`` mid-run: how many moves and steps cuts need."""
    p, cost, spp = case.p, case.cost, case.spp
    sp2 = np.ones(p)
    slow2 = (case.slow_rank + p // 2) % p
    sp2[slow2] = 1.0 / args.slow
    model.speed = sp2[mpi.rank]
    m0, s0, h0 = dom.moves, bal.steps, len(bal.history)
    w2, _ = run_steps(dom, model, bal, args.swap_settle)
    mv = [h for h in bal.history[h0:] if h["moved"]]
    opt2, _ = optimal_bottleneck(cost, sp2)
    tail = w2[-min(40, len(w2)):]
    return {"slow_rank": slow2, "moves": dom.moves - m0,
            "steps_to_last_move": (mv[-1]["step"] - s0) if mv else None,
            "cuts": dom.cuts.tolist(),
            "pred_s": part.bottleneck(cost, sp2, dom.cuts) * spp,
            "discrete_opt_s": opt2 * spp, "ideal_s": case.ideal,
            "last40_step_s": st(tail), "step_s": w2.tolist(),
            "data_ok": check_data(dom)}


def log_balanced(rep, r, case):
    """Rank 0's line on balanced run ``rep`` (and on its swap)."""
    ideal, s, swap = case.ideal, r["step_s"], r["swap"]
    log(f"balanced #{rep}: median {s['median'] * 1e3:.2f} ms "
        f"({s['min'] * 1e3:.2f}-{s['max'] * 1e3:.2f}), "
        f"throughput {r['throughput_s'] * 1e3:.2f} ms, "
        f"moves {r['moves_settle']}+{r['moves_timed']}, last move at step "
        f"{r['last_move_step']}, cuts {r['cuts']} (oracle {case.oracle_cuts.tolist()}), "
        f"data ok {r['data_ok']}")
    if swap:
        log(f"  slow rank {case.slow_rank} -> {swap['slow_rank']}: {swap['moves']} move(s), last "
            f"{swap['steps_to_last_move']} steps after the change, last 40 steps "
            f"{swap['last40_step_s']['median'] * 1e3:.2f} ms (ideal {ideal * 1e3:.2f}, "
            f"cuts predict {swap['pred_s'] * 1e3:.2f}, best {swap['discrete_opt_s'] * 1e3:.2f})"
            f", data ok {swap['data_ok']}")


def summarise(res, reps, ideal):
    """The median balanced run, and every mode's step time and throughput over the ideal."""
    res["balanced_runs"] = reps
    meds = [r["step_s"]["median"] for r in reps]
    best = reps[int(np.argsort(meds)[len(meds) // 2])]   # the median run
    res["balanced"] = {k: best[k] for k in ("step_s", "throughput_s", "cuts", "pred_s",
                                            "moves_settle", "last_move_step")}
    res["balanced"]["median_over_runs_s"] = st(meds)
    for k in ("even", "oracle", "balanced"):
        res[f"{k}_over_ideal"] = res[k]["step_s"]["median"] / ideal
        res[f"{k}_throughput_over_ideal"] = res[k]["throughput_s"] / ideal
    res["balanced_over_ideal_runs"] = [m / ideal for m in meds]


def write_json(res, p, tag):
    """Rank 0: benchmarks/results/domain_balance_model_n<p><tag>.json, and the summary."""
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, f"domain_balance_model_n{p}{tag}.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    log(json.dumps({k: v for k, v in res.items()
                    if k not in ("balanced_runs",)}, indent=1))
    log("wrote", out)


def main():
    global RESULTS
    args = parse_args()
    RESULTS = output_dir(args)
    if args.plot:
        return plot_summary()
    mpi = MPI.COMM_WORLD
    case = make_case(args, mpi.size)
    res = header(args, case)
    # --- even and oracle (fixed cuts, no balancer)
    for name, cuts in (("even", part.even_cuts(case.shape[0], case.p)),
                       ("oracle", case.oracle_cuts)):
        res[name] = fixed_run(mpi, args, case, name, cuts)
    # --- balanced, from the even cuts
    reps = []
    for rep in range(args.repeats):
        reps.append(balanced_run(mpi, args, case, rep))
    summarise(res, reps, case.ideal)
    res["load_avg_end"] = os.getloadavg()
    if mpi.rank == 0:
        write_json(res, case.p, args.tag)


def plot_summary():
    """One figure: step time / ideal for every rank count (real knee at the counts measured
    by domain_balance.py, modelled compute here)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = []
    for f in sorted(glob.glob(os.path.join(RESULTS, "domain_balance_n*.json"))):
        d = json.load(open(f))
        p = d["ranks"]
        label = f"{p} ranks\nreal knee" + ("\n(> 2 cores)" if p > 2 else "")
        rows.append((label, p, [d["even"]["step_s"], d["balanced"]["step_s"]],
                     d["ideal"]["step_s"], None, 3 * (p - 1 + 1 / 3) / p))
    for f in sorted(glob.glob(os.path.join(RESULTS, "domain_balance_model_n*.json"))):
        d = json.load(open(f))
        ideal = d["ideal"]["step_s"]
        extra = "" if d["cost"] == "uniform" else f"\n{d['cost']} cost, slow rank {d['slow_rank']}"
        rows.append((f"{d['ranks']} ranks\nmodelled{extra}", d["ranks"],
                     [d["even"]["step_s"], d["balanced"]["step_s"], d["oracle"]["step_s"]],
                     ideal, d["ideal"]["discrete_opt_s"] / ideal, d["even"]["pred_s"] / ideal))
    rows.sort(key=lambda r: (r[1], "modelled" in r[0], len(r[0])))
    fig, ax = plt.subplots(figsize=(max(6, 1.7 * len(rows)), 4.4))
    names = ["even", "balanced", "oracle cuts (true speeds)"]
    colors = ["tab:red", "tab:green", "tab:blue"]
    wbar = 0.25
    for i, (label, p, sts, ideal, dopt, even_pred) in enumerate(rows):
        for j, s in enumerate(sts):
            m = s["median"] / ideal
            ax.bar(i + (j - 1) * wbar, m, wbar, color=colors[j],
                   yerr=[[m - s["min"] / ideal], [s["max"] / ideal - m]])
            ax.text(i + (j - 1) * wbar, m + 0.05, f"{m:.2f}", ha="center", fontsize=7)
        if dopt is not None:
            ax.plot([i - 0.5 * wbar, i + 1.5 * wbar], [dopt] * 2, "k:", lw=1.2)
        ax.plot([i - 1.5 * wbar, i - 0.5 * wbar], [even_pred] * 2, "k--", lw=1)
    for j, nm in enumerate(names):
        ax.bar([0], [0], 0, color=colors[j], label=nm)
    ax.axhline(1.0, color="gray", lw=1)
    ax.axhline(1.15, color="gray", lw=0.8, ls="--")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r[0] for r in rows], fontsize=8)
    ax.set_ylabel("median step time / ideal (min-max bars)")
    ax.set_title("one rank 3x slower, 2 cores: step time / ideal (medians, min-max bars)\n"
                 "gray dashed: ideal +15 %; black dashed: even split predicted; dotted: best "
                 "whole-plane cuts", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.join(RESULTS, "domain_balance_summary.png")
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main()
