"""Kernel speed vs the memory-bandwidth roof, measured in the same run (one core).

Roof: a streamed copy reads 8 B and writes 8 B per element, as the constant-coefficient
stencil does per lattice update (T read once thanks to the layer condition, Tn written), so
a copy's element rate is that kernel's roof. Two copies are timed: numpy's ``copyto``
(glibc memcpy, non-temporal stores for large arrays: no write-allocate, the best case) and a
numba loop ``b[i] = a[i] + s`` that stores like the stencil does (normal stores, so each
written line is read first: 24 B of traffic per element, as INSPECT counts for this
stencil). The stencil's roof is the numba copy's element rate; the memcpy roof is reported
too. The knee kernel also reads a 1-byte tissue id: roof = bandwidth / 17 B (numba copy:
bandwidth counted as 24 B/element, so roof = 24/25 of the copy's element rate).
Medians of repeated runs with min-max.

Also timed: one step of the whole serial solver (``HeatSolver.advance`` on a one-rank
domain: the kernel called in the halo-overlap chunks, the enthalpy pass over the pack, the
perfusion-factor refresh every 10 s of simulated time amortised), i.e. what a run gets.

    python benchmarks/knee_kernel.py [--shape 200 160 160] [--repeat 7]
Writes benchmarks/results/knee_kernel.json and .png.
"""
import argparse
import json
import os
import platform
import time

import numpy as np
from numba import njit

from pyfw.apps.knee import kernel as K
from pyfw.apps.knee.phantom import Geometry, planes
from pyfw.apps.knee.solver import Tables
from pyfw.apps.knee.tissues import DEFAULT_TISSUES, ID

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))


@njit(cache=True)
def _stream_copy(a, b, s):
    fa, fb = a.ravel(), b.ravel()
    for i in range(fa.size):
        fb[i] = fa[i] + s


def timed(fn, repeat):
    fn()  # warm-up (and compile)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return np.array(ts)


def stats(rates):
    return {"median": float(np.median(rates)), "min": float(rates.min()),
            "max": float(rates.max())}


def solver_steps(shape, tid, tab, repeat, steps=20):
    """Seconds per step of the serial solver (medians over ``repeat`` runs of ``steps``)."""
    from mpi4py import MPI

    from pyfw.apps.knee.solver import HeatSolver
    from pyfw.domain import SlabDomain
    dom = SlabDomain(MPI.COMM_SELF, shape)
    dom.set_from_global("tid", tid)
    T = np.where(tid == ID["air"], 24.0, 35.0)
    T[tid == ID["ice"]] = -10.0
    dom.set_from_global("T", T)
    s = HeatSolver(dom, tab, perfusion_every=10.0)
    s.prepare()
    return timed(lambda: s.advance(steps), repeat) / steps


def parse_args():
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=(200, 160, 160))
    ap.add_argument("--repeat", type=int, default=7)
    add_output_options(ap, os.path.join(HERE, "results"))
    return ap.parse_args()


def copy_rates(a, b, repeat):
    """Both streamed copies: memcpy bytes/s and the numba copy's elements/s."""
    n = a.size
    t_copy = timed(lambda: np.copyto(b, a), repeat)
    copy_bw = 16.0 * n / t_copy                                   # bytes/s (read + write)
    t_ncopy = timed(lambda: _stream_copy(a, b, 0.0), repeat)
    ncopy_rate = n / t_ncopy                                      # elements/s, normal stores
    return copy_bw, ncopy_rate


def knee_times(shape, repeat):
    """Seconds of one knee-kernel sweep and of one serial solver step."""
    geo = Geometry(shape=shape, bandage=1.0)   # as measured
    tid = planes(geo, 0, shape[0])
    tab = Tables(DEFAULT_TISSUES, 1e-3)
    g = tab.g(0.5)
    T = np.full(shape, 35.0)
    Tn = T.copy()
    # the default run's physics: the perfusion factor field P (vasoconstriction law, read
    # per voxel: 8 more bytes per update) and the frozen pack, whose voxels are redone by
    # the enthalpy update (_phase_step) after the main loop, as the solver does
    tid[tid == ID["gel"]] = ID["ice"]
    P = np.empty(shape)
    K._perf_factor(T, tid, P, tab.kap, tab.tref, 1.0, 1.0)
    idx = K._phase_index(tid, tab.pc, 1, shape[0] - 1)

    def knee_step():
        K._pennes_step(T, Tn, tid, P, tab.C, g, tab.wb, tab.src, 1, shape[0] - 1)
        K._phase_step(T, Tn, tid, tab.rhoc, tab.pcm, idx)
    t_knee = timed(knee_step, repeat)
    return t_knee, solver_steps(shape, tid, tab, repeat)


def summarise(shape, repeat, copy_bw, ncopy_rate, t_const, t_knee, t_solver):
    """The rates (MLUP/s, GB/s), the roofs, the fractions of the roofs and the targets."""
    nup = (shape[0] - 2) * (shape[1] - 2) * (shape[2] - 2)
    const = stats(nup / t_const)
    knee = stats(nup / t_knee)
    solver = stats(nup / t_solver)
    res = {
        "shape": shape, "repeat": repeat, "host": platform.node(),
        "copy_GBps": stats(copy_bw / 1e9),
        "numba_copy_GBps_incl_write_allocate": stats(24.0 * ncopy_rate / 1e9),
        "roof_const_memcpy_MLUPs": float(np.median(copy_bw) / 16 / 1e6),
        "const_MLUPs": {k: v / 1e6 for k, v in const.items()},
        "knee_MLUPs": {k: v / 1e6 for k, v in knee.items()},
        "knee_solver_step_MLUPs": {k: v / 1e6 for k, v in solver.items()},
        "roof_const_MLUPs": float(np.median(ncopy_rate) / 1e6),
        "roof_knee_MLUPs": float(np.median(ncopy_rate) * 24 / 25 / 1e6),
    }
    res["const_fraction_of_roof"] = res["const_MLUPs"]["median"] / res["roof_const_MLUPs"]
    res["knee_fraction_of_roof"] = res["knee_MLUPs"]["median"] / res["roof_knee_MLUPs"]
    res["targets"] = {"const >= 60% of roof": res["const_fraction_of_roof"] >= 0.6,
                      "knee >= 200 MLUP/s": res["knee_MLUPs"]["median"] >= 200}
    return res


def plot(res, shape, out):
    """``out``.png: both kernels' rates against their roofs (none without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        names = ["constant 7-pt", "knee (Pennes)"]
        med = [res["const_MLUPs"]["median"], res["knee_MLUPs"]["median"]]
        err = [[m - r["min"] for m, r in zip(med, (res["const_MLUPs"], res["knee_MLUPs"]))],
               [r["max"] - m for m, r in zip(med, (res["const_MLUPs"], res["knee_MLUPs"]))]]
        ax.bar(names, med, yerr=err, color=["tab:blue", "tab:orange"], label="measured")
        ax.scatter(names, [res["roof_const_MLUPs"], res["roof_knee_MLUPs"]], marker="_",
                   s=2000, color="k", label="copy-bandwidth roof")
        ax.set_ylabel("M lattice updates / s (1 core)")
        ax.axhline(res["roof_const_memcpy_MLUPs"], ls=":", color="gray",
                   label="memcpy roof (no write-allocate)")
        ax.set_title(f"grid {shape}, memcpy {res['copy_GBps']['median']:.1f} GB/s")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=110)
    except ImportError:
        pass


def main():
    args = parse_args()
    shape = tuple(args.shape)
    a = np.random.default_rng(0).random(shape)
    b = np.empty_like(a)
    copy_bw, ncopy_rate = copy_rates(a, b, args.repeat)
    t_const = timed(lambda: K._const_step(a, b, 0.1, 1, shape[0] - 1), args.repeat)
    t_knee, t_solver = knee_times(shape, args.repeat)
    res = summarise(shape, args.repeat, copy_bw, ncopy_rate, t_const, t_knee, t_solver)
    out = os.path.join(output_dir(args), "knee_kernel")
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    plot(res, shape, out)


if __name__ == "__main__":
    main()
