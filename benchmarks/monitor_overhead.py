"""Benchmark: overhead of on-line monitoring inside real pyfw jobs (target <= 1 % of run time).

    flock /tmp/pyfw-bench.lock python benchmarks/monitor_overhead.py [--nprocs 2,4] [--reps 5]

Three jobs, each run with the monitor ``on`` and ``off`` in the same launch, interleaved
(on/off order alternates every repetition, ABBA, so drift in the machine's load cancels):

* ``domain``: a :class:`pyfw.domain.SlabDomain` stencil loop (numpy 7-point average, halo
  overlap). ``on`` = the job's shared ``OnlineMonitor(budget=0.01)`` (link probes) with a
  ``Balancer(every=20)`` reading its speed forecasts (record each step, sync at checks, the
  probes piggybacked); ``off`` = fixed cuts, nothing else.
* ``spmd``: a synthetic step loop (``--work-ms`` of calibrated busy work + a 64 KiB exchange
  with both ring neighbours); ``on`` = ``mon.step(work, seconds)`` every step.
* ``farm``: :class:`pyfw.Farm` over ``--farm-tasks`` tasks of ``--task-ms`` busy work.
  ``on`` = the farm's per-worker round-trip forecaster banks (NWS, pyfw.monitor) plus a
  passive :class:`pyfw.monitor.Profiler` and the end-of-run :func:`profile`; ``off`` = the
  banks replaced by a bare last-value holder (no bank) and no profile.

Per job and rank count: median and min-max of the job's wall time (slowest rank) per variant;
the A/B overhead ``median(on) / median(off) - 1`` and the median of the per-repetition paired
ratios (noisy on a shared 2-core box: other processes move these by several %); and the
**self-measured** overhead: seconds spent inside monitor calls (timed around every call;
for the farm, inside the forecaster banks and the profile) over the job's wall time, max over
ranks -- the figure that is not drowned by the machine's noise. Writes
``benchmarks/results/monitor_overhead.json`` + ``.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ------------------------------------------------------------------------------ farm task
def busy_task(ms):
    from pyfw.monitor import spin_work
    spin_work(ms * 1e3, rate=1e6)
    return ms


class _LastOnly:
    """The ``off`` variant's stand-in for ForecasterBank: keeps the last value, no bank."""

    def __init__(self, *a, **k):
        self.v = float("nan")

    def update(self, x):
        self.v = float(x)

    def predict(self):
        from pyfw.monitor import Forecast
        return Forecast(self.v, float("nan"), "last")

    def __len__(self):
        return 1


def _timed_bank():
    """ForecasterBank that sums the seconds spent in update/predict (class-wide)."""
    from pyfw.monitor import ForecasterBank

    class TimedBank(ForecasterBank):
        spent = 0.0

        def update(self, x):
            t0 = time.perf_counter()
            super().update(x)
            TimedBank.spent += time.perf_counter() - t0

        def predict(self):
            t0 = time.perf_counter()
            out = super().predict()
            TimedBank.spent += time.perf_counter() - t0
            return out
    return TimedBank


# ------------------------------------------------------------------------------ jobs
def job_spmd(comm, args, on):
    from pyfw.monitor import OnlineMonitor, spin_work
    p, me = comm.size, comm.rank
    sbuf = np.ones(65536, np.uint8)
    rbuf = np.zeros(65536, np.uint8)
    mon = OnlineMonitor(comm, budget=0.01) if on else None
    inside = 0.0
    comm.mpi.Barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        s0 = time.perf_counter()
        spin_work(args.work_ms * 1e3, rate=1e6)
        if p > 1:
            comm.Sendrecv(sbuf, (me + 1) % p, rbuf, (me - 1) % p)
            comm.Sendrecv(sbuf, (me - 1) % p, rbuf, (me + 1) % p)
        if mon is not None:
            m0 = time.perf_counter()
            mon.step(work=args.work_ms, seconds=m0 - s0)
            inside += time.perf_counter() - m0
    if mon is not None:
        m0 = time.perf_counter()
        mon.close()
        inside += time.perf_counter() - m0
    el = time.perf_counter() - t0
    extra = {"probes": mon.probes, "every": mon.every, "stretch": mon.stretch} if on else {}
    return el, inside, extra


def job_domain(comm, args, on):
    from pyfw.domain import Balancer, SlabDomain
    from pyfw.monitor import OnlineMonitor
    nz, ny, nx = args.grid
    mon = OnlineMonitor(comm, budget=0.01) if on else None
    dom = SlabDomain(comm, (nz, ny, nx), monitor=mon)
    dom.set_from_global("u", lambda z0, z1: np.random.default_rng(z0).random((z1 - z0, ny, nx)))
    dom.add("v")
    bal = Balancer(dom, every=20) if on else None

    def update(k0, k1):
        u, v = dom["u"], dom["v"]
        c = u[k0:k1]
        v[k0:k1, 1:-1, 1:-1] = (u[k0 - 1:k1 - 1, 1:-1, 1:-1] + u[k0 + 1:k1 + 1, 1:-1, 1:-1]
                                + c[:, :-2, 1:-1] + c[:, 2:, 1:-1] + c[:, 1:-1, :-2]
                                + c[:, 1:-1, 2:] + 2.0 * c[:, 1:-1, 1:-1]) * 0.125
    inside = 0.0
    comm.mpi.Barrier()
    t0 = time.perf_counter()
    for _ in range(args.domain_steps):
        spent = dom.step(update, ["u"], overlap=True)
        dom.fields["u"], dom.fields["v"] = dom.fields["v"], dom.fields["u"]
        if on:
            m0 = time.perf_counter()
            bal.record(spent)        # also counts the monitor's step (probes when due)
            bal.check()
            inside += time.perf_counter() - m0
    if on:
        m0 = time.perf_counter()
        mon.close()
        inside += time.perf_counter() - m0
    el = time.perf_counter() - t0
    extra = ({"probes": mon.probes, "syncs": mon.syncs, "every": mon.every,
              "stretch": mon.stretch, "moves": dom.moves} if on else {})
    return el, inside, extra


def job_farm(comm, args, on):
    import pyfw.farm.policies as pol
    from pyfw import Farm
    from pyfw.monitor import Profiler, profile
    saved = pol.ForecasterBank
    bank = _timed_bank() if on else _LastOnly
    pol.ForecasterBank = bank
    try:
        prof = Profiler(comm) if on else None
        comm.mpi.Barrier()
        t0 = time.perf_counter()
        with Farm(comm.mpi) as farm:
            if farm.is_master:
                for _ in farm.map(busy_task, [args.task_ms] * args.farm_tasks):
                    pass
        inside = 0.0
        if on:
            p0 = time.perf_counter()
            profile(comm, prof, root=0)
            inside = time.perf_counter() - p0 + bank.spent
            bank.spent = 0.0
        el = time.perf_counter() - t0
    finally:
        pol.ForecasterBank = saved
    return el, inside, {}


JOBS = {"domain": job_domain, "spmd": job_spmd, "farm": job_farm}


def worker(args) -> None:
    from mpi4py import MPI

    from pyfw.comm import Comm
    comm = Comm(MPI.COMM_WORLD.Dup())
    jobs = args.jobs.split(",")
    res = {j: {"off": [], "on": [], "self": [], "extra": []} for j in jobs}
    quick = argparse.Namespace(**{**vars(args), "steps": 50, "domain_steps": 50,
                                  "farm_tasks": 100})
    for j in jobs:                      # warm-up (imports, first-touch, caches)
        JOBS[j](comm, quick, True)
        JOBS[j](comm, quick, False)
    for rep in range(args.reps):
        order = (False, True) if rep % 2 == 0 else (True, False)
        for j in jobs:
            for on in order:
                el, inside, extra = JOBS[j](comm, args, on)
                el = comm.mpi.allreduce(el, op=MPI.MAX)
                frac = comm.mpi.allreduce(inside / el, op=MPI.MAX)
                r = res[j]
                if on:
                    r["on"].append(el)
                    r["self"].append(frac)
                    r["extra"].append(extra)
                else:
                    r["off"].append(el)
    if comm.rank == 0:
        with open(args.worker, "w") as f:
            json.dump(res, f)
    comm.free()


def summarize(r) -> dict:
    off, on = np.array(r["off"]), np.array(r["on"])
    return {"off_median_s": float(np.median(off)), "off_min_max": [off.min(), off.max()],
            "on_median_s": float(np.median(on)), "on_min_max": [on.min(), on.max()],
            "overhead_ab": float(np.median(on) / np.median(off) - 1),
            "overhead_paired_median": float(np.median(on / off) - 1),
            "overhead_paired_min_max": [float((on / off).min() - 1),
                                        float((on / off).max() - 1)],
            "self_overhead_median": float(np.median(r["self"])),
            "self_overhead_min_max": [float(min(r["self"])), float(max(r["self"]))]}


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nprocs", default="2,4")
    ap.add_argument("--jobs", default="domain,spmd,farm")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=600, help="spmd job steps")
    ap.add_argument("--domain-steps", type=int, default=1500)
    ap.add_argument("--work-ms", type=float, default=5.0)
    ap.add_argument("--grid", type=int, nargs=3, default=(128, 96, 96))
    ap.add_argument("--farm-tasks", type=int, default=1500)
    ap.add_argument("--task-ms", type=float, default=1.0)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    add_output_options(ap, os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    args.out = os.path.join(output_dir(args), "monitor_overhead")   # the prefix of .json and .png
    return args


def launch_workers(n: int, args) -> dict:
    """One launch of ``n`` ranks running :func:`worker`: its per-job results."""
    from pyfw.launch import run
    tmp = f"{args.out}.tmp{n}.json"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", tmp, "--reps",
           str(args.reps), "--steps", str(args.steps), "--work-ms", str(args.work_ms),
           "--domain-steps", str(args.domain_steps),
           "--jobs", args.jobs, "--grid", *map(str, args.grid), "--farm-tasks",
           str(args.farm_tasks), "--task-ms", str(args.task_ms)]
    res = run(n, cmd, timeout=1800, capture=True)
    assert res.returncode == 0, res.stderr[-3000:]
    with open(tmp) as f:
        r = json.load(f)
    os.remove(tmp)
    return r


def print_summary(n: int, j: str, s: dict) -> None:
    """One line on job ``j`` at ``n`` ranks: off, on, A/B, paired and self-measured."""
    print(f"{n} ranks {j:6s}: off {s['off_median_s']:.3f} s "
          f"({s['off_min_max'][0]:.3f}-{s['off_min_max'][1]:.3f})  on "
          f"{s['on_median_s']:.3f} s ({s['on_min_max'][0]:.3f}-{s['on_min_max'][1]:.3f})"
          f"  A/B {100 * s['overhead_ab']:+.2f} %  paired "
          f"{100 * s['overhead_paired_median']:+.2f} % "
          f"({100 * s['overhead_paired_min_max'][0]:+.1f}..."
          f"{100 * s['overhead_paired_min_max'][1]:+.1f})  self-measured "
          f"{100 * s['self_overhead_median']:.3f} % "
          f"(max {100 * s['self_overhead_min_max'][1]:.3f} %)", flush=True)


def plot(results: dict, jobs: list, out: str) -> None:
    """``out``.png: every repetition's seconds, on and off, per job and rank count."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(jobs), figsize=(4 * len(jobs), 4), squeeze=False)
        for ax, j in zip(axes[0], jobs):
            for k, (n, r) in enumerate(results.items()):
                rj = r[j]
                ax.scatter([k - 0.1] * len(rj["off"]), rj["off"], marker="o",
                           color="tab:blue", label="off" if k == 0 else None)
                ax.scatter([k + 0.1] * len(rj["on"]), rj["on"], marker="x",
                           color="tab:red", label="on" if k == 0 else None)
                s = rj["summary"]
                ax.annotate(f"self {100 * s['self_overhead_median']:.2f} %",
                            (k, max(rj["on"] + rj["off"])), ha="center", fontsize=7)
            ax.set_xticks(range(len(results)), [f"{n} ranks" for n in results])
            ax.set_ylabel("job seconds (slowest rank)")
            ax.set_title(f"{j}: monitor on vs off")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=110)
    except ImportError:
        pass


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    results = {}
    load = os.getloadavg()
    for n in (int(x) for x in args.nprocs.split(",")):
        r = launch_workers(n, args)
        for j, rj in r.items():
            rj["summary"] = s = summarize(rj)
            print_summary(n, j, s)
        results[n] = r
    out = {"benchmark": "monitor_overhead", "budget": 0.01, "args": vars(args),
           "host": os.uname().nodename, "loadavg_before": load,
           "loadavg_after": os.getloadavg(), "results": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    plot(results, args.jobs.split(","), args.out)
    print(f"wrote {args.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
