"""Why the knee model's cooling plateaus: one parameter at a time over its range, effect
on the 30/60/90-min drops, ranked.

    python benchmarks/knee_sensitivity.py [--dx 2 --shape 100 80 80] [--point suprapatellar_pouch]

The default scenario (healthy knee, crushed ice on three sides, 90 min) on a coarse grid
(2 mm: ~10 s per run here; the grid study of issue 16 says how far that is from 1 mm), each
parameter set to the low and the high end of its range with everything else at the
default. The ranges, and where they come from (``source``; "not re-checked" marks figures
quoted from memory in our notes that must be checked before they are relied on):

Writes ``benchmarks/results/knee_sensitivity.json`` and a tornado plot ``.png``, and
``apps/knee/sensitivity.json``: the default run's drops with the band the study implies
(the one-at-a-time deltas summed in quadrature, each side separately), which the default
run prints beside its single number.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, ROOT)

MARKS = ("30", "60", "90")


def _tissue(name):
    from apps.knee.tissues import DEFAULT_TISSUES
    return next(t for t in DEFAULT_TISSUES if t.name == name)


def parameters():
    """name -> (low args, high args, range text, source): the tissues' parameters, then the
    scenario's settings."""
    return {**_tissue_parameters(), **_setting_parameters()}


def _tissue_parameters():
    """The ranges of the tissue table's values (relative to the current ones)."""
    m, f, s = _tissue("muscle"), _tissue("fat"), _tissue("skin")
    contact_high = max(2.0 * _tissue("ice").contact, 0.01)
    perf = lambda t, x: ["--set", f"{t.name}.perfusion={t.perfusion * x:.6g}"]  # noqa: E731
    return {
        "muscle perfusion": (perf(m, 0.54), perf(m, 1.35),
                             "x0.54 .. x1.35 of IT'IS 37 mL/min/kg (20-50 mL/min/kg)",
                             "IT'IS database: perfusion rates vary widely (its own "
                             "documentation); resting muscle ~2-5 mL/min/100 g (not "
                             "re-checked)"),
        "skin and fat perfusion": (perf(s, 0.25) + perf(f, 0.25), perf(s, 1.0) + perf(f, 1.0),
                                   "x0.25 .. x1 of IT'IS",
                                   "Khoshnevis et al. 2015 (PMC4395553): skin perfusion "
                                   "falls strongly under cryotherapy devices (the low "
                                   "end); IT'IS's resting value (the high end)"),
        "cold response Q10 (skin, fat, muscle, tendon)": (
            [a for t in (s, f, m, _tissue("tendon")) for a in ("--set", f"{t.name}.q10=3.65")],
            [a for t in (s, f, m, _tissue("tendon")) for a in ("--set", f"{t.name}.q10=4.25")],
            f"Q10 3.65 .. 4.25 (default {m.q10:g})",
            "local skin cooling 34 -> 28 C cut skin blood flow to 42-46 % at three forearm "
            "sites (Hodges et al. 2007, Am J Physiol Heart Circ Physiol 293:H3187): "
            "Q10 3.65-4.25"),
        "pack-skin contact resistance": (
            ["--set", "ice.contact=1e-4"], ["--set", f"ice.contact={contact_high:g}"],
            f"1e-4 .. {contact_high:g} m2 K/W (fitted {_tissue('ice').contact:g})",
            "fitted with the Q10 on the thigh muscle under ice of Otte et al. 2002 "
            "(benchmarks/knee_validation.py); 1e-4 is the bag's own film (0.05 mm of "
            "polyethylene), the high end (twice the fit, at least 0.01) is ours"),
        "muscle conductivity": (["--set", f"muscle.k={m.k * 0.8:.4g}"],
                                ["--set", f"muscle.k={m.k * 1.2:.4g}"], "+-20 % of IT'IS",
                                "IT'IS database spread (not re-checked)"),
    }


def _setting_parameters():
    """The ranges of the scenario's settings (command-line options)."""
    return {
        "vasoconstriction lag": (["--perfusion-lag", "0"], ["--perfusion-lag", "600"],
                                 "0 .. 600 s (default 0)",
                                 "muscle blood flow under cold packs unchanged for 5 min, "
                                 "-49 % at 10 min, -66 % at most (Thorsson et al., Med Sci "
                                 "Sports Exerc 17 (1985) 710)"),
        "arterial blood temperature": (["--t-arterial", "33.5"], ["--t-arterial", "37"],
                                       "33.5 .. 37 C (default 34.5)",
                                       "tibialis anterior 34.55 +- 1.02 C (Flouris et al., "
                                       "Physiol Meas 36 (2015) N103): its lower 1 SD, up to "
                                       "the core's 37 C"),
        "pack thickness (cold reserve)": (["--thickness", "8"], ["--thickness", "40"],
                                          "8 .. 40 mm (default 15)",
                                          "0.3 to 1.9 kg of ice over the three sides (the "
                                          "default 15 mm holds 0.6 kg): bags of 750 g (Otte "
                                          "2002), 1.8 kg (Myrer 2001) and 2 kg (Sanchez-"
                                          "Inchausti 2005)"),
        "pack start temperature": (["--pack-temp", "-1"], ["--pack-temp", "-15"],
                                   "-1 (crushed ice) .. -15 C (frozen pack)",
                                   "crushed ice melts at 0 C; a freezer pack starts at "
                                   "-15 to -20 C"),
        "dressing under the pack (contact)": (["--bandage", "0"], ["--bandage", "2"],
                                              "0 .. 2 mm (default 0)",
                                              "Martin et al. 2002 / Breslin 2015: "
                                              "post-operative dressings of 1-2 mm"),
        "skin and fat over the pouch": (["--subcutis", "6"], ["--subcutis", "16"],
                                        "6 .. 16 mm (default 10)",
                                        "half the anterior-thigh skinfolds of 12-32 mm, "
                                        "the middle of the 0-40 mm of Otte et al.'s 47 "
                                        "volunteers (Arch Phys Med Rehabil 83 (2002) 1501)"),
        "skin-air coefficient": (["--h-air", "5"], ["--h-air", "10"], "5 .. 10 W/(m2 K)",
                                 "natural convection + radiation (research notes, "
                                 "heat.md: h 5-10)"),
    }


def keep_leg(grid, extra):
    """``grid`` with a cross-section wide enough for the full leg radius outside of which
    ``extra``'s device fits: the phantom shrinks the leg to make room for a device that
    does not fit, which would change the anatomy along with the device (a thicker pack
    or a dressing would also mean a thinner leg)."""
    from apps.knee.cli import parser
    from apps.knee.phantom import Geometry
    a = parser().parse_args(list(grid) + list(extra))
    geo = Geometry(shape=tuple(a.shape), dx=a.dx, device=a.device, thickness=a.thickness,
                   length=a.length, bandage=a.bandage)
    if geo.device == "none":
        return list(grid)
    need = int(math.ceil(2.0 * (geo.radius + geo.device_depth() + a.dx) / a.dx - 1e-9)) + 2
    need += need % 2       # even: the leg's voxels then lie as on any other even grid
    nz, ny, nx = a.shape
    if min(ny, nx) >= need:
        return list(grid)
    g = list(grid)
    i = g.index("--shape")
    g[i + 1:i + 4] = [str(nz), str(max(ny, need)), str(max(nx, need))]
    return g


def add_grid_options(ap):
    """``--dx`` and ``--shape`` of the knee benchmarks: a coarse grid by default (2 mm, the
    default leg; ~10 s per 90-min run here)."""
    ap.add_argument("--dx", default="2", help="voxel size, mm (default 2)")
    ap.add_argument("--shape", nargs=3, default=["100", "80", "80"],
                    help="grid NZ NY NX before keep_leg widens it (default 100 80 80)")


def grid_of(args):
    """The CLI grid options of parsed ``add_grid_options`` arguments."""
    return ["--dx", args.dx, "--shape", *args.shape]


#: finished runs by (grid, options, minutes): the runs are deterministic, and the fits
#: repeat configurations (a later sweep, or two studies with the same scenario)
_RUNS = {}


def run_summary(extra, grid, minutes=90):
    """One serial knee run through the CLI: its ``summary.json`` (drops and histories;
    shared between identical calls, so read it, do not change it). The grid is widened
    where the device would otherwise shrink the leg (``keep_leg``)."""
    from apps.knee.cli import main
    grid = keep_leg(grid, extra)
    key = (tuple(grid), tuple(extra), minutes)
    if key in _RUNS:
        return _RUNS[key]
    with tempfile.TemporaryDirectory() as out:
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(grid + ["--minutes", str(minutes), "--no-plots", "--quiet",
                                "--out", out] + list(extra))
        if code != 0:
            raise RuntimeError(f"knee run failed with {extra}")
        with open(os.path.join(out, "summary.json")) as fh:
            _RUNS[key] = json.load(fh)
    return _RUNS[key]


def run_once(extra, grid, minutes=90):
    """The drops (C) of every point at 30/60/90 min (those reached) of one run."""
    return run_summary(extra, grid, minutes)["summary"]["drop"]


def band(base, deltas):
    """Low/high ends from one-at-a-time deltas summed in quadrature, each side apart."""
    down = math.sqrt(sum(min(0.0, d) ** 2 for pair in deltas for d in pair))
    up = math.sqrt(sum(max(0.0, d) ** 2 for pair in deltas for d in pair))
    return base - down, base + up


def plot(d, point):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = d["ranked"]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    base = d["base"]["90"][point]
    for i, r in enumerate(reversed(rows)):
        lo, hi = r["drop90_low"] - base, r["drop90_high"] - base
        ax.barh(i, lo, color="tab:blue", label="low end" if i == 0 else None)
        ax.barh(i, hi, color="tab:red", alpha=0.7, label="high end" if i == 0 else None)
    ax.set_yticks(range(len(rows)), [r["parameter"] for r in reversed(rows)], fontsize=8)
    ax.axvline(0, c="k", lw=0.8)
    ax.set_xlabel(f"change of the 90-min drop at {point.replace('_', ' ')} (C; base "
                  f"{base:.2f} C)")
    ax.legend(fontsize=8)
    ax.set_title("knee model sensitivity (one at a time)")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "knee_sensitivity.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_options(ap)
    ap.add_argument("--point", default="suprapatellar_pouch")
    a = ap.parse_args(argv)
    grid = grid_of(a)
    t0 = time.time()
    base = run_once([], grid)
    rows = []
    for name, (low, high, rng, source) in parameters().items():
        lo, hi = run_once(low, grid), run_once(high, grid)
        row = {"parameter": name, "range": rng, "source": source, "low_args": low,
               "high_args": high}
        for m in MARKS:
            row[f"drop{m}_low"] = lo[m][a.point]
            row[f"drop{m}_high"] = hi[m][a.point]
        row["effect90"] = abs(row["drop90_high"] - row["drop90_low"])
        rows.append(row)
        print(f"{name:40s} 90-min drop {row['drop90_low']:5.2f} .. {row['drop90_high']:5.2f} "
              f"(base {base['90'][a.point]:.2f})", flush=True)
    rows.sort(key=lambda r: -r["effect90"])
    bands = {}
    for m in MARKS:
        b = base[m][a.point]
        deltas = [(r[f"drop{m}_low"] - b, r[f"drop{m}_high"] - b) for r in rows]
        bands[m] = band(b, deltas)
    base_grid = keep_leg(grid, [])   # cases needing more room for their device ran wider
    d = {"grid": base_grid, "point": a.point, "base": base, "ranked": rows, "band": bands,
         "seconds": time.time() - t0,
         "method": "one at a time; band = base -/+ quadrature sum of the negative/positive "
                   "deltas"}
    with open(os.path.join(RESULTS, "knee_sensitivity.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    with open(os.path.join(ROOT, "apps", "knee", "sensitivity.json"), "w") as fh:
        json.dump({"point": a.point, "grid": base_grid, "scenario": "default (ice, 3 sides)",
                   "base": {m: base[m][a.point] for m in MARKS}, "band": bands,
                   "made_by": "benchmarks/knee_sensitivity.py"}, fh, indent=1)
    plot(d, a.point)
    for m in MARKS:
        print(f"{m} min: drop {base[m][a.point]:.2f} C, band {bands[m][0]:.2f} .. "
              f"{bands[m][1]:.2f} C")
    return 0


if __name__ == "__main__":
    sys.exit(main())
