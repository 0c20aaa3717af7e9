"""The knee model's thigh and calf muscle under ice, against measured muscles.

    python -m apps.knee.studies muscle [--dx 2 --shape 100 80 80] [--publish]

The joint targets of the ``validation`` study mix the physics between the pack and a deep point
with the joint's anatomy, which no study measured. Two studies measured muscle temperature
under a bag of crushed ice directly, in groups of subcutaneous fat, the layer that sets how
fast the cold gets in; they test the same physics (the bag's contact, conduction through
skin and fat, the perfusion of muscle and its cold response) where the anatomy is simple:

* **Otte et al. 2002** (Arch Phys Med Rehabil 83:1501, pubmed 12422316), n = 47: a 750 g
  crushed-ice bag on the anterior thigh until the muscle 1 cm under the fat had cooled by
  7 C. Minutes needed (mean +- SD): 8.0 +- 3.4, 23.3 +- 6.7, 37.8 +- 9.6 and 58.6 +- 11.7
  for anterior-thigh skinfolds of 0-10, 11-20, 21-30 and 31-40 mm.
* **Myrer et al. 2001** (J Athl Train 36:32, PMC155399), n = 30: a 1.8 kg crushed-ice pack
  on the medial calf for 20 min. Drop at its end 1 cm under the fat 14.43 / 9.06 / 5.00 C,
  3 cm under it 6.22 / 3.86 / 2.42 C, for calf skinfolds <= 8, 10-18 and >= 20 mm
  (abstract: means only). Then the pack came off: 30 min later the muscle 1 cm under the
  fat had rewarmed by 5.39 and 2.22 C in the two thinner groups and was still 0.49 C
  colder in the thickest; 3 cm under it all three were colder than at the pack's removal,
  by 1.63, 1.83 and 2.10 C. The model takes its pack off at 20 min (``--device-off``) and
  runs on to 50; a rewarming is a positive change, the after-drop a negative one. The
  rewarming is also run with vessels that stay constricted once the cold has gone
  (``--perfusion-recovery inf``; skin blood flow at the knee stayed depressed for 2 h after
  1 h of cooling, Khoshnevis et al., J Biomech Eng 138 (2016) 031004), for comparison.

Set-up, from the methods as far as the model can express them: the phantom's leg with its
skin and fat (``--subcutis``) half the skinfold (a fold is a double layer; the calipers'
compression is ignored) at the middle of the group, and at the group's ends for a band
(Myrer's open group: 20-28 mm, an assumption; skin alone where half a fold is under the
model's 2 mm skin). The bag is the model's crushed-ice pack (15 mm, at its melting point,
the model's contact) on one 100-degree side of the leg, 120 mm long,
centred on the probe (``--device-at``): the thigh probe sits in vastus lateralis 40 mm
above the joint line, the calf probes medially 40 mm below it (``Geometry.points``).
Otte's bag lay on the anterior thigh; the phantom's front 40 mm above the joint line is
the patella's upper part and the pouch, not muscle, so the bag and the probe go to the
lateral side, where skin, fat and muscle lie in the same order. The
bag sizes differ (750 g and 1.8 kg); the model's pack holds ice for the whole run either
way, so its size matters only through its footprint. The couplings are the model's
defaults, which are what the ``validation`` study fits: the bag's contact and the perfusion's
Q10 on Otte's four groups (so Otte's rows are the fit, and Myrer's are held out). A target
is met within the study's SD or +-30 %, as in the validation.

Writes ``muscle.json`` and ``.png`` (``--out DIR``, default ``results/local/``;
``--publish``: the tracked ``apps/knee/studies/results/``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from pyfw.monitor.results import machine

from . import ensemble
from .common import (add_grid_options, add_output_options, grid_of, keep_leg, output_dir,
                     request)

SKIN_MM = 2.0
PROBE_MM = 40.0          # the muscle probes' distance from the joint line (phantom)
COOLING_C = 7.0          # Otte's end point
OTTE_MINUTES = 90        # long enough for the thickest group's 58.6 +- 11.7 min
MYRER_ON, MYRER_AFTER = 20, 30   # minutes of the pack, minutes followed after it came off
REWARMING = "rewarming 20-50 min"
PERSISTENT = ["--perfusion-recovery", "inf"]   # constricted vessels never open again

#: (study, skinfold group mm (low, high), point, target kind, measured, SD or None)
TARGETS = [
    ("Otte 2002 thigh", (0, 10), "thigh_lateral_im1", "minutes to -7 C", 8.0, 3.4),
    ("Otte 2002 thigh", (11, 20), "thigh_lateral_im1", "minutes to -7 C", 23.3, 6.7),
    ("Otte 2002 thigh", (21, 30), "thigh_lateral_im1", "minutes to -7 C", 37.8, 9.6),
    ("Otte 2002 thigh", (31, 40), "thigh_lateral_im1", "minutes to -7 C", 58.6, 11.7),
    ("Myrer 2001 calf", (0, 8), "calf_medial_im1", "drop at 20 min", 14.43, None),
    ("Myrer 2001 calf", (10, 18), "calf_medial_im1", "drop at 20 min", 9.06, None),
    ("Myrer 2001 calf", (20, 28), "calf_medial_im1", "drop at 20 min", 5.00, None),
    ("Myrer 2001 calf", (0, 8), "calf_medial_im3", "drop at 20 min", 6.22, None),
    ("Myrer 2001 calf", (10, 18), "calf_medial_im3", "drop at 20 min", 3.86, None),
    ("Myrer 2001 calf", (20, 28), "calf_medial_im3", "drop at 20 min", 2.42, None),
    ("Myrer 2001 calf", (0, 8), "calf_medial_im1", REWARMING, 5.39, None),
    ("Myrer 2001 calf", (10, 18), "calf_medial_im1", REWARMING, 2.22, None),
    ("Myrer 2001 calf", (20, 28), "calf_medial_im1", REWARMING, -0.49, None),
    ("Myrer 2001 calf", (0, 8), "calf_medial_im3", REWARMING, -1.63, None),
    ("Myrer 2001 calf", (10, 18), "calf_medial_im3", REWARMING, -1.83, None),
    ("Myrer 2001 calf", (20, 28), "calf_medial_im3", REWARMING, -2.10, None),
]


def subcutis_of(skinfold):
    """Skin and fat (mm) under a caliper skinfold (mm): half the fold, at least the skin."""
    return max(0.5 * skinfold, SKIN_MM)


def scenario(study, subcutis):
    """The knee CLI options of one study's bag over a leg with ``subcutis`` mm of skin+fat."""
    thigh = study.startswith("Otte")
    return ["--sides", "lateral" if thigh else "medial", "--length", "120",
            "--device-at", f"{PROBE_MM if thigh else -PROBE_MM:g}", "--subcutis", f"{subcutis:g}",
            "--history-every", "15"] + ([] if thigh else ["--device-off", str(MYRER_ON)])


def curve(summ, point):
    """(minutes, drop C) of ``point`` in a run's summary."""
    t0 = summ["summary"]["t0"][point]
    return (np.asarray(summ["history"]["t"]) / 60.0,
            t0 - np.asarray(summ["history"][point], dtype=float))


def minutes_to(t, drop, cooling):
    """The first time (min, linear between records) the drop reaches ``cooling``, or None."""
    above = np.nonzero(drop >= cooling)[0]
    if not len(above):
        return None
    i = above[0]
    if i == 0:
        return float(t[0])
    return float(t[i - 1] + (cooling - drop[i - 1]) * (t[i] - t[i - 1]) / (drop[i] - drop[i - 1]))


def value(kind, t, drop):
    """A target's value from a drop curve (minutes, C)."""
    if kind == "minutes to -7 C":
        return minutes_to(t, drop, COOLING_C)
    on = float(np.interp(MYRER_ON, t, drop))
    if kind == REWARMING:        # warmer 30 min after the pack came off: a positive change
        return on - float(np.interp(MYRER_ON + MYRER_AFTER, t, drop))
    return on


def run_minutes(study):
    return OTTE_MINUTES if study.startswith("Otte") else MYRER_ON + MYRER_AFTER


def request_for(study, skinfold, extra, grid):
    """The run of ``study``'s scenario for a subject of that ``skinfold`` (mm) with the
    knee options ``extra``."""
    return request(scenario(study, subcutis_of(skinfold)) + list(extra), grid,
                   run_minutes(study))


def simulate(study, skinfold, extra, grid):
    """One run: ``study``'s scenario for a subject of that ``skinfold`` (mm) with the knee
    options ``extra``; its ``summary.json``."""
    return ensemble.result(request_for(study, skinfold, extra, grid))


def requests(extra, grid, targets=TARGETS, bands=True):
    """The runs that the rows of ``targets`` need with the knee options ``extra`` (each
    group's middle, and its ends if ``bands``): for :func:`.ensemble.prefetch`."""
    out = []
    for study, (lo, hi), *_ in targets:
        for fold in (0.5 * (lo + hi),) + ((lo, hi) if bands else ()):
            out.append(request_for(study, fold, extra, grid))
    return out


def target_value(target, extra, grid, skinfold=None, curves=None):
    """The model's value of one TARGETS row with the knee options ``extra``, at the middle
    of its skinfold group or at ``skinfold``; its drop curve goes into ``curves``."""
    study, (lo, hi), point, kind, measured, sd = target
    fold = 0.5 * (lo + hi) if skinfold is None else skinfold
    summ = simulate(study, fold, extra, grid)
    t, drop = curve(summ, point)
    if curves is not None:
        curves[f"{study}|{point}|{lo}-{hi}"] = (t.tolist(), drop.tolist())
    return value(kind, t, drop)


def fit_error(extra, grid, study="Otte 2002 thigh"):
    """Mean |relative error| over ``study``'s groups (a time never reached counts as the
    run's length): what the validation study minimises."""
    errs = []
    for target in (t for t in TARGETS if t[0] == study):
        got = target_value(target, extra, grid)
        errs.append(abs((run_minutes(study) if got is None else got) / target[4] - 1.0))
    return sum(errs) / len(errs)


def rows(extra, grid, curves=None, bands=True):
    """One row per target (model at the group's middle, and at its ends if ``bands``)."""
    out = []
    for target in TARGETS:
        study, (lo, hi), point, kind, measured, sd = target
        m = target_value(target, extra, grid, curves=curves)
        band = ([target_value(target, extra, grid, skinfold=f) for f in (lo, hi)]
                if bands else [None, None])
        rel = None if m is None else (m - measured) / measured
        within = m is not None and ((sd is not None and abs(m - measured) <= sd)
                                    or abs(rel) <= 0.30)
        out.append({"study": study, "skinfold_mm": [lo, hi], "subcutis_mm":
                    [subcutis_of(lo), subcutis_of(0.5 * (lo + hi)), subcutis_of(hi)],
                    "point": point, "target": kind, "measured": measured, "sd": sd,
                    "model": m, "model_band": band, "relative_error": rel,
                    "within": bool(within)})
    return out


def couplings():
    """The model's default couplings (the validation's fit)."""
    from ..tissues import ICE_CONTACT, Q10_TISSUE
    return {"ice_contact": ICE_CONTACT, "q10": Q10_TISSUE}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_options(ap)
    add_output_options(ap)
    a = ap.parse_args(argv)
    out = output_dir(a)
    grid = grid_of(a)
    ensemble.set_ranks(a.ranks)
    t0 = time.time()
    ensemble.prefetch(requests([], grid) + requests(
        PERSISTENT, grid, [t for t in TARGETS if t[3] == REWARMING], bands=False))
    curves = {}
    table = rows([], grid, curves)
    # the rewarming again with vessels that stay constricted after the cold (Khoshnevis et
    # al. 2016 saw the knee's skin blood flow stay depressed for 2 h after 1 h of cooling)
    for r, target in zip(table, TARGETS):
        if target[3] == REWARMING:
            r["model_persistent"] = target_value(target, PERSISTENT, grid)
    fmt = (lambda v: "never" if v is None else f"{v:5.1f}")
    for r in table:
        lo, hi = r["skinfold_mm"]
        sd = "" if r["sd"] is None else f" +- {r['sd']:4.1f}"
        print(f"{r['study']:16s} skinfold {lo:2d}-{hi:2d} mm {r['point']:18s} {r['target']:16s} "
              f"measured {r['measured']:5.1f}{sd} model {fmt(r['model'])} "
              f"[{fmt(r['model_band'][0])} .. {fmt(r['model_band'][1])}] "
              f"{'ok' if r['within'] else 'OUT'}"
              + (f" (persistent: {fmt(r['model_persistent'])})" if "model_persistent" in r
                 else ""), flush=True)
    d = {"command": "python -m apps.knee.studies muscle "
                    + " ".join(sys.argv[2:] if argv is None else argv),
         "machine": machine(),
         "grid": keep_leg(grid, scenario("Otte", 10.0)), "fitted": couplings(),
         "rows": table, "within": sum(r["within"] for r in table), "targets": len(table),
         "curves": curves, "seconds": time.time() - t0}
    with open(os.path.join(out, "muscle.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    plot(d, out)
    print(f"wrote {out}/muscle.json and .png")
    print(f"{d['within']} of {d['targets']} muscle targets within the study's SD or +-30 %")
    return 0


def plot(d, out):
    """Otte: minutes to a 7 C drop against skinfold; Myrer: the drop at 20 min and the
    rewarming in the 30 min after, against skinfold, at 1 and 3 cm; measured (dots, SD bars
    or +-30 %) and model (line, band over each group's skinfold range)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [("Otte 2002 thigh", "minutes to -7 C", "minutes to a 7 C drop, 1 cm under the fat"),
              ("Myrer 2001 calf", "drop at 20 min", "drop after 20 min of ice (C)"),
              ("Myrer 2001 calf", REWARMING, "change in the 30 min after the pack (C)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(14, 4))
    for ax, (study, kind, ylabel) in zip(axes, panels):
        mine = [r for r in d["rows"] if r["study"] == study and r["target"] == kind]
        for k, point in enumerate(sorted({r["point"] for r in mine})):
            rs = [r for r in mine if r["point"] == point]
            x = [0.5 * sum(r["skinfold_mm"]) for r in rs]
            y = [r["measured"] for r in rs]
            err = [r["sd"] if r["sd"] is not None else 0.3 * abs(r["measured"]) for r in rs]
            c = f"C{k}"
            ax.errorbar(x, y, yerr=err, fmt="o", c=c, capsize=3,
                        label=f"measured, {point.replace('_', ' ')}")
            xm = [xi for xi, r in zip(x, rs) if r["model"] is not None]
            ym = [r["model"] for r in rs if r["model"] is not None]
            ax.plot(xm, ym, "-s", c=c, mfc="none", label=f"model, {point.replace('_', ' ')}")
            for r in rs:
                lo, hi = r["model_band"]
                if lo is not None and hi is not None:
                    ax.plot(r["skinfold_mm"], [lo, hi], c=c, lw=4, alpha=0.25)
        if kind == REWARMING:
            ax.axhline(0.0, c="0.6", lw=0.8)
        ax.set_xlabel("skinfold (mm); subcutis = half of it")
        ax.set_ylabel(ylabel)
        ax.set_title(study + (" (the validation's fit)" if study.startswith("Otte")
                              else " (held out)"), fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle("muscle under a crushed-ice bag: model (squares, band over the group's "
                 "skinfolds) against measured (dots)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "muscle.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
