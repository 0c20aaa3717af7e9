"""Slow, obvious reference code for the heat tests (independent of apps.knee.solver)."""
import numpy as np

RHO_B_C_B = 1050.0 * 3617.0


def props(tissues, tid):
    """Per-voxel arrays straight from the tissue objects."""
    get = lambda a: np.array([getattr(t, a) for t in tissues], dtype=float)[tid]  # noqa: E731
    bnd = np.array([t.boundary for t in tissues])[tid]
    return get("k"), get("rho") * get("c"), get("perfusion") * RHO_B_C_B, get("qm"), \
        get("h"), bnd


def face_coef(k1, k2, bnd2, h2, dx):
    """Conductance per volume across one face, from voxel 1 (conducting) to voxel 2."""
    if bnd2 and k2 == 0:
        return h2 / dx
    return 2 * k1 * k2 / (k1 + k2) / dx ** 2


def step(T, tid, tissues, dt, dx, Ta=37.0):
    """One explicit Pennes step with plain Python loops (outer layer held fixed)."""
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
                    flux += face_coef(k[z, y, x], k[n], bnd[n], h[n], dx) * (T[n] - T[z, y, x])
                out[z, y, x] = T[z, y, x] + dt / rc[z, y, x] * (
                    flux + wb[z, y, x] * (Ta - T[z, y, x]) + qm[z, y, x])
    return out


def stable_dt(tid, tissues, dx):
    """min over conducting interior voxels of rho c / (sum of face coefficients + wb)."""
    k, rc, wb, qm, h, bnd = props(tissues, tid)
    best = np.inf
    nz, ny, nx = tid.shape
    for z in range(1, nz - 1):
        for y in range(1, ny - 1):
            for x in range(1, nx - 1):
                if bnd[z, y, x]:
                    continue
                d = wb[z, y, x]
                for n in ((z - 1, y, x), (z + 1, y, x), (z, y - 1, x), (z, y + 1, x),
                          (z, y, x - 1), (z, y, x + 1)):
                    d += face_coef(k[z, y, x], k[n], bnd[n], h[n], dx)
                best = min(best, rc[z, y, x] / d)
    return best
