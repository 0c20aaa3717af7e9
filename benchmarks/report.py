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


def _stats(xs):
    """{median, min, max} of a sequence."""
    xs = sorted(xs)
    return {"median": statistics.median(xs), "min": xs[0], "max": xs[-1]}


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


def knee_sensitivity(d):
    rows = [[r["parameter"], r.get("range", ""), _g(r["drop90_low"]), _g(r["drop90_high"])]
            for r in d["ranked"]]
    return (f"Point {d['point']}; band of the drop (C) at 30/60/90 min: "
            + "; ".join(f"{m}: {_g(lo)}–{_g(hi)}" for m, (lo, hi) in d["band"].items())
            + ".\n\n" + _table(["parameter", "range", "90-min drop, low end",
                                "90-min drop, high end"], rows))


def knee_validation(d):
    rows = [[r["study"], r["target"], "fit" if r.get("fit") else "held out",
             _g(r["measured"]), "never" if r["model"] is None else _g(r["model"]),
             "–" if r["relative_error"] is None else f"{100 * r['relative_error']:+.0f} %",
             "yes" if r["within"] else "no"] for r in d["table"]]
    fits = "; ".join(f"{f['parameter']} = {_g(f['value'])} (fitted on "
                     + ", ".join(dict.fromkeys(st for st, _ in f["fitted_on"]))
                     + f", {len(f['fitted_on'])} target(s)"
                     + (f", jointly with {f['jointly_with']}" if f.get("jointly_with") else "")
                     + (f"; candidates {_g(f['range'][0])}..{_g(f['range'][1])}"
                        + (", at an end: a limit, not an optimum" if f["at_range_end"] else "")
                        if "range" in f else "")
                     + ")" for f in d["fits"])
    out = (f"Fitted: {fits}. Held out: {d['held_out_within']} of {d['held_out_targets']} "
           f"targets within their spread or ±30 %. A rise is a negative drop; the muscle "
           f"studies' targets are in minutes or C as named.\n\n"
           + _table(["study", "target", "role", "measured", "model", "error",
                     "within"], rows))
    arth = d.get("arthroscopy")
    if arth:            # the post-operative targets at the ends of the assumed duration
        ends = sorted(arth["range"], key=float)
        model = {m: {(r["study"], r["target"]): r["model"] for r in arth["range"][m]}
                 for m in ends}
        assumed = {(r["study"], r["target"]): r["model"] for r in d["table"]}
        keys = list(model[ends[0]])
        out += (f"\n\nPost-operative targets against the arthroscopy's assumed duration "
                f"({_g(arth['assumed_min'])} min in the table above):\n\n"
                + _table(["study", "target"] + [f"{_g(float(m))} min" for m in ends[:1]]
                         + [f"{_g(arth['assumed_min'])} min"]
                         + [f"{_g(float(m))} min" for m in ends[1:]],
                         [[st, tg, _g(model[ends[0]][(st, tg)]), _g(assumed[(st, tg)])]
                          + [_g(model[m][(st, tg)]) for m in ends[1:]] for st, tg in keys]))
    return out


def knee_plateau(d):
    marks = sorted({int(m) for c in d["cases"].values() for m in c["drops"]})
    rows = [[name] + [_g(c["drops"].get(str(m))) if str(m) in c["drops"] else "–"
                      for m in marks] + [_g(c["skin_drop_90"]), c["what"]]
            for name, c in d["cases"].items()]
    rows.append(["Warren 2004 (measured medians)"]
                + [_g(d["warren"].get(str(m))) if str(m) in d["warren"] else "–"
                   for m in marks] + ["–", "the reference"])
    return (f"Drop (C) at the {d['point'].replace('_', ' ')} by minute of cooling, and of "
            f"the skin at 90 min:\n\n"
            + _table(["case"] + [f"{m} min" for m in marks] + ["skin at 90", "what it tests"],
                     rows))


def knee_postop(d):
    starts = d["starts"]
    rows = [[name.replace(" (post-op)", ""), r["target"], _g(r["measured"]),
             _g(r["measured_start"])]
            + [_g(v) for v in r["sweep"]]
            + [_g(r["implied_start"]) if r["implied_start"] is not None else "none"]
            + [_g(r["tourniquet"][str(m)]) for m in d["tourniquet_minutes"]]
            for name, r in d["studies"].items()]
    fit = ", ".join(f"{k} = {_g(v)}" for k, v in d["fitted"].items())
    return (f"Drop (C; a rise is negative) at the target by the cavity's temperature at the "
            f"operation's end ({d['arthroscopy']}-min arthroscopy), the start at which the "
            f"model meets the study, and the drop with a tourniquet during an operation of "
            f"that many minutes (from the measured start, else 24.5 C). Couplings: the "
            f"validation's fit ({fit}).\n\n"
            + _table(["study", "target", "measured", "measured start"]
                     + [f"start {_g(s)}" for s in starts] + ["implied start"]
                     + [f"tourniquet {m} min" for m in d["tourniquet_minutes"]], rows))


def memory_contention(d):
    rows = [[kind, f"{_g(v['median_alone'])} [{_g(min(v['alone']))}–{_g(max(v['alone']))}]",
             f"{_g(v['median_pair'])} [{_g(min(v['pair']))}–{_g(max(v['pair']))}]",
             f"{v['pair_over_alone']:.2f}"] for kind, v in d["kinds"].items()]
    return (f"Operations per CPU second of one process alone and of each of two started "
            f"together (medians of {d['repeats']} alternating runs, [min–max]); lookups "
            f"read a {d['gigabytes']:g} GB table in 2 MB pages at random.\n\n"
            + _table(["kernel", "alone", "each of a pair", "pair / alone"], rows))


def knee_muscle(d):
    def fmt(v):
        return "never" if v is None else _g(v)
    rows = [[r["study"], f"{r['skinfold_mm'][0]}–{r['skinfold_mm'][1]}",
             _g(r["subcutis_mm"][1]), r["point"], r["target"],
             _g(r["measured"]) + ("" if r["sd"] is None else f" ± {_g(r['sd'])}"),
             fmt(r["model"]), f"{fmt(r['model_band'][0])}–{fmt(r['model_band'][1])}",
             "–" if r["relative_error"] is None else f"{100 * r['relative_error']:+.0f} %",
             "yes" if r["within"] else "no", fmt(r["model_persistent"])
             if "model_persistent" in r else "–"] for r in d["rows"]]
    fit = ", ".join(f"{k} = {_g(v)}" for k, v in d["fitted"].items())
    return (f"The model's default couplings ({fit}) are the knee validation's fit on Otte's "
            f"groups; Myrer's targets are held out. {d['within']} of {d['targets']} targets "
            f"within the study's SD or ±30 %. Model band: the group's skinfold range. "
            f"Persistent: the rewarming with vessels that never open again after the cold "
            f"(`--perfusion-recovery inf`), for comparison.\n\n"
            + _table(["study", "skinfold mm", "subcutis mm", "point", "target", "measured",
                      "model", "model band", "error", "within", "persistent"], rows))


def knee_convergence(d):
    hs = [str(r["dx"]) for r in sorted(d["runs"], key=lambda r: -r["dx"])]
    rows = [[r["point"], r["minute"]] + [_g(r["drops"][h]) for h in hs]
            + [_g(r["f0_p2"]), _g(r.get("observed_order")),
               _g(100 * r["default_rel_diff_p2"]) + " %" if "default_rel_diff_p2" in r else "–"]
            for r in d["rows"]]
    return _table(["point", "min"] + [f"dx {h} mm" for h in hs]
                  + ["Richardson (p=2)", "observed p", "1 mm off by"], rows)


def rubik_bench(d):
    proof = d.get("proof", {})
    rows = [[h, _mm(v)] for h, v in proof.items() if isinstance(v, dict) and "median" in v]
    out = _table(["heuristic", "T16 proof s, 1 core, median [min–max]"], rows)
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
    if len(d["configs"]) == 2:
        out.append(_config_ratios(*d["configs"]))
    return "\n\n".join(out)


def _solves(res):
    """A launch's solve seconds: the median, and [min–max] where it solved repeatedly."""
    runs = res.get("runs", [])
    if len(runs) < 2:
        return _g(res["seconds"])
    return f"{_g(res['seconds'])} [{_g(min(runs))}–{_g(max(runs))}]"


def _config_ratios(a, b):
    """Per-cube solve-time ratios of the second configuration over the first."""
    def desc(cfg):
        return ", ".join(f"{k}={cfg[k]}" for k in ("order", "split", "steal", "table_memory")
                         if k in cfg)
    by_seed = {c["seed"]: c for c in b["cubes"]}
    rows = []
    for ca in a["cubes"]:
        cb = by_seed.get(ca["seed"])
        if cb:
            rows.append([cb["one"]["seconds"] / ca["one"]["seconds"],
                         cb["two"]["seconds"] / ca["two"]["seconds"],
                         cb["two"]["generated"] / ca["two"]["generated"]])
    if not rows:
        return ""
    cols = list(zip(*rows))
    return (f"Solve time of ({desc(b)}) over ({desc(a)}), per cube: 1 worker "
            f"{_mm(_stats(cols[0]))}, 2 workers {_mm(_stats(cols[1]))}; nodes on 2 workers "
            f"{_mm(_stats(cols[2]))} (median [min–max] over {len(rows)} cubes).")


def rubik_heuristic(d):
    s = d["summary"]
    a, b = d.get("sides", ("direct", "inverse"))
    la, lb = d.get("labels", ("position only", "with inverse"))
    out = [f"Median serial solve {_g(s[a]['median_seconds'])} s ({la}), "
           f"{_g(s[b]['median_seconds'])} s ({lb}); nodes divided by "
           f"{_g(s['median_nodes_ratio'])} (median; geometric mean {_g(s['geomean_nodes_ratio'])}, "
           f"{_g(s['min_nodes_ratio'])}–{_g(s['max_nodes_ratio'])}), time by "
           f"{_g(s['median_time_ratio'])} (geometric mean {_g(s['geomean_time_ratio'])}, "
           f"{_g(s['min_time_ratio'])}–{_g(s['max_time_ratio'])}); slowest cube "
           f"{_g(s[a]['max_seconds'])} s -> {_g(s[b]['max_seconds'])} s.\n"]
    out.append(_table(["seed", "moves", f"{la} s", "nodes", f"{lb} s", "nodes",
                       "nodes ratio", "time ratio"],
                      [[c["seed"], c["length"], _g(c[a]["seconds"]),
                        _g(c[a]["generated"]), _g(c[b]["seconds"]),
                        _g(c[b]["generated"]), _g(c["nodes_ratio"]),
                        _g(c["time_ratio"])] for c in d["cubes"]]))
    return "\n\n".join(out)


def rubik_probe(d):
    r = d["results"]
    rows = [[name, _mm(r[name]["batched_ns"]), _mm(r[name]["chained_ns"])]
            for name in ("shared", "private")]
    ratio = d["shared_over_private"]
    pages = d.get("huge_page_bytes")
    return (_table(["table memory", "ns per load, 8 independent", "ns per load, dependent"],
                   rows)
            + f"\n\nShared over private: {_g(ratio['batched_ns'])}x (independent loads), "
              f"{_g(ratio['chained_ns'])}x (dependent); {d['probes']:,} random probes of the "
              f"{d['table_bytes'] / 1e9:.2f} GB huge table, median [min–max] of "
              f"{d['repeats']} passes. The private copy took {_g(d['copy_seconds'])} s to "
              f"make" + (f", {pages / 1e9:.2f} GB of it in 2 MB pages." if pages is not None
                         else "."))


def rubik_symmetry(d):
    rows = []
    for r in d["results"]:
        s = r["summary"]
        rows.append([r["name"], r["symmetries"], r["length"], _g(r["solve_seconds"]),
                     _g(r["solve_generated"]), r["proof_depth"],
                     f"{_g(s['pruned']['median_seconds'])} [{_g(s['pruned']['min_seconds'])}–"
                     f"{_g(s['pruned']['max_seconds'])}]", _g(s["pruned"]["generated"]),
                     f"{_g(s['full']['median_seconds'])} [{_g(s['full']['min_seconds'])}–"
                     f"{_g(s['full']['max_seconds'])}]", _g(s["full"]["generated"]),
                     _g(s["time_ratio"]), _g(s["nodes_ratio"])])
    return (f"{d['ranks'] - 1} workers, {d['repeats']} alternated proofs of each kind per "
            f"position (median [min–max]); the solve ran once, with the pruning.\n\n" +
            _table(["position", "symmetries", "moves", "solve s", "solve nodes",
                    "proof: no solution <=", "pruned s", "pruned nodes", "full s",
                    "full nodes", "time ratio", "nodes ratio"], rows))


def testbed(d):
    md = os.path.join(RESULTS, "testbed.md")
    return ("Every figure with its peer in the same run; the full generated report: "
            "[results/testbed.md](results/testbed.md).") if os.path.exists(md) else ""


#: (title, JSON glob, command, renderer)
SECTIONS = [
    ("Farm throughput vs mpi4py.futures", "farm_throughput.json",
     "python benchmarks/farm_bench.py", farm_throughput),
    ("Farm policies with one slow worker", "farm_imbalance.json",
     "python benchmarks/farm_bench.py", farm_imbalance),
    ("Farm over a slow link (pipelining)", "farm_slow_link.json",
     "python benchmarks/farm_slow_link.py", farm_slow_link),
    ("pyfw.futures against every peer", "futures_peers.json",
     "pip install -e .[bench] && python benchmarks/futures_peers.py", futures_peers),
    ("Farm scaling model: flat vs two-level", "farm_scale_model.json",
     "python benchmarks/farm_scale_model.py", farm_scale_model),
    ("Tuned collectives vs native MPI", "coll_osu.json",
     "python benchmarks/coll_osu.py", coll_osu),
    ("Link monitor: ping-pong against C and mpi4py", "monitor_pingpong.json",
     "python benchmarks/monitor_pingpong.py", monitor_pingpong),
    ("Link monitor overhead", "monitor_overhead.json",
     "python benchmarks/monitor_overhead.py", monitor_overhead),
    ("Dashboard overhead", "dashboard_overhead.json",
     "python benchmarks/dashboard_overhead.py", dashboard_overhead),
    ("Domain balance, one rank 3x slower", "domain_balance_n*.json",
     "pyfw-run -n N -- python benchmarks/domain_balance.py", domain_balance),
    ("Domain balance with modelled compute", "domain_balance_model_n*.json",
     "pyfw-run -n N -- python benchmarks/domain_balance_model.py", domain_balance_model),
    ("Halo exchange overlapped with compute", "domain_halo_overlap_n*.json",
     "pyfw-run -n N -- python benchmarks/domain_halo_overlap.py", domain_halo_overlap),
    ("Knee kernel against the bandwidth roof", "knee_kernel.json",
     "python benchmarks/knee_kernel.py", knee_kernel),
    ("Knee model sensitivity", "knee_sensitivity.json",
     "python benchmarks/knee_sensitivity.py", knee_sensitivity),
    ("Knee model against measured knees", "knee_validation.json",
     "python benchmarks/knee_validation.py", knee_validation),
    ("Knee model: muscle under ice against measured muscles", "knee_muscle.json",
     "python benchmarks/knee_muscle.py", knee_muscle),
    ("Knee model: post-operative knees by their starting temperature", "knee_postop.json",
     "python benchmarks/knee_postop.py", knee_postop),
    ("Knee model: what limits the late cooling", "knee_plateau.json",
     "python benchmarks/knee_plateau.py", knee_plateau),
    ("Knee model grid convergence", "knee_convergence.json",
     "python benchmarks/knee_convergence.py", knee_convergence),
    ("Rubik's cube solver", "rubik_bench.json",
     "python benchmarks/rubik_bench.py", rubik_bench),
    ("Rubik: lookups on the inverse position", "rubik_heuristic.json",
     "python benchmarks/rubik_heuristic.py", rubik_heuristic),
    ("Rubik: skipping the moves tight inverse values rule out", "rubik_tight.json",
     "python benchmarks/rubik_heuristic.py --compare tight --seeds 10-17 "
     "--out benchmarks/results/rubik_tight", rubik_heuristic),
    ("Rubik: the nx table against the huge table", "rubik_nx.json",
     "python benchmarks/rubik_heuristic.py --compare nx --seeds 0-5 "
     "--out benchmarks/results/rubik_nx", rubik_heuristic),
    ("Memory contention between two busy cores", "memory_contention.json",
     "python benchmarks/memory_contention.py", memory_contention),
    ("Rubik: two workers against one on random cubes", "rubik_speedup*.json",
     "python benchmarks/rubik_speedup.py", rubik_speedup),
    ("Rubik: work stealing against whole subtrees", "rubik_steal.json",
     "python benchmarks/rubik_speedup.py --seeds 10-17 --compare serial:adaptive:nosteal "
     "--out benchmarks/results/rubik_steal", rubik_speedup),
    ("Rubik: table probes in 2 MB pages against the shared mapping", "rubik_probe.json",
     "python benchmarks/rubik_probe.py", rubik_probe),
    ("Rubik: workers' tables in 2 MB pages against the shared mapping", "rubik_memory.json",
     "python benchmarks/rubik_speedup.py --seeds 10-29 --compare serial:adaptive:shared "
     "--out benchmarks/results/rubik_memory", rubik_speedup),
    ("Rubik: symmetric positions", "rubik_symmetry.json",
     "python benchmarks/rubik_symmetry.py", rubik_symmetry),
    ("Rubik: two workers against one on symmetric positions", "rubik_symspeedup.json",
     "python benchmarks/rubik_speedup.py --positions superflip,sym-seed3 "
     "--out benchmarks/results/rubik_symspeedup", rubik_speedup),
    ("Uneven clusters on the multi-node test bed", "testbed_farm.json",
     "python benchmarks/testbed_remeasure.py", testbed),
]


def _plots(pattern):
    stems = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(RESULTS, pattern))}
    pngs = sorted(p for p in glob.glob(os.path.join(RESULTS, "*.png"))
                  if any(os.path.basename(p).startswith(s) for s in stems))
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
           "not edit by hand. Every script runs the peer (mpi4py.futures, native MPI, the "
           "bandwidth roof, the ideal makespan, ...) side by side with pyfw in one run; the "
           "machines are shared and noisy, so figures are medians of repeated runs with "
           "min–max. Timings are never pass/fail tests.", ""]
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
