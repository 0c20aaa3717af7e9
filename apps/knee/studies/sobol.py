"""Global sensitivity of the knee model: Sobol first- and total-order indices of the pouch's
90-min drop over the inputs of the ``sensitivity`` study, each uniform over its published
range, all varied at once.

    pyfw-run -n N -- python -m apps.knee.studies sobol [--n 64] [--surrogate 2048]
                                   [--dx 4 --shape 50 40 40] [--ranks 1] [--publish]

The ``sensitivity`` study moves one input at a time; it cannot see interactions, where two
inputs together do more (or less) than the sum of their own effects. Here every input is
drawn at once (Saltelli's scheme on a Sobol sequence: ``N * (d + 2)`` runs for ``d``
inputs, second order off) and SALib's estimators give, per input, the first-order index
S1 (the share of the drop's variance its own variation explains) and the total-order index
ST (its share with every interaction it takes part in); ST - S1 is what interactions add,
and 1 - sum(S1) is the variance no input explains alone. 95 % confidence intervals by
bootstrap (SALib's ``*_conf`` is the half-width; the widths reported are twice that).

Intervals shrink as 1/sqrt(N): under 0.05 for every index of the knee's 12 inputs takes N
of about 8,192 (114,688 runs). ``--surrogate M`` reaches it from M more runs: a fit of a
generic basis to them (:mod:`.surrogate`) whose indices SALib takes at N doubled until every
interval, fit and sampling together (:func:`surrogate_indices`), is under the target; the
Saltelli runs, which the fit never sees, test it.

The inputs and their ranges are ``sensitivity.parameters()``'s (one place for them): a draw
u in [0, 1] of an input sets every number that differs between its low and high arguments
to ``low + u (high - low)`` (so the pack's start temperature runs from -1 to -15 C, the
muscle's perfusion from x0.54 to x1.35 of IT'IS, ...). Inputs of the geometry (pack,
dressing, skin and fat) act through whole voxels on the study's grid. The runs go through
the study's ensemble (``--ranks`` per run under ``pyfw-run -n N``; serially otherwise).

Writes ``sobol.json`` and ``sobol.png`` (``--out DIR``, default ``results/local/``;
``--publish``: the tracked ``apps/knee/studies/results/``). Needs SALib (the ``studies``
extra: ``pip install -e .[studies]``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass

import numpy as np

from pyfw.monitor.results import machine

from . import ensemble
from .common import add_grid_options, add_output_options, keep_leg, output_dir, request
from .sensitivity import parameters
from .surrogate import fit_quality

POINT = "suprapatellar_pouch"
MINUTE = "90"
#: the other drops analysed from the same runs (no run more): Warren's 30 and 60 min
ALSO = ("30", "60")
#: Warren et al. 2004's medians at the pouch, ice bag (the validation's held-out target)
WARREN = {"30": 3.3, "60": 12.8, "90": 15.2}
#: the 95 % confidence interval every index should be narrower than (issue 38)
TARGET_WIDTH = 0.05
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def blend(low, high, u):
    """``low``'s arguments with every number that differs from ``high``'s at the same place
    moved to ``low + u (high - low)`` (the two lists have the same shape: the sensitivity
    study's ends of one input)."""
    out = []
    for a, b in zip(low, high, strict=True):
        na, nb = _NUMBER.findall(a), _NUMBER.findall(b)
        if a == b or len(na) != len(nb) or _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
            if a != b:
                raise ValueError(f"cannot blend {a!r} and {b!r}")
            out.append(a)
            continue
        vals = iter(f"{float(x) + u * (float(y) - float(x)):.6g}" if x != y else x
                    for x, y in zip(na, nb))
        out.append(_NUMBER.sub(lambda m: next(vals), a))
    return out


def problem_of(names):
    """SALib's problem: the inputs as draws u in [0, 1] (their ranges: ``blend``)."""
    return {"num_vars": len(names), "names": list(names), "bounds": [[0.0, 1.0]] * len(names)}


def samples(problem, n, seed=0):
    """Saltelli's ``n * (d + 2)`` input rows (scrambled Sobol sequence; ``n`` a power of 2)."""
    from SALib.sample import sobol as sobol_sample
    return sobol_sample.sample(problem, n, calc_second_order=False, scramble=True, seed=seed)


def analyse(problem, y, seed=0, resamples=1000):
    """First- and total-order indices with their 95 % half-widths (SALib's estimators:
    Saltelli 2010 first order, Jansen total order; bootstrap intervals)."""
    from SALib.analyze import sobol as sobol_analyze
    si = sobol_analyze.analyze(problem, np.asarray(y, dtype=float), calc_second_order=False,
                               conf_level=0.95, num_resamples=resamples, seed=seed,
                               print_to_console=False)
    return {k: np.asarray(si[k], dtype=float).tolist() for k in ("S1", "S1_conf", "ST",
                                                                 "ST_conf")}


def indices(problem, request_of, output_of, n, seed=0):
    """Sobol indices of ``output_of(result)`` over ``problem``: ``request_of(row)`` names the
    run of one input row (an :mod:`.ensemble` request); every run goes out at once
    (:func:`.ensemble.prefetch`). Returns the rows, outputs and indices."""
    x = samples(problem, n, seed)
    reqs = [request_of(row) for row in x]
    ensemble.prefetch(reqs)
    y = np.array([output_of(ensemble.result(r)) for r in reqs])
    return x, y, analyse(problem, y, seed)


def widths(si):
    """The 95 % interval widths of every S1 and ST (twice SALib's half-widths)."""
    return {"S1": [2.0 * c for c in si["S1_conf"]], "ST": [2.0 * c for c in si["ST_conf"]]}


def n_for_target(n, si, target=TARGET_WIDTH):
    """The smallest power of 2 that, with intervals shrinking as 1/sqrt(N), brings the widest
    interval measured at ``n`` under ``target``."""
    widest = max(max(w) for w in widths(si).values())
    need = n * (widest / target) ** 2
    return 1 << max(0, math.ceil(math.log2(max(need, 1.0))))


def design(d, m, seed=0):
    """``m`` draws in [0, 1]^d spread evenly (a scrambled Sobol sequence; ``m`` a power of
    2): the runs a surrogate is fitted to."""
    from scipy.stats import qmc
    return qmc.Sobol(d, scramble=True, seed=seed).random(m)


def surrogate_indices(problem, u, y, target=TARGET_WIDTH, refits=100, n_max=1 << 15,
                      seed=0):
    """Sobol indices of a surrogate fitted to runs ``y`` at draws ``u``
    (:func:`.surrogate.select`), by SALib's estimators on ``N`` Saltelli draws of it, with
    95 % intervals that hold both sources of doubt: the fit (the spread of the indices of
    ``refits`` surrogates fitted to bootstrap resamples of the runs, at the same draws) and
    the sampling at ``N`` (SALib's own bootstrap), combined as independent normal errors.
    ``N`` doubles from 2^11 until every interval is narrower than ``target`` (or reaches
    ``n_max``)."""
    from . import surrogate
    u, y = np.asarray(u, dtype=float), np.asarray(y, dtype=float)
    fitted, tried = surrogate.select(u, y, seed=seed)
    rng = np.random.default_rng(seed)
    coefs = np.column_stack(
        [surrogate.Surrogate.fit(u[i], y[i], fitted.knots, fitted.order).coef
         for i in (rng.integers(0, len(y), len(y)) for _ in range(refits))])
    d = problem["num_vars"]
    n = 1 << 11
    while True:
        x = samples(problem, n, seed)
        point = analyse(problem, fitted.predict(x), seed, resamples=200)
        ys = surrogate.evaluate(x, fitted.knots, fitted.order, coefs)
        boot = np.array([_point_estimates(problem, ys[:, b]) for b in range(refits)])
        fit_half = np.std(boot, axis=0, ddof=1) * 1.959964
        for k, key in ((0, "S1_conf"), (d, "ST_conf")):
            point[key] = np.hypot(fit_half[k:k + d], point[key]).tolist()
        widest = 2.0 * max(max(point["S1_conf"]), max(point["ST_conf"]))
        if widest < target or n >= n_max:
            return {"si": point, "n": n, "refits": refits, "knots": fitted.knots,
                    "order": fitted.order, "terms": fitted.terms(), "bases_tried": tried,
                    "model": fitted}
        n *= 2


def _point_estimates(problem, y):
    """SALib's S1 and ST (concatenated) without its bootstrap (the refits give the
    interval)."""
    from SALib.analyze import sobol as sobol_analyze
    si = sobol_analyze.analyze(problem, np.asarray(y, dtype=float), calc_second_order=False,
                               num_resamples=2, seed=0, print_to_console=False)
    return np.concatenate([si["S1"], si["ST"]])


def knee_request(names, grid, minutes=90):
    """``row -> request``: the default scenario with each input blended to its draw."""
    ends = parameters()

    def request_of(row):
        extra = []
        for name, u in zip(names, row):
            low, high = ends[name][0], ends[name][1]
            extra += blend(low, high, float(u))
        return request(extra, grid, minutes)
    return request_of


def pouch_drop(doc, minute=MINUTE):
    return doc["summary"]["drop"][minute][POINT]


def table_of(names, ends, si):
    """One row per input: S1, ST, their 95 % widths and ST - S1, ranked by ST."""
    w = widths(si)
    rows = [{"parameter": name, "range": ends[name][2], "S1": si["S1"][i],
             "S1_ci": w["S1"][i], "ST": si["ST"][i], "ST_ci": w["ST"][i],
             "interactions": si["ST"][i] - si["S1"][i]} for i, name in enumerate(names)]
    return sorted(rows, key=lambda r: -r["ST"])


def spread(y, measured):
    """The drops' spread over the draws, and where a measured value falls in it."""
    y = np.asarray(y, dtype=float)
    return {"mean": float(np.mean(y)), "std": float(np.std(y)), "min": float(np.min(y)),
            "p05": float(np.percentile(y, 5)), "p95": float(np.percentile(y, 95)),
            "max": float(np.max(y)), "warren": measured,
            "share_within_30pct_of_warren": float(np.mean(np.abs(y / measured - 1) <= 0.3))}


@dataclass(frozen=True)
class Ishigami:
    """The Ishigami function at one draw (u in [0, 1]^3 mapped to [-pi, pi]^3) as an
    :mod:`.ensemble` request: the analytic stand-in the tests run through ``indices``. Its
    indices are known: S1 = (0.3139, 0.4424, 0), ST = (0.5576, 0.4424, 0.2437) for
    a = 7, b = 0.1."""
    u: tuple
    a: float = 7.0
    b: float = 0.1

    def __call__(self, comm) -> dict:
        x = [-math.pi + 2.0 * math.pi * v for v in self.u]
        y = (math.sin(x[0]) + self.a * math.sin(x[1]) ** 2
             + self.b * x[2] ** 4 * math.sin(x[0]))
        return {"y": comm.bcast(y, root=0)}

    @staticmethod
    def exact(a=7.0, b=0.1):
        """(S1, ST) of the Ishigami function."""
        v1 = 0.5 * (1 + b * math.pi ** 4 / 5) ** 2
        v2 = a ** 2 / 8
        v13 = b ** 2 * math.pi ** 8 * (1 / 18 - 1 / 50)
        var = v1 + v2 + v13
        return (v1 / var, v2 / var, 0.0), ((v1 + v13) / var, v2 / var, v13 / var)


def plot(d, out):
    """The indices as bars with their 95 % intervals: the knee runs' (Saltelli N), and
    beside them the surrogate's where the study fitted one (inputs in the same order)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sg = d.get("surrogate")
    panels = [(f"knee runs: N = {d['n']}, {d['runs']} runs; sum S1 = {d['sum_S1']:.2f}",
               d["table"])]
    if sg:
        panels.append((f"surrogate of {sg['runs']} runs (held-out R$^2$ "
                       f"{sg['held_out']['r2']:.3f}): N = {sg['n']}; sum S1 = "
                       f"{sg['sum_S1']:.2f}", sg["table"]))
    order = [r["parameter"] for r in panels[-1][1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 0.45 * len(order)
                                                      + 1.8), sharey=True, squeeze=False)
    y = np.arange(len(order))[::-1]
    for ax, (title, table) in zip(axes[0], panels):
        rows = {r["parameter"]: r for r in table}
        rows = [rows[name] for name in order]
        ax.barh(y + 0.18, [r["S1"] for r in rows], 0.36,
                xerr=[r["S1_ci"] / 2 for r in rows], color="tab:blue",
                label="first order S1", capsize=2)
        ax.barh(y - 0.18, [r["ST"] for r in rows], 0.36,
                xerr=[r["ST_ci"] / 2 for r in rows], color="tab:red", alpha=0.7,
                label="total order ST", capsize=2)
        ax.axvline(0, c="k", lw=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(f"share of the variance of the {MINUTE}-min drop, "
                      f"{POINT.replace('_', ' ')} (bars: 95 % CI)", fontsize=8)
        ax.legend(fontsize=8)
    axes[0][0].set_yticks(y, order, fontsize=8)
    fig.suptitle(f"knee model, Sobol indices (grid dx {d['grid'][1]} mm)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sobol.png"), dpi=110)
    plt.close(fig)


def _surrogate_section(problem, names, ends, u_fit, y_fit, x_test, y_test, seed):
    """The surrogate's indices (fitted to the runs at ``u_fit``) and how well it predicts
    the Saltelli runs ``x_test``, which it was not fitted to."""
    s = surrogate_indices(problem, u_fit, y_fit, seed=seed)
    si, model = s.pop("si"), s.pop("model")
    widest = max(max(v) for v in widths(si).values())
    return {"runs": len(y_fit), **s, "table": table_of(names, ends, si),
            "sum_S1": float(sum(si["S1"])),
            "sum_interactions": float(sum(si["ST"]) - sum(si["S1"])),
            "widest_ci": widest, "met": widest < TARGET_WIDTH,
            "held_out": fit_quality(y_test, model.predict(x_test)),
            "samples": np.asarray(u_fit).tolist(), "outputs": list(map(float, y_fit)),
            "method": "a basis expansion (surrogate.py: hat functions per input, Legendre "
                      "pair products; knots and order by 8-fold cross-validation) fitted to "
                      "runs on a scrambled Sobol design; SALib's sobol.analyze on N Saltelli "
                      "draws of it; 95 % CI: the spread of the indices of surrogates refitted to "
                      "bootstrap resamples of the runs and SALib's bootstrap at N, combined as "
                      "independent normal errors"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_options(ap)
    ap.set_defaults(dx="4", shape=["50", "40", "40"])
    ap.add_argument("--n", type=int, default=64,
                    help="base sample N (a power of 2): N * (d + 2) runs (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--surrogate", type=int, default=0, metavar="M",
                    help="also fit a surrogate to M more runs (a power of 2, spread evenly "
                         "over the inputs) and give its indices, with N doubled until every "
                         "interval is under the target; the N * (d + 2) runs test it "
                         "(default 0: none)")
    add_output_options(ap)
    a = ap.parse_args(argv)
    for opt, v in (("--n", a.n), ("--surrogate", a.surrogate)):
        if (v < 2 and opt == "--n") or v & (v - 1):
            ap.error(f"{opt} must be a power of 2, got {v}")
    out = output_dir(a)
    ensemble.set_ranks(a.ranks)
    grid = ["--dx", a.dx, "--shape", *a.shape]
    ends = parameters()
    names = list(ends)
    problem = problem_of(names)
    print(f"{len(names)} inputs, N = {a.n}: {a.n * (len(names) + 2)} runs"
          + (f", and {a.surrogate} for the surrogate" if a.surrogate else ""), flush=True)
    t0 = time.time()
    request_of = knee_request(names, grid)
    u_fit = design(len(names), a.surrogate, a.seed) if a.surrogate else np.empty((0, 0))
    # every run of the study at once: the farm schedules them together
    ensemble.prefetch([request_of(r) for r in samples(problem, a.n, a.seed)]
                      + [request_of(r) for r in u_fit])
    x, y, si = indices(problem, request_of, pouch_drop, a.n, a.seed)
    table = table_of(names, ends, si)
    w = widths(si)
    widest = max(max(v) for v in w.values())
    # the same runs' drops at 30 and 60 min (Warren's other marks): no run more
    docs = [ensemble.result(request_of(row)) for row in x]
    also = {}
    for m in ALSO:
        ym = [pouch_drop(doc, m) for doc in docs]
        sim = analyse(problem, ym, a.seed)
        also[m] = {"table": table_of(names, ends, sim), "sum_S1": float(sum(sim["S1"])),
                   "drop": spread(ym, WARREN[m]), "outputs": ym}
    d = {"command": "python -m apps.knee.studies sobol "
                    + " ".join(sys.argv[2:] if argv is None else argv),
         "machine": machine(), "grid": keep_leg(grid, []), "point": POINT, "minute": MINUTE,
         "n": a.n, "runs": len(y), "seed": a.seed, "inputs": len(names),
         "drop": spread(y, WARREN[MINUTE]),
         "table": table, "sum_S1": float(sum(si["S1"])),
         "widest_ci": widest, "target_ci": TARGET_WIDTH,
         "n_for_target": n_for_target(a.n, si),
         "other_minutes": also,
         "method": "SALib Saltelli sampling (scrambled Sobol), sobol.analyze (Saltelli 2010 S1, "
                   "Jansen ST), bootstrap 95 % CI (width = 2 x conf); inputs uniform over "
                   "the sensitivity study's ranges",
         "seconds": time.time() - t0,
         "samples": x.tolist(), "outputs": y.tolist()}
    if a.surrogate:
        y_fit = [pouch_drop(ensemble.result(request_of(r))) for r in u_fit]
        d["surrogate"] = _surrogate_section(problem, names, ends, u_fit, y_fit, x, y, a.seed)
        d["seconds"] = time.time() - t0
    with open(os.path.join(out, "sobol.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    plot(d, out)
    _print_table(f"the knee runs, N = {a.n}", table)
    for m, dr, s1 in [(MINUTE, d["drop"], d["sum_S1"])] + [
            (m, v["drop"], v["sum_S1"]) for m, v in also.items()]:
        print(f"drop at {m} min: mean {dr['mean']:.2f} C, sd {dr['std']:.2f} C, "
              f"{dr['min']:.2f} .. {dr['max']:.2f} C (Warren {dr['warren']} C; "
              f"{100 * dr['share_within_30pct_of_warren']:.0f} % of the draws within 30 % of "
              f"it); sum S1 = {s1:.3f}")
    print(f"widest 95 % CI {widest:.3f} (target < {TARGET_WIDTH}): "
          + ("met" if widest < TARGET_WIDTH else
             f"not met; about N = {d['n_for_target']} would meet it"))
    if a.surrogate:
        sg = d["surrogate"]
        _print_table(f"the surrogate ({sg['runs']} runs, {sg['terms']} terms), N = {sg['n']}",
                     sg["table"])
        ho = sg["held_out"]
        print(f"surrogate on the {len(y)} Saltelli runs it was not fitted to: rmse "
              f"{ho['rmse']:.3f} C, R^2 {ho['r2']:.4f}; sum S1 {sg['sum_S1']:.3f}, "
              f"interactions (sum ST - S1) {sg['sum_interactions']:+.3f}; widest 95 % CI "
              f"{sg['widest_ci']:.3f}: " + ("met" if sg["met"] else "not met"))
    print(f"wrote {out}/sobol.json and .png")
    return 0


def _print_table(title, table):
    print(title)
    print(f"{'input':46s}    S1 (95% CI width)    ST (95% CI width)   ST-S1")
    for r in table:
        print(f"{r['parameter']:46s} {r['S1']:6.3f} ({r['S1_ci']:.3f})     {r['ST']:6.3f} "
              f"({r['ST_ci']:.3f})     {r['interactions']:+.3f}")


if __name__ == "__main__":
    sys.exit(main())
