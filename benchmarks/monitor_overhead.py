"""Benchmark: overhead of in-run probes (OnlineMonitor, budget 1 %) in an SPMD step loop.

    python benchmarks/monitor_overhead.py [--nprocs 2,4] [--reps 5] [--steps 400]

Each launch runs a domain-style loop: per step ``--work-ms`` of calibrated busy work
(:func:`pyfw.monitor.spin_work`) and a 64 KiB exchange with both ring neighbours through
:class:`pyfw.comm.Comm`. Variants ``off`` (no monitor) and ``on`` (``OnlineMonitor(comm,
budget=0.01)``, ``mon.step()`` every step) alternate ``--reps`` times in the same job; the loop
time is the slowest rank's. Also times one full :func:`probe_pairs` at the study sizes.

Reports, per rank count: median (min-max) loop seconds per variant, the overhead
``median(on) / median(off) - 1``, the monitor's self-measured fraction ``mon.overhead()``,
and the number of probe steps. Writes ``benchmarks/results/monitor_overhead.json`` + ``.png``.
(The farm-run overhead and the balancer-adapts demo need pyfw.farm / pyfw.domain.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def worker(args) -> None:
    from mpi4py import MPI

    from pyfw.comm import Comm
    from pyfw.monitor import OnlineMonitor, probe_pairs, spin_work
    comm = Comm(MPI.COMM_WORLD.Dup())
    p, me = comm.size, comm.rank
    sbuf = np.ones(65536, np.uint8)
    rbuf = np.zeros(65536, np.uint8)

    def loop(mon):
        comm.mpi.Barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            s0 = time.perf_counter()
            spin_work(args.work_ms * 1e3, rate=1e6)
            if p > 1:
                comm.Sendrecv(sbuf, (me + 1) % p, rbuf, (me - 1) % p)
                comm.Sendrecv(sbuf, (me - 1) % p, rbuf, (me + 1) % p)
            if mon is not None:
                mon.step(work=args.work_ms, seconds=time.perf_counter() - s0)
        el = time.perf_counter() - t0
        return comm.mpi.allreduce(el, op=MPI.MAX)

    loop(None)  # warm-up
    res = {"off": [], "on": [], "self_overhead": [], "probes": [], "every": []}
    for _ in range(args.reps):
        res["off"].append(loop(None))
        mon = OnlineMonitor(comm, budget=0.01)
        res["on"].append(loop(mon))
        res["self_overhead"].append(comm.mpi.allreduce(mon.overhead(), op=MPI.MAX))
        res["probes"].append(mon.probes)
        res["every"].append(mon.every)
    t0 = time.perf_counter()
    probe_pairs(comm)
    res["probe_pairs_s"] = comm.mpi.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    if me == 0:
        with open(args.worker, "w") as f:
            json.dump(res, f)
    comm.free()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nprocs", default="2,4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--work-ms", type=float, default=5.0)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "monitor_overhead"))
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    from pyfw.launch import run
    results = {}
    for n in (int(x) for x in args.nprocs.split(",")):
        tmp = f"{args.out}.tmp{n}.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", tmp, "--reps",
               str(args.reps), "--steps", str(args.steps), "--work-ms", str(args.work_ms)]
        res = run(n, cmd, timeout=900, capture=True)
        assert res.returncode == 0, res.stderr[-3000:]
        with open(tmp) as f:
            r = json.load(f)
        os.remove(tmp)
        off, on = np.median(r["off"]), np.median(r["on"])
        r["summary"] = {"off_median_s": off, "off_min_max": [min(r["off"]), max(r["off"])],
                        "on_median_s": on, "on_min_max": [min(r["on"]), max(r["on"])],
                        "overhead": on / off - 1,
                        "self_overhead_median": float(np.median(r["self_overhead"]))}
        results[n] = r
        s = r["summary"]
        print(f"{n} ranks: off {off:.3f} s ({s['off_min_max'][0]:.3f}-{s['off_min_max'][1]:.3f})"
              f"  on {on:.3f} s ({s['on_min_max'][0]:.3f}-{s['on_min_max'][1]:.3f})"
              f"  overhead {100 * s['overhead']:+.2f} %  self-measured "
              f"{100 * s['self_overhead_median']:.2f} %  probes {r['probes']}"
              f"  full probe_pairs {r['probe_pairs_s'] * 1e3:.1f} ms", flush=True)
    out = {"benchmark": "monitor_overhead", "steps": args.steps, "work_ms": args.work_ms,
           "reps": args.reps, "budget": 0.01, "host": os.uname().nodename,
           "results": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for k, (n, r) in enumerate(results.items()):
            ax.scatter([k - 0.1] * len(r["off"]), r["off"], marker="o", label=f"{n} off")
            ax.scatter([k + 0.1] * len(r["on"]), r["on"], marker="x", label=f"{n} on")
        ax.set_xticks(range(len(results)), [f"{n} ranks" for n in results])
        ax.set_ylabel("loop seconds (slowest rank)")
        ax.set_title("OnlineMonitor(budget=1 %) on vs off, each repetition")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out + ".png", dpi=110)
    except ImportError:
        pass
    print(f"wrote {args.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
