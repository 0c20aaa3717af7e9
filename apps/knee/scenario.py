"""One knee scenario on a given communicator, as a function: :func:`run_scenario`.

This is the knee as a task of an ensemble (issue 38): a farm group, a sub-communicator from
``COMM_WORLD.Split(...)``, ``MPI.COMM_SELF`` for a serial run, or ``COMM_WORLD`` itself.
Several groups of one job may run different scenarios at the same time::

    from mpi4py import MPI
    from apps.knee import Params, run_scenario

    world = MPI.COMM_WORLD
    g = world.rank // 2
    group = world.Split(g, world.rank)                     # groups of 2 ranks
    p = Params(shape=(67, 53, 53), dx_mm=3.0, thickness_mm=10.0 + 5.0 * g)
    s = run_scenario(p, group, minutes=30)                 # on every rank of the group
    s["summary"]["drop"]["30"]["suprapatellar_pouch"]      # C, the same on each of them

What it promises:

* **The CLI's summary.** The returned dict is what ``python -m apps.knee`` writes as
  ``summary.json`` (``params``, ``summary`` with its ``uncertainty`` band where the CLI adds
  one, ``perf``, ``tissue_stats``, ``history``), read back: plain JSON types, string keys
  (``s["summary"]["drop"]["30"]``), picklable.
* **Identical on every rank of the group**: the group's rank 0 broadcasts it (its ``perf``
  timings, as the CLI writes rank 0's).
* **Bitwise reproducible**: everything but ``perf`` (wall time, final cuts, moves) is
  bitwise the same on any rank count, any slabs, with the balancer on or off, alone in a job
  or beside other groups (the kernel and the reductions do not depend on the
  decomposition; ``tests/test_knee_scenario.py`` checks it).
* **Quiet and file-free by default**: nothing printed unless ``log`` is given (then only
  the group's rank 0 calls it), nothing written unless ``out`` is given (a directory per
  scenario: two groups given the same ``out`` would overwrite each other's files), no
  ``sys.argv``, no ``COMM_WORLD``. (:mod:`pyfw.coll` may print its one-line notice on
  stderr that no tuned table exists for the group's layout, once per process.)
* **Errors on every rank of the group, no hang**: bad parameters, an unstable ``dt``, a
  grid too small for the group's ranks, an unwritable ``out`` raise the same exception
  (:class:`~pyfw.errors.ConfigurationError`, :class:`~apps.knee.solver.UnstableTimeStep`)
  on every rank of the group, before or at the same collective; other groups never take
  part in this group's messages, so they are unaffected. An exception on one rank alone
  (a bug, memory) is not agreed: the others wait for that rank in their next exchange
  (the halo's timeout is 600 s) until the caller releases them (the farm's part).

The communicator is used as it is (no duplicate): the domain's point-to-point messages
(tags 11, 12, 21, 22) and collectives travel on it, so hand each scenario a communicator
nothing else is messaging on while it runs (a farm group's own communicator). Using it
as it is also means that revoking or aborting it reaches the scenario's ranks.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping

import numpy as np

from pyfw.comm import mpi_of
from pyfw.domain import io as dio
from pyfw.errors import ConfigurationError

from .model import KneeRun, Params

__all__ = ["run_scenario", "as_params", "summary_document"]


def as_params(params) -> Params:
    """A :class:`Params` from a :class:`Params` (returned as it is) or a mapping of its
    fields (``shape`` and ``sides`` as lists or tuples, ``perfusion_recovery`` ``"inf"``
    as in ``summary.json``'s ``params``): a task's arguments can be plain dicts."""
    if isinstance(params, Params):
        return params
    if not isinstance(params, Mapping):
        raise ConfigurationError(f"params must be a Params or a dict of its fields, got "
                                 f"{type(params).__name__}")
    d = dict(params)
    for key in ("shape", "sides"):
        if key in d:
            d[key] = tuple(d[key])
    if d.get("perfusion_recovery") == "inf":
        d["perfusion_recovery"] = math.inf
    try:
        return Params(**d)
    except TypeError as e:   # an unknown field: the same on every rank, before any message
        raise ConfigurationError(f"params: {e}") from None


def _slowdown_of(slowdown, rank: int) -> float:
    if isinstance(slowdown, Mapping):   # {rank: factor}; string keys too (a JSON'd task)
        return float(slowdown.get(rank, slowdown.get(str(rank), 1.0)))
    return float(slowdown)


def run_scenario(params, comm, minutes: float | None = 90.0, *, steps: int | None = None,
                 history_every: float = 60.0, balance: bool = True, balance_every: int = 20,
                 overlap: bool = True, slowdown=1.0, out: str | None = None,
                 snapshot_every: float = 0.0, checkpoint_every: float = 0.0,
                 log=None) -> dict:
    """Run one knee scenario on ``comm`` and return its summary (see the module docstring).
    Collective over ``comm`` (mpi4py or :class:`pyfw.comm.Comm`).

    ``params``: a :class:`Params` or a dict of its fields. ``minutes`` of cooling, or up to
    step ``steps`` if that is given (as the CLI's ``--minutes`` and ``--steps``).
    ``history_every``: seconds of simulated time between probe records; ``balance``,
    ``balance_every``, ``overlap``: as the CLI's ``--no-balance``, ``--balance-every``,
    ``--no-overlap``; ``slowdown``: emulate a slower rank, a factor for this rank or
    ``{group rank: factor}`` (the same dict on every rank: tests, benchmarks).

    Output only when asked: ``out`` (a directory, created if needed) receives what the CLI
    writes there but the plots: ``summary.json``, the final checkpoint ``ckpt.h5`` (every
    ``checkpoint_every`` minutes too, if > 0) and, with ``snapshot_every`` > 0 (minutes),
    ``knee.h5`` + ``knee.xmf``. ``log``: a callable that the group's rank 0 calls with the
    run's progress lines (``log=print``); nothing is printed by default.
    """
    if not hasattr(mpi_of(comm), "Get_rank"):
        raise ConfigurationError(f"run_scenario needs a communicator (mpi4py or pyfw Comm; "
                                 f"MPI.COMM_SELF for a serial run), got {comm!r}")
    p = as_params(params)
    if steps is None and not (minutes is not None and minutes > 0 and math.isfinite(minutes)):
        raise ConfigurationError(f"minutes must be a finite number > 0, got {minutes}")
    rank = mpi_of(comm).Get_rank()
    say = log if log is not None and rank == 0 else (lambda *a: None)
    run = KneeRun(comm, p, balance=balance, overlap=overlap, balance_every=balance_every,
                  slowdown=_slowdown_of(slowdown, rank), log=say)   # no message yet
    dom = run.dom
    if out is not None:
        _on_root(dom, lambda: os.makedirs(out, exist_ok=True),
                 f"cannot create the output directory {out!r}")
    try:
        _advance(run, say, minutes=minutes, steps=steps, history_every=history_every,
                 out=out, snapshot_every=snapshot_every, checkpoint_every=checkpoint_every)
    except ConfigurationError:
        # raised alike on every rank (validated or agreed): complete the monitor's
        # exchanges anyway, so no request is left on comm for the next task or Finalize
        dom.close()
        raise
    doc = summary_document(run, dom.comm)
    if out is not None:
        def write():
            with open(os.path.join(out, "summary.json"), "w") as f:
                json.dump(doc, f, indent=1)
        _on_root(dom, write, f"cannot write {out!r}/summary.json")
    # as summary.json reads back (string keys, plain types), the same on every rank
    return dom.comm.mpi.bcast(json.loads(json.dumps(doc)) if dom.rank == 0 else None, root=0)


def _on_root(dom, action, what: str) -> None:
    """Run ``action`` on the domain's rank 0; its failure raises on every rank. Collective."""
    exc = None
    if dom.rank == 0:
        try:
            action()
        except OSError as e:
            exc = ConfigurationError(f"{what}: {e}")
    dom.agree(exc, "run_scenario")


def _advance(run: KneeRun, say, *, minutes, steps, history_every, out, snapshot_every,
             checkpoint_every) -> None:
    """Steady state, irrigation, cooling to the end asked for; the files of ``out``."""
    p = run.p
    run.steady_state()
    run.irrigate()
    run.start_cooling()
    s = run.solver
    say(f"grid {run.geo.shape} on {run.dom.size} rank(s), slabs {run.dom.cuts.tolist()}, "
        f"dt = {s.dt:.4g} s (limit {s.dt_limit:.4g} s)")
    snaps, ckpt = None, None
    if out is not None:
        ckpt = os.path.join(out, "ckpt.h5")
        if snapshot_every > 0:
            d = p.dx_mm * 1e-3
            fields = run.snapshot_fields()
            snaps = dio.SnapshotFile(run.dom, os.path.join(out, "knee.h5"),
                                     static=[] if "tid" in fields else ["tid"],
                                     spacing=(d, d, d))
            snaps.write(s.step_count, s.time, names=fields)
    run.run(minutes=minutes if steps is None else None, steps=steps,
            history_every=history_every, snapshots=snaps,
            snapshot_every=snapshot_every if out is not None else 0.0,
            checkpoint=ckpt, checkpoint_every=checkpoint_every if out is not None else 0.0)
    if ckpt is not None:
        run.save(ckpt)
    run.dom.close()   # completes the monitor's exchanges: none is left on comm


def summary_document(run: KneeRun, comm) -> dict:
    """What the CLI writes as ``summary.json`` for a finished ``run`` (collective: the
    tissue statistics reduce over ``comm``): ``params``, ``summary`` (+ ``uncertainty``
    for the default scenario), ``perf`` (this rank's timings), ``tissue_stats``,
    ``history``."""
    from .band import sensitivity_band   # the band the CLI reports (reads a package file)
    summ = run.summary()
    band = sensitivity_band(run.p, summ)
    if band is not None:
        summ["uncertainty"] = band
    nvox = int(np.prod(run.geo.shape))
    perf = {"steps": run.steps_done, "wall_s": run.wall,
            "mlups": run.steps_done * nvox / max(run.wall, 1e-12) / 1e6,
            "cuts": run.dom.cuts.tolist(), "moves": run.dom.moves, "ranks": comm.size}
    return {"params": json.loads(run.p.key()), "summary": summ, "perf": perf,
            "tissue_stats": run.stats(), "history": run.history}
