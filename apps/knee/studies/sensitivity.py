"""Why the knee model's cooling plateaus: one parameter at a time over its range, effect
on the 30/60/90-min drops, ranked.

    python -m apps.knee.studies sensitivity [--dx 2 --shape 100 80 80]
                                            [--point suprapatellar_pouch] [--publish]

The default scenario (healthy knee, crushed ice on three sides, 90 min) on a coarse grid
(2 mm: ~10 s per run here; the grid study of issue 16 says how far that is from 1 mm), each
parameter set to the low and the high end of its range with everything else at the
default. The ranges, and where they come from (``source``; "not re-checked" marks figures
quoted from memory in our notes that must be checked before they are relied on):

Writes ``sensitivity.json`` and a tornado plot ``sensitivity.png`` (to the results
directory: ``--out DIR``, default ``results/local/``), and ``model_band.json``: the default
run's drops with the band the study implies (the one-at-a-time deltas summed in
quadrature, each side separately), which the default run prints beside its single number.
With ``--publish`` the results go to the tracked ``apps/knee/studies/results/`` and the
band becomes the app's package data, ``apps/knee/sensitivity.json`` (how to regenerate it:
docs/knee.md).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from . import ensemble
from .common import (PACKAGE_SENSITIVITY, add_grid_options, add_output_options, grid_of,
                     keep_leg, output_dir, request, run_summary)

MARKS = ("30", "60", "90")


def _tissue(name):
    from ..tissues import DEFAULT_TISSUES
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
            "(python -m apps.knee.studies validation); 1e-4 is the bag's own film (0.05 mm of "
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


def simulate(extra, grid, minutes=90):
    """One run of the study (the default scenario with ``extra``): the drops (C) of every
    point at 30/60/90 min (those reached)."""
    return run_summary(extra, grid, minutes)["summary"]["drop"]


def band(base, deltas):
    """Low/high ends from one-at-a-time deltas summed in quadrature, each side apart."""
    down = math.sqrt(sum(min(0.0, d) ** 2 for pair in deltas for d in pair))
    up = math.sqrt(sum(max(0.0, d) ** 2 for pair in deltas for d in pair))
    return base - down, base + up


def plot(d, point, out):
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
    fig.savefig(os.path.join(out, "sensitivity.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_options(ap)
    ap.add_argument("--point", default="suprapatellar_pouch")
    add_output_options(ap)
    a = ap.parse_args(argv)
    out = output_dir(a)
    grid = grid_of(a)
    ensemble.set_ranks(a.ranks)
    t0 = time.time()
    ensemble.prefetch([request([], grid)] + [request(args, grid) for low, high, _, _ in
                                             parameters().values() for args in (low, high)])
    base = simulate([], grid)
    rows = []
    for name, (low, high, rng, source) in parameters().items():
        lo, hi = simulate(low, grid), simulate(high, grid)
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
    with open(os.path.join(out, "sensitivity.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    band_path = PACKAGE_SENSITIVITY if a.publish else os.path.join(out, "model_band.json")
    with open(band_path, "w") as fh:
        json.dump({"point": a.point, "grid": base_grid, "scenario": "default (ice, 3 sides)",
                   "base": {m: base[m][a.point] for m in MARKS}, "band": bands,
                   "made_by": "python -m apps.knee.studies sensitivity --publish"}, fh, indent=1)
    print(f"wrote {os.path.join(out, 'sensitivity.json')} and {band_path}")
    plot(d, a.point, out)
    for m in MARKS:
        print(f"{m} min: drop {base[m][a.point]:.2f} C, band {bands[m][0]:.2f} .. "
              f"{bands[m][1]:.2f} C")
    return 0


if __name__ == "__main__":
    sys.exit(main())
