"""Slow, obvious reference code for the heat tests (independent of apps.knee.solver)."""
import numpy as np

RHO_B_C_B = 1050.0 * 3617.0


def props(tissues, tid):
    """Per-voxel arrays straight from the tissue objects."""
    get = lambda a: np.array([getattr(t, a) for t in tissues], dtype=float)[tid]  # noqa: E731
    bnd = np.array([t.boundary for t in tissues])[tid]
    return get("k"), get("rho") * get("c"), get("perfusion") * RHO_B_C_B, get("qm"), \
        get("h"), bnd


def face_coef(k1, k2, bnd2, h2, dx, contact=0.0):
    """Conductance per volume across one face, from voxel 1 (conducting) to voxel 2: the
    thermal resistances of half of each voxel and of any contact between them in series."""
    if bnd2 and k2 == 0:
        return 0.0 if h2 == 0 else 1.0 / (dx * (1.0 / h2 + contact))
    if bnd2:
        contact = 0.0
    return 1.0 / (dx * (dx / (2 * k1) + dx / (2 * k2) + contact))


def contact(tissues, tid, a, b):
    """The contact resistance between voxels ``a`` and ``b``: both tissues' between different
    conducting tissues, an h boundary's own (a cuff's bladder on the skin; a pack's contact
    is with the skin, not with the air), none towards a fixed-temperature conductor."""
    ta, tb = tissues[tid[a]], tissues[tid[b]]
    if tb.boundary:
        return tb.contact if tb.k == 0 else 0.0
    if tid[a] == tid[b]:
        return 0.0
    return ta.contact + tb.contact


def perfusion_factor(T, q10, tref):
    """Cold-induced vasoconstriction: q10 ** ((T - tref) / 10) below tref, 1 above."""
    return q10 ** ((T - tref) / 10.0) if T < tref else 1.0


def enthalpy(T, t):
    """Volumetric enthalpy (J/m^3, from t_solidus) of a phase-change tissue ``t``: sensible
    heat of the frozen and the liquid phase, the latent heat spread evenly over the melting
    range together with the mean sensible heat capacity."""
    cs, cl = t.rho * (t.c_solid or t.c), t.rho * t.c
    cm = t.rho * t.latent / (t.t_liquidus - t.t_solidus) + (cs + cl) / 2
    if T <= t.t_solidus:
        return cs * (T - t.t_solidus)
    if T <= t.t_liquidus:
        return cm * (T - t.t_solidus)
    return cm * (t.t_liquidus - t.t_solidus) + cl * (T - t.t_liquidus)


def temperature(H, t):
    """Inverse of :func:`enthalpy` (bisection: slow and obvious)."""
    lo, hi = -300.0, 300.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if enthalpy(mid, t) < H:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def factors(T, tid, tissues):
    """The perfusion factor of every voxel at temperatures ``T``."""
    out = np.ones(T.shape)
    for n in np.ndindex(T.shape):
        t = tissues[tid[n]]
        out[n] = 1.0 if t.boundary else perfusion_factor(T[n], t.q10, t.tref)
    return out


def step(T, tid, tissues, dt, dx, Ta=37.0, P=None):
    """One explicit Pennes step with plain Python loops (outer layer held fixed). ``P``: the
    perfusion factors to use (default: from ``T``; the solver refreshes them every few
    seconds of simulated time)."""
    if P is None:
        P = factors(T, tid, tissues)
    k, rc, wb, qm, h, bnd = props(tissues, tid)
    out = T.copy()
    nz, ny, nx = T.shape
    for z in range(1, nz - 1):
        for y in range(1, ny - 1):
            for x in range(1, nx - 1):
                if bnd[z, y, x]:
                    continue
                flux = 0.0
                for dz, dy, dxx in ((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1),
                                    (0, 0, 1)):
                    n = (z + dz, y + dy, x + dxx)
                    rcon = contact(tissues, tid, (z, y, x), n)
                    flux += face_coef(k[z, y, x], k[n], bnd[n], h[n], dx, rcon) * \
                        (T[n] - T[z, y, x])
                tis = tissues[tid[z, y, x]]
                p = P[z, y, x]
                q = flux + p * (wb[z, y, x] * (Ta - T[z, y, x]) + qm[z, y, x])
                if tis.latent > 0:
                    out[z, y, x] = temperature(enthalpy(T[z, y, x], tis) + dt * q, tis)
                else:
                    out[z, y, x] = T[z, y, x] + dt / rc[z, y, x] * q
    return out


def stable_dt(tid, tissues, dx, Ta=37.0):
    """min over conducting interior voxels of rho c / (sum of face coefficients + wb), with
    rho c the smallest enthalpy slope of a phase-change tissue (frozen or liquid sensible
    heat) and wb replaced by a bound of |d/dT (p(T) (wb (Ta - T) + qm))| when the perfusion
    depends on temperature: p' <= kap p with kap = ln(q10)/10, and max_T p kap |Ta - T|
    <= max(1, kap |Ta - tref|)."""
    k, rc, wb, qm, h, bnd = props(tissues, tid)
    best = np.inf
    nz, ny, nx = tid.shape
    for z in range(1, nz - 1):
        for y in range(1, ny - 1):
            for x in range(1, nx - 1):
                if bnd[z, y, x]:
                    continue
                tis = tissues[tid[z, y, x]]
                d = wb[z, y, x]
                if tis.q10 != 1.0:
                    kap = np.log(tis.q10) / 10
                    d = d * (1 + max(1.0, kap * abs(Ta - tis.tref))) + kap * qm[z, y, x]
                c = rc[z, y, x]
                if tis.latent > 0:
                    c = tis.rho * min(tis.c, tis.c_solid or tis.c)
                for n in ((z - 1, y, x), (z + 1, y, x), (z, y - 1, x), (z, y + 1, x),
                          (z, y, x - 1), (z, y, x + 1)):
                    d += face_coef(k[z, y, x], k[n], bnd[n], h[n], dx,
                                   contact(tissues, tid, (z, y, x), n))
                best = min(best, c / d)
    return best


def direct_step(T, tid, C, g, wb, src, P):
    """The direct (per-voxel) form of one kernel step with the solver's own tables, in
    numpy: every voxel sums its six face terms ``C[t, u] (T_u - T_i)`` in the order z-, z+,
    y-, y+, x-, x+ and applies ``T + g (f + P (src - wb T))``. Each numpy operation is one
    IEEE-rounded operation per element, so this is bitwise what a kernel with that
    operation order must give (boundary voxels have g = 0 and keep their value)."""
    c = (slice(1, -1),) * 3
    tc, t = T[c], tid[c]
    f = None
    for ax in range(3):
        for d in (-1, 1):
            s = [slice(1, -1)] * 3
            s[ax] = slice(1 + d, T.shape[ax] - 1 + d)
            s = tuple(s)
            term = C[t, tid[s]] * (T[s] - tc)
            f = term if f is None else f + term
    out = T.copy()
    out[c] = tc + g[t] * (f + P[c] * (src[t] - wb[t] * tc))
    return out
