"""Numba kernels of the bioheat solver: pure functions of arrays and scalars, no MPI.

A voxel of tissue ``t`` whose neighbour across a face has tissue ``u`` exchanges heat with
face coefficient ``C[t, u]`` (W/(m^3 K)): ``2 k_t k_u / (k_t + k_u) / dx^2`` (harmonic mean,
series resistance of two half cells) between conducting tissues, ``h_u / dx`` towards a
boundary material ``u`` (air, cryo-cuff: fixed temperature), 0 for an insulator. One explicit
(FTCS) step of the Pennes equation is then

    T'_i = T_i + g_t * (sum_f C[t, u_f] (T_f - T_i) + p_t(T_i) (src_t - wb_t T_i))

with ``g_t = dt / (rho c)_t`` (0 for boundary materials, which keeps them fixed),
``wb_t = omega_b rho_b c_b``, ``src_t = wb_t T_a + q_m`` and the vasoconstriction factor
``p_t(T) = exp(kap_t (T - tref_t))`` below ``tref_t`` (1 above; ``kap_t = ln(Q10)/10``,
0 for constant perfusion). A phase-change material (frozen pack) is advanced in enthalpy:
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
def _melt(tc, dh, ts, tl, cs, cm, cl):  # pragma: no cover - compiled
    """Enthalpy update of a phase-change voxel: H(T) is piecewise linear with volumetric
    slopes ``cs`` (frozen, T <= ts), ``cm`` (mushy, latent heat spread over ts..tl) and
    ``cl`` (liquid); returns T(H(tc) + dh). H is measured from ts."""
    hm = cm * (tl - ts)
    if tc <= ts:
        h = cs * (tc - ts)
    elif tc <= tl:
        h = cm * (tc - ts)
    else:
        h = hm + cl * (tc - tl)
    h += dh
    if h <= 0.0:
        return ts + h / cs
    if h <= hm:
        return ts + h / cm
    return tl + (h - hm) / cl


@njit(cache=True, nogil=True)
def _pennes_step(T, Tn, tid, C, g, wb, src, kap, tref, pcm, pc, dt, k0, k1):  # pragma: no cover
    """One explicit step. Per tissue: ``kap = ln(q10)/10`` and ``tref`` of the perfusion law
    (``kap = 0``: constant), ``pc`` != 0 marks a phase-change material whose row ``pcm`` =
    (t_solidus, t_liquidus, rho c_solid, mushy slope, rho c_liquid) drives an enthalpy update
    with step ``dt``."""
    ny, nx = T.shape[1], T.shape[2]
    for k in range(k0, k1):
        for j in range(1, ny - 1):
            for i in range(1, nx - 1):
                t = tid[k, j, i]
                tc = T[k, j, i]
                f = (C[t, tid[k - 1, j, i]] * (T[k - 1, j, i] - tc)
                     + C[t, tid[k + 1, j, i]] * (T[k + 1, j, i] - tc)
                     + C[t, tid[k, j - 1, i]] * (T[k, j - 1, i] - tc)
                     + C[t, tid[k, j + 1, i]] * (T[k, j + 1, i] - tc)
                     + C[t, tid[k, j, i - 1]] * (T[k, j, i - 1] - tc)
                     + C[t, tid[k, j, i + 1]] * (T[k, j, i + 1] - tc))
                q = f + _pfac(tc, kap[t], tref[t]) * (src[t] - wb[t] * tc)
                if pc[t]:
                    Tn[k, j, i] = _melt(tc, dt * q, pcm[t, 0], pcm[t, 1], pcm[t, 2],
                                        pcm[t, 3], pcm[t, 4])
                else:
                    Tn[k, j, i] = tc + g[t] * q


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
