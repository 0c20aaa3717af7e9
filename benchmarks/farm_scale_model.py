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

5. **Fitted to the scale benchmark** (``--scale farm_scale.json [...]``, issue 41): from the
   per-role CPU seconds per task that ``benchmarks/farm_scale.py`` measured at 16-256 ranks,
   each role's cost is fitted per mode (flat, each node block size) and task duration as
   ``c(P) = a + b P`` (P ranks sharing the
   cores: a rank woken from a sleep finds its caches cold, more so the more ranks there
   are). A map of N tasks of ``tau`` on P ranks then runs at
   ``rate = min(W / tau_eff, cores / sum_roles c(P), 1 / c_master(P))``
   (``tau_eff``: what ``time.sleep(tau)`` really lasts here while P - 1 plain processes
   sleep alike on the same cores, measured by this script; ``W`` the ranks that compute:
   P - 1, less what the sub-masters do not compute while they schedule, their measured
   share of a worker's tasks fitted per block size and task duration), makespan
   ``N / rate + tau_eff``; checked against every run (measured / predicted). For a cluster
   (one rank per core: no shared cores, no cold caches from oversubscription) the costs at
   two ranks per core, ``c(cores)``, give the 1,024-worker figure, and ``c(16)`` (the
   least oversubscribed run) its pessimistic end: the error band. Writes
   ``farm_scale_fit.json``.
"""
from __future__ import annotations

import argparse
import json
import math
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


# ----------------------------------------------------------------------------- scale fit
ROLES = ("master", "submasters", "workers")


def plain_sleepers(tau: float, procs: int = 1, seconds: float = 1.0) -> dict:
    """``procs`` plain processes (no MPI, no pyfw) that ``time.sleep(tau)`` in a loop on the
    shared cores, all at once: the median over them of their loop time per sleep
    (``wall_s``: wake-ups wait for a core; the floor a farm's sleep task has) and of their
    CPU time per sleep (``cpu_s``: what a wake-up costs here, before any messaging)."""
    import subprocess
    n = max(3, int(seconds / tau))
    code = (f"import sys, time\nsys.stdin.read(1)\nt0 = time.perf_counter()\n"
            f"c0 = time.process_time()\n"
            f"for _ in range({n}): time.sleep({tau!r})\n"
            f"print((time.perf_counter() - t0) / {n}, (time.process_time() - c0) / {n})\n")
    kids = [subprocess.Popen([sys.executable, "-S", "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    time.sleep(min(10.0, 0.5 + 0.02 * procs))     # every interpreter up and waiting
    for k in kids:
        k.stdin.write("x")
        k.stdin.flush()
    got = [tuple(map(float, k.communicate()[0].split())) for k in kids]
    return {"wall_s": statistics.median(g[0] for g in got),
            "cpu_s": statistics.median(g[1] for g in got)}


def sleep_overshoot(tau: float, procs: int = 1, seconds: float = 1.0) -> float:
    """How long a task of ``time.sleep(tau)`` lasts here while ``procs`` plain processes
    sleep the same way (:func:`plain_sleepers`)."""
    return plain_sleepers(tau, procs, seconds)["wall_s"]


def _block(mode: str) -> int:
    """Ranks per node block of a scale-benchmark mode (``node32``, ``node32:again``: 32); 0
    for flat and for ``node`` (the real split: one block per host)."""
    from farm_scale import parse_mode          # the benchmark's own reading of its modes
    return parse_mode(mode)[1] or 0


def _family(mode: str) -> str:
    """What a mode's costs are fitted with: the mode itself, each node block size and each
    set of options apart (``node16`` from ``node32``, ``flat:again`` from ``flat``). A block
    size sets how many sub-masters route how many tasks, so its per-role costs are its own:
    fitted as one family, node16 and node32 at 256 ranks read 0.89 and 1.17 on the same
    run's 1 ms maps, the line passing between them."""
    from farm_scale import parse_mode
    parse_mode(mode)                            # an unknown mode stops here
    return mode


def _plain(row, kind: str) -> bool:
    """A row of a plain ``kind`` mode (flat or node of any block size, no options)."""
    from farm_scale import parse_mode
    return ":" not in row["mode"] and parse_mode(row["mode"])[0] == kind


def scale_runs(paths) -> list[dict]:
    """Every map of the scale benchmark's results files, flattened."""
    rows = []
    for path in paths:
        with open(path) as fh:
            d = json.load(fh)
        for r in d["results"]:
            if r["mode"].partition(":")[0] == "floor":
                continue          # forked sleepers, no farm: the box's limit, not modelled
            for ph in r["phases"]:
                p, k = r["ranks"], _block(r["mode"])
                routed = ph["tasks"] * (p - k) / (p - 1) if k else 0
                rows.append({"ranks": p, "mode": r["mode"], "family": _family(r["mode"]),
                             "sub_share": _sub_share(ph),
                             "task_s": ph["task_s"], "tasks": ph["tasks"], "wall_s": ph["wall_s"],
                             "ideal_s": ph["ideal_s"],
                             "c": {k: v / ph["tasks"] for k, v in ph["cpu_s"].items()},
                             "c_sub_routed": ph["cpu_s"]["submasters"] / routed if routed
                             else 0.0})
    return rows


def _sub_share(ph) -> float | None:
    """How much of a worker's share of tasks a sub-master ran itself in this map (None: no
    sub-master, or a results file from before farm_scale.py counted tasks by role)."""
    ran, count = ph.get("tasks_by_role"), ph.get("ranks_by_role", {})
    if not ran or not count.get("submasters") or not count.get("workers"):
        return None
    per_worker = ran["workers"] / count["workers"]
    return (ran["submasters"] / count["submasters"]) / per_worker if per_worker else None


def sub_shares(rows) -> dict:
    """Per (mode, task duration): the mean share a sub-master computes (see _sub_share) over
    the sizes run; a sub-master that schedules its node computes less than a worker, so a
    node of k ranks computes like k - 1 + share workers."""
    acc: dict = {}
    for r in rows:
        if r["sub_share"] is not None:
            acc.setdefault(f"{r['mode']}/{r['task_s']:g}", []).append(r["sub_share"])
    return {k: statistics.mean(v) for k, v in acc.items()}


def compute_ranks(shares, mode, tau, ranks) -> float:
    """Ranks that compute in a map: every rank but the master, a sub-master counted at its
    fitted share (1 without a fit)."""
    k = _block(mode)
    subs = max(0, ranks // k - 1) if k else 0
    share = shares.get(f"{mode}/{tau:g}", 1.0)
    return ranks - 1 - subs * (1.0 - share)


def fit_scale(rows) -> dict:
    """Per (family, task duration, role): ``c(P) = a + b P`` by least squares over the
    sizes run (one size: b = 0)."""
    import numpy as np
    fits = {}
    keys = sorted({(r["family"], r["task_s"]) for r in rows})
    for fam, tau in keys:
        sel = [r for r in rows if r["family"] == fam and r["task_s"] == tau]
        ps = np.array([r["ranks"] for r in sel], dtype=float)
        for role in ROLES:
            cs = np.array([r["c"][role] for r in sel])
            if len(set(ps)) > 1:
                b, a = np.polyfit(ps, cs, 1)
            else:
                a, b = float(cs.mean()), 0.0
            fits[f"{fam}/{tau:g}/{role}"] = {"a_s": float(a), "b_s": float(b)}
    return fits


def cost(fits, fam, tau, role, ranks) -> float:
    f = fits[f"{fam}/{tau:g}/{role}"]
    return max(0.0, f["a_s"] + f["b_s"] * ranks)


def predict_scale(fits, fam, tau, ranks, tasks, cores, tau_eff, computing=None) -> dict:
    """Makespan of ``tasks`` sleep tasks of ``tau`` on ``ranks`` ranks of one box
    (``computing``: the ranks that compute, see :func:`compute_ranks`; all but the master
    by default)."""
    c = {role: cost(fits, fam, tau, role, ranks) for role in ROLES}
    computing = ranks - 1 if computing is None else computing
    limits = {"workers": computing / tau_eff,
              "cores": cores / max(sum(c.values()), 1e-12),
              "master": 1.0 / max(c["master"], 1e-12)}
    bound = min(limits, key=limits.get)
    rate = limits[bound]
    return {"rate": rate, "bound": bound, "makespan_s": tasks / rate + tau_eff, "c": c}


def cluster_figure(run_flat, run_node, tau_eff, workers, per_node) -> dict:
    """Flat and two-level tasks/s for ``workers`` (``per_node`` a node) on a cluster, from
    the per-role CPU per task one size measured here (``run_flat``, ``run_node``: rows of
    :func:`scale_runs`). Flat: the master serves every task, ``1 / c_master``. Two-level:
    the master's cost per task in node mode (measured with direct workers beside the
    sub-masters: pessimistic), and each sub-master, on a core of its own, routes at most
    ``1 / c_sub`` tasks/s (``c_sub``: its CPU per task it routes); the master's own node is
    served directly."""
    flat = min(workers / tau_eff, 1.0 / run_flat["c"]["master"])
    nodes = workers // per_node
    c_sub, c_top = run_node["c_sub_routed"], run_node["c"]["master"]
    two = min(workers / tau_eff, 1.0 / c_top if c_top > 0 else math.inf,
              (nodes - 1) / c_sub + (per_node - 1) / tau_eff if c_sub > 0 else math.inf)
    return {"ranks_measured": run_flat["ranks"], "node_mode": run_node["mode"],
            "flat_tasks_per_s": flat, "two_level_tasks_per_s": two, "ratio": two / flat,
            "c_master_flat_us": 1e6 * run_flat["c"]["master"],
            "c_master_node_us": 1e6 * c_top, "c_sub_routed_us": 1e6 * c_sub}


def scale_main(paths, cores) -> dict:
    rows = scale_runs(paths)
    fits = fit_scale(rows)
    shares = sub_shares(rows)
    taus = sorted({r["task_s"] for r in rows})
    eff = {tau: sleep_overshoot(tau) for tau in taus}          # one sleeper: a cluster
    sleepers = {(tau, p): plain_sleepers(tau, p - 1) for tau in taus
                for p in sorted({r["ranks"] for r in rows})}   # P - 1 sleepers on this box
    floor = {k: v["wall_s"] for k, v in sleepers.items()}
    checks = []
    for r in rows:
        p = predict_scale(fits, r["family"], r["task_s"], r["ranks"], r["tasks"], cores,
                          floor[r["task_s"], r["ranks"]],
                          compute_ranks(shares, r["mode"], r["task_s"], r["ranks"]))
        checks.append({"ranks": r["ranks"], "mode": r["mode"], "task_s": r["task_s"],
                       "measured_s": r["wall_s"], "predicted_s": p["makespan_s"],
                       "measured_over_predicted": r["wall_s"] / p["makespan_s"],
                       "bound": p["bound"]})
    cluster = {}
    for tau in taus:
        figures = []
        for ranks in sorted({r["ranks"] for r in rows}):
            here = [r for r in rows if r["task_s"] == tau and r["ranks"] == ranks]
            flat = [r for r in here if _plain(r, "flat")]
            node = sorted((r for r in here if _plain(r, "node")),
                          key=lambda r: -_block(r["mode"]))   # largest blocks
            if flat and node:
                figures.append(cluster_figure(flat[0], node[0], eff[tau], 1024, PER_NODE))
        if figures:
            ratios = [f["ratio"] for f in figures]
            cluster[f"{tau:g}"] = {"ratio_min": min(ratios), "ratio_max": max(ratios),
                                   "by_size": figures}
    return {"fits": fits, "sub_shares": shares,
            "tau_eff_s": {f"{t:g}": v for t, v in eff.items()},
            "tau_eff_shared_s": {f"{t:g}@{p}": v for (t, p), v in floor.items()},
            # what a plain process's time.sleep(tau) costs in CPU beside P - 1 others: the
            # floor under the workers' CPU per task
            "sleep_cpu_shared_s": {f"{t:g}@{p}": v["cpu_s"] for (t, p), v in sleepers.items()},
            "checks": checks, "cluster_1024": cluster, "sources": list(paths)}


def print_scale(d) -> None:
    print("| ranks | mode | task | measured s | predicted s | measured/predicted | bound |")
    print("|---|---|---|---|---|---|---|")
    for c in d["checks"]:
        print(f"| {c['ranks']} | {c['mode']} | {c['task_s'] * 1e3:g} ms | {c['measured_s']:.2f} "
              f"| {c['predicted_s']:.2f} | {c['measured_over_predicted']:.2f} | {c['bound']} |")
    print("\n| task | costs measured at | c_master flat us | c_master node us | c_sub per routed "
          "task us | flat tasks/s | two-level tasks/s | two-level / flat |")
    print("|---|---|---|---|---|---|---|---|")
    for tau, v in d["cluster_1024"].items():
        for f in v["by_size"]:
            print(f"| {float(tau) * 1e3:g} ms | {f['ranks_measured']} ranks ({f['node_mode']}) | "
                  f"{f['c_master_flat_us']:.1f} | {f['c_master_node_us']:.1f} | "
                  f"{f['c_sub_routed_us']:.1f} | {f['flat_tasks_per_s']:,.0f} | "
                  f"{f['two_level_tasks_per_s']:,.0f} | {f['ratio']:.1f} |")
        print(f"1,024 workers, {float(tau) * 1e3:g} ms tasks: two-level/flat "
              f"{v['ratio_min']:.1f}x .. {v['ratio_max']:.1f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-ranks", type=int, default=16)
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--scale", nargs="+", metavar="JSON",
                    help="fit the model to farm_scale.py results instead (issue 41)")
    add_output_options(ap, PUBLISHED)
    a = ap.parse_args(argv)
    if a.scale:
        from pyfw.monitor.results import write_json
        d = scale_main(a.scale, os.cpu_count() or 1)
        print_scale(d)
        write_json(output_dir(a), "farm_scale_fit.json", d)
        return 0
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
