"""The bioheat solver on a :class:`pyfw.domain.SlabDomain`: property tables, stability limit,
explicit stepping (overlapped halo, optional balancing), steady state by red-black SOR.

The same kernels run serially (a domain on one rank) and under MPI. The outermost layer of
voxels of the global grid is the boundary and is never updated (fixed-temperature tissues,
air, insulators belong there).
"""
from __future__ import annotations

import numpy as np

from pyfw.domain import reductions as red
from pyfw.errors import ConfigurationError

from . import kernel as K
from .tissues import C_BLOOD, RHO_BLOOD, T_ARTERIAL

__all__ = ["UnstableTimeStep", "Tables", "HeatSolver"]


class UnstableTimeStep(ConfigurationError):
    """The requested time step is above the stability limit of the explicit scheme."""


class Tables:
    """Small per-tissue tables (never per-voxel or per-face arrays) for voxel size ``dx`` (m)."""

    def __init__(self, tissues, dx: float, t_arterial: float = T_ARTERIAL):
        if not dx > 0:
            raise ConfigurationError(f"voxel size must be > 0, got {dx}")
        nt = len(tissues)
        if not 0 < nt <= 256:
            raise ConfigurationError("between 1 and 256 tissues (ids are uint8)")
        self.tissues, self.dx, self.t_arterial = tuple(tissues), float(dx), float(t_arterial)
        k = np.array([t.k for t in tissues], dtype=np.float64)
        # face coefficients, symmetric: C[b, a] = C[a, b] also when b is a boundary material
        # (the boundary voxel itself is never updated: g = 0), so the kernel computes each
        # face's heat flow once for both voxels (kernel._pennes_step)
        self.C = np.zeros((nt, nt))
        for a, ta in enumerate(tissues):
            if ta.boundary:
                continue
            for b, tb in enumerate(tissues):
                if tb.boundary and tb.k == 0:   # h, in series with the boundary's own contact
                    c = 0.0 if tb.h == 0 else 1.0 / (dx * (1.0 / tb.h + tb.contact))
                elif tb.boundary:
                    c = 2.0 * k[a] * k[b] / (k[a] + k[b]) / dx ** 2
                elif b < a:
                    continue            # conducting pair: set once, mirrored below
                else:                   # half a voxel of each, in series with any contact
                    rc = ta.contact + tb.contact if a != b else 0.0
                    c = 1.0 / (dx * (0.5 * dx / k[a] + 0.5 * dx / k[b] + rc))
                self.C[a, b] = self.C[b, a] = c
        self.rhoc = np.array([0.0 if t.boundary else t.rho * t.c for t in tissues])
        self.wb = np.array([0.0 if t.boundary else t.perfusion * RHO_BLOOD * C_BLOOD
                            for t in tissues])
        self.src = np.array([0.0 if t.boundary else w * t_arterial + t.qm
                             for t, w in zip(tissues, self.wb)])
        self.conducting = np.array([not t.boundary for t in tissues], dtype=np.bool_)
        # temperature-dependent perfusion: factor exp(kap (T - tref)) below tref
        self.kap = np.array([0.0 if t.boundary else np.log(t.q10) / 10.0 for t in tissues])
        self.tref = np.array([t.tref for t in tissues], dtype=np.float64)
        # phase change (enthalpy): (t_solidus, t_liquidus, rho c_s, mushy slope, rho c_l,
        # and the inverses of the three slopes)
        self.pc = np.array([t.phase_change and not t.boundary for t in tissues],
                           dtype=np.uint8)
        self.pcm = np.zeros((nt, 8))
        for a, t in enumerate(tissues):
            if self.pc[a]:
                cs = t.rho * (t.c_solid or t.c)
                cl = t.rho * t.c
                cm = t.rho * t.latent / (t.t_liquidus - t.t_solidus) + 0.5 * (cs + cl)
                self.pcm[a] = (t.t_solidus, t.t_liquidus, cs, cm, cl, 1 / cs, 1 / cm, 1 / cl)
        # stability: the smallest volumetric heat capacity (enthalpy slope) of each tissue
        # and a bound of |d/dT| of the perfusion + metabolism term p(T) (src - wb T):
        # |p' (src - wb T) - p wb| <= wb (1 + max(1, kap |T_a - tref|)) + kap q_m for p <= 1
        # (= wb when the perfusion is constant).
        self.rhoc_min = np.array([0.0 if t.boundary else
                                  (min(self.pcm[a, 2], self.pcm[a, 4]) if self.pc[a]
                                   else t.rho * t.c) for a, t in enumerate(tissues)])
        self.wstab = np.array([
            0.0 if t.boundary else
            (w if kp == 0.0 else
             w * (1.0 + max(1.0, kp * abs(t_arterial - t.tref))) + kp * t.qm)
            for t, w, kp in zip(tissues, self.wb, self.kap)])

    def g(self, dt: float) -> np.ndarray:
        """dt / (rho c) per tissue (0 for boundary materials)."""
        return np.where(self.rhoc > 0, dt / np.where(self.rhoc > 0, self.rhoc, 1.0), 0.0)


class HeatSolver:
    """Explicit Pennes stepping of field ``T`` (with scratch ``Tn``) over a domain holding a
    uint8 field ``tid``. ``dt=None`` picks ``safety`` times the stability limit; a requested
    ``dt`` above the limit raises :class:`UnstableTimeStep` on every rank. The temperature-
    dependent perfusion factor lives in field ``P``, refreshed from ``T`` every
    ``perfusion_every`` seconds of simulated time (0: every step). With ``perfusion_lag``
    > 0 (seconds) the factor follows the temperature with that first-order time constant
    instead of at once (vessels take minutes to constrict). ``perfusion_recovery`` (seconds)
    is the time constant with which it rises again when the tissue rewarms: None, the same
    as the fall; ``inf``, never (a cold-induced vasoconstriction that persists)."""

    def __init__(self, dom, tables: Tables, dt: float | None = None, safety: float = 0.9,
                 overlap: bool = True, balancer=None, perfusion_every: float = 10.0,
                 perfusion_lag: float = 0.0, perfusion_recovery: float | None = None):
        self.dom, self.tab = dom, tables
        if not perfusion_every >= 0:
            raise ConfigurationError("perfusion_every must be >= 0 (seconds)")
        if not perfusion_lag >= 0:
            raise ConfigurationError("perfusion_lag must be >= 0 (seconds)")
        self.perfusion_every = float(perfusion_every)
        if perfusion_recovery is not None and not perfusion_recovery >= 0:
            raise ConfigurationError("perfusion_recovery must be >= 0 (seconds) or None")
        self.perfusion_lag = float(perfusion_lag)
        self.perfusion_recovery = (self.perfusion_lag if perfusion_recovery is None
                                   else float(perfusion_recovery))
        self._pc_key, self._pc_idx = None, None
        self.overlap, self.balancer = overlap, balancer
        if "tid" not in dom.fields or dom.fields["tid"].dtype != np.uint8:
            raise ConfigurationError("the domain needs a uint8 field 'tid'")
        if int(red.field_max(dom, "tid")) >= len(tables.tissues):
            raise ConfigurationError(f"tissue id {int(red.field_max(dom, 'tid'))} not in the "
                                     f"table of {len(tables.tissues)} tissues")
        if "T" not in dom.fields:
            dom.add("T", np.float64)
        dom.exchange(["tid"])
        self.dt_limit = self.stable_dt()
        if dt is None:
            dt = safety * self.dt_limit
        self.set_dt(dt)
        self.step_count = 0
        self.time = 0.0

    # -------------------------------------------------------------- stability
    def _planes(self, k0: int, k1: int) -> tuple[int, int]:
        """Clip local planes k0:k1 to those updated (not the first/last global plane)."""
        lo, nz = self.dom.lo, self.dom.shape[0]
        return max(k0, 2 - lo), min(k1, nz - lo)

    def stable_dt(self) -> float:
        """Global stability limit min (rho c) / (sum of face coefficients + wb) (collective),
        with the smallest enthalpy slope of a phase-change material for (rho c) and a bound of
        the temperature-dependent perfusion term's derivative for wb (Tables.wstab)."""
        d = self.dom
        a, b = self._planes(1, d.n + 1)
        local = K._stable_dt(d["tid"], self.tab.C, self.tab.rhoc_min, self.tab.wstab, a, b) \
            if a < b else np.inf
        return float(red.allreduce(d.comm, np.array([local]), "min")[0])

    def set_dt(self, dt: float) -> None:
        """Use time step ``dt``; raises :class:`UnstableTimeStep` above the limit."""
        if not (np.isfinite(dt) and dt > 0):
            raise ConfigurationError(f"time step must be > 0, got {dt}")
        if dt > self.dt_limit:
            raise UnstableTimeStep(
                f"time step {dt:.6g} s is above the stability limit {self.dt_limit:.6g} s of "
                f"the explicit scheme for this grid and tissue table (dx = {self.tab.dx:g} m); "
                f"use dt <= {self.dt_limit:.6g} s or omit it to get 0.9 x the limit")
        self.dt = float(dt)
        self._g = self.tab.g(self.dt)
        # the perfusion factor field is refreshed from T every _pevery steps (global step
        # count, so the schedule is the same on every rank and after a restart)
        self._pevery = max(1, int(round(self.perfusion_every / self.dt)))

    def set_tables(self, tables: Tables) -> None:
        """Step on with other tissue properties from now on (same tissue ids and voxel size,
        e.g. a pack's contact changing as its ice melts); the time step stays, and must be
        stable under the new properties (:class:`UnstableTimeStep` otherwise)."""
        if len(tables.tissues) != len(self.tab.tissues) or tables.dx != self.tab.dx:
            raise ConfigurationError("set_tables needs the same tissue ids and voxel size")
        old = self.tab
        self.tab = tables
        limit = self.stable_dt()
        if self.dt > limit:
            self.tab = old
            raise UnstableTimeStep(f"time step {self.dt:.6g} s is above the stability limit "
                                   f"{limit:.6g} s of the new tissue properties")
        self.dt_limit = limit
        self._g = tables.g(self.dt)
        self._pc_key = None          # the phase-change voxels may differ

    def set_material(self, mask: np.ndarray, new_id: int, temperature: float) -> None:
        """Turn this rank's voxels where ``mask`` (the shape of its own planes) is true into
        tissue ``new_id`` at ``temperature`` (C) from now on: a pack put on (its voxels were
        room air) or taken off (they become room air). Collective. The time step stays and
        must be stable with the new voxels (:class:`UnstableTimeStep` otherwise, with
        nothing changed)."""
        d = self.dom
        tid, T = d.fields["tid"], d.fields["T"]
        own, exc = tid[1:-1], None
        if not 0 <= int(new_id) < len(self.tab.tissues):
            exc = ConfigurationError(f"tissue id {new_id} not in the table")
        elif mask.shape != own.shape:
            exc = ConfigurationError(f"mask of shape {mask.shape} for own planes "
                                     f"{own.shape}")
        d.agree(exc, "set_material")          # on every rank, before any message
        before = own[mask].copy()
        own[mask] = new_id
        d.exchange(["tid"])
        limit = self.stable_dt()
        if self.dt > limit:
            own[mask] = before
            d.exchange(["tid"])
            raise UnstableTimeStep(f"time step {self.dt:.6g} s is above the stability limit "
                                   f"{limit:.6g} s with the new voxels")
        self.dt_limit = limit
        T[1:-1][mask] = temperature
        self._pc_key = None          # the phase-change voxels differ
        self.prepare()

    # -------------------------------------------------------------- stepping
    def prepare(self) -> None:
        """Call after changing ``T`` by hand: copies it into the scratch field and exchanges
        ghost planes. Creates the perfusion factor field ``P`` from ``T`` if it is missing
        (a restart brings its own)."""
        d = self.dom
        d.fields["Tn"] = d.fields["T"].copy()
        d.exchange(["T", "tid"])
        if "P" not in d.fields:
            d.add("P", np.float64, 1.0)
            self.refresh_perfusion(at_once=True)

    def refresh_perfusion(self, at_once: bool = False) -> None:
        """P = the vasoconstriction factor at the current temperatures, or (with a lag or a
        recovery time) P moved towards it by what that time constant allows over one
        refresh interval (local, no messages)."""
        d, t = self.dom, self.tab

        def share(tau):     # of the way to the target over one refresh interval
            return 1.0 if at_once or tau == 0 else -np.expm1(-self._pevery * self.dt / tau)
        K._perf_factor(d.fields["T"], d.fields["tid"], d.fields["P"], t.kap, t.tref,
                       share(self.perfusion_lag), share(self.perfusion_recovery))

    def _phase_voxels(self) -> np.ndarray:
        """Row runs of the phase-change voxels, rebuilt when the slab changes."""
        d = self.dom
        tid = d.fields["tid"]
        key = (d.lo, d.n, id(tid))
        if key != self._pc_key:
            a, b = self._planes(1, d.n + 1)
            self._pc_idx = K._phase_index(tid, self.tab.pc, a, b) if (
                a < b and self.tab.pc.any()) else np.empty((0, 4), np.int64)
            self._pc_key = key
        return self._pc_idx

    def _update(self, k0: int, k1: int) -> None:
        a, b = self._planes(k0, k1)
        if a < b:
            f, t = self.dom.fields, self.tab
            K._pennes_step(f["T"], f["Tn"], f["tid"], f["P"], t.C, self._g, t.wb, t.src, a, b)
            idx = self._phase_voxels()
            if idx.shape[0]:
                lo, hi = np.searchsorted(idx[:, 0], (a, b))
                if lo < hi:
                    K._phase_step(f["T"], f["Tn"], f["tid"], t.rhoc, t.pcm, idx[lo:hi])

    def advance(self, nsteps: int) -> None:
        """Take ``nsteps`` explicit steps (rebalancing if a balancer is attached)."""
        d = self.dom
        if "Tn" not in d.fields:
            self.prepare()
        for _ in range(int(nsteps)):
            if self.step_count % self._pevery == 0:
                self.refresh_perfusion()
            spent = d.step(self._update, ["T"], overlap=self.overlap)
            d.fields["T"], d.fields["Tn"] = d.fields["Tn"], d.fields["T"]
            self.step_count += 1
            self.time = self.step_count * self.dt
            if self.balancer is not None:
                self.balancer.record(spent)
                self.balancer.check()

    # -------------------------------------------------------------- steady state
    def steady_state(self, tol: float = 1e-6, max_iter: int = 20000, omega: float = 1.9,
                     check_every: int = 10) -> int:
        """Relax ``T`` to the steady state (red-black SOR, identical on any decomposition)
        until the largest change of a sweep is below ``tol`` (K). Returns the sweep count;
        raises RuntimeError if it does not converge."""
        d, t = self.dom, self.tab
        d.exchange(["tid"])
        for it in range(1, max_iter + 1):
            big = 0.0
            for colour in (0, 1):
                d.exchange(["T"])
                a, b = self._planes(1, d.n + 1)
                if a < b:
                    big = max(big, K._sor_sweep(d["T"], d["tid"], t.C, t.wb, t.src, t.kap,
                                                t.tref, t.conducting, omega,
                                                d.lo - 1 + colour, a, b))
            if it % check_every == 0:
                if red.allreduce(d.comm, np.array([big]), "max")[0] < tol:
                    self.prepare()
                    return it
        raise RuntimeError(f"steady state did not converge in {max_iter} sweeps")
