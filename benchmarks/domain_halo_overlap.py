"""Halo overlap: step time with and without overlapping the halo exchange with the interior
update, over emulated slow links of known latency.

On one node the halo exchange costs microseconds, too little to show overlap. Every link
between neighbouring ranks therefore gets an emulated latency ``L`` (``--latencies``, ms):
a :class:`pyfw.monitor.emulate.DeliveryShaper` on the domain's Comm (the same object
``PYFW_EMULATE_LINKS="0-1:0.005,1-2:0.005,..."`` installs). ``Comm.Isend`` then holds each
halo plane at the sender and posts it once ``L`` has passed (at the first test after that:
between interior chunks with overlap, in the wait loop without), while both ends keep
computing -- the ground truth is known.

Stencil: numpy 7-point average on a ``--shape`` grid, halo of one field, ``SlabDomain.step``
with ``overlap=True`` (post, update the interior in chunks while testing the requests,
complete, update the two boundary planes) or ``overlap=False`` (complete, then update all).
Variants alternate within each repetition. Per variant: median (min-max over ``--reps``) of
the mean step time of ``--steps`` steps (slowest rank), and the model's prediction from the
measured compute time ``C`` of the ``L = 0`` run: without overlap ``L + C``; with overlap
``max(L, C_interior) + C_boundary``.

    flock /tmp/pyfw-bench.lock pyfw-run -n 2 -- python benchmarks/domain_halo_overlap.py [--latencies 0,2,5,10]
Writes benchmarks/results/domain_halo_overlap_n<ranks>.json and .png (rank 0).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw.comm import Comm
from pyfw.domain import SlabDomain
from pyfw.monitor.emulate import DeliveryShaper


def make(comm, shape):
    nz, ny, nx = shape
    dom = SlabDomain(comm, shape)
    dom.set_from_global("u", lambda z0, z1: np.random.default_rng(z0).random((z1 - z0, ny, nx)))
    dom.add("v")

    def update(k0, k1):
        u, v = dom["u"], dom["v"]
        c = u[k0:k1]
        v[k0:k1, 1:-1, 1:-1] = (u[k0 - 1:k1 - 1, 1:-1, 1:-1] + u[k0 + 1:k1 + 1, 1:-1, 1:-1]
                                + c[:, :-2, 1:-1] + c[:, 2:, 1:-1] + c[:, 1:-1, :-2]
                                + c[:, 1:-1, 2:] + 2.0 * c[:, 1:-1, 1:-1]) * 0.125
    return dom, update


def run(comm, dom, update, steps, overlap, chunk):
    comp = 0.0
    comm.mpi.Barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        comp += dom.step(update, ["u"], overlap=overlap, chunk=chunk)
        dom.fields["u"], dom.fields["v"] = dom.fields["v"], dom.fields["u"]
    el = (time.perf_counter() - t0) / steps
    return comm.mpi.allreduce(el, op=MPI.MAX), comm.mpi.allreduce(comp / steps, op=MPI.MAX)


def st(a):
    return {"median": float(np.median(a)), "min": float(np.min(a)), "max": float(np.max(a)),
            "samples": [float(x) for x in a]}


def parse_args():
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=(64, 192, 192))
    ap.add_argument("--latencies", default="0,2,5,10", help="ms, comma-separated")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=4)
    add_output_options(ap, os.path.join(HERE, "results"))
    return ap.parse_args()


def measure_case(comm, dom, update, args, lat):
    """Both variants, alternating, over links of emulated latency ``lat`` (s)."""
    p = comm.size
    comm.shaper = (DeliveryShaper(comm.rank, p, latency={(i, i + 1): lat
                                                          for i in range(p - 1)})
                   if lat > 0 else None)
    wall = {True: [], False: []}
    comp = {True: [], False: []}
    for rep in range(args.reps):
        for ov in ((True, False) if rep % 2 == 0 else (False, True)):
            w, c = run(comm, dom, update, args.steps, ov, args.chunk)
            wall[ov].append(w)
            comp[ov].append(c)
    return {"latency_s": lat,
            "overlap": {"step_s": st(wall[True]), "compute_s": st(comp[True])},
            "no_overlap": {"step_s": st(wall[False]), "compute_s": st(comp[False])}}


def add_model(res, lats):
    """Each case's predicted step times and its measured gain from overlapping."""
    # the model, from the compute time measured without emulated latency
    c0 = res["cases"][f"{lats[0] * 1e3:g}ms"]["no_overlap"]["compute_s"]["median"]
    n = min(res["planes_per_rank"])
    c_bnd = c0 * 2.0 / n
    for key, case in res["cases"].items():
        lat = case["latency_s"]
        case["model"] = {"no_overlap_s": lat + c0,
                         "overlap_s": max(lat, c0 - c_bnd) + c_bnd}
        case["gain"] = case["no_overlap"]["step_s"]["median"] / case["overlap"]["step_s"]["median"]


def print_cases(res):
    """One line per latency: both variants measured (min-max) and modelled, and the gain."""
    for key, case in res["cases"].items():
        o, no, m = case["overlap"]["step_s"], case["no_overlap"]["step_s"], case["model"]
        print(f"L={key:>5s}: overlap {o['median'] * 1e3:6.2f} ms ({o['min'] * 1e3:.2f}-"
              f"{o['max'] * 1e3:.2f}) model {m['overlap_s'] * 1e3:6.2f} | no overlap "
              f"{no['median'] * 1e3:6.2f} ms ({no['min'] * 1e3:.2f}-{no['max'] * 1e3:.2f})"
              f" model {m['no_overlap_s'] * 1e3:6.2f} | gain x{case['gain']:.2f}",
              flush=True)


def plot(res, p, shape, out):
    """``out``.png: step times per latency with and without overlap, and the model."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        keys = list(res["cases"])
        x = np.arange(len(keys))
        fig, ax = plt.subplots(figsize=(7, 4))
        for off, (name, lab, col) in enumerate((("overlap", "overlap", "tab:green"),
                                                ("no_overlap", "no overlap", "tab:red"))):
            med = [res["cases"][k][name]["step_s"]["median"] * 1e3 for k in keys]
            lo = [res["cases"][k][name]["step_s"]["min"] * 1e3 for k in keys]
            hi = [res["cases"][k][name]["step_s"]["max"] * 1e3 for k in keys]
            ax.bar(x + (off - 0.5) * 0.35, med, 0.35, color=col, label=lab,
                   yerr=[np.subtract(med, lo), np.subtract(hi, med)])
            mod = [res["cases"][k]["model"][f"{name}_s"] * 1e3 for k in keys]
            ax.scatter(x + (off - 0.5) * 0.35, mod, color="k", marker="_", s=300,
                       zorder=3, label="model" if off == 0 else None)
        ax.set_xticks(x, [f"link +{k}" for k in keys])
        ax.set_ylabel("step time (ms)")
        ax.set_title(f"halo overlap, {p} ranks, grid {shape}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=110)
    except ImportError:
        pass


def main():
    args = parse_args()
    comm = Comm(MPI.COMM_WORLD.Dup())
    p = comm.size
    shape = tuple(args.shape)
    dom, update = make(comm, shape)
    run(comm, dom, update, 5, True, args.chunk)  # warm-up
    res = {"ranks": p, "shape": shape, "steps": args.steps, "reps": args.reps,
           "chunk": args.chunk, "planes_per_rank": np.diff(dom.cuts).tolist(),
           "loadavg": os.getloadavg(), "cases": {}}
    lats = [float(x) * 1e-3 for x in args.latencies.split(",")]
    for lat in lats:
        res["cases"][f"{lat * 1e3:g}ms"] = measure_case(comm, dom, update, args, lat)
    comm.shaper = None
    add_model(res, lats)
    if comm.rank == 0:
        out = os.path.join(output_dir(args), f"domain_halo_overlap_n{p}")
        with open(out + ".json", "w") as f:
            json.dump(res, f, indent=1)
        print_cases(res)
        plot(res, p, shape, out)
    comm.free()


if __name__ == "__main__":
    main()
