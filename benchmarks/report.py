"""Write benchmarks/README.md: every result table generated from benchmarks/results/*.json.

    python benchmarks/report.py          # rewrite benchmarks/README.md
    python benchmarks/report.py --check  # exit 1 if README.md is not what the JSON says

Each section names the script and command that produced its JSON, the machine it ran on
(as recorded in the JSON, where the script records it), a table of the headline figures
(medians of repeated runs with min-max where the JSON keeps them) and the plots. No number
in benchmarks/README.md is typed by hand: rerun a benchmark, then this script.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
OUT = os.path.join(HERE, "README.md")
DEFAULT_MACHINE = "the project's shared 2-core VM (the JSON does not record more)"


def _load(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _g(x, digits=3):
    """A number for a table: 3 significant digits, thousands apart."""
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if abs(x) >= 1e9:
        return f"{x / 1e9:.{digits}g} G"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.{digits}g} M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.{digits}g} k"
    if x != 0 and abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def _mm(stat, scale=1.0):
    """'median [min-max]' of a {median, min, max} dict."""
    if not isinstance(stat, dict) or "median" not in stat:
        return _g(stat)
    return (f"{_g(stat['median'] * scale)} [{_g(stat['min'] * scale)}–"
            f"{_g(stat['max'] * scale)}]")


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _machine(d):
    for key in ("machine", "meta", "host"):
        if isinstance(d, dict) and key in d:
            m = d[key]
            if isinstance(m, dict):
                return ", ".join(f"{k} {v}" for k, v in m.items()
                                 if k in ("host", "cores", "cpus", "date", "note", "load"))
            return str(m)
    parts = [f"{k} {d[k]}" for k in ("host", "cpus", "date") if isinstance(d, dict) and k in d]
    return ", ".join(parts) or DEFAULT_MACHINE


# --------------------------------------------------------------------- sections
def farm_throughput(d):
    rows = []
    for ranks, runs in d["runs"].items():
        for label, st in runs.items():
            rows.append([ranks, label.replace("|", ": "), _mm(st)])
    ratios = [[k, _g(v.get("farm_vs_mpi4py_default")), _g(v.get("farm_vs_mpi4py_best")),
               _g(v.get("executor_vs_mpi4py_best")), v.get("mpi4py_best", "")]
              for k, v in d["ratios"].items() if "farm_vs_mpi4py_default" in v]
    return (_table(["ranks", "arm", "tasks/s median [min–max]"], rows) + "\n\n"
            + _table(["case", "Farm / mpi4py default", "Farm / mpi4py best",
                      "Executor / mpi4py best", "mpi4py best"], ratios))


def farm_imbalance(d):
    rows = [[k, _mm(d["makespan"][k]), _g(v)] for k, v in
            sorted(d["ratio_to_ideal"].items(), key=lambda kv: kv[1])]
    return (f"{d['tasks']} tasks, {d['workers']} workers, one {d['slowdown']:g}x slower; "
            f"ideal {_g(d['ideal_s'])} s.\n\n"
            + _table(["policy", "makespan s median [min–max]", "/ ideal"], rows))


def farm_slow_link(d):
    rows = [[a["label"], _mm(a["makespan"]), _g(a.get("ratio_to_ideal"))] for a in d["arms"]]
    return _table(["arm", "makespan s median [min–max]", "/ ideal"], rows)


def futures_peers(d):
    txt = os.path.join(RESULTS, "futures_peers.txt")
    body = open(txt).read().rstrip() if os.path.exists(txt) else ""
    return "```text\n" + body + "\n```"


def futures_spawn(d):
    rows = [[r["stack"], r["workers"], f"{_g(r['first_result_s'])} [{_g(r['min_s'])}–"
             f"{_g(r['max_s'])}]", _g(r["all_workers_s"]), _g(r["shutdown_s"])]
            for r in d["rows"]]
    return _table(["stack", "workers", "Executor() to first result s median [min–max]",
                   "all workers answered s", "shutdown s"], rows)


def mpi_init(d):
    rows = [[r["how"], r["arm"], _mm(r["init_s"]), _mm(r["wall_s"])] for r in d["rows"]]
    peer = "Open MPI's default"
    by = {(r["how"], r["arm"]): r["init_s"]["median"] for r in d["rows"]}
    ratios = "; ".join(f"{how}: {_g(by[how, peer] / t)}x faster"
                       for (how, arm), t in by.items() if arm != peer)
    return (f"{d['repeat']} fresh processes per arm, alternating; `MPI_Init` is `from mpi4py "
            f"import MPI` (rank 0 in a job), the whole is the process or the `pyfw-run` job "
            f"from start to exit. `MPI_Init` with pyfw's setting: {ratios}.\n\n"
            + _table(["how", "arm", "MPI_Init s median [min–max]",
                      "whole s median [min–max]"], rows))


def _startup_ab(d, key, cpu_key, peer, what, earlier, arm_header, done_header, cpu_header):
    """A start-up setting against its peer (pmix_gds.py, startup_bytecode.py): per size
    and arm, when the last rank got ``key`` done, its CPU per rank and the job's time.
    ``earlier``: the headline as seconds saved, else as the peer's time over ours."""
    rows = [[r["ranks"], r["arm"], _mm(r[key]), _mm(r[cpu_key], 1e3), _mm(r["job_s"])]
            for r in d["rows"]]
    by = {(r["ranks"], r["arm"]): r[key]["median"] for r in d["rows"]}
    ratios = "; ".join(f"{ranks} ranks {_g(by[ranks, peer] - t)} s earlier" if earlier
                       else f"{ranks} ranks {_g(by[ranks, peer] / t)}x"
                       for (ranks, arm), t in by.items() if arm != peer)
    return (f"{d['repeat']} launches per arm and size, alternating; {what}: {ratios}.\n\n"
            + _table(["ranks", arm_header, done_header, cpu_header,
                      "job s median [min–max]"], rows))


def pmix_gds(d):
    return _startup_ab(d, "init_done_last_s", "init_cpu_median_s",
                       "PMIx default (shmem2 first)",
                       "a program that only initialises MPI under `pyfw-run`, timed from the "
                       "launch. Last rank's `MPI_Init` done, default / pyfw", False,
                       "PMIx store", "last MPI_Init done s median [min–max]",
                       "MPI_Init CPU per rank ms (median rank) [min–max]")


def startup_bytecode(d):
    return _startup_ab(d, "import_done_last_s", "import_cpu_median_s", "every rank compiles",
                       "pyfw's bytecode deleted before each and `PYTHONDONTWRITEBYTECODE=1`; "
                       "a program that initialises MPI and imports `pyfw.farm` under "
                       "`pyfw-run`, timed from the launch. Last rank's import done with the "
                       "launcher's bytecode", True, "bytecode",
                       "last pyfw import done s median [min–max]",
                       "import CPU per rank ms (median rank) [min–max]")


def joblib_peers(d):
    rows = [[r["workload"], r["backend"], r["workers"], _mm(r["cold_s"]), _mm(r["warm_s"]),
             "yes" if r["same_answer"] else "NO"] for r in d["rows"]]
    return (f"{d['repeat']} fresh processes per backend, {d['calls']} calls each (the first "
            f"cold, timed from before the backend's import; the others warm).\n\n"
            + _table(["workload", "backend", "workers", "cold s median [min–max]",
                      "warm s median [min–max]", "same answer as loky"], rows))


def ensemble_peers(d):
    rows = [[r["workload"], r["arm"], r["sims"], "/".join(map(str, r["widths"])),
             _g(r["makespan_s"]), _g(r.get("makespan_over_ideal")),
             _g(r.get("overhead_per_sim_s")) if "error" not in r else "did not run"]
            for r in d["rows"]]
    pyfw = {r["workload"]: r["makespan_s"] for r in d["rows"] if r["arm"] == "pyfw"}
    ratios = [[r["workload"], r["arm"], _g(r["makespan_s"] / pyfw[r["workload"]])]
              for r in d["rows"] if r["arm"] != "pyfw" and r.get("makespan_s")]
    return (f"{d['ranks']} ranks for every arm. " + d.get("note", "") + ".\n\n"
            + _table(["workload", "arm", "sims", "widths", "makespan s", "/ ideal",
                      "overhead s per sim"], rows)
            + "\n\n" + _table(["workload", "peer", "peer / pyfw makespan"], ratios))


def ensemble_testbed(d):
    rows = [[r["workload"], r["sims"], _g(r["makespan_s"]), _g(r["inner_s"]), _g(r["ideal_s"]),
             _g(r["makespan_over_ideal"]), _g(r["inner_over_ideal"]),
             "yes" if r["groups_inside_nodes"] else "NO",
             ", ".join(f"{h} {v['sims']}" for h, v in r["per_node"].items())]
            for r in d["rows"]]
    return (d.get("note", "") + ".\n\n"
            + _table(["workload", "sims", "makespan s", "in the map s", "ideal s",
                      "makespan / ideal", "map / ideal", "groups inside nodes",
                      "sims per node (last slowed)"], rows))


def farm_scale_model(d):
    rows = [[p["workers"], _g(p["flat_tasks_per_s"]), _g(p["two_level_tasks_per_s"]),
             _g(p["ratio"])] for p in d["predictions"]]
    checks = [[c["ranks"], c["tasks"], c["hierarchy"], _g(c["measured_tasks_per_s"]),
               _g(c["predicted_tasks_per_s"]), _g(c["measured_over_predicted"])]
              for c in d["checks"]]
    return (f"Crossover at {d['crossover_workers']} workers; two-level / flat at 1,024 "
            f"workers: {_g(d['ratio_at_1024'])}.\n\n"
            + _table(["workers", "flat tasks/s", "two-level tasks/s", "ratio"], rows)
            + "\n\nChecked against runs on this machine:\n\n"
            + _table(["ranks", "tasks", "mode", "measured", "predicted", "measured / predicted"],
                     checks))


def coll_osu(d):
    rows = [[k, _g(v["worst_ratio"]), v.get("at_size"),
             "–".join(_g(x) for x in v.get("worst_spread", [])), _g(v.get("best_ratio"))]
            for k, v in d["report"]["tuned_vs_native"].items()]
    return ("Paired time ratio to native MPI per size (lower is faster; full report: "
            "[coll_osu_report.txt](results/coll_osu_report.txt)).\n\n"
            + _table(["collective, ranks, variant", "worst ratio", "at bytes", "its spread",
                      "best ratio"], rows))


def monitor_overhead(d):
    rows = []
    for ranks, jobs in d["results"].items():
        for job, r in jobs.items():
            if not isinstance(r, dict) or "on" not in r:
                continue
            med = lambda xs: sorted(xs)[len(xs) // 2]   # noqa: E731
            self_share = r.get("self")
            rows.append([ranks, job, _g(med(r["off"])), _g(med(r["on"])),
                         _g(100 * max(self_share)) + " %" if self_share else "–"])
    return _table(["ranks", "job", "off s (median)", "on s (median)",
                   "time in monitor calls, max"], rows)


def monitor_pingpong(d):
    rows = []
    for transport, r in d["results"].items():
        impls = [k for k in r if k != "env" and "/" not in k]
        sizes = sorted({s for k in impls for s in r[k]}, key=int)
        for s in sizes:
            rows.append([transport, s] + [_g(r[k][s]["median_s"] * 1e6) if s in r[k] else "–"
                                          for k in impls])
    return (f"One-way time, {d.get('statistic', 'median')}.\n\n"
            + _table(["transport", "bytes"] + [f"{k} µs" for k in impls], rows[:40]))


def dashboard_overhead(d):
    rows = [[k, _g(v.get("off_median_s")), _g(v.get("on_median_s")),
             _g(100 * v.get("overhead_ab", float("nan"))) + " %"]
            for k, v in d["summary"].items() if isinstance(v, dict)]
    return _table(["workload", "off s", "on s (browser polling 1/s)", "overhead"], rows)


def domain_balance(d):
    return _table(["ranks", "slowdown", "even step s", "balanced step s", "ideal step s",
                   "even / ideal", "balanced / ideal"],
                  [[d["ranks"], d["slow"], _mm(d["even"]["step_s"]),
                    _mm(d["balanced"]["step_s"]), _g(d["ideal"]["step_s"]),
                    _g(d["even_over_ideal"]),
                    _g(d["balanced"]["step_s"]["median"] / d["ideal"]["step_s"])]])


def domain_balance_model(d):
    return _table(["ranks", "even / ideal", "oracle / ideal", "balanced / ideal"],
                  [[d["ranks"], _g(d["even_over_ideal"]), _g(d["oracle_over_ideal"]),
                    _g(d["balanced_over_ideal"])]])


def domain_halo_overlap(d):
    rows = []
    for case, c in d["cases"].items():
        cols = [_mm(c[k]["step_s"], 1e3) for k in ("overlap", "no_overlap") if k in c]
        rows.append([case] + cols)
    return _table(["link", "overlap ms/step", "no overlap ms/step"], rows)


def knee_kernel(d):
    keys = ["copy_GBps", "roof_const_MLUPs", "const_MLUPs", "knee_MLUPs",
            "knee_solver_step_MLUPs", "const_fraction_of_roof"]
    return _table(["figure", "median [min–max]"], [[k, _mm(d[k])] for k in keys if k in d])


def memory_contention(d):
    rows = [[kind, f"{_g(v['median_alone'])} [{_g(min(v['alone']))}–{_g(max(v['alone']))}]",
             f"{_g(v['median_pair'])} [{_g(min(v['pair']))}–{_g(max(v['pair']))}]",
             f"{v['pair_over_alone']:.2f}"] for kind, v in d["kinds"].items()]
    return (f"Operations per CPU second of one process alone and of each of two started "
            f"together (medians of {d['repeats']} alternating runs, [min–max]); lookups "
            f"read a {d['gigabytes']:g} GB table in 2 MB pages at random.\n\n"
            + _table(["kernel", "alone", "each of a pair", "pair / alone"], rows))


def rubik_bench(d):
    proof = d.get("proof", {})
    rows = [[h, _mm(v), _g(v.get("generated")), _mm(v.get("nodes_per_s"), 1e-6)]
            for h, v in proof.items() if isinstance(v, dict) and "median" in v]
    out = _table(["heuristic", "T16 proof s, 1 core, median [min–max]", "nodes generated",
                  "M nodes/s"], rows)
    cmp_ = d.get("compare")
    if cmp_:
        out += (f"\n\nThe serial search of `{cmp_['before']}` (before) against this code "
                f"(after): {cmp_['note']}.\n\n")
        rows = []
        for h, res in cmp_.items():
            if not isinstance(res, dict) or "cases" not in res:
                continue
            for case, r in res["cases"].items():
                b, a = r["before"], r["after"]
                rows.append([h, case, _g(b["generated"]) + ("" if r["same_nodes"] else
                                                            " / " + _g(a["generated"])),
                             _mm(b["seconds"]), _mm(a["seconds"]),
                             _mm(b["nodes_per_cpu_s"], 1e-6), _mm(a["nodes_per_cpu_s"], 1e-6),
                             _g(r["nodes_per_cpu_s_ratio"]),
                             _g(r.get("best_nodes_per_cpu_s_ratio"))])
        out += _table(["heuristic", "cube", "nodes", "before s", "after s",
                       "before M nodes/CPU s", "after M nodes/CPU s", "after / before",
                       "best / best"], rows)
    rnd = d.get("random", {})
    if rnd.get("cubes"):
        out += "\n\nRandom cubes solved optimally on " + str(rnd.get("workers")) + " workers:\n\n"
        out += _table(["seed", "length", "seconds"],
                      [[c["seed"], c["length"], _g(c["seconds"])] for c in rnd["cubes"]])
    return out


def rubik_speedup(d):
    out = []
    if d.get("complete") is False:
        done = "; ".join(
            f"{len(cfg['cubes'])} of the {len(d['seeds'])} cubes asked for "
            + (f"(seeds {', '.join(str(c['seed']) for c in cfg['cubes'])})"
               if len(cfg["cubes"]) < len(d["seeds"]) else "(all)")
            + f" with tables {cfg.get('table_memory', 'auto')}" for cfg in d["configs"])
        out.append(f"**Stopped early:** {done} finished; "
                   + d.get("note", "the run was cut short.") + "\n")
    for cfg in d["configs"]:
        s = cfg["summary"]
        inv = "" if cfg.get("inverse", True) else ", position-only lookups"
        if "inverse" not in cfg:
            inv = ", before the inverse lookups existed"
        if "steal" in cfg:
            inv += ", work stealing" if cfg["steal"] else ", no stealing"
        else:
            inv += ", before work stealing existed"
        if "table_memory" in cfg:
            inv += f", workers' tables {cfg['table_memory']}"
        out.append(f"order={cfg['order']}, split={cfg['split']}{inv}: geometric-mean speedup "
                   f"{_g(s['geomean_speedup'])}, median {_g(s['median_speedup'])}, worst "
                   f"{_g(s['min_speedup'])} (seed {s['worst_seed']}), best "
                   f"{_g(s['max_speedup'])}; {s['below_1_3']} cube(s) below 1.3; median "
                   f"nodes ratio (2 / 1 workers) {_g(s['median_nodes_ratio'])}; median solve "
                   f"on 2 workers {_g(s['median_seconds_2_workers'])} s.\n")
        if d.get("repeat", 1) > 1:
            out.append(f"Each launch solved its cube {d['repeat']} times: seconds are the "
                       f"median solve [min–max], the speedup the ratio of the medians.")
        out.append(_table(["seed", "moves", "1 worker s", "2 workers s", "speedup",
                           "nodes 1 worker", "nodes ratio"],
                          [[c["seed"], c["length"], _solves(c["one"]), _solves(c["two"]),
                            _g(c["speedup"]), _g(c["one"]["generated"]),
                            _g(c["nodes_ratio"])]
                           for c in cfg["cubes"]]))
    vs = d.get("versus")
    if vs:
        first, second = (cfg["order"] for cfg in d["configs"])
        out.append(" ".join(
            f"{second} against {first} on {name}: solve seconds {second}/{first} geometric "
            f"mean {_g(vs[key]['geomean'])} ({_g(vs[key]['min'])}–{_g(vs[key]['max'])}), "
            f"{first} faster on {vs[key]['first_faster']} of {vs[key]['cubes']} cubes."
            for key, name in (("one", "1 worker"), ("two", "2 workers"))))
    return "\n\n".join(out)


def farm_forecast_ab(d):
    from farm_forecast_ab import report   # the benchmark's own table
    return report(d)


def rubik_batch(d):
    res = d["results"]
    names = {"batch": f"one batch on {d['workers']} workers", "launches":
             f"one launch per cube, {d['workers']} workers each", "serial": "serial batch"}

    def wall(r):
        if len(r.get("seconds_runs", [])) > 1:
            return f"{r['seconds']:.0f} [{r['seconds_min']:.0f}–{r['seconds_max']:.0f}]"
        return f"{r['seconds']:.0f}"

    def ratio(key):
        runs = res.get(key + "_runs", [])
        spread = f" [{_g(min(runs))}–{_g(max(runs))}]" if len(runs) > 1 else ""
        return f"{_g(res[key])}{spread}"

    rows = [[names[k], wall(r), _g(r["cubes_per_second"]),
             _g(r["cubes_per_second_per_core"]), r["cores"],
             _g(r.get("nodes_per_second")) if "nodes_per_second" in r else "–",
             _g(r["busy_fraction"]) if "busy_fraction" in r else "–"]
            for k, r in res.items() if k in names]
    lengths = res.get("batch", res.get("serial", {})).get("lengths", {})
    repeats = d.get("repeats", 1)
    out = [f"{d['cubes']} cubes, `Cube.random({d['seeds'][0]}..{d['seeds'][1]})`, heuristic "
           f"{d['heuristic']}; lengths {lengths}. Whole-command wall times"
           + (f", median [min–max] of {repeats} alternating repeats" if repeats > 1 else "")
           + "." + (f" {d['note']}." if d.get("note") else ""),
           _table(["mode", "wall s", "cubes/s", "cubes/s per core", "cores",
                   "nodes/s per worker", "workers busy"], rows)]
    ratios = []
    if "batch_over_launches" in res:
        ratios.append(f"batch against one launch per cube: {ratio('batch_over_launches')}x "
                      f"as many cubes per second")
    elif "batch" in res and "launches" in res:
        ratios.append(f"batch / one launch per cube: "
                      f"{_g(res['launches']['seconds'] / res['batch']['seconds'])}x faster")
    if "batch_efficiency" in res:
        ratios.append(f"batch efficiency against {d['workers']} x the serial rate: "
                      f"{ratio('batch_efficiency')} (goal >= 0.9)")
    if ratios:
        out.append("; ".join(ratios) + ".")
    out.append("Published figures of other solvers, on other CPUs (not measured here): "
               + "; ".join(f"{p['solver']}, {p['threads']} threads: "
                           f"{_g(p['cubes_per_second'])} cubes/s"
                           for p in d["published_other_cpus"]) + ".")
    return "\n\n".join(out)


def rubik_vcube(d):
    res = d["results"]
    def spread(xs):
        return f"{_g(statistics.median(xs))} [{_g(min(xs))}–{_g(max(xs))}]"
    rows = [[c["seed"], c["length"], _g(c.get("ours_generated")), spread(c["ours_seconds"]),
             spread(c["vcube_seconds"]), _g(c["ratio"])] for c in res["per_cube"]]
    by_length = "; ".join(
        f"{k.split('_')[2]}-movers ({v['cubes']}): ours {_g(v['ours'])} s, vcube {_g(v['vcube'])} s"
        for k, v in res.items() if k.startswith("mean_seconds_"))
    return "\n\n".join([
        f"`Cube.random({d['seeds']})`, one thread each, {d['repeats']} rounds alternating "
        f"which solver goes first; ours: table {d['ours_table']}, vcube: table "
        f"{d['vcube_table']}{'; ' + d['note'] if d.get('note') else ''}. Each solver's own solve time "
        f"(tables loaded before its clock), median [min–max] over the rounds; lengths agree on every "
        f"cube and every vcube solution solves our cube model.",
        _table(["seed", "length", "our nodes", "ours s", "vcube s", "ours / vcube"], rows),
        f"Mean solve: ours **{_g(res['ours']['mean_seconds'])} s**, vcube "
        f"**{_g(res['vcube']['mean_seconds'])} s** ({_g(res['ratio_of_means'])}x); per cube "
        f"ours / vcube: geometric mean {_g(res['ratio_geomean'])}, "
        f"{_g(res['ratio_min'])}–{_g(res['ratio_max'])}. {by_length}."])


def rubik_order(d):
    res = d["results"]
    rows = [[c["seed"], c["plain"]["length"], _g(c["plain"]["generated"]),
             _g(c["ordered"]["generated"]), _g(c["node_ratio"]), _g(c["plain"]["seconds"]),
             _g(c["ordered"]["seconds"])] for c in res["per_cube"]]
    mean, rate = res["mean_seconds"], res["nodes_per_second"]
    return "\n\n".join([
        f"`Cube.random({d['seeds']})`, table {d['heuristic']} (private copy), one process: "
        f"`Solver(ordered=False)` (each iteration one search from the cube) against `Solver()` "
        f"(iterations above 4 moves as the 43,254 subtrees 4 moves deep, densest first by "
        f"the iteration before), alternating which goes first. Node counts are exact; "
        f"times are one run each.",
        _table(["seed", "length", "plain nodes", "ordered nodes", "ordered / plain",
                "plain s", "ordered s"], rows),
        f"Ordered / plain nodes: **{_g(res['node_ratio_all'])}** of all nodes; per cube "
        f"geometric mean {_g(res['node_ratio_geomean'])}, {_g(res['node_ratio_min'])}–"
        f"{_g(res['node_ratio_max'])}. Mean solve: plain {_g(mean['plain'])} s, ordered "
        f"**{_g(mean['ordered'])} s**; nodes per second {_g(rate['plain'] / 1e6)} M and "
        f"{_g(rate['ordered'] / 1e6)} M."])


def rubik_startup(d):
    from rubik_startup import table     # the benchmark's own table
    commits = ", ".join(f"{k}: {v}" for k, v in d.get("commits", {}).items())
    return (f"`{d['cli']}` in one process (no mpiexec), tables cached: CPU and wall seconds "
            f"from the interpreter's start to the end of the first search slice, {d['runs']} "
            f"runs of each, alternating ({commits}). Each category excludes what it nests "
            f"(numba's lazy imports at its first kernel load count as numba's imports); "
            f"CPU above wall is other threads' (OpenBLAS's spinning threads, before).\n\n"
            + table(d["results"]))


def _solves(res):
    """A launch's solve seconds: the median, and [min–max] where it solved repeatedly."""
    runs = res.get("runs", [])
    if len(runs) < 2:
        return _g(res["seconds"])
    return f"{_g(res['seconds'])} [{_g(min(runs))}–{_g(max(runs))}]"


def testbed(d):
    md = os.path.join(RESULTS, "testbed.md")
    return ("Every figure with its peer in the same run; the full generated report: "
            "[results/testbed.md](results/testbed.md).") if os.path.exists(md) else ""


#: (title, JSON glob, command that regenerates it, renderer): current results only; settled
#: comparisons are in docs/decisions.md, the knee model's validation in docs/knee.md
SECTIONS = [
    ("Farm throughput vs mpi4py.futures", "farm_throughput.json",
     "python benchmarks/farm_bench.py --only throughput --publish", farm_throughput),
    ("Farm policies with one slow worker", "farm_imbalance.json",
     "python benchmarks/farm_bench.py --only imbalance --publish", farm_imbalance),
    ("Farm over a slow link (pipelining)", "farm_slow_link.json",
     "python benchmarks/farm_slow_link.py --publish", farm_slow_link),
    ("pyfw.futures against every peer", "futures_peers.json",
     "pip install -e .[bench] && python benchmarks/futures_peers.py --publish", futures_peers),
    ("pyfw.futures spawn start-up vs mpi4py.futures", "futures_spawn.json",
     "python benchmarks/futures_spawn.py --publish", futures_spawn),
    ("MPI_Init: Open MPI's idle libfabric BTL left out (pyfw) against Open MPI's default",
     "mpi_init.json", "python benchmarks/mpi_init.py --publish", mpi_init),
    ("Start-up on one host: PMIx's hash store (pyfw-run) against its default", "pmix_gds.json",
     "python benchmarks/pmix_gds.py --publish", pmix_gds),
    ("Start-up: pyfw's bytecode compiled once by pyfw-run against in every rank",
     "startup_bytecode.json", "python benchmarks/startup_bytecode.py --publish",
     startup_bytecode),
    ("joblib backends: pyfw vs loky vs dask", "joblib_peers.json",
     "pip install -e .[bench] && python benchmarks/joblib_peers.py --publish", joblib_peers),
    ("Ensembles of knee simulations against per-launch peers", "ensemble_peers*.json",
     "pip install -e .[bench] && python benchmarks/ensemble_peers.py --publish",
     ensemble_peers),
    ("Ensembles on the test bed, one node slowed", "ensemble_testbed.json",
     "python benchmarks/ensemble_peers.py --testbed ens --short 24 --long 0 --mixed 24 "
     "--publish", ensemble_testbed),
    ("Farm: the next chunk sent before a worker runs dry (before / after, one launch)",
     "farm_forecast_ab.json", "python benchmarks/farm_forecast_ab.py --publish",
     farm_forecast_ab),
    ("Farm scaling model: flat vs two-level", "farm_scale_model.json",
     "python benchmarks/farm_scale_model.py --publish", farm_scale_model),
    ("Tuned collectives vs native MPI", "coll_osu.json",
     "python benchmarks/coll_osu.py --publish", coll_osu),
    ("Link monitor: ping-pong against C and mpi4py", "monitor_pingpong.json",
     "python benchmarks/monitor_pingpong.py --publish", monitor_pingpong),
    ("Link monitor overhead", "monitor_overhead.json",
     "python benchmarks/monitor_overhead.py --publish", monitor_overhead),
    ("Dashboard overhead", "dashboard_overhead.json",
     "python benchmarks/dashboard_overhead.py --publish", dashboard_overhead),
    ("Domain balance, one rank 3x slower", "domain_balance_n*.json",
     "pyfw-run -n N -- python benchmarks/domain_balance.py --publish", domain_balance),
    ("Domain balance with modelled compute", "domain_balance_model_n*.json",
     "pyfw-run -n N -- python benchmarks/domain_balance_model.py --publish",
     domain_balance_model),
    ("Halo exchange overlapped with compute", "domain_halo_overlap_n*.json",
     "pyfw-run -n N -- python benchmarks/domain_halo_overlap.py --publish", domain_halo_overlap),
    ("Knee kernel against the bandwidth roof", "knee_kernel.json",
     "python benchmarks/knee_kernel.py --publish", knee_kernel),
    ("Rubik's cube solver", "rubik_bench.json",
     "python benchmarks/rubik_bench.py --publish", rubik_bench),
    ("Rubik: two workers against one on random cubes", "rubik_speedup.json",
     "python benchmarks/rubik_speedup.py --publish", rubik_speedup),
    ("Rubik: one cube on the farm, ordered (dense) against serial order",
     "rubik_speedup_dense.json",
     "python benchmarks/rubik_speedup.py --order dense --compare serial:adaptive --repeat 1 "
     "--name rubik_speedup_dense --publish", rubik_speedup),
    ("Rubik: batches of cubes against one launch per cube", "rubik_batch*.json",
     "python benchmarks/rubik_batch.py --cubes N --repeats R --publish", rubik_batch),
    ("Rubik: per-core speed against vcube (C++) on this machine", "rubik_vcube.json",
     "python benchmarks/rubik_vcube.py --vcube PATH --publish", rubik_vcube),
    ("Rubik: ordered iterations against one search per bound", "rubik_order.json",
     "python benchmarks/rubik_order.py --publish", rubik_order),
    ("Rubik: start-up to the first search node (before / after, one run)",
     "rubik_startup.json", "python benchmarks/rubik_startup.py --baseline OLD_TREE --publish",
     rubik_startup),
    ("Memory contention between two busy cores", "memory_contention.json",
     "python benchmarks/memory_contention.py --publish", memory_contention),
    ("Uneven clusters on the multi-node test bed", "testbed_farm.json",
     "python benchmarks/testbed_remeasure.py --publish", testbed),
]


def _plots(pattern):
    stems = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(RESULTS, pattern))}
    # a plot goes with the results its name starts with, unless it is another result's own
    others = {os.path.splitext(os.path.basename(p))[0]
              for p in glob.glob(os.path.join(RESULTS, "*.json"))} - stems
    pngs = sorted(p for p in glob.glob(os.path.join(RESULTS, "*.png"))
                  if any(os.path.basename(p).startswith(s) for s in stems)
                  and os.path.splitext(os.path.basename(p))[0] not in others)
    if pattern.startswith("testbed"):
        pngs = sorted(glob.glob(os.path.join(RESULTS, "testbed_*.png")))
    if pattern.startswith("coll_osu"):
        pngs = sorted(glob.glob(os.path.join(RESULTS, "coll_osu_*.png")))
    if pattern.startswith("rubik_bench"):
        pngs = [os.path.join(RESULTS, f) for f in ("rubik_proof.png", "rubik_subtrees.png")
                if os.path.exists(os.path.join(RESULTS, f))]
    return [f"![{os.path.basename(p)}](results/{os.path.basename(p)})" for p in pngs]


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def render() -> str:
    out = ["# Benchmarks", "",
           "Generated by `python benchmarks/report.py` from `benchmarks/results/*.json`; do "
           "not edit by hand. One script per question, each running the peer (mpi4py.futures, "
           "native MPI, the bandwidth roof, the ideal makespan, ...) side by side with pyfw "
           "in one run; the machines are shared and noisy, so figures are medians of "
           "repeated runs with min–max. Timings are never pass/fail tests.", "",
           "A run writes to `benchmarks/results/local/` (untracked) or to `--out DIR`; only "
           "`--publish` replaces the tracked results below (then rerun this report). "
           "Settled comparisons, with their figures and commits: "
           "[docs/decisions.md](../docs/decisions.md). The knee model's validation studies "
           "belong to the app: `python -m apps.knee.studies`, results in "
           "[docs/knee.md](../docs/knee.md).", ""]
    out += ["| benchmark | command |", "|---|---|"]
    out += [f"| [{t}](#{_anchor(t)}) | `{c}` |"
            for t, pat, c, _ in SECTIONS if glob.glob(os.path.join(RESULTS, pat))]
    out.append("")
    for title, pattern, command, render_fn in SECTIONS:
        files = sorted(glob.glob(os.path.join(RESULTS, pattern)))
        if not files:
            continue
        out += [f"## {title}", "", f"Command: `{command}`", ""]
        for path in files:
            d = _load(os.path.basename(path))
            if len(files) > 1:
                out += [f"`{os.path.basename(path)}`:", ""]
                if d.get("command") and d["command"] != command:
                    out += [f"Command: `{d['command']}`", ""]
            out += [f"Machine: {_machine(d)}.", "", render_fn(d), ""]
        out += _plots(pattern) + [""]
    return "\n".join(out).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        with open(OUT) as fh:
            if fh.read() != text:
                print(f"{OUT} is stale: run python benchmarks/report.py", file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w") as fh:
        fh.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
