"""Grid convergence of the knee model: point temperatures at 30/60/90 min as dx goes
3 -> 2 -> 1.5 -> 1 mm over the same physical leg (the default grid is 1 mm, 200 x 160 x 160).

    python -m apps.knee.studies convergence [--ranks 2] [--dx 3 2 1.5 1] [--minutes 90]
                                            [--publish]

Each grid runs the default scenario (healthy knee, crushed ice, 90 min) under ``pyfw-run``.
The extrapolated value of every point and time is a Richardson estimate: the observed order p
from the three finest grids (f(h) = f0 + C h^p solved exactly; non-uniform ratios allowed)
and, beside it, f0 with the scheme's formal order p = 2 from the two finest grids (centred
differences in space; the stable explicit step scales with dx^2, so the time error is
O(dx^2) as well). Reported: every drop per grid, f0, p, and the default grid's relative
difference from f0 (goal <= 5 %). Writes ``convergence.json`` and ``.png`` (``--out DIR``,
default ``results/local/``; ``--publish``: the tracked ``apps/knee/studies/results/``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from pyfw import launch
from pyfw.monitor.results import machine

from . import ensemble
from .common import add_output_options, keep_leg, output_dir, request

#: the app these studies belong to, as it was imported (``apps.knee`` in a checkout,
#: ``pyfw.apps.knee`` installed), and the directory its runs start in (the checkout's root)
APP = __package__.rpartition(".")[0]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EXTENT_MM = (200.0, 160.0, 160.0)   # the default grid's leg: 200 x 160 x 160 voxels of 1 mm
POINTS = ("suprapatellar_pouch", "joint_centre", "skin_anterior")


def grid_at(dx: float) -> list:
    """The CLI grid of the default leg at ``dx`` mm, widened where the pack would otherwise
    shrink the leg."""
    return keep_leg(["--dx", f"{dx:g}", "--shape",
                     *[str(int(round(e / dx))) for e in EXTENT_MM]], [])


def simulate(dx: float, ranks: int, minutes: float, timeout: float) -> dict:
    """One run: the default scenario on a grid of ``dx`` mm on ``ranks`` ranks: a task of
    the study's ensemble (under ``pyfw-run -n N``), else its own ``pyfw-run``; returns
    summary.json's drops."""
    grid = grid_at(dx)
    shape = grid[3:6]
    if ensemble.farm_active():
        doc = ensemble.result(request([], grid, minutes))
        return {"dx": dx, "shape": [int(s) for s in shape], "seconds": doc["perf"]["wall_s"],
                "drop": doc["summary"]["drop"]}
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", APP, "--dx", f"{dx:g}", "--shape", *shape,
               "--minutes", f"{minutes:g}", "--no-plots", "--quiet", "--out", out]
        t0 = time.time()
        res = launch.run(ranks, cmd, timeout=timeout, capture=True, cwd=ROOT)
        if res.returncode != 0:
            raise SystemExit(f"knee run at dx={dx} failed ({res.returncode}):\n"
                             f"{res.stdout}\n{res.stderr}")
        with open(os.path.join(out, "summary.json")) as fh:
            drop = json.load(fh)["summary"]["drop"]
    return {"dx": dx, "shape": [int(s) for s in shape], "seconds": time.time() - t0,
            "drop": drop}


def observed_order(h, f):
    """p, f0 of f = f0 + C h^p through three points (h descending); None if not monotone."""
    (h1, h2, h3), (f1, f2, f3) = h, f
    d12, d23 = f1 - f2, f2 - f3
    if d12 == 0 or d23 == 0 or (d12 > 0) != (d23 > 0):
        return None, None

    def g(p):   # zero where the two differences have the model's ratio
        return (h1 ** p - h2 ** p) * d23 - (h2 ** p - h3 ** p) * d12

    lo, hi = 0.05, 8.0
    if g(lo) * g(hi) > 0:
        return None, None
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if g(lo) * g(mid) <= 0:
            hi = mid
        else:
            lo = mid
    p = 0.5 * (lo + hi)
    c = d23 / (h2 ** p - h3 ** p)
    return p, f3 - c * h3 ** p


def richardson2(h_coarse, f_coarse, h_fine, f_fine):
    """f0 for a second-order scheme from two grids."""
    r2 = (h_coarse / h_fine) ** 2
    return (r2 * f_fine - f_coarse) / (r2 - 1.0)


def analyse(runs: list[dict], default_dx: float = 1.0) -> list[dict]:
    runs = sorted(runs, key=lambda r: -r["dx"])
    rows = []
    for minute in ("30", "60", "90"):
        for point in POINTS:
            hs = [r["dx"] for r in runs]
            fs = [r["drop"][minute][point] for r in runs]
            row = {"point": point, "minute": int(minute),
                   "drops": dict(zip(map(str, hs), fs))}
            if len(runs) >= 3:
                p, f0 = observed_order(hs[-3:], fs[-3:])
                row["observed_order"], row["f0_observed"] = p, f0
            row["f0_p2"] = richardson2(hs[-2], fs[-2], hs[-1], fs[-1])
            fd = dict(zip(hs, fs)).get(default_dx)
            if fd is not None and row["f0_p2"]:
                row["default_rel_diff_p2"] = abs(fd - row["f0_p2"]) / abs(row["f0_p2"])
                if row.get("f0_observed"):
                    row["default_rel_diff_observed"] = (abs(fd - row["f0_observed"])
                                                        / abs(row["f0_observed"]))
            rows.append(row)
    return rows


def plot(runs, rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(POINTS), figsize=(4 * len(POINTS), 3.8))
    for ax, point in zip(axes, POINTS):
        for minute, style in (("30", "o-"), ("60", "s-"), ("90", "^-")):
            hs = [r["dx"] for r in runs]
            ax.plot(hs, [r["drop"][minute][point] for r in runs], style, label=f"{minute} min")
            row = next(x for x in rows if x["point"] == point and str(x["minute"]) == minute)
            ax.plot([0], [row["f0_p2"]], "k" + style[0], mfc="none")
        ax.set_xlim(left=-0.1)
        ax.set_xlabel("dx (mm); open marker at 0: Richardson, p = 2")
        ax.set_ylabel("drop (C)")
        ax.set_title(point.replace("_", " "))
        ax.legend(fontsize=8)
    fig.suptitle("knee model grid convergence (default scenario)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2,
                    help="ranks of each grid's run (its own pyfw-run, or its group's width "
                         "when the study runs under pyfw-run -n N)")
    ap.add_argument("--dx", type=float, nargs="+", default=[3.0, 2.0, 1.5, 1.0])
    ap.add_argument("--minutes", type=float, default=90.0)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per grid, seconds")
    add_output_options(ap)
    a = ap.parse_args(argv)
    out = output_dir(a)
    ensemble.set_ranks(a.ranks)
    ensemble.prefetch([request([], grid_at(dx), a.minutes) for dx in a.dx])
    runs = []
    for dx in a.dx:
        runs.append(simulate(dx, a.ranks, a.minutes, a.timeout))
        r = runs[-1]
        print(f"dx {dx:g} mm {r['shape']}: {r['seconds']:.0f} s; pouch drop 30/60/90 min "
              + " / ".join(f"{r['drop'][m]['suprapatellar_pouch']:.2f}" for m in ("30", "60", "90")),
              flush=True)
    rows = analyse(runs)
    for row in rows:
        p = row.get("observed_order")
        print(f"{row['point']:20s} {row['minute']:2d} min: "
              + " ".join(f"{v:6.2f}" for v in row["drops"].values())
              + f" | f0(p=2) {row['f0_p2']:6.2f}"
              + (f", observed p {p:.2f} f0 {row['f0_observed']:6.2f}" if p else ", p n/a")
              + (f" | 1 mm off by {100 * row['default_rel_diff_p2']:.1f} %"
                 if "default_rel_diff_p2" in row else ""))
    d = {"command": "python -m apps.knee.studies convergence "
                    + " ".join(sys.argv[2:] if argv is None else argv),
         "machine": machine(),
         "extent_mm": EXTENT_MM, "minutes": a.minutes, "ranks": a.ranks, "runs": runs,
         "rows": rows}
    with open(os.path.join(out, "convergence.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    plot(sorted(runs, key=lambda r: -r["dx"]), rows, os.path.join(out, "convergence.png"))
    print(f"wrote {out}/convergence.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
