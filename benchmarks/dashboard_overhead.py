"""Benchmark: overhead of the live dashboard on a farm job (goal <= 1 % of run time).

    flock /tmp/pyfw-bench.lock python benchmarks/dashboard_overhead.py [--reps 5] [-n 3]

Each repetition launches the same farm job twice under ``pyfw-run``: ``off`` (no
dashboard) and ``on`` (``Farm(dashboard=...)`` serving on a local port while a client polls
it every second exactly as the page does -- ``/api/state?since=SEQ`` -- and also scrapes
``/metrics`` every second, 15x more often than Prometheus' default). The order alternates
every repetition (ABBA) so drift in the machine's load cancels. The job runs two
workloads back to back:

* ``fine``: ``--fine-tasks`` tasks of ``--fine-us`` µs of busy work (the master's loop
  turns fastest here, so the per-step observer hook costs most);
* ``coarse``: ``--coarse-tasks`` tasks of ``--coarse-ms`` ms.

Reported per workload: median and min-max wall time of each variant, the A/B overhead
``median(on) / median(off) - 1``, the median of the per-repetition paired ratios, and the
**self-measured** overhead of the ``on`` runs: seconds the job's thread spent building and
publishing snapshots plus seconds the server thread spent answering (each holds the GIL the
master needs), over the job's wall time -- the figure the noise of a shared 2-core box does
not drown. Writes ``benchmarks/results/dashboard_overhead.json`` and ``.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from pyfw.monitor.results import add_output_options, machine, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def busy(us):
    from pyfw.monitor.emulate import spin_cpu
    spin_cpu(us * 1e-6)
    return us


# ------------------------------------------------------------------------------ the job
def _timed(hub, spent):
    """Wrap the hub's readers so the seconds the server thread spends in them are summed."""
    for name in ("state", "metrics"):
        inner = getattr(hub, name)

        def timed(*a, _inner=inner, **k):
            t0 = time.perf_counter()
            try:
                return _inner(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0
        setattr(hub, name, timed)


def job(args) -> None:
    from mpi4py import MPI

    from pyfw import Farm
    from pyfw.dashboard import Dashboard
    comm = MPI.COMM_WORLD
    hub, served = None, [0.0]
    if args.variant == "on" and comm.rank == 0:
        hub = Dashboard(args.port, stream=open(os.devnull, "w"))
        _timed(hub, served)
    out = {}
    for name, n, us in (("fine", args.fine_tasks, args.fine_us),
                        ("coarse", args.coarse_tasks, args.coarse_ms * 1e3)):
        comm.Barrier()
        served[0] = 0.0
        with Farm(comm, dashboard=hub if hub is not None else False) as farm:
            if farm.is_master:
                t0 = time.perf_counter()
                sum(farm.map(busy, [us] * n))
                wall = time.perf_counter() - t0
                ticker = farm._ticker
                out[name] = {"wall_s": wall, "publish_s": ticker.seconds if ticker else 0.0,
                             "serve_s": served[0]}
    if comm.rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------ driver
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Poller(threading.Thread):
    """A client like the page: api/state?since=SEQ every second, plus /metrics."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.base = f"http://127.0.0.1:{port}/"
        self.stop = threading.Event()
        self.ok = 0

    def run(self):
        seq = -1
        while not self.stop.wait(1.0):
            try:
                with urllib.request.urlopen(f"{self.base}api/state?since={seq}", timeout=5) as r:
                    seq = json.load(r)["seq"]
                with urllib.request.urlopen(self.base + "metrics", timeout=5) as r:
                    r.read()
                self.ok += 1
            except OSError:
                pass   # not up yet, or between workloads


def launch(args, variant: str) -> dict:
    port = free_port()
    cmd = [sys.executable, "-m", "pyfw.launch", "-n", str(args.nprocs), "--timeout", "600",
           "--", sys.executable, os.path.abspath(__file__), "--job", variant,
           "--port", str(port), "--fine-tasks", str(args.fine_tasks),
           "--fine-us", str(args.fine_us), "--coarse-tasks", str(args.coarse_tasks),
           "--coarse-ms", str(args.coarse_ms)]
    poller = Poller(port) if variant == "on" else None
    if poller:
        poller.start()
    env = dict(os.environ)
    env.pop("PYFW_DASHBOARD", None)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if poller:
        poller.stop.set()
        poller.join()
    line = next((x for x in res.stdout.splitlines() if x.startswith("RESULT ")), None)
    if res.returncode != 0 or line is None:
        raise SystemExit(f"job failed ({res.returncode}):\n{res.stderr[-3000:]}")
    out = json.loads(line[7:])
    out["polls"] = poller.ok if poller else 0
    return out


def summarise(runs: list[dict], names) -> dict:
    import statistics as st
    out = {}
    for name in names:
        on = [r["on"][name]["wall_s"] for r in runs]
        off = [r["off"][name]["wall_s"] for r in runs]
        self_frac = [(r["on"][name]["publish_s"] + r["on"][name]["serve_s"])
                     / r["on"][name]["wall_s"] for r in runs]
        out[name] = {
            "on_median_s": st.median(on), "on_min_s": min(on), "on_max_s": max(on),
            "off_median_s": st.median(off), "off_min_s": min(off), "off_max_s": max(off),
            "overhead_ab": st.median(on) / st.median(off) - 1,
            "overhead_paired_median": st.median(a / b - 1 for a, b in zip(on, off)),
            "self_measured_fraction_median": st.median(self_frac),
            "self_measured_fraction_max": max(self_frac),
            "publish_s_median": st.median(r["on"][name]["publish_s"] for r in runs),
            "serve_s_median": st.median(r["on"][name]["serve_s"] for r in runs)}
    return out


def plot(summary: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(summary)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for k, (key, label) in enumerate((("overhead_ab", "A/B: median(on)/median(off) - 1"),
                                      ("overhead_paired_median", "paired ratios, median"),
                                      ("self_measured_fraction_median",
                                       "self-measured (publish + serve) / wall"))):
        ax.bar([i + 0.27 * (k - 1) for i in range(len(names))],
               [100 * summary[n][key] for n in names], width=0.27, label=label)
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="goal: 1 %")
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xticks(range(len(names)), [f"{n} tasks" for n in names])
    ax.set_ylabel("overhead, % of run time")
    ax.set_title("Dashboard on (polled every second) vs off")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("-n", "--nprocs", type=int, default=3)
    p.add_argument("--fine-tasks", type=int, default=100_000)
    p.add_argument("--fine-us", type=float, default=50.0)
    p.add_argument("--coarse-tasks", type=int, default=2000)
    p.add_argument("--coarse-ms", type=float, default=4.0)
    p.add_argument("--job", choices=("on", "off"), dest="variant", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    add_output_options(p, RESULTS)
    args = p.parse_args()
    if args.variant:
        job(args)
        return
    out = output_dir(args)
    load_before = os.getloadavg()
    runs = []
    for rep in range(args.reps):
        order = ("off", "on") if rep % 2 == 0 else ("on", "off")
        run = {v: launch(args, v) for v in order}
        runs.append(run)
        print(f"rep {rep}: " + ", ".join(f"{v} {n} {run[v][n]['wall_s']:.3f} s"
                                         for v in order for n in ("fine", "coarse")),
              flush=True)
    summary = summarise(runs, ("fine", "coarse"))
    result = {"machine": machine(), "benchmark": "dashboard_overhead", "nprocs": args.nprocs, "reps": args.reps,
              "workloads": {"fine": {"tasks": args.fine_tasks, "task_us": args.fine_us},
                            "coarse": {"tasks": args.coarse_tasks,
                                       "task_ms": args.coarse_ms}},
              "poll_interval_s": 1.0, "load_before": load_before,
              "load_after": os.getloadavg(), "summary": summary, "runs": runs}
    with open(os.path.join(out, "dashboard_overhead.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    plot(summary, os.path.join(out, "dashboard_overhead.png"))
    print(f"wrote {out}/dashboard_overhead.json and .png")
    for name, s in summary.items():
        print(f"{name}: off {s['off_median_s']:.3f} s [{s['off_min_s']:.3f}-"
              f"{s['off_max_s']:.3f}], on {s['on_median_s']:.3f} s [{s['on_min_s']:.3f}-"
              f"{s['on_max_s']:.3f}]; A/B {100 * s['overhead_ab']:+.2f} %, paired "
              f"{100 * s['overhead_paired_median']:+.2f} %, self-measured "
              f"{100 * s['self_measured_fraction_median']:.3f} %")


if __name__ == "__main__":
    main()
