"""What the knee studies share: the grid and ensemble options, one knee run by its
command-line options, and where results go.

Every study runs its simulations through ``run_summary`` / ``request`` (one run of
``apps.knee``'s command line, by its arguments; where and when it runs, and that identical
runs are done once: :mod:`.ensemble`). Results go to an untracked directory by default;
``--publish`` writes the tracked ones in ``apps/knee/studies/results/`` that
``docs/knee.md`` quotes (:mod:`pyfw.monitor.results`).
"""
from __future__ import annotations

import math
import os

from pyfw.monitor import results

from . import ensemble

#: the tracked results the docs quote (``--publish`` writes them)
PUBLISHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: the model's shipped band (package data), written by ``sensitivity --publish``
PACKAGE_SENSITIVITY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "sensitivity.json")


def add_output_options(ap):
    """``--out DIR`` / ``--publish`` (default: ``apps/knee/studies/results/local/``)."""
    results.add_output_options(ap, PUBLISHED)


def output_dir(args):
    """The directory the parsed options name (created)."""
    return results.output_dir(args)


def published_or_local(name, out):
    """The result ``name`` from ``out`` if a run wrote it there, else the published one
    (a study that builds on another's fit reads it from here)."""
    mine = os.path.join(out, name)
    return mine if os.path.exists(mine) else os.path.join(PUBLISHED, name)


def keep_leg(grid, extra):
    """``grid`` with a cross-section wide enough for the full leg radius outside of which
    ``extra``'s device fits: the phantom shrinks the leg to make room for a device that
    does not fit, which would change the anatomy along with the device (a thicker pack
    or a dressing would also mean a thinner leg)."""
    from ..cli import parser
    from ..phantom import Geometry
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
    """``--dx`` and ``--shape`` of the knee studies: a coarse grid by default (2 mm, the
    default leg; ~10 s per 90-min run here)."""
    ap.add_argument("--dx", default="2", help="voxel size, mm (default 2)")
    ap.add_argument("--shape", nargs=3, default=["100", "80", "80"],
                    help="grid NZ NY NX before keep_leg widens it (default 100 80 80)")
    add_ensemble_options(ap)


def add_ensemble_options(ap, default=1):
    """``--ranks K``: ranks of each simulation's group when the study runs as an ensemble
    (``pyfw-run -n N -- python -m apps.knee.studies NAME --ranks K``)."""
    ap.add_argument("--ranks", type=int, default=default,
                    help=f"ranks of each simulation when run under pyfw-run -n N (default "
                         f"{default}; the results do not depend on it)")


def grid_of(args):
    """The CLI grid options of parsed ``add_grid_options`` arguments."""
    return ["--dx", args.dx, "--shape", *args.shape]


def request(extra, grid, minutes=90):
    """The run of the default scenario with the knee options ``extra`` on ``grid``, widened
    where the device would otherwise shrink the leg (``keep_leg``): an
    :class:`.ensemble.Run` for :func:`.ensemble.prefetch`."""
    return ensemble.Run(tuple(keep_leg(grid, extra)), tuple(extra), minutes)


def run_summary(extra, grid, minutes=90):
    """One knee run (``request``'s): its ``summary.json`` (drops and histories; shared
    between identical calls, so read it, do not change it)."""
    return ensemble.result(request(extra, grid, minutes))
