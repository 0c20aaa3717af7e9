"""The farm adapts to an emulated slow link: per-worker round-trip forecasts size each
worker's pipeline.

    python benchmarks/farm_slow_link.py [--repeats 3] [--latency 0.01] [--tasks 3000]

4 ranks (master + 3 workers), tasks of 1 ms (sleep, so the 2 cores are not the limit).
The link master-worker 1 delivers every message ``--latency`` seconds late in each
direction (``PYFW_EMULATE_LINKS``, delivery-delay shaping: nobody blocks, as on a real
long-haul link). Compared in one run:

* no emulation, pyfw default;
* slow link, one chunk in flight (``pipeline_depth=1``, ss): the classic self-scheduler;
* slow link, pyfw default pipelining with policy ss (one task per message), so only the
  depth can compensate;
* slow link, pyfw fully default (adaptive chunking + pipelining);
* slow link, pyfw default with forecasts replaced by the global minimum round trip
  (``--no-forecast`` arm), to isolate what the per-link forecast buys.

Reports makespan vs the ideal (tasks x 1 ms / 3 workers), tasks done by the worker behind
the slow link, and the forecast round trip per worker. Writes
benchmarks/results/farm_slow_link.json and .png.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = os.path.join(HERE, "results")
#: where this run writes (main sets it): PUBLISHED with --publish, else --out DIR or
#: PUBLISHED/local
RESULTS = os.path.join(PUBLISHED, "local")

TASK_S = 1e-3


def sleep_task(x):
    time.sleep(TASK_S)
    return x


def child(args) -> None:
    from mpi4py import MPI

    from pyfw import Farm
    from pyfw.farm.policies import Pipeline

    comm = MPI.COMM_WORLD
    opts = json.loads(args.child)
    kwargs = {"policy": opts.get("policy", "adaptive"),
              "pipeline_depth": opts.get("depth")}
    out = None
    with Farm(comm, **kwargs) as farm:
        if farm.is_master:
            if opts.get("no_forecast"):
                farm.engine.pipeline.rtt_of = lambda rank, p=farm.engine.pipeline: p.rtt
            t0 = time.perf_counter()
            for _ in farm.map(sleep_task, range(args.tasks)):
                pass
            span = time.perf_counter() - t0
            st = farm.stats()
            out = {"makespan_s": span,
                   "tasks_per_worker": {w["rank"]: w["tasks"] for w in st["workers"]},
                   "links": st["pipeline"]["links"], "rtt_min_s": st["pipeline"]["rtt_s"]}
    if out is not None:
        with open(args.child_out, "w") as fh:
            json.dump(out, fh)
    _ = Pipeline  # imported to fail early if the farm API changes


def run_arm(label, opts, latency, args):
    from pyfw import launch
    env = dict(os.environ)
    if latency:
        env["PYFW_EMULATE_LINKS"] = f"0-1:{latency}"
    else:
        env.pop("PYFW_EMULATE_LINKS", None)
    out = os.path.join(RESULTS, ".farm_slow_link.tmp.json")
    samples = []
    for _ in range(args.repeats):
        res = launch.run(4, [sys.executable, os.path.abspath(__file__), "--child",
                             json.dumps(opts), "--child-out", out, "--tasks", str(args.tasks)],
                         timeout=600, capture=True, env=env)
        if res.returncode != 0:
            raise SystemExit(f"{label} failed:\n{res.stdout}\n{res.stderr}")
        with open(out) as fh:
            samples.append(json.load(fh))
        os.remove(out)
    spans = [s["makespan_s"] for s in samples]
    mid = samples[spans.index(statistics.median(spans))] if len(spans) % 2 else samples[0]
    return {"label": label, "latency_s": latency, "options": opts,
            "makespan": {"median": statistics.median(spans), "min": min(spans),
                         "max": max(spans), "samples": spans},
            "tasks_per_worker": mid["tasks_per_worker"], "links": mid["links"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--child")
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    add_output_options(parser, PUBLISHED)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    global RESULTS
    RESULTS = output_dir(args)
    os.makedirs(RESULTS, exist_ok=True)
    lat = args.latency
    arms = [("no emulation, pyfw default", {}, 0.0),
            ("slow link, 1 in flight (ss)", {"policy": "ss", "depth": 1}, lat),
            ("slow link, pyfw pipelining (ss)", {"policy": "ss"}, lat),
            ("slow link, pyfw pipelining (ss), no per-link forecast",
             {"policy": "ss", "no_forecast": True}, lat),
            ("slow link, pyfw default", {}, lat)]
    ideal = args.tasks * TASK_S / 3
    rows = [run_arm(label, opts, latency, args) for label, opts, latency in arms]
    for r in rows:
        r["ratio_to_ideal"] = r["makespan"]["median"] / ideal
        print(f"{r['label']:<55} {r['makespan']['median']:7.3f} s "
              f"({r['makespan']['min']:.3f}-{r['makespan']['max']:.3f})  "
              f"x{r['ratio_to_ideal']:.2f} ideal  tasks/worker {r['tasks_per_worker']}  "
              f"rtt forecasts { {k: round(v['rtt_s'] * 1e3, 2) for k, v in r['links'].items()} } ms")
    data = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "repeats": args.repeats,
                     "tasks": args.tasks, "task_s": TASK_S, "latency_s": lat,
                     "ideal_s": ideal}, "arms": rows}
    with open(os.path.join(RESULTS, "farm_slow_link.json"), "w") as fh:
        json.dump(data, fh, indent=1)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.8))
    labels = [r["label"] for r in rows]
    med = [r["ratio_to_ideal"] for r in rows]
    ax.barh(labels, med, color=["tab:gray" if "1 in flight" in l else "tab:blue" for l in labels])
    ax.axvline(1.0, color="k", lw=1)
    ax.set_xlabel("makespan / ideal (median)")
    ax.set_title(f"{args.tasks} x 1 ms tasks, 3 workers, link to worker 1 +{lat * 1e3:g} ms "
                 f"each way")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "farm_slow_link.png"), dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
