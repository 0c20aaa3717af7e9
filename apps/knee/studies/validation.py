"""The knee model against the measured knees: fit on some studies, error on the others.

    python -m apps.knee.studies validation [--dx 2 --shape 100 80 80] [--publish]

Scenarios, set up from each study's methods as far as the model can express them:

* **Warren et al. 2004 (Am J Sports Med 32:441)**, healthy knees, probe in the
  suprapatellar pouch, no dressing: ice bag 3.3 / 12.8 / 15.2 C at 30 / 60 / 90 min
  (medians); cryotherapy device 2.2 / 7.1 / 9.7 C. Both **held out**.
* **Oosterveld et al. 1992 (Arthritis Rheum 35:146)**, healthy knees, a probe "inserted into
  the knee joint cavity": ice chips took the joint from 31.9 to 22.5 C and the skin from
  27.9 to 11.5 C; cold air from 32.9 to 28.8 C. Joints and the skin under ice: **held
  out**; the skin under cold air: **fit set** of the blown air's coefficient (below). The abstract does not say
  where in the cavity the probe sat, how long the cold was applied, or the air's
  temperature and speed: a needle-inserted probe lies in a recess reached from the skin,
  and the suprapatellar pouch is the usual one, so the model's pouch is compared; 30 min
  of application and air at -30 C (a "cuff" boundary at that temperature over the
  device's sides, without the bag contact) are assumptions (not re-checked); the air's
  coefficient is fitted on the measured skin.
* **Martin et al. 2001 (Am J Sports Med 29:288) / 2002 (Clin Orthop 400:184)**, after
  arthroscopy, a dressing under the device (2 mm); thermocouples in the lateral gutter
  (2001) and in the medial gutter and the suprapatellar pouch (2002, whose two sites
  correlated). The model's joint has no gutters, so its pouch stands for both:
  cryo-cuff (liquid at 8 C) 2.2 C in the first hour, while untreated knees *rose* 5.0 C
  (2001: 7.1 C between them at 60 min); ice 2.7-5 C at 1 h, untreated knees rose 1.7-3 C
  (2002: 6 C between them at 1 h). Both ran two hours: in 2002 one group had ice in the
  first hour only and the other in the second only (their joints fell 2.7-5 C with ice
  and rose 1.7-3 C without, in either hour: the abstract pools the groups); in 2001 the
  cuff group fell a further 0.79 C in the second hour and the controls, given the cold
  then, fell 4.0 C. The second hours (``--device-off 60`` / ``--device-on 60``) are
  targets of their own, the change over minutes 60-120. **Sanchez-Inchausti et al. 2005
  (Arthroscopy 21:552)**: a 2 kg bag of ice after arthroscopy, "almost 4 C in the first
  hour". All **held out**.
  These knees start cold: the cavity ends the operation at the saline's temperature (24.5 C
  against 32.2 C before), so the model runs the arthroscopy first (``--arthroscopy 45``:
  the cavity held at 24.5 C for 45 min, an assumed duration; 30 and 90 min are reported
  too) and measures from its end, as the studies did. The *difference* between treated and
  untreated knees at 1 h depends on that start only through the model's nonlinear parts
  (the perfusion's cold response, the melting ice), so it is the cleanest of these
  targets; the drops themselves test how the model's knee rewarms after the operation.
  The model's dressing exists only under a device, so the untreated knees have none.
* **Cryo/Cuff after arthroscopy, Am J Knee Surg 11 (1998) 203 (pubmed 9853997)**, 30 knees:
  the joint was at 34.8 C at the start of surgery and ended it at 27.5 +- 2.2 C (a wound
  dressing only) or 26.8 +- 2.2 C (a Cryo/Cuff with an automatic pump); one hour later both
  groups were back at 34.8 +- 1.7 and 34.0 +- 1.6 C: rises of 7.3 and 7.2 C. The model's
  cavity ends the arthroscopy at the measured temperature (``--irrigant-temp``); the
  cuff's liquid (not in the abstract) and the probe's place in the joint are assumed as
  for Martin 2001 (8 C, the suprapatellar pouch). **Held out.** Against Martin 2001 (the
  same device cooled the joint by 2.2 C in the first hour) this study's cuff did not
  change the rewarming: the published post-operative knees disagree with each other.

No knee is fitted on. The bag's contact resistance and the cold response of perfusion
(Q10 of skin, fat, muscle and tendon) are fitted together on a muscle study,
**Otte et al. 2002** (the ``muscle`` study): the minutes a 750 g crushed-ice bag needs to cool
the thigh's muscle 1 cm under the fat by 7 C, in four groups of subcutaneous fat (47
volunteers). The thin-fat groups measure the contact (how fast the cold gets in), the thick
ones the perfusion that carries heat back (Q10 over 3.65 .. 4.25), on a grid of both, by the
mean relative error over the four groups. The contact applies to every bag and pack, and in
series with the cryo-cuff's coefficient. **Myrer et al. 2001** (calf muscle at 1 and 3 cm
under the fat) is held out. The blown air's coefficient is fitted on Oosterveld's skin under
cold air. The Q10's range is what local skin cooling measures: skin blood flow fell
to 42-46 % of baseline at three forearm sites when the skin was cooled from 34 to 28 C (Hodges et
al., Am J Physiol Heart Circ Physiol 293 (2007) H3187), i.e. Q10 = 3.65-4.25. Every
candidate of a fit lies inside its published range (see ``CONTACTS``), and a fit at an end
of its range is flagged in the output (``at_range_end``). Reported: every target of every
study with its model value and relative error, and whether it lies within the study's spread
or +-30 %.
Writes ``validation.json`` and ``.png`` (``--out DIR``, default ``results/local/``;
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
from . import muscle as knee_muscle
from .common import (add_grid_options, add_output_options, grid_of, keep_leg, output_dir,
                     request)

#: the arthroscopy's duration (min), an assumption (the abstracts do not give it); the
#: post-operative targets are also reported at the ARTHROSCOPY_RANGE ends
ARTHROSCOPY = 45
ARTHROSCOPY_RANGE = (30, 90)
POST_OP = ["--bandage", "2", "--arthroscopy", str(ARTHROSCOPY)]
NO_DEVICE = ["--device", "none"]
ICE = []
CUFF = ["--device", "cuff", "--cuff-temp", "8"]
COLD_AIR = ["--device", "cuff", "--cuff-temp", "-30"]   # blown air: a "cuff" at the air's T

#: study -> (kind, args, minutes, {point@minute: (measured drop C, spread low, spread high)});
#: a target ``point@a-b`` is the drop between minutes a and b (a rise is negative);
#: kind says which fitted coupling applies: "ice" (pack contact), "air" (blown-air h), "cuff",
#: "none" (no device: the Q10 alone). A rise is a negative drop.
STUDIES = {
    "Warren ice": ("ice", ICE, 90, {"suprapatellar_pouch@30": (3.3, None, None),
                                    "suprapatellar_pouch@60": (12.8, None, None),
                                    "suprapatellar_pouch@90": (15.2, None, None)}),
    "Warren cryo device": ("cuff", CUFF, 90, {"suprapatellar_pouch@30": (2.2, None, None),
                                              "suprapatellar_pouch@60": (7.1, None, None),
                                              "suprapatellar_pouch@90": (9.7, None, None)}),
    "Oosterveld ice chips": ("ice", ICE, 30, {"suprapatellar_pouch@30": (9.4, None, None),
                                              "skin_anterior@30": (16.4, None, None)}),
    "Oosterveld cold air": ("air", COLD_AIR, 30, {"suprapatellar_pouch@30": (4.1, None, None),
                                                  "skin_anterior@30": (15.0, None, None)}),
    "Martin 2002 ice (post-op)": ("ice", POST_OP + ICE, 60,
                                  {"suprapatellar_pouch@60": (3.85, 2.7, 5.0)}),
    "Martin 2002 no ice (post-op)": ("none", POST_OP + NO_DEVICE, 60,
                                     {"suprapatellar_pouch@60": (-2.35, -3.0, -1.7)}),
    "Martin 2001 cryo-cuff (post-op)": ("cuff", POST_OP + CUFF, 60,
                                        {"suprapatellar_pouch@60": (2.2, None, None)}),
    "Martin 2001 no cryotherapy (post-op)": ("none", POST_OP + NO_DEVICE, 60,
                                             {"suprapatellar_pouch@60": (-5.0, None, None)}),
    "Sanchez-Inchausti ice (post-op)": ("ice", POST_OP + ICE, 60,
                                        {"suprapatellar_pouch@60": (3.9, None, None)}),
    # the second hour of Martin's protocols (the change over it: a drop, or a rise < 0).
    # 2002: ice for the first hour only (group 1) or the second only (group 2); 2001: the
    # cuff for both hours, or none in the first and then the same device (the controls)
    "Martin 2002 ice, then none: 2nd hour (post-op)": (
        "ice", POST_OP + ICE + ["--device-off", "60"], 120,
        {"suprapatellar_pouch@60-120": (-2.35, -3.0, -1.7)}),
    "Martin 2002 none, then ice: 2nd hour (post-op)": (
        "ice", POST_OP + ICE + ["--device-on", "60"], 120,
        {"suprapatellar_pouch@60-120": (3.85, 2.7, 5.0)}),
    "Martin 2001 cryo-cuff: 2nd hour (post-op)": (
        "cuff", POST_OP + CUFF, 120, {"suprapatellar_pouch@60-120": (0.79, None, None)}),
    "Martin 2001 none, then cuff: 2nd hour (post-op)": (
        "cuff", POST_OP + CUFF + ["--device-on", "60"], 120,
        {"suprapatellar_pouch@60-120": (4.0, None, None)}),
    "Cryo/Cuff 1998 dressing only (post-op)": (
        "none", POST_OP + ["--irrigant-temp", "27.5"] + NO_DEVICE, 60,
        {"suprapatellar_pouch@60": (-7.3, None, None)}),
    "Cryo/Cuff 1998 cryo-cuff (post-op)": (
        "cuff", POST_OP + ["--irrigant-temp", "26.8"] + CUFF, 60,
        {"suprapatellar_pouch@60": (-7.2, None, None)}),
}

#: treated minus untreated knees of one study, at one target, as the study reports it
#: (Martin 2002's abstract: 6 C "at 1 hour"; Martin 2001: 7.1 C at 60 min): name ->
#: (treated study, untreated study, target, (measured difference C, spread low, high))
DIFFERENCES = {
    "Martin 2002 ice minus no ice (post-op)": (
        "Martin 2002 ice (post-op)", "Martin 2002 no ice (post-op)", "suprapatellar_pouch@60",
        (6.0, None, None)),
    "Martin 2001 cryo-cuff minus none (post-op)": (
        "Martin 2001 cryo-cuff (post-op)", "Martin 2001 no cryotherapy (post-op)",
        "suprapatellar_pouch@60", (7.1, None, None)),
}

#: the fits: the bag's contact and the perfusion's cold response together, on the muscle of
#: Otte et al. 2002 (the minutes a crushed-ice bag needs to cool the thigh's muscle 1 cm
#: under the fat by 7 C, in four groups of fat: ``knee_muscle.TARGETS``): the thin groups
#: measure the contact, the thick ones the perfusion that carries heat back in. Then the
#: blown air's coefficient on Oosterveld's skin under cold air, with that Q10. No knee
#: target is fitted on. Every candidate lies in its published range: the contact from the
#: bag's own film up (0.05 mm of polyethylene, about 1e-4 m^2 K/W; perfect contact is not a
#: bag on skin); the Q10 over what local skin cooling measured at Hodges' three forearm
#: sites (34 -> 28 C left 42-46 % of the skin blood flow: Q10 3.65-4.25, Hodges et al., Am
#: J Physiol Heart Circ Physiol 293 (2007) H3187); the air's coefficient from the model's
#: still air (10 W/(m2 K), natural convection and radiation) up to forced convection's 100
#: (research notes, heat.md: h 8-100). A fit at an end of its range is a range limit, not
#: an optimum, and the report says so. The first air value also stands in while the muscle
#: is fitted (no air there).
CONTACTS = (1e-4, 0.005, 0.01, 0.02, 0.04)
Q10S = (3.65, 4.0, 4.25)
AIR_HS = (10.0, 12.5, 15.0, 20.0, 30.0, 50.0, 100.0)
FIT_CANDIDATES = {"ice_contact": CONTACTS, "q10": Q10S, "air_h": AIR_HS}
MUSCLE_FIT = "Otte 2002 thigh"
AIR_FIT = [("Oosterveld cold air", "skin_anterior@30")]


def fitted_args(kind, fitted):
    """The command-line settings of the fitted parameters that apply to a study's kind."""
    args = [a for t in ("skin", "fat", "muscle", "tendon")
            for a in ("--set", f"{t}.q10={fitted['q10']:g}")]
    if kind == "ice":
        args += ["--set", f"ice.contact={fitted['ice_contact']:g}"]
    if kind == "cuff":      # the same skin contact in series with the cuff's own coefficient
        args += ["--set", f"cuff.contact={fitted['ice_contact']:g}"]
    if kind == "air":       # blown air: no bag between it and the skin
        args += ["--set", f"cuff.h={fitted['air_h']:g}", "--set", "cuff.contact=0"]
    return args


def request_for(study, fitted, grid, arthroscopy=None):
    """The run of ``study``'s scenario with the ``fitted`` couplings. ``arthroscopy`` (min)
    replaces a post-operative study's assumed duration."""
    kind, args, minutes, _ = STUDIES[study]
    if arthroscopy is not None and "--arthroscopy" in args:
        args = list(args)
        args[args.index("--arthroscopy") + 1] = str(arthroscopy)
    return request(args + fitted_args(kind, fitted), grid, minutes)


def simulate(study, fitted, grid, arthroscopy=None):
    """One run (``request_for``'s): its ``summary.json``."""
    return ensemble.result(request_for(study, fitted, grid, arthroscopy))


def model_values(study, fitted, grid, curves=None, arthroscopy=None):
    """The model's drop at each target of ``study``; its drop curves (minutes, C) of the
    targets' points go into ``curves`` if given. ``arthroscopy`` (min) replaces a
    post-operative study's assumed duration."""
    targets = STUDIES[study][3]
    summ = simulate(study, fitted, grid, arthroscopy)
    hist = summ["history"]
    t = np.asarray(hist["t"]) / 60.0
    out = {}
    for key in targets:
        point, when = key.split("@")
        t0 = summ["summary"]["t0"][point]
        temp = lambda m: float(np.interp(float(m), t, hist[point]))  # noqa: E731
        a, _, b = when.partition("-")
        out[key] = temp(a) - temp(b) if b else t0 - temp(a)
        if curves is not None:
            curves[point] = (t.tolist(), [t0 - v for v in hist[point]])
    return out


def difference_values(values, curves=None):
    """Treated minus untreated knees (DIFFERENCES) from the studies' model ``values``; with
    ``curves`` (study -> point -> (t, drop)), their difference curves, keyed by name."""
    out, diff_curves = {}, {}
    for name, (treated, untreated, key, _) in DIFFERENCES.items():
        out[name] = {key: values[treated][key] - values[untreated][key]}
        if curves is not None:
            point = key.split("@")[0]
            (ta, da), (tb, db) = curves[treated][point], curves[untreated][point]
            diff_curves[name] = {point: (ta, [a - float(np.interp(t, tb, db))
                                               for t, a in zip(ta, da)])}
    return out, diff_curves


def targets_of(study):
    return STUDIES[study][3] if study in STUDIES else {DIFFERENCES[study][2]:
                                                      DIFFERENCES[study][3]}


def errors(study, values):
    rows = []
    for key, (measured, lo, hi) in targets_of(study).items():
        got = values[key]
        rel = (got - measured) / measured
        inside = (lo is not None and lo <= got <= hi) or abs(rel) <= 0.30
        rows.append({"study": study, "target": key, "measured": measured, "model": got,
                     "spread": [lo, hi], "relative_error": rel, "within": bool(inside)})
    return rows


def plot(d, out):
    """One panel per study: the model's drop curve at each measured point, the measured
    drops (with their spread where reported), and the +-30 % band around each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    studies = list(d["curves"])
    cols = 3
    rows = (len(studies) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    colours = {}
    for ax, study in zip(axes.flat, studies):
        for point, (t, drop) in d["curves"][study].items():
            c = colours.setdefault(point, f"C{len(colours)}")
            ax.plot(t, drop, c=c, label=f"model, {point.replace('_', ' ')}")
        for r in (r for r in d["table"] if r["study"] == study):
            point, when = r["target"].split("@")
            a, _, b = when.partition("-")
            c, m, y = colours[point], float(b or a), r["measured"]
            lo, hi = r["spread"] if r["spread"][0] is not None else sorted((0.7 * y, 1.3 * y))
            base = 0.0
            if b:     # a change over [a, b]: drawn from the model's curve at a
                t, drop = d["curves"][study][point]
                base = float(np.interp(float(a), t, drop))
                ax.plot([float(a), m], [base, base + y], ":", c=c)
            ax.errorbar(m, base + y, yerr=[[y - lo], [hi - y]], fmt="o", c=c, capsize=3,
                        alpha=0.5)
            ax.plot(m, base + y, "s" if r["fit"] else "o", c=c, mec="k", label=None)
        targets = [r for r in d["table"] if r["study"] == study]
        role = ("fitted" if all(r["fit"] for r in targets) else
                "partly fitted" if any(r["fit"] for r in targets) else "held out")
        ax.set_title(f"{study} ({role})", fontsize=9)
        ax.set_xlabel("minutes")
        ax.set_ylabel("drop (C)")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(studies):]:
        ax.axis("off")
    fig.suptitle("knee model (lines) against measured drops (squares: fitted on, dots: held "
                 "out; bars: reported spread or +-30 %;\ndotted: a change over an interval, "
                 "from the model's curve at its start); "
                 + ", ".join(f"{k} = {v:g}" for k, v in d["fitted"].items()),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))   # 0.5 in: 2-line title
    fig.savefig(os.path.join(out, "validation.png"), dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ the runs of each stage
def muscle_fit_requests(grid):
    """The runs of ``fit_muscle``: every (contact, Q10) candidate on MUSCLE_FIT's groups."""
    targets = [t for t in knee_muscle.TARGETS if t[0] == MUSCLE_FIT]
    return [r for c in CONTACTS for q in Q10S
            for r in knee_muscle.requests(
                fitted_args("ice", {"ice_contact": c, "q10": q, "air_h": AIR_HS[0]}), grid,
                targets, bands=False)]


def air_fit_requests(fitted, grid):
    """The runs of ``fit_air``: AIR_FIT's studies for every candidate coefficient."""
    return [request_for(st, dict(fitted, air_h=h), grid) for h in AIR_HS for st, _ in AIR_FIT]


def table_requests(fitted, grid, skip_kinds=()):
    """The runs of ``knee_table``, ``muscle_table`` and ``arthroscopy_range`` with the
    ``fitted`` couplings, but the studies of ``skip_kinds`` (those whose coupling is not
    fitted yet)."""
    post_op = [st for st in STUDIES if "--arthroscopy" in STUDIES[st][1]]
    out = [request_for(st, fitted, grid) for st in STUDIES if STUDIES[st][0] not in skip_kinds]
    out += knee_muscle.requests(fitted_args("ice", fitted), grid, bands=False)
    out += [request_for(st, fitted, grid, arthroscopy=m) for m in ARTHROSCOPY_RANGE
            for st in post_op if STUDIES[st][0] not in skip_kinds]
    return out


def fit_muscle(grid):
    """Contact and Q10 fitted together on MUSCLE_FIT: every pair's score, best pair."""
    muscle_scores = {}
    for c in CONTACTS:
        for q in Q10S:
            trial = {"ice_contact": c, "q10": q, "air_h": AIR_HS[0]}
            muscle_scores[(c, q)] = knee_muscle.fit_error(fitted_args("ice", trial), grid,
                                                          MUSCLE_FIT)
            print(f"contact {c:g}, Q10 {q:g}: mean |relative error| on {MUSCLE_FIT} "
                  f"{muscle_scores[(c, q)]:.3f}", flush=True)
    return muscle_scores, min(muscle_scores, key=muscle_scores.get)


def fit_air(fitted, grid):
    """The blown air's coefficient on AIR_FIT: each of AIR_HS -> mean |relative error|."""
    air_scores = {}
    for h in AIR_HS:
        trial = dict(fitted, air_h=h)
        values = {st: model_values(st, trial, grid) for st, _ in AIR_FIT}
        rel = [abs(values[st][tg] / STUDIES[st][3][tg][0] - 1.0) for st, tg in AIR_FIT]
        air_scores[h] = sum(rel) / len(rel)
        print(f"air_h = {h:g}: mean |relative error| on {AIR_FIT[0][0]} {air_scores[h]:.2f}",
              flush=True)
    return air_scores


def knee_table(fitted, grid):
    """Every knee study's and difference's targets against the model, and the curves."""
    fit_targets = set(AIR_FIT)
    table, curves, values = [], {}, {}
    for study in STUDIES:
        curves[study] = {}
        values[study] = model_values(study, fitted, grid, curves[study])
    diffs, diff_curves = difference_values(values, curves)
    values.update(diffs)
    curves.update(diff_curves)
    for study in values:
        table += errors(study, values[study])
    for r in table:
        r["fit"] = (r["study"], r["target"]) in fit_targets
    return table, curves


def muscle_table(fitted, grid):
    """The muscle studies' rows, with the fitted couplings (Otte's rows are the fit)."""
    table = []
    for r in knee_muscle.rows(fitted_args("ice", fitted), grid, bands=False):
        lo, hi = r["skinfold_mm"]
        sd = r["sd"]
        table.append({"study": r["study"],
                      "target": f"{r['point']}, skinfold {lo}-{hi} mm: {r['target']}",
                      "measured": r["measured"], "model": r["model"],
                      "spread": [r["measured"] - sd, r["measured"] + sd] if sd else [None, None],
                      "relative_error": r["relative_error"], "within": r["within"],
                      "fit": r["study"] == MUSCLE_FIT})
    return table


def arthroscopy_range(fitted, grid):
    """The post-operative targets at the ends of ARTHROSCOPY_RANGE."""
    post_op = [st for st in STUDIES if "--arthroscopy" in STUDIES[st][1]]
    arthroscopy = {}
    for minutes in ARTHROSCOPY_RANGE:
        vals = {st: model_values(st, fitted, grid, arthroscopy=minutes) for st in post_op}
        vals.update(difference_values(vals)[0])
        arthroscopy[minutes] = [{"study": st, "target": tg, "model": v}
                                for st in vals for tg, v in vals[st].items()]
    return arthroscopy


def print_table(table):
    """One line per target: measured, model, relative error, within or OUT, fitted on."""
    for r in table:
        model = "never" if r["model"] is None else f"{r['model']:5.1f}"
        rel = "" if r["relative_error"] is None else f"({100 * r['relative_error']:+4.0f} %)"
        print(f"{r['study']:42s} {r['target']:24s} measured {r['measured']:5.1f} model "
              f"{model} {rel} {'ok' if r['within'] else 'OUT'}{' (fit)' if r['fit'] else ''}")


def fit_range(name, fitted):
    """A fitted value with its candidates' range and whether it sits at an end of it (a
    range limit, not an optimum)."""
    v, candidates = fitted[name], FIT_CANDIDATES[name]
    return {"parameter": name, "value": v, "range": [min(candidates), max(candidates)],
            "at_range_end": v in (min(candidates), max(candidates))}


def result_json(argv, grid, fitted, muscle_scores, air_scores, table, arthroscopy, curves, t0):
    """What validation.json holds: fits, scores, table, arthroscopy, curves."""
    muscle_on = [(MUSCLE_FIT, f"{point}, skinfold {lo}-{hi} mm: {kind}")
                 for st, (lo, hi), point, kind, _, _ in knee_muscle.TARGETS if st == MUSCLE_FIT]
    held = [r for r in table if not r["fit"]]
    return {"command": "python -m apps.knee.studies validation "
                       + " ".join(sys.argv[2:] if argv is None else argv),
            "machine": machine(),
            "grid": keep_leg(grid, []),
            "fits": [dict(fit_range("ice_contact", fitted), fitted_on=muscle_on,
                          jointly_with="q10"),
                     dict(fit_range("q10", fitted), fitted_on=muscle_on,
                          jointly_with="ice_contact"),
                     dict(fit_range("air_h", fitted), fitted_on=AIR_FIT,
                          scores={f"{h:g}": v for h, v in air_scores.items()})],
            "muscle_fit_scores": [{"ice_contact": c, "q10": q, "mean_abs_relative_error": v}
                                  for (c, q), v in muscle_scores.items()],
            "fitted": fitted, "table": table,
            "arthroscopy": {"assumed_min": ARTHROSCOPY, "range": arthroscopy},
            "held_out_within": sum(r["within"] for r in held), "held_out_targets": len(held),
            "curves": curves, "seconds": time.time() - t0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_options(ap)
    add_output_options(ap)
    a = ap.parse_args(argv)
    out = output_dir(a)
    grid = grid_of(a)
    ensemble.set_ranks(a.ranks)
    t0 = time.time()
    # three waves of runs: the muscle fit; the air fit with every run that needs only the
    # muscle's couplings; what the air's fit decides
    ensemble.prefetch(muscle_fit_requests(grid))
    muscle_scores, (contact, q10) = fit_muscle(grid)
    fitted = {"ice_contact": contact, "q10": q10, "air_h": AIR_HS[0]}
    ensemble.prefetch(air_fit_requests(fitted, grid)
                      + table_requests(fitted, grid, skip_kinds=("air",)))
    air_scores = fit_air(fitted, grid)
    fitted["air_h"] = min(air_scores, key=air_scores.get)
    ensemble.prefetch(table_requests(fitted, grid))
    table, curves = knee_table(fitted, grid)
    table += muscle_table(fitted, grid)
    arthroscopy = arthroscopy_range(fitted, grid)
    print_table(table)
    for name in FIT_CANDIDATES:
        r = fit_range(name, fitted)
        print(f"fitted {name} = {r['value']:g} in {r['range']}"
              + (": at an end of its range (a limit, not an optimum)" if r["at_range_end"]
                 else ""))
    d = result_json(argv, grid, fitted, muscle_scores, air_scores, table, arthroscopy, curves, t0)
    with open(os.path.join(out, "validation.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    plot(d, out)
    print(f"wrote {out}/validation.json and .png")
    print(f"held out: {d['held_out_within']} of {d['held_out_targets']} targets within their "
          f"spread or +-30 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
