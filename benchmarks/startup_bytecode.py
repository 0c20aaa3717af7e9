"""Start-up of a job whose ranks import pyfw: its bytecode compiled once by ``pyfw-run``
(pyfw.bytecode, the default) against every rank compiling pyfw's modules itself, side by
side.

    python benchmarks/startup_bytecode.py [--ranks 16,64,256] [--repeat 3] [--publish | --out DIR]

Each launch is ``pyfw-run -n R`` of a program that initialises MPI and then imports
``pyfw.farm``; the two arms alternate launch by launch. Before every launch of either arm,
pyfw's bytecode is deleted (the first job after an install or an edit), and both run with
``PYTHONDONTWRITEBYTECODE=1``, as this machine's sessions and some CI images do: there no
rank ever writes the bytecode, so without the launcher every job compiles pyfw in every
rank. (Where Python may write bytecode, the first job's ranks write it, all at once, and
later jobs find it.) Reported per arm: when the last rank had pyfw imported, counted from
the launch; the median rank's CPU in the import; the whole job's wall time (the launcher's
compiling included); medians with min-max.
"""
import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pyfw.bytecode
from pyfw.monitor.results import (add_output_options, alternate, output_dir, timed_job,
                                  write_json)

PYFW_DIR = os.path.dirname(os.path.abspath(pyfw.bytecode.__file__))

PROGRAM = ("import json, os, time\n"
           "import mpi4py\n"
           "mpi4py.rc.initialize = False\n"
           "from mpi4py import MPI\n"
           "MPI.Init()\n"
           "c0 = time.process_time()\n"
           "import pyfw.farm\n"
           "cpu = time.process_time() - c0\n"
           "done = time.time() - float(os.environ['PYFW_LAUNCH_T0'])\n"
           "got = MPI.COMM_WORLD.gather((done, cpu), root=0)\n"
           "if MPI.COMM_WORLD.rank == 0:\n"
           "    cpus = sorted(c for _, c in got)\n"
           "    print(json.dumps({'import_done_last_s': max(d for d, _ in got),\n"
           "                      'import_cpu_median_s': cpus[len(cpus) // 2]}))\n"
           "MPI.Finalize()\n")

#: arm -> the value of $PYFW_PRECOMPILE
ARMS = {"every rank compiles": "0", "pyfw-run compiles once": "1"}


def _forget_bytecode() -> None:
    for root, dirs, _ in os.walk(PYFW_DIR):
        if "__pycache__" in dirs:
            shutil.rmtree(os.path.join(root, "__pycache__"), ignore_errors=True)
            dirs.remove("__pycache__")


def _launch(ranks: int, precompile: str) -> dict:
    _forget_bytecode()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env[pyfw.bytecode.ENV] = precompile
    return timed_job(ranks, PROGRAM, env, f"{pyfw.bytecode.ENV}={precompile}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="16,64,256")
    ap.add_argument("--repeat", type=int, default=3)
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    rows = []
    try:
        for r in alternate([int(x) for x in a.ranks.split(",")], a.repeat, ARMS, _launch,
                           ("import_done_last_s", "import_cpu_median_s", "job_s")):
            rows.append(r)
            print(f"{r['ranks']:>4} ranks {r['arm']:>24}: last pyfw import done "
                  f"{r['import_done_last_s']['median']:.2f} s "
                  f"({r['import_done_last_s']['min']:.2f}-"
                  f"{r['import_done_last_s']['max']:.2f}), import CPU "
                  f"{1e3 * r['import_cpu_median_s']['median']:.0f} ms, "
                  f"job {r['job_s']['median']:.2f} s", flush=True)
    finally:
        pyfw.bytecode.ensure_compiled()    # leave the package as the launcher would
    write_json(output_dir(a), "startup_bytecode.json", {"repeat": a.repeat, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
