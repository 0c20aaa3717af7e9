"""Command line of the knee-cooling simulation: ``python -m apps.knee [options]``, serially or
under ``mpiexec -n N`` (or ``pyfw-run -n N -- python -m apps.knee ...``).

Bad options (unknown tissue or side, a pack that does not fit, an unstable ``--dt``, an
unreadable checkpoint, a grid too small for the ranks) print one clear error line on every
rank and exit with status 2; nothing waits for a rank that gave up.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from pyfw.errors import ConfigurationError

__all__ = ["main", "parser", "params_of"]


def _slowdown(text: str):
    rank, _, f = text.partition("=")
    try:
        return int(rank), float(f)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RANK=FACTOR, got {text!r}") from None


def _override(text: str):
    key, _, v = text.partition("=")
    try:
        return key, float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected tissue.prop=value, got {text!r}") from None


from .band import SENSITIVITY, sensitivity_band  # noqa: E402,F401 (public here too)
from .tissues import T_ARTERIAL_KNEE  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """The ``python -m apps.knee`` command line."""
    p = argparse.ArgumentParser(prog="python -m apps.knee",
                                description="3-D Pennes bioheat simulation of a cooled knee "
                                            "(explicit FD, slab decomposition over MPI ranks).")
    _model_options(p.add_argument_group("model"))
    _run_options(p.add_argument_group("run"))
    _output_options(p.add_argument_group("output"))
    return p


def _model_options(g) -> None:
    g.add_argument("--shape", type=int, nargs=3, default=(200, 160, 160),
                   metavar=("NZ", "NY", "NX"), help="grid, z along the leg (default 200 160 160)")
    g.add_argument("--dx", type=float, default=1.0, help="voxel size in mm (default 1)")
    g.add_argument("--device", choices=("gel", "cuff", "none"), default="gel",
                   help="cooling device: gel = a pack of --pack material (default), cuff = "
                        "fixed-temperature cryo-cuff, none = uncooled")
    g.add_argument("--device-on", type=float, default=0.0, metavar="MIN",
                   help="put the device on at this minute; the knee is left alone before "
                        "(default 0)")
    g.add_argument("--device-off", type=float, default=None, metavar="MIN",
                   help="take the device off at this minute; the run goes on to --minutes "
                        "with the skin open to the room (default: on to the end)")
    g.add_argument("--sides", default="anterior,medial,lateral",
                   help="sides the device covers (100 degree sectors each), comma list of anterior, "
                        "posterior, medial, lateral (default anterior,medial,lateral)")
    g.add_argument("--thickness", type=float, default=15.0, help="pack thickness, mm (default 15)")
    g.add_argument("--length", type=float, default=120.0, help="device length along the leg, centred on --device-at, mm "
                        "(default 120)")
    g.add_argument("--subcutis", type=float, default=10.0,
                   help="skin (2 mm) and subcutaneous fat over the muscles and the quadriceps "
                        "tendon, mm (default 10; a skinfold measures twice this)")
    g.add_argument("--device-at", type=float, default=None, metavar="MM",
                   help="centre of the device along the leg, mm above the joint line "
                        "(default: the patella's centre, 27 mm at full size; e.g. 40 for the "
                        "thigh muscle probe, -40 for the calf's)")
    g.add_argument("--pouch", type=float, default=2.0, metavar="MM",
                   help="fluid depth of the suprapatellar pouch, mm (default 2: a healthy "
                        "knee; more for a joint distended by fluid)")
    g.add_argument("--bandage", type=float, default=0.0,
                   help="dressing under the device, mm (default 0: healthy knee; 1-2 for a "
                        "post-operative dressing)")
    g.add_argument("--pack", choices=("ice", "gel"), default="ice",
                   help="pack material: ice = frozen water-based pack with latent heat "
                        "(melts over -1..0 C, default), gel = non-freezing gel")
    g.add_argument("--pack-temp", type=float, default=-1.0,
                   help="pack start temperature, C (default -1: crushed ice at its melting "
                        "point; a frozen gel pack from a freezer: -15 to -20)")
    g.add_argument("--t-arterial", type=float, default=T_ARTERIAL_KNEE,
                   help=f"arterial blood temperature entering the knee region, C (default "
                        f"{T_ARTERIAL_KNEE:g}: limb, not core; 37 = core value)")
    g.add_argument("--cuff-temp", type=float, default=8.0, help="cryo-cuff liquid temperature, C (default 8)")
    g.add_argument("--ambient", type=float, default=24.0,
                   help="room temperature, C (default 24, as in Horvath & Hollander 1949)")
    g.add_argument("--perfusion-every", type=float, default=10.0,
                   help="seconds of simulated time between refreshes of the temperature-"
                        "dependent perfusion factor (0: every step; default 10)")
    g.add_argument("--perfusion-lag", type=float, default=0.0,
                   help="time constant (s) with which perfusion follows the temperature "
                        "(vessels take minutes to constrict; default 0: at once)")
    g.add_argument("--perfusion-recovery", type=float, default=None, metavar="S",
                   help="time constant (s) with which constricted vessels open again as the "
                        "tissue rewarms (default: as --perfusion-lag; inf: never, a "
                        "vasoconstriction that persists after the cold)")
    g.add_argument("--arthroscopy", type=float, default=0.0, metavar="MIN",
                   help="minutes of arthroscopic irrigation before the device goes on: the "
                        "joint cavity is held at --irrigant-temp, and t = 0 is the end of the "
                        "operation (default 0: an unoperated knee)")
    g.add_argument("--irrigant-temp", type=float, default=24.5,
                   help="temperature of the irrigated joint cavity, C (default 24.5: saline "
                        "at room temperature, as measured at the end of knee arthroscopies)")
    g.add_argument("--tourniquet", action="store_true",
                   help="a thigh tourniquet holds the leg's blood flow at zero during "
                        "--arthroscopy (it is released when the device goes on)")
    g.add_argument("--h-air", type=float, default=10.0, help="skin-air coefficient (natural convection + radiation), W/(m^2 K) "
                        "(default 10)")
    g.add_argument("--set", type=_override, action="append", default=[], metavar="T.P=V",
                   help="override a tissue property, e.g. muscle.perfusion=5e-4 (repeatable)")


def _run_options(r) -> None:
    r.add_argument("--minutes", type=float, default=90.0, help="cooling time (default 90)")
    r.add_argument("--steps", type=int, default=None, help="stop at this step instead")
    r.add_argument("--dt", type=float, default=None,
                   help="time step in s (default 0.9 x the stability limit; above it: error)")
    r.add_argument("--steady-tol", type=float, default=1e-5, help="steady-state tolerance: largest change of an SOR sweep, K (default 1e-5)")
    r.add_argument("--no-balance", action="store_true", help="keep the initial even slabs")
    r.add_argument("--balance-every", type=int, default=20, help="steps between balance checks (default 20)")
    r.add_argument("--no-overlap", action="store_true", help="complete halos before computing")
    r.add_argument("--slowdown", type=_slowdown, action="append", default=[],
                   metavar="RANK=F", help="emulate a rank F times slower (benchmarks, tests)")


def _output_options(o) -> None:
    o.add_argument("--out", default="knee-out", help="output directory (default knee-out)")
    o.add_argument("--history-every", type=float, default=60.0, help="seconds of simulated time between point-temperature records (default 60)")
    o.add_argument("--snapshot-every", type=float, default=30.0,
                   help="minutes between HDF5 snapshots OUT/knee.h5 + knee.xmf (0: none; "
                        "default 30)")
    o.add_argument("--checkpoint-every", type=float, default=0.0,
                   help="minutes between checkpoints (0: only at the end)")
    o.add_argument("--checkpoint", default=None, help="checkpoint file (default OUT/ckpt.h5)")
    o.add_argument("--restart", default=None, help="continue from this checkpoint (any number of ranks; the model options "
                        "come from the checkpoint)")
    o.add_argument("--no-plots", action="store_true", help="skip the PNG plots (cross-sections, temperature vs time)")
    o.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _device_name(p) -> str:
    """The device as the docs name it: a pack (``device="gel"``) is a bag of crushed ice
    (``pack="ice"``, pack_temp near 0 C) or a frozen gel pack; other devices by their name."""
    if p.device != "gel":
        return p.device
    if p.pack == "ice":
        return "crushed-ice pack" if p.pack_temp > -5 else f"frozen pack ({p.pack_temp:g} C)"
    return f"non-freezing gel pack ({p.pack_temp:g} C)"


def main(argv=None, comm=None) -> int:
    """Entry point (also ``python -m apps.knee``). Returns the exit status."""
    args = parser().parse_args(argv)
    from mpi4py import MPI

    from pyfw.comm import Comm
    comm = Comm(MPI.COMM_WORLD if comm is None else comm)
    try:
        return _run(args, comm)
    except ConfigurationError as e:
        print(f"knee: error (rank {comm.rank}): {e}", file=sys.stderr, flush=True)
        return 2


def params_of(args):
    """The model :class:`~apps.knee.model.Params` that parsed ``parser()`` options describe
    (the knee studies turn their runs' options into ``run_scenario`` parameters with it)."""
    from .model import Params
    return Params(shape=tuple(args.shape), dx_mm=args.dx, device=args.device,
                  sides=tuple(s for s in args.sides.split(",") if s),
                  thickness_mm=args.thickness, length_mm=args.length,
                  bandage_mm=args.bandage, pack_temp=args.pack_temp, pack=args.pack,
                  t_arterial=args.t_arterial, perfusion_every=args.perfusion_every,
                  perfusion_lag=args.perfusion_lag, perfusion_recovery=args.perfusion_recovery,
                  cuff_temp=args.cuff_temp, ambient=args.ambient, h_air=args.h_air,
                  overrides=dict(args.set), dt=args.dt, steady_tol=args.steady_tol,
                  arthroscopy_min=args.arthroscopy, irrigant_temp=args.irrigant_temp,
                  tourniquet=args.tourniquet,
                  subcutis_mm=args.subcutis, device_at_mm=args.device_at,
                  pouch_mm=args.pouch, device_on_min=args.device_on,
                  device_off_min=args.device_off)


def _start(args, comm, log, kw):
    """A KneeRun restarted from ``--restart`` or set up from the options and brought to its
    uncooled steady state."""
    from .model import KneeRun
    if args.restart:
        run = KneeRun.restart(comm, args.restart, **kw)
        log(f"restarted from {args.restart} at step {run.solver.step_count} "
            f"({run.solver.time / 60:.1f} min) on {comm.size} rank(s)")
        s = run.solver
        end = args.steps if args.steps is not None else math.ceil(
            args.minutes * 60.0 / s.dt - 1e-9)
        if s.step_count >= end:
            asked = f"step {args.steps}" if args.steps is not None else f"{args.minutes:g} min"
            log(f"the checkpoint is already at step {s.step_count} ({s.time / 60:.1f} min), "
                f"the end asked for ({asked}): nothing to run; give a later --minutes (or "
                f"--steps) to continue")
        return run
    run = KneeRun(comm, params_of(args), **kw)
    run.steady_state()
    run.irrigate()
    run.start_cooling()
    return run


def _report(log, run, summ, band, perf, comm) -> None:
    """The end-of-run lines (rank 0): performance, drops, the band, clinical anchors."""
    log(f"{run.steps_done} steps in {run.wall:.1f} s ({perf['mlups']:.0f} M voxel "
        f"updates/s over {comm.size} rank(s)), {run.dom.moves} rebalance(s), "
        f"final slabs {run.dom.cuts.tolist()}")
    log("temperature at t = 0 and drop (C) after cooling:")
    for k, v in summ["t0"].items():
        drops = "  ".join(f"{m} min: {d[k]:5.2f}" for m, d in summ["drop"].items())
        log(f"  {k:24s} {v:6.2f} C   {drops}")
    if band is not None:
        log(f"{band['point'].replace('_', ' ')} drop with the band of the sensitivity "
            f"study ({band['method']}):")
        for m, (d, lo, hi) in band["drops"].items():
            log(f"  {m:>4} min: {d:5.2f} C  ({lo:.2f} .. {hi:.2f} C)")
    log("clinical anchors (ice on the knee, intra-articular probes):"
        "\n  suprapatellar pouch, healthy knees, ice bag: median drop 3.3 / 12.8 / 15.2 C "
        "at 30 / 60 / 90 min (Warren 2004)\n  medial gutter and suprapatellar pouch "
        "after arthroscopy, 1 h of ice: 2.7-5 C (Martin 2002)\n  joint cavity, healthy knees, "
        "ice chips: 31.9 -> 22.5 C, skin 27.9 -> 11.5 C (Oosterveld 1992)\n  uncooled knee: "
        "34.8 +- 1 C at the start of surgery (1998); 31.4-32.2 C in the notch at rest (Becher "
        "2008)\n  how the model compares with each: docs/knee.md (benchmarks/knee_validation.py)")


def _run(args, comm) -> int:
    from pyfw.domain import io as dio

    quiet = args.quiet or comm.rank != 0
    log = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    slow = dict(args.slowdown)
    kw = dict(balance=not args.no_balance, overlap=not args.no_overlap,
              slowdown=slow.get(comm.rank, 1.0), balance_every=args.balance_every, log=log)
    out = args.out
    ckpt = args.checkpoint or os.path.join(out, "ckpt.h5")
    if comm.rank == 0:
        os.makedirs(out, exist_ok=True)
    run = _start(args, comm, log, kw)
    s = run.solver
    log(f"grid {run.geo.shape} on {comm.size} rank(s), slabs {run.dom.cuts.tolist()}, "
        f"dt = {s.dt:.4g} s (limit {s.dt_limit:.4g} s), device: {_device_name(run.p)} on "
        f"{','.join(run.p.sides)}")
    geo = run.geo
    if geo.outer_radius() < geo.radius:
        log(f"note: the leg's radius is {geo.outer_radius():g} mm, not {geo.radius:g}: the "
            f"grid's cross-section is too narrow for the full leg"
            + (" and the device around it" if geo.device != "none" else "")
            + "; widen --shape to keep it")
    snaps = None
    if args.snapshot_every > 0:
        d = run.p.dx_mm * 1e-3
        fields = run.snapshot_fields()      # tid too when the device goes on or comes off
        snaps = dio.SnapshotFile(run.dom, os.path.join(out, "knee.h5"),
                                 static=[] if "tid" in fields else ["tid"],
                                 spacing=(d, d, d))
        snaps.write(s.step_count, s.time, names=fields)
    run.run(minutes=args.minutes if args.steps is None else None, steps=args.steps,
            history_every=args.history_every, snapshots=snaps,
            snapshot_every=args.snapshot_every, checkpoint=ckpt,
            checkpoint_every=args.checkpoint_every)
    run.save(ckpt)
    run.dom.close()
    from .scenario import summary_document   # the same document run_scenario returns
    doc = summary_document(run, comm)
    summ, perf = doc["summary"], doc["perf"]
    field = run.dom.gather("T", 0) if not args.no_plots else None
    tid = run.dom.gather("tid", 0) if not args.no_plots else None
    if comm.rank == 0:
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(doc, f, indent=1)
        _report(log, run, summ, summ.get("uncertainty"), perf, comm)
        if not args.no_plots:
            from .plots import plot_all
            files = plot_all(out, run, field, tid)
            log("plots: " + ", ".join(files))
    return 0
