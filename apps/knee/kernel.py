"""Numba kernels of the bioheat solver: pure functions of arrays and scalars, no MPI.

A voxel of tissue ``t`` whose neighbour across a face has tissue ``u`` exchanges heat with
face coefficient ``C[t, u]`` (W/(m^3 K)): ``1 / (dx (dx/2k_t + dx/2k_u + R_c))`` (the series
resistance of two half cells and of any contact ``R_c`` between different tissues; the
harmonic mean of the conductivities when ``R_c = 0``) between conducting tissues,
``1 / (dx (1/h_u + R_u))`` towards a boundary material ``u`` (air, cryo-cuff: fixed
temperature; ``R_u`` its own contact, a cuff's bladder), 0 for an insulator. The table
is symmetric (``C[u, t] = C[t, u]`` for a boundary ``u``: never used, since boundary
voxels are not updated), so a face's heat flow can be computed once for both voxels. One explicit
(FTCS) step of the Pennes equation is then

    T'_i = T_i + g_t * (sum_f C[t, u_f] (T_f - T_i) + P_i (src_t - wb_t T_i))

with ``g_t = dt / (rho c)_t`` (0 for boundary materials, which keeps them fixed),
``wb_t = omega_b rho_b c_b``, ``src_t = wb_t T_a + q_m`` and the vasoconstriction factor
``P_i = p_t(T_i) = exp(kap_t (T_i - tref_t))`` below ``tref_t`` (1 above;
``kap_t = ln(Q10)/10``, 0 for constant perfusion), held in a per-voxel field refreshed from
T every few seconds of simulated time (the vasomotor response is slower than that; an exp
per voxel and step would halve the kernel's speed). A phase-change material (frozen pack) is advanced in enthalpy:
``H(T'_i) = H(T_i) + dt * (the same bracket)`` with a piecewise-linear H(T) (latent heat
spread over the melting range), so the stored field stays the temperature. Every voxel sees the same
operands in the same order whatever the slab it lives in, so results do not depend on the
decomposition.

Arrays are ``(nz, ny, nx)`` slabs with ghost planes; the kernels update planes ``k0:k1`` and
never the outer ring ``j in {0, ny-1}``, ``i in {0, nx-1}`` (the boundary layer of the grid).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = []


@njit(cache=True, nogil=True, inline="always")
def _pfac(tc, kap, tref):  # pragma: no cover - compiled
    """Vasoconstriction factor exp(kap (T - tref)) = q10**((T - tref)/10) below tref, else 1."""
    if kap != 0.0 and tc < tref:
        return np.exp(kap * (tc - tref))
    return 1.0


@njit(cache=True, nogil=True, inline="always")
def _melt(tc, dh, ts, tl, cs, cm, cl, ics, icm, icl):  # pragma: no cover - compiled
    """Enthalpy update of a phase-change voxel: H(T) is piecewise linear with volumetric
    slopes ``cs`` (frozen, T <= ts), ``cm`` (mushy, latent heat spread over ts..tl) and
    ``cl`` (liquid), ``ics`` ... their inverses; returns T(H(tc) + dh). H is measured
    from ts."""
    hm = cm * (tl - ts)
    if tc <= ts:
        h = cs * (tc - ts)
    elif tc <= tl:
        h = cm * (tc - ts)
    else:
        h = hm + cl * (tc - tl)
    h += dh
    if h <= 0.0:
        return ts + h * ics
    if h <= hm:
        return ts + h * icm
    return tl + (h - hm) * icl


@njit(cache=True, nogil=True)
def _pennes_step(T, Tn, tid, P, C, g, wb, src, k0, k1):  # pragma: no cover - compiled
    """One explicit step with the perfusion factor field ``P`` (see :func:`_perf_factor`).
    Phase-change voxels get a provisional value here and are redone by
    :func:`_phase_step` (kept out of this loop so that the common voxel stays branch-free).

    Flux form: the heat flow across each face, ``C[t, u] (T_u - T_t)``, is computed once and
    used by both voxels it joins (the lower voxel's ``+`` face is the upper voxel's ``-``
    face, with the sign flipped). ``C`` must be symmetric (``Tables.C`` is: series
    resistances are, and a boundary row mirrors its column, which is harmless because
    boundary voxels have ``g = 0``). Negation is exact, so each voxel sums bitwise the same six terms, in
    the same order (z-, z+, y-, y+, x-, x+), as the direct form
    ``sum_f C[t, u_f] (T_f - T_i)`` would: results do not depend on where a call's planes
    start (rank, chunk). The flows across z faces are kept in a plane buffer, those across
    y faces in a row buffer and the x face in a register; this halves the table look-ups
    and multiplications of the direct form (~1.4x faster)."""
    ny, nx = T.shape[1], T.shape[2]
    zb = np.empty((ny, nx))      # flow across the face below (k-1 | k), for voxel (k-1)
    yb = np.empty(nx)            # flow across the face (j-1 | j), for voxel (j-1)
    for j in range(1, ny - 1):
        for i in range(1, nx - 1):
            zb[j, i] = C[tid[k0 - 1, j, i], tid[k0, j, i]] * (T[k0, j, i] - T[k0 - 1, j, i])
    for k in range(k0, k1):
        for i in range(1, nx - 1):
            yb[i] = C[tid[k, 0, i], tid[k, 1, i]] * (T[k, 1, i] - T[k, 0, i])
        for j in range(1, ny - 1):
            t = tid[k, j, 0]
            tc = T[k, j, 0]
            u = tid[k, j, 1]
            tx = T[k, j, 1]
            fxm = C[t, u] * (tx - tc)        # flow across (i-1 | i) for voxel i-1
            t = u
            tc = tx
            for i in range(1, nx - 1):
                u = tid[k, j, i + 1]
                tx = T[k, j, i + 1]
                fxp = C[t, u] * (tx - tc)
                fzp = C[t, tid[k + 1, j, i]] * (T[k + 1, j, i] - tc)
                fyp = C[t, tid[k, j + 1, i]] * (T[k, j + 1, i] - tc)
                f = (-zb[j, i]) + fzp + (-yb[i]) + fyp + (-fxm) + fxp
                zb[j, i] = fzp
                yb[i] = fyp
                Tn[k, j, i] = tc + g[t] * (f + P[k, j, i] * (src[t] - wb[t] * tc))
                fxm = fxp
                t = u
                tc = tx


@njit(cache=True, nogil=True)
def _phase_step(T, Tn, tid, rhoc, pcm, runs):  # pragma: no cover - compiled
    """Enthalpy update of the phase-change voxels, given as row runs ``(k, j, i0, i1)``,
    after :func:`_pennes_step` wrote ``Tn = T + dt q / rhoc`` there: the heat received,
    ``dt q = (Tn - T) rhoc``, is applied to the enthalpy, ``H(T') = H(T) + dt q``."""
    for n in range(runs.shape[0]):
        k, j = runs[n, 0], runs[n, 1]
        for i in range(runs[n, 2], runs[n, 3]):
            t = tid[k, j, i]
            tc = T[k, j, i]
            Tn[k, j, i] = _melt(tc, (Tn[k, j, i] - tc) * rhoc[t], pcm[t, 0], pcm[t, 1],
                                pcm[t, 2], pcm[t, 3], pcm[t, 4], pcm[t, 5], pcm[t, 6],
                                pcm[t, 7])


@njit(cache=True, nogil=True)
def _phase_index(tid, pc, k0, k1):  # pragma: no cover - compiled
    """Runs ``(k, j, i0, i1)`` (sorted by k) of consecutive updated voxels (planes k0:k1,
    not the outer ring) whose tissue has a phase change."""
    ny, nx = tid.shape[1], tid.shape[2]
    out = np.empty((max(0, k1 - k0) * ny * (nx // 2 + 1), 4), np.int64)
    m = 0
    for k in range(k0, k1):
        for j in range(1, ny - 1):
            i = 1
            while i < nx - 1:
                if pc[tid[k, j, i]]:
                    i0 = i
                    while i < nx - 1 and pc[tid[k, j, i]]:
                        i += 1
                    out[m, 0], out[m, 1], out[m, 2], out[m, 3] = k, j, i0, i
                    m += 1
                else:
                    i += 1
    return out[:m].copy()


@njit(cache=True, nogil=True)
def _perf_factor(T, tid, P, kap, tref, relax, relax_up):  # pragma: no cover - compiled
    """The vasoconstriction law per voxel: ``P`` moves the fraction ``relax`` of the way to
    ``exp(kap (T - tref))`` below tref, else 1, where that target is below ``P`` (the vessels
    constrict), and the fraction ``relax_up`` where it is above (they dilate again); 1:
    straight to it, 0: not at all."""
    nz, ny, nx = T.shape
    for k in range(nz):
        for j in range(ny):
            for i in range(nx):
                t = tid[k, j, i]
                target = _pfac(T[k, j, i], kap[t], tref[t])
                f = relax if target < P[k, j, i] else relax_up
                if f >= 1.0:
                    P[k, j, i] = target
                else:
                    P[k, j, i] += f * (target - P[k, j, i])


@njit(cache=True, nogil=True)
def _const_step(T, Tn, r, k0, k1):  # pragma: no cover - compiled
    """Constant-coefficient 7-point FTCS step (the bandwidth-roof benchmark kernel)."""
    ny, nx = T.shape[1], T.shape[2]
    c0 = 1.0 - 6.0 * r
    for k in range(k0, k1):
        for j in range(1, ny - 1):
            for i in range(1, nx - 1):
                Tn[k, j, i] = c0 * T[k, j, i] + r * (
                    T[k - 1, j, i] + T[k + 1, j, i] + T[k, j - 1, i] + T[k, j + 1, i]
                    + T[k, j, i - 1] + T[k, j, i + 1])


@njit(cache=True, nogil=True)
def _stable_dt(tid, C, rhoc, wb, k0, k1):  # pragma: no cover - compiled
    """Largest dt keeping every update coefficient >= 0 over planes k0:k1:
    min over conducting voxels of (rho c) / (sum_f C + wb). inf if there is none.
    The solver passes the smallest volumetric heat capacity of a tissue (the enthalpy
    slope of a phase-change material) as ``rhoc`` and a bound of |d(source)/dT| as ``wb``."""
    ny, nx = tid.shape[1], tid.shape[2]
    best = np.inf
    for k in range(k0, k1):
        for j in range(1, ny - 1):
            for i in range(1, nx - 1):
                t = tid[k, j, i]
                if rhoc[t] <= 0.0:
                    continue
                d = (C[t, tid[k - 1, j, i]] + C[t, tid[k + 1, j, i]]
                     + C[t, tid[k, j - 1, i]] + C[t, tid[k, j + 1, i]]
                     + C[t, tid[k, j, i - 1]] + C[t, tid[k, j, i + 1]] + wb[t])
                if d > 0.0:
                    v = rhoc[t] / d
                    if v < best:
                        best = v
    return best


@njit(cache=True, nogil=True)
def _sor_sweep(T, tid, C, wb, src, kap, tref, conducting, omega, parity, k0,
               k1):  # pragma: no cover
    """One colour of a red-black SOR sweep towards the steady state
    ``sum_f C (T_f - T) + p(T) (src - wb T) = 0`` (``p`` the perfusion factor, taken at the
    voxel's current temperature: a lagged, Picard-type update whose fixed point is the
    steady state); updates voxels with (z + j + i) % 2 == 0 where z = k + parity. Returns
    the largest |change|."""
    ny, nx = T.shape[1], T.shape[2]
    big = 0.0
    for k in range(k0, k1):
        for j in range(1, ny - 1):
            i0 = 1 + ((k + parity + j + 1) & 1)
            for i in range(i0, nx - 1, 2):
                t = tid[k, j, i]
                if not conducting[t]:
                    continue
                c1 = C[t, tid[k - 1, j, i]]
                c2 = C[t, tid[k + 1, j, i]]
                c3 = C[t, tid[k, j - 1, i]]
                c4 = C[t, tid[k, j + 1, i]]
                c5 = C[t, tid[k, j, i - 1]]
                c6 = C[t, tid[k, j, i + 1]]
                old = T[k, j, i]
                p = _pfac(old, kap[t], tref[t])
                d = c1 + c2 + c3 + c4 + c5 + c6 + p * wb[t]
                if d <= 0.0:
                    continue
                num = (c1 * T[k - 1, j, i] + c2 * T[k + 1, j, i] + c3 * T[k, j - 1, i]
                       + c4 * T[k, j + 1, i] + c5 * T[k, j, i - 1] + c6 * T[k, j, i + 1]
                       + p * src[t])
                new = old + omega * (num / d - old)
                T[k, j, i] = new
                if abs(new - old) > big:
                    big = abs(new - old)
    return big
