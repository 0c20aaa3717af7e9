"""The knee-cooling run: phantom -> steady state of the uncooled knee -> cooling transient,
with point histories, snapshots, checkpoints and a summary. Used by the CLI and the tests.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from pyfw.domain import Balancer, SlabDomain
from pyfw.domain import io as dio
from pyfw.domain import reductions as red
from pyfw.errors import ConfigurationError

from . import phantom
from .solver import HeatSolver, Tables
from .tissues import ID, T_ARTERIAL_KNEE, tissue_table

__all__ = ["Params", "KneeRun", "PACKS", "T_ARTERIAL_KNEE"]

#: pack material by --pack choice (tissue name in the table)
PACKS = {"ice": "ice", "gel": "gel"}




@dataclass
class Params:
    """Everything that defines the physics (stored in checkpoints and compared on restart).

    The defaults are the setting of Warren et al. 2004 (AJSM 32:441, pubmed 14977671):
    healthy knee, supine at room temperature, a bag of crushed ice on the front and sides
    of the knee for 90 min, intra-articular probe in the suprapatellar pouch (the
    ``suprapatellar_pouch`` point). Crushed ice sits at its melting point (-1..0 C here):
    ``pack_temp = -1`` with the whole latent heat left; the default pack (15 mm over three
    100-degree sides, 120 mm long) holds 0.6 kg of ice. Warren's abstract gives no mass;
    the bags of the other studies held 0.75 kg (Otte et al. 2002), 1.8 kg (Myrer et al., J
    Athl Train 36:32, 2001) and 2 kg (Sanchez-Inchausti et al. 2005), which the
    sensitivity study covers (8-40 mm: 0.3-1.9 kg). No dressing under it
    (healthy knees; after surgery the pack goes over a dressing: ``bandage_mm`` 1-2, as in
    Martin et al. 2002 or Breslin et al. 2015). A frozen gel pack from a freezer is
    ``pack_temp = -15 .. -20``; ``pack = "gel"`` a non-freezing gel.

    After an arthroscopy (``arthroscopy_min`` > 0) the device goes on a knee that was
    irrigated for that long: the joint cavity is held at ``irrigant_temp`` (saline at room
    temperature; the cavity ends the operation at 24.5 +- 1.0 C, "nearly equal" to the
    saline, Sanchez-Inchausti et al., Arthroscopy 21 (2005) 552, and at 24.6 +- 1.5 C in a
    second series of 40 knees, Knee Surg Sports Traumatol Arthrosc, doi
    10.1007/BF01466616), and t = 0 is the end of the operation, when the device is put on.
    With ``tourniquet`` the leg has no blood flow during the operation (a thigh tourniquet,
    common in knee arthroscopy; the cited studies' abstracts do not say whether they used
    one); it is released when the device goes on.

    With ``device_on_min`` the device goes on that many minutes after t = 0 (the knee is
    left alone before: the second hour of a study's protocol), and with ``device_off_min``
    it comes off at that minute (after a 20-min treatment, say) and the run goes on with the
    skin (or the dressing) open to the room, as the studies that follow the rewarming did."""
    shape: tuple = (200, 160, 160)
    dx_mm: float = 1.0
    device: str = "gel"
    sides: tuple = ("anterior", "medial", "lateral")
    thickness_mm: float = 15.0
    length_mm: float = 120.0
    bandage_mm: float = 0.0
    pack_temp: float = -1.0
    pack: str = "ice"            # ice: frozen water-based pack (latent heat); gel: no freezing
    t_arterial: float = T_ARTERIAL_KNEE
    perfusion_every: float = 10.0  # s between refreshes of the perfusion factor from T
    # s, time constant of vasoconstriction. 0 (at once) is a bounding case: muscle blood
    # flow under a cold pack held for 5 min and fell 49 % by 10 min (Thorsson et al., Med Sci
    # Sports Exerc 17 (1985) 710); the sensitivity study runs 0 .. 600 s
    perfusion_lag: float = 0.0
    # s, time constant with which constricted vessels open again as the tissue rewarms: None
    # as fast as they closed; inf never (skin blood flow stayed depressed for the 2 h after
    # 1 h of cooling at the knee, Khoshnevis et al., J Biomech Eng 138 (2016) 031004)
    perfusion_recovery: float | None = None
    cuff_temp: float = 8.0         # assumed: cryo-cuff liquids run 5-15 C (Ohkoshi 1999: 5, 10)
    ambient: float = 24.0          # room air, within the 20-25 C of the research notes
    h_air: float = 10.0
    overrides: dict = field(default_factory=dict)
    dt: float | None = None
    steady_tol: float = 1e-5
    arthroscopy_min: float = 0.0   # minutes of irrigation before the device goes on
    irrigant_temp: float = 24.5    # C, the irrigated cavity's temperature
    tourniquet: bool = False       # no blood flow in the leg during the arthroscopy
    subcutis_mm: float = phantom.SUBCUTIS_MM   # skin + subcutaneous fat (half a skinfold)
    device_at_mm: float | None = None  # the device's centre above the joint line (below:
                                       # < 0; None: the patella's centre)
    pouch_mm: float = phantom.POUCH_MM   # fluid depth of the suprapatellar pouch
    device_on_min: float = 0.0           # minute at which the device goes on
    device_off_min: float | None = None  # minute at which it comes off (None: never)

    def geometry(self) -> phantom.Geometry:
        """The phantom's grid and device layout for these parameters."""
        return phantom.Geometry(shape=tuple(self.shape), dx=self.dx_mm, device=self.device,
                                sides=tuple(self.sides), thickness=self.thickness_mm,
                                length=self.length_mm, bandage=self.bandage_mm,
                                subcutis=self.subcutis_mm, device_at=self.device_at_mm,
                                pouch=self.pouch_mm)

    def tissues(self):
        """The tissue table with the skin-air coefficient and the overrides applied."""
        ov = {"air.h": self.h_air}
        ov.update(self.overrides)
        return tissue_table(ov)

    def validate(self) -> None:
        """Pure checks, identical on every rank (call before any communication)."""
        if len(self.shape) != 3:
            raise ConfigurationError(f"shape needs 3 values, got {self.shape}")
        self.geometry().validate()
        self.tissues()
        if self.pack not in PACKS:
            raise ConfigurationError(f"unknown pack {self.pack!r} ({', '.join(PACKS)})")
        for name in ("pack_temp", "cuff_temp", "ambient", "h_air", "t_arterial",
                     "irrigant_temp"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigurationError(f"{name} must be finite")
        if not (self.perfusion_lag >= 0 and math.isfinite(self.perfusion_lag)):
            raise ConfigurationError(f"perfusion_lag must be a finite number of seconds >= 0, "
                                     f"got {self.perfusion_lag}")
        rec = self.perfusion_recovery
        if rec is not None and not rec >= 0:
            raise ConfigurationError(f"perfusion_recovery must be a number of seconds >= 0 "
                                     f"(inf: never), got {rec}")
        if not (self.arthroscopy_min >= 0 and math.isfinite(self.arthroscopy_min)):
            raise ConfigurationError(f"arthroscopy_min must be a finite number of minutes "
                                     f">= 0, got {self.arthroscopy_min}")
        on, off = self.device_on_min, self.device_off_min
        if not (on >= 0 and math.isfinite(on)):
            raise ConfigurationError(f"device_on_min must be a finite number of minutes "
                                     f">= 0, got {on}")
        if off is not None and not (off > on and math.isfinite(off)):
            raise ConfigurationError(f"device_off_min must be a finite number of minutes "
                                     f"after device_on_min ({on:g}), got {off}")
        if (off is not None or on > 0) and self.device == "none":
            raise ConfigurationError("device_on_min and device_off_min need a device "
                                     "(device is 'none')")

    def key(self) -> str:
        """These parameters as canonical JSON (stored in checkpoints, compared on restart);
        an infinite ``perfusion_recovery`` is the string "inf" (strict JSON has no
        Infinity)."""
        d = asdict(self)
        if d["perfusion_recovery"] == math.inf:
            d["perfusion_recovery"] = "inf"
        d["shape"], d["sides"] = list(self.shape), list(self.sides)
        return json.dumps(d, sort_keys=True)


#: seconds of wall time between progress lines of a run
PROGRESS_EVERY = 10.0


class KneeRun:
    """One simulation over ``comm`` (mpi4py or pyfw Comm). Collective in every method."""

    def __init__(self, comm, params: Params, balance: bool = True, overlap: bool = True,
                 slowdown: float = 1.0, balance_every: int = 20, log=print, cuts=None):
        params.validate()
        self.p = params
        self.geo = params.geometry()
        self.tissues = params.tissues()
        self.tab = Tables(self.tissues, params.dx_mm * 1e-3, t_arterial=params.t_arterial)
        self.dom = SlabDomain(comm, self.geo.shape, cuts=cuts, slowdown=slowdown)
        self.rank = self.dom.rank
        self.log = log if self.rank == 0 else (lambda *a, **k: None)
        self.balancer = Balancer(self.dom, every=balance_every) if balance else None
        self.overlap = overlap
        self.points = self.geo.points()
        self.history = {"t": [], **{k: [] for k in self.points}}
        self.solver = None
        self.steady_sweeps = 0
        self.t0_values = None
        self.asked_min = None      # the end the last run() was asked for, minutes
        self.changed = False       # change_tissues() was called (no checkpoints then)

    # ------------------------------------------------------------------ set-up
    def _planes(self, z0: int, z1: int) -> np.ndarray:
        out = phantom.planes(self.geo, z0, z1)
        out[out == ID["gel"]] = ID[PACKS[self.p.pack]]
        return out

    def _fill(self, phase: str) -> None:
        d, p = self.dom, self.p
        tid = d.set_from_global("tid", self._planes, np.uint8)
        own = tid[1:-1]
        pack = ID[PACKS[p.pack]]
        if phase == "steady":  # the uncooled knee: no pack or cuff yet (bandage stays)
            own[(own == pack) | (own == ID["cuff"])] = ID["air"]
        T = d.add("T", np.float64, 37.0)
        T[1:-1][own == ID["air"]] = p.ambient
        T[1:-1][own == pack] = p.pack_temp
        T[1:-1][own == ID["cuff"]] = p.cuff_temp

    def check_dt(self) -> None:
        """Refuse an unstable ``dt`` now, on the cooling phase's tissues, rather than after
        the steady-state solve (seconds to minutes)."""
        if self.p.dt is None:
            return
        self.dom.set_from_global("tid", self._planes, np.uint8)
        HeatSolver(self.dom, self.tab, dt=self.p.dt, overlap=self.overlap)  # UnstableTimeStep

    def steady_state(self) -> None:
        """Build the uncooled knee and relax it to its steady state."""
        self.check_dt()
        t0 = time.perf_counter()
        self._fill("steady")
        s = HeatSolver(self.dom, self.tab, dt=None, overlap=self.overlap)
        self.steady_sweeps = s.steady_state(tol=self.p.steady_tol)
        self.log(f"steady state: {self.steady_sweeps} SOR sweeps in "
                 f"{time.perf_counter() - t0:.1f} s; "
                 + ", ".join(f"{k} {v:.2f} C" for k, v in self.probe().items()))

    def irrigate(self) -> None:
        """The arthroscopy, if ``arthroscopy_min`` > 0: from the steady state, the joint
        cavity (every synovial-fluid voxel: joint space and pouch) is held at
        ``irrigant_temp`` for that many minutes, as the flowing saline holds it, while the
        tissues around it cool by conduction and their perfusion responds. No device yet
        (a dressing, ``bandage_mm``, is already there, as in the steady state); with
        ``tourniquet`` no tissue is perfused meanwhile. Its time
        step is 0.9 x its own stability limit (``dt`` applies to the cooling)."""
        p = self.p
        if self.solver is not None:
            raise ConfigurationError("irrigate() comes before start_cooling()")
        if p.arthroscopy_min <= 0:
            return
        t0 = time.perf_counter()
        fluid = ID["synovial_fluid"]
        table = list(self.tissues)
        if p.tourniquet:   # the thigh cuff stops the blood: the tissues cool unopposed
            table = [replace(t, perfusion=0.0) for t in table]
        table[fluid] = replace(table[fluid], boundary=True)   # a fixed-temperature conductor
        tab = Tables(table, p.dx_mm * 1e-3, t_arterial=p.t_arterial)
        T, tid = self.dom.fields["T"], self.dom.fields["tid"]
        T[1:-1][tid[1:-1] == fluid] = p.irrigant_temp
        s = HeatSolver(self.dom, tab, dt=None, overlap=self.overlap, balancer=self.balancer,
                       perfusion_every=p.perfusion_every, perfusion_lag=p.perfusion_lag,
                       perfusion_recovery=p.perfusion_recovery)
        s.prepare()
        s.advance(int(math.ceil(p.arthroscopy_min * 60.0 / s.dt - 1e-9)))
        self.log(f"arthroscopy: cavity held at {p.irrigant_temp:g} C for "
                 f"{p.arthroscopy_min:g} min ({s.step_count} steps, "
                 f"{time.perf_counter() - t0:.1f} s); "
                 + ", ".join(f"{k} {v:.2f} C" for k, v in self.probe().items()))

    def start_cooling(self) -> None:
        """Put the device on the steady-state knee (t = 0), or leave its place to the room's
        air until ``device_on_min`` (the time step is the one with the device on)."""
        d, p = self.dom, self.p
        T = d.fields["T"]
        tid = d.set_from_global("tid", self._planes, np.uint8)
        own = tid[1:-1]
        T[1:-1][own == ID[PACKS[p.pack]]] = p.pack_temp
        T[1:-1][own == ID["cuff"]] = p.cuff_temp
        self._make_solver()
        if p.device_on_min > 0:
            self.take_device_off(quiet=True)
        self.t0_values = self.probe()
        self._record()

    def change_tissues(self, overrides: dict) -> None:
        """From now on, step with these tissue overrides on top of the run's own
        (``{"ice.contact": 0.0}``: e.g. a bag's contact improving as meltwater fills its
        air gaps); a later call starts again from the run's own overrides. Collective. Not
        recorded in checkpoints, so a run that changed its tissues refuses to save one."""
        if self.solver is None:
            raise ConfigurationError("change_tissues() needs a started run (start_cooling)")
        merged = dict(self.p.overrides, **overrides)
        tissues = tissue_table(dict({"air.h": self.p.h_air}, **merged))
        tab = Tables(tissues, self.p.dx_mm * 1e-3, t_arterial=self.p.t_arterial)
        self.solver.set_tables(tab)          # refuses an unstable change: nothing changed
        self.tissues, self.tab, self.changed = tissues, tab, True

    def _make_solver(self) -> None:
        self.solver = HeatSolver(self.dom, self.tab, dt=self.p.dt, overlap=self.overlap,
                                 balancer=self.balancer,
                                 perfusion_every=self.p.perfusion_every,
                                 perfusion_lag=self.p.perfusion_lag,
                                 perfusion_recovery=self.p.perfusion_recovery)
        self.solver.prepare()

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str) -> None:
        """Write a checkpoint (fields T, tid, P, the step, dt and the histories) to ``path``."""
        if self.changed:
            raise ConfigurationError("this run changed its tissues during the run "
                                     "(change_tissues), which a checkpoint cannot record")
        s = self.solver
        dio.save_checkpoint(self.dom, path, ["T", "tid", "P"], {
            "params": self.p.key(), "step": s.step_count, "dt": s.dt,
            "history": json.dumps(self.history), "t0_values": json.dumps(self.t0_values)})

    @classmethod
    def restart(cls, comm, path: str, **kw) -> "KneeRun":
        """Continue from a checkpoint on any number of ranks (same physics required)."""
        from pyfw.domain.comms import as_comm
        pc = as_comm(comm)
        meta = dio.read_checkpoint(pc, path)
        params = params_from_key(meta["params"])
        run = cls(pc, params, **kw)
        run.dom.add("P", np.float64, 1.0)
        dio.load_fields(run.dom, path, ["T", "tid", "P"])
        run.p.dt = float(meta["dt"])
        run._make_solver()
        run.solver.step_count = int(meta["step"])
        run.solver.time = run.solver.step_count * run.solver.dt
        run.history = json.loads(meta["history"])
        run.t0_values = json.loads(meta["t0_values"])
        return run

    # ------------------------------------------------------------------ running
    def probe(self) -> dict:
        """The temperature (C) at each named point, on every rank."""
        vals = red.probe(self.dom, "T", list(self.points.values()))
        return dict(zip(self.points, vals.tolist()))

    def _record(self) -> None:
        self.history["t"].append(self.solver.time)
        for k, v in self.probe().items():
            self.history[k].append(v)

    def run(self, minutes: float | None = None, steps: int | None = None,
            history_every: float = 60.0, snapshots: dio.SnapshotFile | None = None,
            snapshot_every: float = 0.0, checkpoint: str | None = None,
            checkpoint_every: float = 0.0) -> None:
        """Advance to ``minutes`` of cooling (or to absolute step ``steps``)."""
        s = self.solver
        end = steps if steps is not None else int(math.ceil(minutes * 60.0 / s.dt - 1e-9))
        self.asked_min = minutes if steps is None else steps * s.dt / 60.0
        per = lambda sec: max(1, int(round(sec / s.dt))) if sec > 0 else 0  # noqa: E731
        h, sn, ck = per(history_every), per(snapshot_every * 60), per(checkpoint_every * 60)
        t0 = time.perf_counter()
        start = s.step_count
        report = t0 + PROGRESS_EVERY
        # a line every PROGRESS_EVERY s of wall time (a batch log must show the job is alive);
        # advances are cut at the next history step at least, so a line is never late by much
        chunk = max(1, min(per(30.0), end - start))
        events = self.device_events()
        while s.step_count < end:
            nxt = [end, s.step_count + chunk] + [(s.step_count // q + 1) * q
                                                 for q in (h, sn, ck) if q]
            nxt += [k for k, _ in events if k > s.step_count]
            s.advance(min(nxt) - s.step_count)
            for k, act in events:
                if s.step_count == k:
                    act()
            now = time.perf_counter()
            if now >= report:
                report = now + PROGRESS_EVERY
                self.log(f"  ... {s.time / 60:.1f} of {end * s.dt / 60:.1f} min simulated "
                         f"(step {s.step_count} of {end}), {now - t0:.0f} s")
            n = s.step_count
            if h and n % h == 0:
                self._record()
            if snapshots is not None and sn and n % sn == 0:
                snapshots.write(n, s.time, names=self.snapshot_fields())
            if checkpoint and ck and n % ck == 0:
                self.save(checkpoint)
        self.wall = time.perf_counter() - t0
        self.steps_done = s.step_count - start
        if self.history["t"][-1] != s.time:
            self._record()

    def device_events(self) -> list:
        """(step, action) of the device going on (``device_on_min`` > 0) and coming off
        (``device_off_min``), in that order: each at the first step at or after its minute,
        and at least one step after the one before (step 0 is the start, never an event)."""
        p, dt = self.p, self.solver.dt
        out, last = [], 0
        for minutes, act in ((p.device_on_min if p.device_on_min > 0 else None,
                              self.put_device_on), (p.device_off_min, self.take_device_off)):
            if minutes is not None:
                last = max(last + 1, int(math.ceil(minutes * 60.0 / dt - 1e-9)))
                out.append((last, act))
        return out

    def snapshot_fields(self) -> tuple:
        """The fields a snapshot holds: the temperature, and the tissue ids too when they
        change during the run (the device goes on or comes off); else those are static."""
        p = self.p
        return ("T", "tid") if p.device_on_min > 0 or p.device_off_min is not None else ("T",)

    def put_device_on(self) -> None:
        """Put the device on now (collective): a fresh pack at ``pack_temp`` or the cuff at
        ``cuff_temp`` where the phantom places it."""
        d, p = self.dom, self.p
        layout = self._planes(d.lo, d.hi)
        for name, temp in ((PACKS[p.pack], p.pack_temp), ("cuff", p.cuff_temp)):
            self.solver.set_material(layout == ID[name], ID[name], temp)
        self.log(f"device on at {self.solver.time / 60:.1f} min")

    def take_device_off(self, quiet: bool = False) -> None:
        """Take the device off now (collective): its voxels (pack or cuff) become room air
        at ``ambient``; a dressing stays on the skin. The checkpoint holds the tissue ids, so
        a restart continues from either side of it."""
        p = self.p
        own = self.dom.fields["tid"][1:-1]
        self.solver.set_material(np.isin(own, [ID[PACKS[p.pack]], ID["cuff"]]), ID["air"],
                                 p.ambient)
        if not quiet:
            self.log(f"device off at {self.solver.time / 60:.1f} min: the skin is open to "
                     f"the room ({p.ambient:g} C)")

    # ------------------------------------------------------------------ results
    def summary(self, marks=(30, 60, 90)) -> dict:
        """Temperature drop of each probe point at the given minutes that were reached, and
        at the end of the run (linear interpolation of the histories)."""
        t = np.array(self.history["t"]) / 60.0
        out = {"t0": self.t0_values, "drop": {}}
        end = float(t[-1]) if t.size else 0.0
        pts = [m for m in marks if m <= end + 1e-9]
        # the run ends on the first step at or past the end asked for: that end is reported
        # unless it is one of the marks (then the mark stands for it)
        asked = self.asked_min if self.asked_min is not None else end
        if end > 0 and not any(abs(asked - m) < 1e-9 for m in pts):
            pts.append(round(end, 2))
        for m in pts:
            out["drop"][m] = {k: float(self.t0_values[k] - np.interp(m, t, self.history[k]))
                              for k in self.points}
        return out

    def stats(self) -> dict:
        """Per-tissue mean/min/max temperature (identical on any decomposition)."""
        st = red.label_stats(self.dom, "T", "tid", len(self.tissues))
        return {t.name: {"mean": float(st["mean"][i]), "min": float(st["min"][i]),
                         "max": float(st["max"][i]), "count": int(st["count"][i])}
                for i, t in enumerate(self.tissues) if st["count"][i] > 0}


def params_from_key(key: str) -> Params:
    """Rebuild :class:`Params` from its JSON key (stored in checkpoints)."""
    d = json.loads(key)
    d["shape"], d["sides"] = tuple(d["shape"]), tuple(d["sides"])
    if d.get("perfusion_recovery") == "inf":
        d["perfusion_recovery"] = math.inf
    return Params(**d)

