"""How far one master goes, and what the two-level farm buys: a scaling model built from
costs measured here, checked against every configuration this machine can run.

    python benchmarks/farm_scale_model.py [--repeats 3] [--max-ranks 16]

1. **Measured costs** (flat farm, 2 ranks, empty tasks, fixed chunk sizes 1 .. 1024; for
   the predictions over TCP between two test-bed nodes when the test bed is available, as a
   cluster's master talks to its workers over the network; on shared memory for the checks):
   the master's CPU seconds per chunk (``c_msg``: a send, a receive, the bookkeeping) and
   per task (``c_task``: reading, pickling, delivering one result), fitted as
   ``cpu = c_msg * chunks + c_task * tasks``; a worker's cost per task and per chunk the same
   way; and the start-up (``Farm()`` to the first result).
2. **Model.** A master that spends ``c_msg + k c_task`` per chunk of ``k`` tasks serves at
   most ``k / (c_msg + k c_task)`` tasks/s. The default policy sizes chunks to last
   ``target`` = 2 ms of a worker's time, so ``k = max(1, target / tau)``. Flat, W workers of
   tasks lasting ``tau``: ``rate = min(W / tau_w, cap(k))`` with ``tau_w = tau + w_task +
   w_msg / k``. Two-level, S nodes of w workers: the master sees S workers whose task time is
   ``tau_w / w`` (chunks ``k_top = max(1, target w / tau_w)``); each sub-master is a flat
   master of w workers; ``rate = min(W / tau_w, cap_top(k_top), S * cap(k))``. Makespan of N
   tasks: ``startup + N / rate``.
3. **Checked** against flat farms of 2 .. ``--max-ranks`` ranks on this 2-core machine, with
   empty tasks (CPU-bound: the model is told the master gets ``cores / busy ranks`` of a
   core) and 1 ms sleeping tasks, and two-level farms forced with ``PYFW_FARM_NODE_SIZE``.
4. **Predicted** for 64 .. 4,096 workers (32 per node), 1 ms tasks: flat vs two-level rate,
   the crossover, and the ratio at 1,024 workers.

Writes ``benchmarks/results/farm_scale_model.json`` and ``.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = os.path.join(HERE, "results")
#: where this run writes (main sets it): PUBLISHED with --publish, else --out DIR or
#: PUBLISHED/local
RESULTS = os.path.join(PUBLISHED, "local")

TARGET = 2e-3            # the adaptive policy's chunk duration floor (pyfw.farm.policies)
PER_NODE = 32            # workers per node in the predictions


def empty(x):
    return x


def sleep_1ms(x):
    time.sleep(1e-3)
    return x


# ----------------------------------------------------------------------------- child job
def child(out, kind, tasks, chunk, hierarchy):
    from mpi4py import MPI

    from pyfw import Farm
    fn = empty if kind == "empty" else sleep_1ms
    t0 = time.perf_counter()
    with Farm(MPI.COMM_WORLD, hierarchy=hierarchy) as farm:
        if not farm.is_master:
            return
        next(iter(farm.map(fn, [0])))
        startup = time.perf_counter() - t0
        cpu0 = time.process_time()
        t1 = time.perf_counter()
        n = 0
        for _ in farm.map(fn, range(tasks), chunksize=chunk or None):
            n += 1
        wall = time.perf_counter() - t1
        cpu = time.process_time() - cpu0
        st = farm.stats()
    rows = [w for w in st["workers"] if w.get("role") != "submaster"]
    with open(out, "w") as fh:
        json.dump({"wall_s": wall, "master_cpu_s": cpu, "tasks": n, "startup_s": startup,
                   "chunks": sum(w["chunks"] for w in st["workers"]),
                   "worker_busy_s": sum(w["busy_s"] for w in rows),
                   "worker_chunks": sum(w["chunks"] for w in rows),
                   "worker_tasks": sum(w["tasks"] for w in rows)}, fh)


def run(ranks, kind, tasks, chunk=0, hierarchy="flat", node_size=None, bed=None):
    from pyfw.launch import run as launch
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    env = dict(os.environ)
    if node_size:
        env["PYFW_FARM_NODE_SIZE"] = str(node_size)
    extra = None
    if bed is not None:   # across test-bed nodes: every message crosses TCP
        from pyfw.testbed.agent import launch_options
        extra = launch_options(bed)
    try:
        res = launch(ranks, [sys.executable, os.path.abspath(__file__), "--child", out, kind,
                             str(tasks), str(chunk), hierarchy], timeout=300, capture=True,
                     env=env, extra=extra)
        if res.returncode != 0:
            raise RuntimeError(res.stderr[-2000:])
        with open(out) as fh:
            return json.load(fh)
    finally:
        os.unlink(out)


def lstsq2(xs, ys, zs):
    """Fit z = a x + b y (two unknowns, least squares)."""
    import numpy as np
    a = np.array([xs, ys], dtype=float).T
    coef, *_ = np.linalg.lstsq(a, np.array(zs, dtype=float), rcond=None)
    return float(coef[0]), float(coef[1])


def measure_costs(repeats, bed=None):
    rows = []
    for chunk in (1, 4, 16, 64, 256, 1024):
        tasks = 4000 if chunk < 16 else 40000
        for _ in range(repeats):
            r = run(2, "empty", tasks, chunk, bed=bed)
            rows.append(dict(r, chunk=chunk))
    c_msg, c_task = lstsq2([r["chunks"] for r in rows], [r["tasks"] for r in rows],
                           [r["master_cpu_s"] for r in rows])
    w_msg, w_task = lstsq2([r["worker_chunks"] for r in rows],
                           [r["worker_tasks"] for r in rows], [r["worker_busy_s"] for r in rows])
    startup = statistics.median(r["startup_s"] for r in rows)
    return {"c_msg_s": max(c_msg, 0.0), "c_task_s": max(c_task, 0.0),
            "w_msg_s": max(w_msg, 0.0), "w_task_s": max(w_task, 0.0), "startup_s": startup,
            "runs": rows}


# ----------------------------------------------------------------------------- model
def cap(costs, k):
    """Tasks/s one master sustains at chunks of k tasks."""
    return k / (costs["c_msg_s"] + k * costs["c_task_s"])


def chunk_for(tau_w):
    return max(1.0, TARGET / tau_w) if tau_w > 0 else 1024.0


def tau_worker(costs, tau, k):
    return tau + costs["w_task_s"] + costs["w_msg_s"] / k


def flat_rate(costs, workers, tau, master_share=1.0):
    k = chunk_for(tau + costs["w_task_s"])
    tw = tau_worker(costs, tau, k)
    return min(workers / tw, master_share * cap(costs, k))


def two_level_rate(costs, workers, tau, per_node=PER_NODE, master_share=1.0):
    nodes = max(1, workers // per_node)
    w = workers / nodes
    k = chunk_for(tau + costs["w_task_s"])
    tw = tau_worker(costs, tau, k)
    k_top = chunk_for(tw / w)
    return min(workers / tw, master_share * cap(costs, k_top),
               nodes * master_share * cap(costs, k))


def predictions(costs):
    out = []
    for workers in (64, 128, 256, 512, 1024, 2048, 4096):
        f = flat_rate(costs, workers, 1e-3)
        t = two_level_rate(costs, workers, 1e-3)
        out.append({"workers": workers, "flat_tasks_per_s": f, "two_level_tasks_per_s": t,
                    "ideal_tasks_per_s": workers / 1e-3, "ratio": t / f,
                    "makespan_1e6_tasks_s": {"flat": costs["startup_s"] + 1e6 / f,
                                             "two_level": costs["startup_s"] + 1e6 / t}})
    crossover = next((p["workers"] for p in out if p["ratio"] > 1.05), None)
    return out, crossover


def check(costs, max_ranks, repeats, cores):
    """Measured vs predicted throughput on this machine."""
    out = []
    configs = [(p, kind, "flat", None) for p in (2, 4, 8, 16) if p <= max_ranks
               for kind in ("empty", "sleep")]
    configs += [(p, "sleep", "node", p // 2) for p in (8, 16) if p <= max_ranks]
    for ranks, kind, hierarchy, node_size in configs:
        tasks = 20000 if kind == "empty" else 3000
        got = [run(ranks, kind, tasks, 0, hierarchy, node_size) for _ in range(repeats)]
        rate = statistics.median(g["tasks"] / g["wall_s"] for g in got)
        workers = ranks - 1 - (1 if hierarchy == "node" else 0)
        tau = 0.0 if kind == "empty" else 1e-3
        # the model told of the oversubscription: CPU-bound ranks share the cores
        busy = ranks if kind == "empty" else 1 + (ranks - 1) * 0.1
        share = min(1.0, cores / busy)
        if kind == "empty":   # workers are CPU-bound too: each gets a share of a core
            wcap = workers * share / tau_worker(costs, 0.0, chunk_for(costs["w_task_s"]))
        else:
            wcap = float("inf")
        model = (flat_rate(costs, workers, tau, share) if hierarchy == "flat" else
                 two_level_rate(costs, workers, tau, ranks // 2 - 1, share))
        model = min(model, wcap)
        out.append({"ranks": ranks, "tasks": kind, "hierarchy": hierarchy,
                    "measured_tasks_per_s": rate, "predicted_tasks_per_s": model,
                    "measured_over_predicted": rate / model,
                    "spread": [min(g["tasks"] / g["wall_s"] for g in got),
                               max(g["tasks"] / g["wall_s"] for g in got)]})
        print(f"check {ranks:2d} ranks {kind:5s} {hierarchy:4s}: measured {rate:10.0f}/s "
              f"model {model:10.0f}/s ({rate / model:.2f})", flush=True)
    return out


def plot(d):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    p = d["predictions"]
    w = [x["workers"] for x in p]
    a.loglog(w, [x["flat_tasks_per_s"] for x in p], "o-", label="flat")
    a.loglog(w, [x["two_level_tasks_per_s"] for x in p], "s-", label="two-level")
    a.loglog(w, [x["ideal_tasks_per_s"] for x in p], "k:", label="ideal (W / 1 ms)")
    a.set_xlabel("workers (1 ms tasks)")
    a.set_ylabel("tasks / s")
    a.legend()
    a.set_title("model, from costs measured here")
    c = d["checks"]
    b.scatter([x["predicted_tasks_per_s"] for x in c], [x["measured_tasks_per_s"] for x in c])
    for x in c:
        b.annotate(f"{x['ranks']}{x['tasks'][0]}{x['hierarchy'][0]}",
                   (x["predicted_tasks_per_s"], x["measured_tasks_per_s"]), fontsize=7)
    lo = min(min(x["predicted_tasks_per_s"], x["measured_tasks_per_s"]) for x in c)
    hi = max(max(x["predicted_tasks_per_s"], x["measured_tasks_per_s"]) for x in c)
    b.loglog([lo, hi], [lo, hi], "k:")
    b.set_xlabel("predicted tasks/s")
    b.set_ylabel("measured tasks/s")
    b.set_title("checks on this machine (ranks, e/s task, f/n)")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "farm_scale_model.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-ranks", type=int, default=16)
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    add_output_options(ap, PUBLISHED)
    a = ap.parse_args(argv)
    if a.child:
        out, kind, tasks, chunk, hierarchy = a.child
        child(out, kind, int(tasks), int(chunk), hierarchy)
        return 0
    global RESULTS
    RESULTS = output_dir(a)
    cores = os.cpu_count() or 1
    costs = measure_costs(a.repeats)   # shared memory: for the checks on this machine
    print("shared memory:", {k: v for k, v in costs.items() if k != "runs"}, flush=True)
    model_costs, over = costs, "shared memory (no test bed here)"
    from pyfw.testbed.netns import refuse_reason
    if refuse_reason() is None:
        from pyfw.testbed import TestBed
        tb = TestBed("pfs")
        try:   # a cluster's master talks to its workers over the network: TCP costs
            model_costs = measure_costs(a.repeats, bed=tb.up(nodes=2, slots=1))
            over = "TCP between two test-bed nodes"
        finally:
            tb.down()
        print("TCP:", {k: v for k, v in model_costs.items() if k != "runs"}, flush=True)
    preds, crossover = predictions(model_costs)
    checks = check(costs, a.max_ranks, a.repeats, cores)
    at1024 = next(p for p in preds if p["workers"] == 1024)
    d = {"costs": costs, "model_costs": model_costs, "model_costs_over": over,
         "target_chunk_s": TARGET, "per_node": PER_NODE, "cores": cores,
         "predictions": preds, "crossover_workers": crossover,
         "ratio_at_1024": at1024["ratio"], "checks": checks}
    with open(os.path.join(RESULTS, "farm_scale_model.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    plot(d)
    for p in preds:
        print(f"{p['workers']:5d} workers: flat {p['flat_tasks_per_s']:10.0f}/s, two-level "
              f"{p['two_level_tasks_per_s']:10.0f}/s ({p['ratio']:.1f}x)")
    print(f"crossover at {crossover} workers; two-level / flat at 1,024: "
          f"{at1024['ratio']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
