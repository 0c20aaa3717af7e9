"""Verification of the bioheat kernel and solver against reference code and analytic answers
(serial: a SlabDomain on COMM_SELF runs the same kernels as the MPI runtime)."""
import math

import numpy as np
import pytest
from mpi4py import MPI

from apps.knee import kernel as K
from apps.knee.solver import HeatSolver, Tables, UnstableTimeStep
from apps.knee.tissues import DEFAULT_TISSUES, Tissue
from pyfw.domain import SlabDomain
from pyfw.errors import ConfigurationError
from tests import naive_heat

WALL = Tissue("wall", boundary=True, h=0.0)           # insulating
ID_ICE = [t.name for t in DEFAULT_TISSUES].index("ice")
MAT = Tissue("m", 1.0, 1.0, 1.0)


def dirichlet(k=1.0):
    return Tissue("fixed", k=k, boundary=True)


def box(shape, tid, T, tissues, dx=1.0, dt=None, safety=0.9):
    dom = SlabDomain(MPI.COMM_SELF, shape)
    dom.set_from_global("tid", np.asarray(tid, np.uint8))
    dom.set_from_global("T", np.asarray(T, np.float64))
    return dom, HeatSolver(dom, Tables(tissues, dx), dt=dt, safety=safety)


def ring(shape, inner=1, outer=0):
    tid = np.full(shape, outer, np.uint8)
    tid[1:-1, 1:-1, 1:-1] = inner
    return tid


def test_kernel_matches_naive_reference():
    rng = np.random.default_rng(1)
    shape = (9, 8, 7)
    tid = rng.integers(0, len(DEFAULT_TISSUES), shape).astype(np.uint8)
    T = rng.uniform(-10, 40, shape)
    dx = 1e-3
    dom, s = box(shape, tid, T, DEFAULT_TISSUES, dx=dx)
    assert s.dt_limit == pytest.approx(naive_heat.stable_dt(tid, DEFAULT_TISSUES, dx), rel=1e-13)
    ref = T.copy()
    P0 = naive_heat.factors(T, tid, DEFAULT_TISSUES)    # refreshed every 10 s: not yet
    for _ in range(3):
        ref = naive_heat.step(ref, tid, DEFAULT_TISSUES, s.dt, dx, P=P0)
    s.advance(3)
    np.testing.assert_allclose(dom.interior("T"), ref, rtol=1e-12, atol=1e-11)
    # boundary materials and the outer layer never change
    fixed = np.array([t.boundary for t in DEFAULT_TISSUES])[tid]
    assert np.array_equal(dom.interior("T")[fixed], T[fixed])


def test_flux_form_kernel_is_bitwise_the_direct_form_in_any_chunking():
    """The kernel computes each face's heat flow once for both voxels; that must give
    bitwise the direct per-voxel sum (same six terms, same order), also when the planes
    are updated in separate calls (ranks' slabs, overlap chunks)."""
    rng = np.random.default_rng(3)
    shape = (11, 9, 10)
    tid = rng.integers(0, len(DEFAULT_TISSUES), shape).astype(np.uint8)
    T = rng.uniform(-10, 40, shape)
    P = rng.uniform(0.2, 1.0, shape)
    t = Tables(DEFAULT_TISSUES, 1e-3)
    assert np.array_equal(t.C, t.C.T)
    g = t.g(0.3)
    want = naive_heat.direct_step(T, tid, t.C, g, t.wb, t.src, P)
    for cuts in ((1, 10), (1, 2, 10), (1, 4, 5, 9, 10), tuple(range(1, 11))):
        Tn = T.copy()
        for a, b in zip(cuts[:-1], cuts[1:]):
            K._pennes_step(T, Tn, tid, P, t.C, g, t.wb, t.src, a, b)
        assert np.array_equal(Tn, want), cuts


def test_discrete_eigenmode_decays_by_exact_factor():
    shape = (18, 14, 12)
    z, y, x = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    m = (1, 2, 1)
    T0 = np.ones(shape)
    for ax, (c, n) in enumerate(zip((z, y, x), shape)):
        T0 = T0 * np.sin(m[ax] * np.pi * c / (n - 1))
    dom, s = box(shape, ring(shape), T0, [dirichlet(), MAT])
    r = s.dt  # k = rho c = dx = 1
    G = 1 - 4 * r * sum(math.sin(mi * math.pi / (2 * (n - 1))) ** 2 for mi, n in zip(m, shape))
    s.advance(60)
    assert G ** 60 < 0.1
    np.testing.assert_allclose(dom.interior("T"), G ** 60 * T0, rtol=0, atol=1e-13)


def test_erf_semi_infinite_body():
    # 1-D column: insulated sides, surface z = 0 held at Ts, body initially at Ti
    nz, dx, k, rc = 121, 1e-3, 0.5, 4e6
    alpha = k / rc
    shape = (nz, 3, 3)
    tid = np.zeros(shape, np.uint8)
    tid[:, 1, 1] = 1
    tid[0, 1, 1] = 2
    Ts, Ti = 5.0, 35.0
    T = np.full(shape, Ti)
    T[0] = Ts
    tis = [WALL, Tissue("body", k, rc, 1.0), Tissue("surface", k=k, boundary=True)]
    dom, s = box(shape, tid, T, tis, dx=dx)
    assert s.dt_limit == pytest.approx(rc * dx * dx / (2 * k))
    nsteps = int(round(900 / s.dt))
    s.advance(nsteps)
    t = nsteps * s.dt
    zc = np.arange(nz) * dx
    exact = Ts + (Ti - Ts) * np.array([math.erf(v / (2 * math.sqrt(alpha * t))) for v in zc])
    err = np.abs(dom.interior("T")[:, 1, 1] - exact).max() / (Ti - Ts)
    assert 2 * math.sqrt(alpha * t) < 0.3 * nz * dx
    assert err < 0.01, err


def test_heat_is_conserved_with_insulated_walls():
    rng = np.random.default_rng(3)
    shape = (12, 10, 11)
    tis = [WALL, Tissue("a", 0.5, 1000, 4000), Tissue("b", 0.2, 900, 2300),
           Tissue("c", 2.0, 1900, 1300)]
    tid = rng.integers(1, 4, shape).astype(np.uint8)
    tid[0] = tid[-1] = tid[:, 0] = tid[:, -1] = tid[:, :, 0] = tid[:, :, -1] = 0
    T = rng.uniform(0, 40, shape)
    dom, s = box(shape, tid, T, tis, dx=1e-3)
    rc = np.array([0.0] + [t.rho * t.c for t in tis[1:]])
    before = (rc[tid] * T).sum()
    s.advance(300)
    after = (rc[tid] * dom.interior("T")).sum()
    assert abs(after - before) / before < 1e-12
    assert dom.interior("T")[tid > 0].std() < 0.5 * T[tid > 0].std()  # it did diffuse


def _two_layer(m, k1=0.5, k2=0.1, nz=20, dx=1e-3):
    shape = (nz, 3, 3)
    tid = np.zeros(shape, np.uint8)
    tid[:, 1, 1] = np.where(np.arange(nz) < m, 1, 2)
    tid[0, 1, 1], tid[-1, 1, 1] = 3, 4
    T = np.full(shape, 0.5)
    T[0], T[-1] = 0.0, 1.0
    tis = [WALL, Tissue("a", k1, 1e6, 1.0), Tissue("b", k2, 1e6, 1.0),
           Tissue("lo", k=k1, boundary=True), Tissue("hi", k=k2, boundary=True)]
    return shape, tid, T, tis


def test_two_layer_steady_state_is_exact():
    nz, m, k1, k2, dx = 20, 7, 0.5, 0.1, 1e-3
    shape, tid, T, tis = _two_layer(m, k1, k2, nz, dx)
    dom, s = box(shape, tid, T, tis, dx=dx)
    s.steady_state(tol=1e-15, max_iter=100000, omega=1.5)
    z = np.arange(nz) * dx
    zi = (m - 0.5) * dx                       # interface midway between nodes
    q = 1.0 / (zi / k1 + (z[-1] - zi) / k2)   # flux through the series resistances
    exact = np.where(z < zi, q * z / k1, q * zi / k1 + q * (z - zi) / k2)
    np.testing.assert_allclose(dom.interior("T")[:, 1, 1], exact, rtol=0, atol=1e-12)
    # the explicit scheme has the same fixed point: stepping from it changes nothing
    s.prepare()
    s.advance(50)
    np.testing.assert_allclose(dom.interior("T")[:, 1, 1], exact, rtol=0, atol=1e-12)


def test_perfusion_lag_relaxes_the_factor_exponentially():
    """With a lag tau the perfusion factor approaches the law's value as exp(-t / tau) over
    the refreshes (t = refreshes x interval), and jumps straight to it without a lag."""
    shape = (5, 5, 5)
    tis = [WALL, Tissue("p", 0.5, 1000, 4000, perfusion=0.0, qm=0.0, q10=4.0)]
    dom = SlabDomain(MPI.COMM_SELF, shape)
    dom.set_from_global("tid", ring(shape))
    dom.set_from_global("T", np.full(shape, 27.0))          # law: 4 ** -1 = 0.25
    tau, every = 300.0, 10.0
    s = HeatSolver(dom, Tables(tis, 1e-3), perfusion_every=every, perfusion_lag=tau)
    s.prepare()
    assert dom.interior("P")[2, 2, 2] == pytest.approx(0.25)  # the start is at equilibrium
    dom["P"][...] = 1.0                                        # as if just cooled to 27 C
    n = 12 * s._pevery
    s.advance(n)
    t = 12 * s._pevery * s.dt
    assert dom.interior("P")[2, 2, 2] == pytest.approx(0.25 + 0.75 * math.exp(-t / tau),
                                                      rel=1e-12)
    s0 = HeatSolver(dom, Tables(tis, 1e-3), perfusion_every=every)
    dom["P"][...] = 1.0
    s0.advance(1)
    assert dom.interior("P")[2, 2, 2] == pytest.approx(0.25, rel=1e-14)
    with pytest.raises(ConfigurationError, match="perfusion_lag"):
        HeatSolver(dom, Tables(tis, 1e-3), perfusion_lag=-1.0)


def test_perfusion_recovery_sets_how_fast_constricted_vessels_open_again():
    """Where the tissue has rewarmed above what its factor says (the law wants more flow),
    the factor rises with the recovery time constant, not the lag; with inf it stays put;
    without one it rises as it falls (the lag's constant)."""
    shape = (5, 5, 5)
    tis = [WALL, Tissue("p", 0.5, 1000, 4000, perfusion=0.0, qm=0.0, q10=4.0)]
    dom = SlabDomain(MPI.COMM_SELF, shape)
    dom.set_from_global("tid", ring(shape))
    dom.set_from_global("T", np.full(shape, 27.0))          # law: 4 ** -1 = 0.25
    every = 10.0
    for lag, recovery, tau in ((0.0, 600.0, 600.0), (60.0, None, 60.0),
                               (0.0, math.inf, math.inf)):
        s = HeatSolver(dom, Tables(tis, 1e-3), perfusion_every=every, perfusion_lag=lag,
                       perfusion_recovery=recovery)
        s.prepare()
        dom["P"][...] = 0.1                                    # as if cooled further before
        s.advance(12 * s._pevery)
        t = 12 * s._pevery * s.dt
        assert dom.interior("P")[2, 2, 2] == pytest.approx(
            0.25 - 0.15 * math.exp(-t / tau), rel=1e-12), (lag, recovery)
    s = HeatSolver(dom, Tables(tis, 1e-3), perfusion_every=every, perfusion_recovery=math.inf)
    dom["P"][...] = 1.0                          # colder than the factor says: falls at once
    s.advance(1)
    assert dom.interior("P")[2, 2, 2] == pytest.approx(0.25, rel=1e-14)
    with pytest.raises(ConfigurationError, match="perfusion_recovery"):
        HeatSolver(dom, Tables(tis, 1e-3), perfusion_recovery=-1.0)


def test_contact_resistance_adds_in_series_at_the_interface():
    """A contact resistance on one layer adds to the series resistance of the bar once, at
    the interface between the layers only, and makes the temperature jump there by q Rc."""
    from dataclasses import replace
    nz, m, k1, k2, dx, rc = 20, 7, 0.5, 0.1, 1e-3, 0.05
    shape, tid, T, tis = _two_layer(m, k1, k2, nz, dx)
    tis[2] = replace(tis[2], contact=rc)
    dom, s = box(shape, tid, T, tis, dx=dx)
    s.steady_state(tol=1e-15, max_iter=100000, omega=1.5)
    z = np.arange(nz) * dx
    zi = (m - 0.5) * dx
    q = 1.0 / (zi / k1 + rc + (z[-1] - zi) / k2)
    exact = np.where(z < zi, q * z / k1, q * (zi / k1 + rc) + q * (z - zi) / k2)
    np.testing.assert_allclose(dom.interior("T")[:, 1, 1], exact, rtol=0, atol=1e-12)


def test_contact_applies_between_different_tissues_and_in_series_with_h():
    """No contact inside one tissue or towards a fixed-temperature conductor; towards an
    h boundary only the boundary's own contact adds to 1/h (a pack's contact is with the
    skin, not with the room's air); an insulator stays insulating."""
    from dataclasses import replace
    dx, rc = 1e-3, 0.02
    a = Tissue("a", 0.5, 1000, 4000, contact=rc)
    b = Tissue("b", 0.2, 1000, 4000)
    cuff = Tissue("cuff", boundary=True, h=500.0, contact=rc)
    ins = Tissue("ins", boundary=True, h=0.0, contact=rc)
    fixed = Tissue("fixed", k=0.5, boundary=True)
    C = Tables([a, b, cuff, ins, fixed], dx).C
    plain = Tables([replace(a, contact=0.0), b], dx).C
    assert C[0, 0] == plain[0, 0] == 0.5 / dx ** 2                 # same tissue: no contact
    assert C[0, 1] == C[1, 0] == pytest.approx(1 / (dx * (dx / 1.0 + dx / 0.4 + rc)))
    assert C[1, 2] == pytest.approx(1 / (dx * (1 / 500.0 + rc)))   # b has none, the cuff rc
    assert C[0, 2] == pytest.approx(1 / (dx * (1 / 500.0 + rc)))   # only the boundary's own
    assert C[0, 3] == 0.0 and C[1, 3] == 0.0
    assert C[1, 4] == pytest.approx(2 * 0.2 * 0.5 / 0.7 / dx ** 2)  # Dirichlet: no contact


def _gauss_error(N, t0=0.004, tend=8 / 2048, r=0.125):
    # box [-0.5, 0.5]^3, k = rho c = 1, Dirichlet walls at the exact initial values
    dx = 1.0 / N
    c = np.arange(N + 1) * dx - 0.5
    zz, yy, xx = np.meshgrid(c, c, c, indexing="ij")
    r2 = zz ** 2 + yy ** 2 + xx ** 2

    def exact(t):
        return (t0 / (t0 + t)) ** 1.5 * np.exp(-r2 / (4 * (t0 + t)))
    shape = r2.shape
    dom, s = box(shape, ring(shape), exact(0.0), [dirichlet(), MAT], dx=dx, dt=r * dx * dx)
    n = int(round(tend / s.dt))
    assert abs(n * s.dt - tend) < 1e-12
    s.advance(n)
    e = dom.interior("T") - exact(tend)
    return np.sqrt((e[1:-1, 1:-1, 1:-1] ** 2).mean())


def test_gaussian_pulse_converges_at_second_order():
    errs = [_gauss_error(N) for N in (16, 32, 64)]
    orders = [math.log2(a / b) for a, b in zip(errs, errs[1:])]
    assert all(1.8 < p < 2.2 for p in orders), (errs, orders)


def test_perfusion_ode_exact_factor():
    shape = (6, 6, 6)
    t = Tissue("p", 0.5, 1000, 4000, perfusion=1e-3, qm=500.0)
    dom, s = box(shape, ring(shape), np.full(shape, 20.0), [WALL, t], dx=1e-3)
    wb = 1e-3 * 1050 * 3617
    teq = 37.0 + 500.0 / wb
    s.advance(100)
    fac = (1 - s.dt * wb / (1000 * 4000)) ** 100
    got = dom.interior("T")[1:-1, 1:-1, 1:-1]
    np.testing.assert_allclose(got, teq + (20.0 - teq) * fac, rtol=1e-13)


def test_unstable_dt_is_refused_and_the_limit_is_tight():
    shape = (34, 34, 34)
    tid = ring(shape)
    z, y, x = np.indices(shape)
    T = np.where(tid == 1, (-1.0) ** (z + y + x), 0.0)   # the least stable mode, roughly
    tis = [dirichlet(), Tissue("m", 1.0, 1.0, 1.0, perfusion=1e-9)]
    dom, s = box(shape, tid, T, tis)
    lim = s.dt_limit
    assert lim == pytest.approx(1 / (6 + 1e-9 * 1050 * 3617), rel=1e-14)
    with pytest.raises(UnstableTimeStep, match="above the stability limit"):
        s.set_dt(1.01 * lim)
    with pytest.raises(UnstableTimeStep):
        box(shape, tid, T, tis, dt=lim * (1 + 1e-9))
    s.set_dt(lim)  # exactly at the limit is allowed

    def grow(factor):
        a, b = T.copy(), T.copy()
        g = s.tab.g(factor * lim)
        for _ in range(400):
            t = s.tab
            K._pennes_step(a, b, tid, np.ones(shape), t.C, g, t.wb, t.src * 0, 1,
                           shape[0] - 1)
            a, b = b, a
        return np.abs(a).max()
    assert grow(1.01) > 10 * np.abs(T).max()      # just above the limit: blows up
    assert grow(0.99) <= np.abs(T).max()          # just below: decays


def test_bad_inputs():
    shape = (6, 6, 6)
    with pytest.raises(ConfigurationError, match="not in the table"):
        box(shape, np.full(shape, 7), np.zeros(shape), [WALL, MAT])
    with pytest.raises(ConfigurationError, match="time step must be > 0"):
        box(shape, ring(shape), np.zeros(shape), [WALL, MAT], dt=-1.0)


# ---------------------------------------------------------------- vasoconstriction, latent heat
def test_perfusion_law_matches_its_formula():
    from apps.knee.tissues import perfusion_factor
    assert perfusion_factor(37.0, 2.0, 37.0) == 1.0
    assert perfusion_factor(40.0, 2.0, 37.0) == 1.0                 # no vasodilation above tref
    assert perfusion_factor(27.0, 2.0, 37.0) == pytest.approx(0.5, rel=1e-15)
    assert perfusion_factor(17.0, 3.0, 37.0) == pytest.approx(1 / 9, rel=1e-15)
    assert perfusion_factor(30.0, 1.0, 37.0) == 1.0                 # q10 = 1: constant
    # the kernel's factor is the same law: a uniform insulated box with perfusion only
    # (explicit Euler step from T0, so the first step's change is exact)
    shape = (5, 5, 5)
    for T0 in (20.0, 30.0, 36.0, 39.0):
        t = Tissue("p", 0.5, 1000, 4000, perfusion=2e-3, qm=800.0, q10=2.5)
        dom, s = box(shape, ring(shape), np.full(shape, T0), [WALL, t], dx=1e-3)
        s.advance(1)
        wb = 2e-3 * 1050 * 3617
        want = T0 + s.dt / 4e6 * perfusion_factor(T0, 2.5, 37.0) * (wb * (37.0 - T0) + 800.0)
        got = dom.interior("T")[2, 2, 2]
        assert got == pytest.approx(want, rel=1e-14, abs=1e-12)


def test_kernel_with_vasoconstriction_and_melting_matches_naive_reference():
    rng = np.random.default_rng(7)
    shape = (8, 9, 7)
    tis = list(DEFAULT_TISSUES) + [Tissue("wax", 0.3, 900, 2000, latent=2e5, c_solid=1500.0,
                                          t_solidus=20.0, t_liquidus=25.0),
                                   Tissue("q3", 0.4, 1000, 3600, 3e-3, 900.0, q10=3.0,
                                          tref=34.0)]
    tid = rng.integers(0, len(tis), shape).astype(np.uint8)
    T = rng.uniform(-5, 40, shape)
    T[tid == ID_ICE] = rng.choice([-3.0, -0.5, -0.01, 0.7], (tid == ID_ICE).sum())
    dx = 1e-3
    dom, s = box(shape, tid, T, tis, dx=dx)
    assert s.dt_limit == pytest.approx(naive_heat.stable_dt(tid, tis, dx), rel=1e-13)
    # the solver refreshes the perfusion factors from T every 10 s of simulated time
    assert s._pevery == round(10.0 / s.dt) and s._pevery > 4
    P0 = naive_heat.factors(T, tid, tis)
    ref = T.copy()
    for _ in range(4):
        ref = naive_heat.step(ref, tid, tis, s.dt, dx, P=P0)
    s.advance(4)
    np.testing.assert_allclose(dom.interior("T"), ref, rtol=1e-11, atol=1e-10)
    # refreshed every step: the factors follow T exactly
    dom, s = box(shape, tid, T, tis, dx=dx)
    s.perfusion_every = 0.0
    s.set_dt(s.dt)
    ref = T.copy()
    for _ in range(4):
        ref = naive_heat.step(ref, tid, tis, s.dt, dx)
    s.advance(4)
    np.testing.assert_allclose(dom.interior("T"), ref, rtol=1e-11, atol=1e-10)


def test_frozen_pack_holds_its_melting_range_until_the_latent_heat_is_spent():
    """0-D lumped check: an insulated block of ice (uniform, so conduction inside is zero)
    heated by a uniform 'metabolic' power q (W/m^3) stays in its melting range for
    rho L / q seconds, then warms as liquid."""
    shape = (6, 6, 6)
    q = 2.0e5                                           # W/m^3
    ice = Tissue("ice", 0.6, 1000, 4180, qm=q, latent=334e3, c_solid=2050.0,
                 t_solidus=-1.0, t_liquidus=0.0)
    dom, s = box(shape, ring(shape), np.full(shape, -10.0), [WALL, ice], dx=1e-3)
    dt = s.dt
    times, temps = [], []
    while s.time < 2500.0:
        s.advance(20)
        times.append(s.time)
        temps.append(dom.interior("T")[3, 3, 3])
    times, temps = np.array(times), np.array(temps)
    # sensible heat to -1 C, then the latent heat + the mean sensible heat of the 1 K range
    t_solid = 1000 * 2050 * 9.0 / q
    t_melt = (1000 * 334e3 + 1000 * (2050 + 4180) / 2 * 1.0) / q
    in_range = times[(temps > -1.0 - 1e-9) & (temps <= 0.0 + 1e-9)]
    assert in_range.min() == pytest.approx(t_solid, abs=25 * dt)
    assert in_range.max() - in_range.min() == pytest.approx(t_melt, rel=0.02)
    # the plateau is the textbook L m / P (latent heat only) within a few %
    assert in_range.max() - in_range.min() == pytest.approx(334e3 * 1000 / q, rel=0.03)
    # energy is exact: final T from the total heat put in
    E = q * s.time
    T_end = 0.0 + (E - 1000 * 2050 * 9.0 - 1000 * 334e3 - 1000 * (2050 + 4180) / 2) / (
        1000 * 4180)
    assert temps[-1] == pytest.approx(T_end, abs=1e-8)


def test_ice_pack_stability_limit_uses_the_frozen_heat_capacity():
    shape = (8, 8, 8)
    ice = Tissue("ice", 0.6, 1000, 4180, latent=334e3, c_solid=2050.0, t_solidus=-1.0,
                 t_liquidus=0.0)
    _, s = box(shape, ring(shape), np.full(shape, -10.0), [WALL, ice], dx=1e-3)
    assert s.dt_limit == pytest.approx(1000 * 2050 / (6 * 0.6 / 1e-6), rel=1e-13)
    with pytest.raises(UnstableTimeStep):
        s.set_dt(1000 * 4180 / (6 * 0.6 / 1e-6))       # the liquid limit is too long
