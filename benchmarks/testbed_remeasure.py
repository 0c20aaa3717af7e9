"""The uneven-cluster figures re-measured on the multi-node test bed (root), each beside its
peer in the same run.

    python benchmarks/testbed_remeasure.py [--repeats 3] [--only farm,coll,monitor,domain,pipeline]

Every part builds its own test bed (prefix ``pfb``, torn down afterwards, also when killed):
nodes are network namespaces with real Open MPI daemons, TCP between them, tc tbf caps on a
node's link (both ways) and a cgroup CPU quota on a slowed node (see ``pyfw-cluster status``
for the ground truth). Parts:

* ``farm``: makespan / ideal with node B's link capped (100 Mbit/s) and node C slowed 2x
  (1 rank per node: master on A, workers on B and C), 300 tasks of 4 ms CPU each returning
  50 kB: pyfw ``Farm.map`` vs ``mpi4py.futures`` (``python -m mpi4py.futures``, default
  ``chunksize=1``). Ideal = CPU work / (1 + 1/2) cores.
* ``coll``: per-call time of all-gather at 2 x 2 and 3 x 2 ranks: native ``Allgather``, pyfw's
  SMP-aware (``smp``), and the tuned dispatch (no table: native), 8 B .. 1 MiB per rank.
* ``monitor``: ``probe_pairs`` bandwidth of every link (3 nodes, B at 50 Mbit/s, C at
  200 Mbit/s) against the tc rate.
* ``domain``: the knee simulation on 2 nodes x 1 rank, node B slowed 2x: balanced slabs vs
  the even split (``--no-balance``); ideal speed-up 1.5.
* ``pipeline``: farm makespan of 1 ms tasks with worker B 10 ms away (one way; this kernel
  has no netem, so the test bed's delay is pyfw's in-process emulation over real TCP) and
  worker C near: automatic pipelining vs one chunk in flight (``pipeline_depth=1``).

Writes ``benchmarks/results/testbed_<part>.json`` + ``.png`` and the report
``benchmarks/results/testbed.md`` (regenerated from every JSON present).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
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
PREFIX = "pfb"

FARM_TASKS, FARM_CPU_S, FARM_PAYLOAD = 300, 4e-3, 50_000
PIPE_TASKS, PIPE_SLEEP_S, PIPE_PAYLOAD, PIPE_DELAY_S = 2000, 1e-3, 100, 0.01


# ----------------------------------------------------------------------------- child jobs
def farm_task(i):
    from pyfw.monitor.emulate import spin_cpu
    spin_cpu(FARM_CPU_S)           # CPU time: a slowed node's quota stretches it
    return i, bytes(FARM_PAYLOAD)


def pipe_task(i):
    time.sleep(PIPE_SLEEP_S)
    return i, bytes(PIPE_PAYLOAD)


def child_pyfw_farm(out, depth=None, kind="farm"):
    from mpi4py import MPI

    from pyfw import Farm
    fn, n = (farm_task, FARM_TASKS) if kind == "farm" else (pipe_task, PIPE_TASKS)
    with Farm(MPI.COMM_WORLD, pipeline_depth=depth) as f:
        if f.is_master:
            t0 = time.perf_counter()
            got = sorted(i for i, _ in f.map(fn, range(n)))
            span = time.perf_counter() - t0
            st = f.stats()
            assert got == list(range(n))
            with open(out, "w") as fh:
                json.dump({"makespan_s": span, "tasks": {w["host"]: w["tasks"]
                                                         for w in st["workers"]},
                           "pipeline": st["pipeline"]}, fh)


def child_mpi4py_farm(out):
    from mpi4py.futures import MPIPoolExecutor
    with MPIPoolExecutor() as ex:
        ex.submit(abs, 1).result()          # workers up, as pyfw's farm is at map()
        t0 = time.perf_counter()
        got = sorted(i for i, _ in ex.map(farm_task, range(FARM_TASKS)))
        span = time.perf_counter() - t0
    assert got == list(range(FARM_TASKS))
    with open(out, "w") as fh:
        json.dump({"makespan_s": span}, fh)


def child_coll(out, reps=5, iters=20):
    import numpy as np
    from mpi4py import MPI

    from pyfw import coll
    w = MPI.COMM_WORLD
    c = w.Dup()
    p = c.Get_size()
    res = {}
    for nbytes in (8, 1024, 65536, 1 << 20):
        n = nbytes // 8
        send = np.full(n, float(c.rank))
        recv = np.empty((p, n))
        calls = {"native": lambda: c.Allgather(send, recv),
                 "smp": lambda: coll.allgather(c, send, recv, algorithm="smp"),
                 "tuned": lambda: coll.allgather(c, send, recv)}
        times = {k: [] for k in calls}
        for _ in range(reps):
            for name, call in calls.items():
                call()
                c.Barrier()
                t0 = MPI.Wtime()
                for _ in range(iters):
                    call()
                dt = (MPI.Wtime() - t0) / iters
                times[name].append(c.allreduce(dt, op=MPI.MAX))
        res[nbytes] = times
    layout = coll.plan(c).layout
    coll.plan(c).free()
    c.Free()
    if w.rank == 0:
        with open(out, "w") as fh:
            json.dump({"times": res, "nodes": layout["nodes"], "ranks": p}, fh)


def child_monitor(out):
    import numpy as np
    from mpi4py import MPI

    from pyfw.monitor import probe_pairs
    m = probe_pairs(MPI.COMM_WORLD, sizes=(1024, 1 << 20), reps=5, timeout=60)
    if MPI.COMM_WORLD.rank == 0:
        with open(out, "w") as fh:
            json.dump({"bandwidth": np.nan_to_num(m.bandwidth).tolist(),
                       "alpha": np.nan_to_num(m.alpha).tolist()}, fh)


def empty_task(i):
    return i


def ms_task(i):
    time.sleep(1e-3)
    return i


def child_hier(out, kind, hierarchy):
    from mpi4py import MPI

    from pyfw import Farm
    fn, n = {"empty": (empty_task, 100_000), "1ms": (ms_task, 3000),
             "uneven": (farm_task, FARM_TASKS)}[kind]
    with Farm(MPI.COMM_WORLD, hierarchy=hierarchy) as f:
        if f.is_master:
            next(iter(f.map(fn, [0])))
            t0 = time.perf_counter()
            got = sorted(x if isinstance(x, int) else x[0] for x in f.map(fn, range(n)))
            span = time.perf_counter() - t0
            assert got == list(range(n))
            with open(out, "w") as fh:
                json.dump({"makespan_s": span, "tasks": n, "hierarchy": f.hierarchy}, fh)


CHILDREN = {"hier": child_hier, "pyfw_farm": child_pyfw_farm, "mpi4py_farm": child_mpi4py_farm,
            "coll": child_coll, "monitor": child_monitor}


# ----------------------------------------------------------------------------- driver
class Bed:
    """A test bed for one part, always torn down (also on SIGTERM/SIGINT)."""

    def __init__(self, **kw):
        from pyfw.testbed import TestBed
        self.tb, self.kw = TestBed(PREFIX), kw

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, f: (self.tb.down(), sys.exit(128 + s)))
        self.info = self.tb.up(**self.kw)
        return self.info

    def __exit__(self, *exc):
        self.tb.down()


def launch(info, argv, n=None, mpi4py_futures=False, timeout=300):
    from pyfw.launch import run
    from pyfw.testbed.agent import launch_options
    from pyfw.testbed.netns import job_env
    env = job_env(info, dict(os.environ))
    n = n or sum(node["slots"] for node in info["nodes"])
    cmd = [sys.executable] + (["-m", "mpi4py.futures"] if mpi4py_futures else []) + argv
    res = run(n, cmd, timeout=timeout, extra=launch_options(info), env=env, capture=True,
              cwd=ROOT)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return res


def child_json(info, mode, *args, mpi4py_futures=False, n=None):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    try:
        launch(info, [os.path.abspath(__file__), "--child", mode, out, *map(str, args)],
               n=n, mpi4py_futures=mpi4py_futures)
        with open(out) as fh:
            return json.load(fh)
    finally:
        os.unlink(out)


def spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def part_farm(repeats):
    ideal = FARM_TASKS * FARM_CPU_S / 1.5
    out = {"setup": "3 nodes x 1 rank: master A, workers B (100 Mbit/s) and C (CPU x1/2); "
                    f"{FARM_TASKS} tasks of {FARM_CPU_S * 1e3:g} ms CPU returning "
                    f"{FARM_PAYLOAD} B", "ideal_s": ideal}
    with Bed(nodes=3, slots=1, links={"B": "100mbit"}, slow={"C": 2}) as info:
        out["ground_truth"] = info
        runs = {"pyfw": [], "mpi4py.futures": []}
        tasks = []
        for _ in range(repeats):   # alternate the peers so drifting load hits both alike
            r = child_json(info, "pyfw_farm")
            runs["pyfw"].append(r["makespan_s"])
            tasks.append(r["tasks"])
            runs["mpi4py.futures"].append(
                child_json(info, "mpi4py_farm", mpi4py_futures=True)["makespan_s"])
    out["makespan_s"] = {k: spread(v) for k, v in runs.items()}
    out["over_ideal"] = {k: statistics.median(v) / ideal for k, v in runs.items()}
    out["pyfw_tasks_per_node"] = tasks
    return out


def part_coll(repeats):
    out = {"setup": "all-gather per call (max over ranks), 20 calls x 5 interleaved blocks",
           "layouts": {}}
    for nodes in (2, 3):
        with Bed(nodes=nodes, slots=2) as info:
            runs = [child_json(info, "coll") for _ in range(repeats)]
        table = {}
        for nbytes in runs[0]["times"]:
            med = {k: statistics.median(t for r in runs for t in r["times"][nbytes][k])
                   for k in runs[0]["times"][nbytes]}
            table[nbytes] = {"median_s": med, "smp_over_native": med["smp"] / med["native"],
                             "tuned_over_native": med["tuned"] / med["native"]}
        out["layouts"][f"{nodes}x2"] = table
    return out


def part_monitor(repeats):
    caps = {"B": "50mbit", "C": "200mbit"}
    with Bed(nodes=3, slots=1, links=caps) as info:
        runs = [child_json(info, "monitor") for _ in range(repeats)]
    rate = [n["rate_bytes_per_s"] for n in info["nodes"]]
    links = {}
    for i, j in ((0, 1), (0, 2), (1, 2)):
        truth = min(r for r in (rate[i], rate[j]) if r) if (rate[i] or rate[j]) else None
        got = [r["bandwidth"][i][j] for r in runs]
        links[f"{'ABC'[i]}-{'ABC'[j]}"] = {
            "tc_bytes_per_s": truth, "measured": spread(got),
            "measured_over_tc": statistics.median(got) / truth if truth else None}
    return {"setup": "probe_pairs at 1 KiB and 1 MiB, 5 reps; B at 50 Mbit/s, C at "
                     "200 Mbit/s (tbf both ways)", "links": links}


def part_domain(repeats):
    knee = ["-m", "pyfw.apps.knee", "--shape", "120", "60", "60", "--dx", "2", "--length", "100",
            "--steps", "1500", "--no-plots", "--quiet"]
    res = {"balanced": [], "even": []}
    cuts = []
    with Bed(nodes=2, slots=1, slow={"B": 2}) as info:
        for _ in range(repeats):
            for arm, extra in (("balanced", []), ("even", ["--no-balance"])):
                with tempfile.TemporaryDirectory() as d:
                    launch(info, knee + extra + ["--out", d], n=2)
                    with open(os.path.join(d, "summary.json")) as fh:
                        perf = json.load(fh)["perf"]
                res[arm].append(perf["wall_s"])
                if arm == "balanced":
                    cuts.append(perf["cuts"])
    b, e = statistics.median(res["balanced"]), statistics.median(res["even"])
    return {"setup": "knee 120x60x60 at 2 mm, 1500 steps, 2 nodes x 1 rank, node B CPU x1/2",
            "wall_s": {k: spread(v) for k, v in res.items()}, "speedup_over_even": e / b,
            "ideal_speedup": 1.5, "final_cuts": cuts}


def part_pipeline(repeats):
    res = {"auto": [], "depth 1": []}
    depth_seen = []
    with Bed(nodes=3, slots=1, delay={"B": PIPE_DELAY_S}) as info:
        for _ in range(repeats):
            r = child_json(info, "pyfw_farm", "", "pipe")
            res["auto"].append(r["makespan_s"])
            depth_seen.append({"tasks": r["tasks"], "links": r["pipeline"]["links"]})
            res["depth 1"].append(child_json(info, "pyfw_farm", 1, "pipe")["makespan_s"])
    ideal = PIPE_TASKS * PIPE_SLEEP_S / 2
    return {"setup": f"3 nodes x 1 rank (master A; workers B, {PIPE_DELAY_S * 1e3:g} ms one "
                     f"way from A ({info['delay_method']}), and C); {PIPE_TASKS} tasks of "
                     f"{PIPE_SLEEP_S * 1e3:g} ms",
            "ideal_s": ideal, "makespan_s": {k: spread(v) for k, v in res.items()},
            "over_ideal": {k: statistics.median(v) / ideal for k, v in res.items()},
            "pipeline_stats": depth_seen}


def part_hier(repeats):
    """Flat vs two-level farm across 2 x 2 and 3 x 2 nodes."""
    out = {"setup": "flat vs node (one sub-master per other node): 100,000 empty tasks "
                    "(tasks/s), 3,000 tasks of 1 ms (tasks/s), and 300 tasks of 4 ms CPU "
                    "returning 50 kB with node B's link at 100 Mbit/s and node C (or B) at "
                    "half a core (makespan / ideal)", "layouts": {}}
    for nodes in (2, 3):
        links = {"B": "100mbit"}
        slow = {"C": 2} if nodes == 3 else {"B": 2}
        table = {}
        for kind in ("empty", "1ms", "uneven"):
            kw = dict(nodes=nodes, slots=2)
            if kind == "uneven":
                kw.update(links=links, slow=slow)
            with Bed(**kw) as info:
                runs = {"flat": [], "node": []}
                for _ in range(repeats):
                    for h in runs:
                        r = child_json(info, "hier", kind, h)
                        runs[h].append(r["tasks"] / r["makespan_s"] if kind != "uneven"
                                       else r["makespan_s"])
            table[kind] = {h: spread(v) for h, v in runs.items()}
            f, n = (statistics.median(runs[h]) for h in ("flat", "node"))
            table[kind]["node_over_flat"] = n / f
        workers_cores = {2: 3, 3: 5}[nodes]
        out["layouts"][f"{nodes}x2"] = table
        out["layouts"][f"{nodes}x2"]["note"] = (f"{workers_cores} workers flat; node mode: "
                                                f"sub-masters ({nodes - 1}) among them, computing "
                                                f"between scheduling turns; "
                                                f"{2 * nodes} ranks on 2 shared cores")
    return out


PARTS = {"hier": part_hier, "farm": part_farm, "coll": part_coll, "monitor": part_monitor,
         "domain": part_domain, "pipeline": part_pipeline}

#: the same quantities measured earlier on one box through the in-process emulator
EMULATED = {
    "hier": "none (new: the two-level farm, issue 12)",
    "farm": "farm_slow_link.json (emulated 10 ms link, sleep tasks)",
    "coll": "coll_osu.json (one node; the SMP algorithms ran on emulated nodes)",
    "monitor": "monitor_pingpong.json (LinkShaper-injected latency/bandwidth)",
    "domain": "domain_balance_n2.json (--slowdown RANK=F, spin padding)",
    "pipeline": "farm_slow_link.json (depth 1 vs auto on an emulated 10 ms link)",
}


def report() -> str:
    """benchmarks/results/testbed.md from every testbed_*.json present."""
    lines = ["# Uneven-cluster figures on the multi-node test bed", "",
             "Generated by `python benchmarks/testbed_remeasure.py` from "
             "`benchmarks/results/testbed_*.json`; medians of repeated runs (min-max in the "
             "JSON). Nodes are network namespaces with real Open MPI daemons over TCP on one "
             "2-core machine; caps are tc tbf, slowdowns cgroup CPU quotas.", ""]
    for part in PARTS:
        path = os.path.join(RESULTS, f"testbed_{part}.json")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            d = json.load(fh)
        lines += [f"## {part}", "", d["setup"], "",
                  f"Emulated counterpart: `{EMULATED[part]}`.", ""]
        if part in ("farm", "pipeline"):
            lines += ["| arm | makespan median (s) | min-max | / ideal |", "|---|---|---|---|"]
            for k, v in d["makespan_s"].items():
                lines.append(f"| {k} | {v['median']:.3f} | {v['min']:.3f}-{v['max']:.3f} | "
                             f"{d['over_ideal'][k]:.2f} |")
            lines.append(f"\nIdeal: {d['ideal_s']:.3f} s.")
        elif part == "coll":
            lines += ["| layout | bytes/rank | native (us) | smp / native | tuned / native |",
                      "|---|---|---|---|---|"]
            for lay, table in d["layouts"].items():
                for nb, row in table.items():
                    lines.append(f"| {lay} | {nb} | {row['median_s']['native'] * 1e6:.1f} | "
                                 f"{row['smp_over_native']:.2f} | "
                                 f"{row['tuned_over_native']:.2f} |")
        elif part == "monitor":
            lines += ["| link | tc (MB/s) | measured median (MB/s) | measured / tc |",
                      "|---|---|---|---|"]
            for k, v in d["links"].items():
                tc = f"{v['tc_bytes_per_s'] / 1e6:.2f}" if v["tc_bytes_per_s"] else "uncapped"
                ratio = f"{v['measured_over_tc']:.3f}" if v["measured_over_tc"] else "-"
                lines.append(f"| {k} | {tc} | {v['measured']['median'] / 1e6:.2f} | {ratio} |")
        elif part == "hier":
            lines += ["| layout | workload | flat | node | node / flat |", "|---|---|---|---|---|"]
            for lay, table in d["layouts"].items():
                for kind in ("empty", "1ms", "uneven"):
                    row = table[kind]
                    unit = "tasks/s" if kind != "uneven" else "s"
                    lines.append(f"| {lay} | {kind} ({unit}) | {row['flat']['median']:.4g} | "
                                 f"{row['node']['median']:.4g} | "
                                 f"{row['node_over_flat']:.2f} |")
                lines.append(f"| {lay} | note | {table['note']} | | |")
        elif part == "domain":
            w = d["wall_s"]
            lines += ["| arm | wall median (s) | min-max |", "|---|---|---|"]
            for k, v in w.items():
                lines.append(f"| {k} | {v['median']:.2f} | {v['min']:.2f}-{v['max']:.2f} |")
            lines.append(f"\nSpeed-up of balanced over even: {d['speedup_over_even']:.2f} "
                         f"(ideal {d['ideal_speedup']}).")
        lines.append("")
    return "\n".join(lines)


def plot(part, d) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if part in ("farm", "pipeline", "domain"):
        data = d["makespan_s"] if part != "domain" else d["wall_s"]
        names = list(data)
        ax.boxplot([data[k]["runs"] for k in names], tick_labels=names)
        ax.set_ylabel("seconds")
        if "ideal_s" in d:
            ax.axhline(d["ideal_s"], ls="--", c="grey", label="ideal")
            ax.legend()
    elif part == "hier":
        labels, vals = [], []
        for lay, table in d["layouts"].items():
            for kind in ("empty", "1ms", "uneven"):
                labels.append(f"{lay}\n{kind}")
                vals.append(table[kind]["node_over_flat"])
        ax.bar(labels, vals)
        ax.axhline(1, c="grey", lw=0.8)
        ax.set_ylabel("node / flat (rate; makespan for uneven)")
        ax.tick_params(labelsize=7)
    elif part == "coll":
        for lay, table in d["layouts"].items():
            sizes = [int(s) for s in table]
            ax.semilogx(sizes, [table[s]["smp_over_native"] for s in table], "o-",
                        label=f"smp / native {lay}")
            ax.semilogx(sizes, [table[s]["tuned_over_native"] for s in table], "x--",
                        label=f"tuned / native {lay}")
        ax.axhline(1, c="grey", lw=0.8)
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("time ratio")
        ax.legend(fontsize=7)
    elif part == "monitor":
        names = list(d["links"])
        ax.bar(names, [d["links"][k]["measured"]["median"] / 1e6 for k in names],
               label="measured")
        ax.scatter(names, [(d["links"][k]["tc_bytes_per_s"] or float("nan")) / 1e6
                           for k in names], c="k", zorder=3, label="tc rate")
        ax.set_yscale("log")
        ax.set_ylabel("MB/s")
        ax.legend()
    ax.set_title(f"test bed: {part}")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, f"testbed_{part}.png"), dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default=",".join(PARTS), help="comma list of parts")
    ap.add_argument("--report-only", action="store_true",
                    help="regenerate testbed.md from the JSON present")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    add_output_options(ap, PUBLISHED)
    a = ap.parse_args(argv)
    if a.child:
        mode, out, *rest = a.child
        args = [None if x == "" else int(x) if x.isdigit() else x for x in rest]
        CHILDREN[mode](out, *args)
        return 0
    global RESULTS
    RESULTS = output_dir(a)
    if not a.report_only:
        from pyfw.testbed.netns import refuse_reason
        reason = refuse_reason()
        if reason:
            sys.exit(f"testbed_remeasure: {reason}")
        for part in a.only.split(","):
            t0 = time.time()
            d = PARTS[part](a.repeats)
            d["machine"] = {"cpus": os.cpu_count(), "load_after": os.getloadavg(),
                            "seconds": time.time() - t0}
            with open(os.path.join(RESULTS, f"testbed_{part}.json"), "w") as fh:
                json.dump(d, fh, indent=1)
            plot(part, d)
            print(f"{part}: done in {time.time() - t0:.0f} s", flush=True)
    with open(os.path.join(RESULTS, "testbed.md"), "w") as fh:
        fh.write(report())
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
