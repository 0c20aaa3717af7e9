"""What limits the knee model's late cooling: the default scenario against bounding cases.

    python -m apps.knee.studies plateau [--dx 2 --shape 100 80 80] [--publish]

The sensitivity study moves each input over its *published* range. This one asks a
different question, with cases outside those ranges on purpose: if the pouch's cooling
between 60 and 90 min were limited by blood flow, shutting perfusion off would deepen it a
lot; if by the pack's cold reserve, a thicker pack would, and a long run shows when the
default pack runs out. The contact the validation used to fit on Oosterveld's skin (0.04
m2 K/W, before the fit moved to muscle under ice) shows what that contact cost. A last case
tests a mechanism for the *shape* of the measured curve: a bag of ice that touches the skin
poorly until meltwater fills its air gaps (wetted ice cools more than dry ice: Dykstra et
al., J Athl Train 44 (2009) 136); no study measured such a change (docs/knee.md). Each case
is one knee run of the default scenario (healthy knee, crushed ice on three sides) with one
thing changed; Warren et al. 2004's medians (3.3 / 12.8 / 15.2 C at 30 / 60 / 90 min) are
the reference.

Writes ``plateau.json`` and ``.png`` (``--out DIR``, default ``results/local/``;
``--publish``: the tracked ``apps/knee/studies/results/``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from pyfw.monitor.results import machine

from . import ensemble
from .common import (add_grid_options, add_output_options, grid_of, keep_leg, output_dir,
                     request)

POINT = "suprapatellar_pouch"
WARREN = {30: 3.3, 60: 12.8, 90: 15.2}
SOFT = ("skin", "fat", "muscle", "tendon")
BONE = ("cortical_bone", "cancellous_bone")


def _zero_perfusion(tissues):
    return [a for t in tissues for a in ("--set", f"{t}.perfusion=0")]


#: case -> (extra args, minutes, what it tests)
CASES = {
    "default": ([], 240, "the default scenario, run on until the pack's ice is gone"),
    "no soft-tissue perfusion": (_zero_perfusion(SOFT), 90,
                                 "blood flow in skin, fat, muscle and tendon shut off"),
    "no perfusion at all": (_zero_perfusion(SOFT + BONE), 90,
                            "also the bones' blood flow (which has no cold response)"),
    "contact 0.04 (the old fit)": (["--set", "ice.contact=0.04"], 90,
                                   "the bag-skin contact resistance fitted on Oosterveld's "
                                   "skin before the fit moved to muscle (Otte 2002)"),
    "pack 30 mm": (["--thickness", "30"], 90, "twice the default pack's ice"),
}


#: a bag whose contact improves once meltwater fills its air gaps: (dry contact, wet
#: contact, minute of the change). Chosen by hand to test whether such a change gives
#: Warren's shape (slow first 30 min, fast after): not fitted, not a published value.
WETTING = (0.1, 0.01, 30.0)


@dataclass(frozen=True)
class WettingRun:
    """The default scenario with the pack's contact changed from WETTING's dry to its wet
    value at its minute (:meth:`apps.knee.model.KneeRun.change_tissues`), which the command
    line cannot express: a request of :mod:`.ensemble`, run on a given communicator."""
    grid: tuple
    minutes: float = 90

    def __call__(self, comm) -> dict:
        """Its summary and history (as ``run_summary``'s), on every rank of ``comm``."""
        from ..model import KneeRun, Params
        grid = keep_leg(list(self.grid), [])
        dry, wet, at = WETTING
        dx, shape = float(grid[grid.index("--dx") + 1]), grid[grid.index("--shape") + 1:][:3]
        p = Params(shape=tuple(int(n) for n in shape), dx_mm=dx,
                   overrides={"ice.contact": dry})
        run = KneeRun(comm, p, balance=False, log=lambda *a: None)
        run.steady_state()
        run.start_cooling()
        run.run(minutes=at)
        run.change_tissues({"ice.contact": wet})
        run.run(minutes=self.minutes)
        run.dom.close()       # no monitor exchange left on comm for its next task
        return {"summary": run.summary(), "history": run.history}


def request_of(extra, grid, minutes):
    """The request of one case: the default scenario with ``extra`` (``None``: the wetting
    bag)."""
    return request(extra, grid, minutes) if extra is not None else WettingRun(
        tuple(grid), minutes)


def simulate(extra, grid, minutes):
    """One run of a case: the default scenario with ``extra`` (``None``: the wetting bag,
    which the command line cannot express); its summary and history."""
    return ensemble.result(request_of(extra, grid, minutes))


def drops_at(summ, point, minutes):
    """The drop of ``point`` at each of ``minutes`` (interpolated in the history)."""
    t = np.array(summ["history"]["t"]) / 60.0
    t0 = summ["summary"]["t0"][point]
    return {m: t0 - float(np.interp(m, t, summ["history"][point])) for m in minutes
            if m <= t[-1] + 1e-9}


def plot(d, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (name, c) in enumerate(d["cases"].items()):
        ax.plot(c["curve"][0], c["curve"][1], c=f"C{i}", label=name)
    ax.plot(list(WARREN), list(WARREN.values()), "ks", label="Warren 2004 (medians)")
    ax.set_xlabel("minutes of cooling")
    ax.set_ylabel(f"drop at the {POINT.replace('_', ' ')} (C)")
    ax.set_title("what limits the late cooling: default scenario against bounding cases",
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plateau.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_options(ap)
    add_output_options(ap)
    a = ap.parse_args(argv)
    out = output_dir(a)
    grid = grid_of(a)
    ensemble.set_ranks(a.ranks)
    t_start = time.time()
    cases = {}
    wetting = (f"bag wets at {WETTING[2]:g} min (contact {WETTING[0]:g} -> {WETTING[1]:g})",
               (None, 90, "a dry bag's poor contact until meltwater fills its gaps "
                          "(values chosen by hand: a hypothesis, not a fit)"))
    cases_and_wetting = list(CASES.items()) + [wetting]
    ensemble.prefetch([request_of(extra, grid, minutes)
                       for _, (extra, minutes, _) in cases_and_wetting])
    for name, (extra, minutes, what) in cases_and_wetting:
        summ = simulate(extra, grid, minutes)
        hist = summ["history"]
        t0 = summ["summary"]["t0"]
        cases[name] = {
            "args": extra, "minutes": minutes, "what": what,
            "drops": drops_at(summ, POINT, (30, 60, 90, 120, 150, 180, 240)),
            "skin_drop_90": drops_at(summ, "skin_anterior", (90,))[90],
            "curve": ([t / 60.0 for t in hist["t"]], [t0[POINT] - v for v in hist[POINT]])}
        dr = cases[name]["drops"]
        print(f"{name:26s} " + "  ".join(f"{m}: {v:5.2f}" for m, v in dr.items())
              + f"   skin at 90: {cases[name]['skin_drop_90']:.1f}", flush=True)
    d = {"command": "python -m apps.knee.studies plateau "
                    + " ".join(sys.argv[2:] if argv is None else argv),
         "machine": machine(),
         "grid": keep_leg(grid, []), "point": POINT, "warren": WARREN, "cases": cases,
         "seconds": time.time() - t_start}
    with open(os.path.join(out, "plateau.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    plot(d, out)
    print(f"wrote {out}/plateau.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
