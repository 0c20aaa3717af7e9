"""Start-up of a job on one host with PMIx's hash store for the job's data (pyfw-run's
default for a job on this host alone: ``PMIX_MCA_gds=hash``) against PMIx's own default
(its shared-memory store, gds/shmem2, chosen first), side by side.

    python benchmarks/pmix_gds.py [--ranks 16,64,256] [--repeat 3] [--publish | --out DIR]

Each launch is ``pyfw-run -n R`` of a program that only initialises MPI (mpi4py with
``rc.initialize = False``, then ``MPI.Init()``); the two stores alternate launch by launch
(load drifts hit both alike). Reported per store: when the last rank finished ``MPI_Init``,
counted from the launch (the launcher's wall clock handed to the ranks), the median rank's
CPU in ``MPI_Init`` (the whole process: PMIx's own thread does much of the work), and the
whole job's wall time; medians with min-max.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw.launch import PMIX_GDS_VAR
from pyfw.monitor.results import (add_output_options, alternate, output_dir, timed_job,
                                  write_json)

PROGRAM = ("import json, os, time\n"
           "import mpi4py\n"
           "mpi4py.rc.initialize = False\n"
           "from mpi4py import MPI\n"
           "c0 = time.process_time()\n"
           "MPI.Init()\n"
           "cpu = time.process_time() - c0\n"
           "done = time.time() - float(os.environ['PYFW_LAUNCH_T0'])\n"
           "got = MPI.COMM_WORLD.gather((done, cpu), root=0)\n"
           "if MPI.COMM_WORLD.rank == 0:\n"
           "    cpus = sorted(c for _, c in got)\n"
           "    print(json.dumps({'init_done_last_s': max(d for d, _ in got),\n"
           "                      'init_cpu_median_s': cpus[len(cpus) // 2]}))\n"
           "MPI.Finalize()\n")

#: store -> the value of PMIX_MCA_gds (None: PMIx's default)
ARMS = {"PMIx default (shmem2 first)": None, "pyfw (hash)": "hash"}


def _launch(ranks: int, gds) -> dict:
    env = dict(os.environ)
    env.pop(PMIX_GDS_VAR, None)
    if gds is None:
        # pyfw-run's own default would apply: the peer names PMIx's default explicitly
        env[PMIX_GDS_VAR] = "shmem2,hash"
    else:
        env[PMIX_GDS_VAR] = gds
    return timed_job(ranks, PROGRAM, env, f"gds {gds}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="16,64,256")
    ap.add_argument("--repeat", type=int, default=3)
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    rows = []
    for r in alternate([int(x) for x in a.ranks.split(",")], a.repeat, ARMS, _launch,
                       ("init_done_last_s", "init_cpu_median_s", "job_s")):
        rows.append(r)
        print(f"{r['ranks']:>4} ranks {r['arm']:>28}: last MPI_Init done "
              f"{r['init_done_last_s']['median']:.2f} s "
              f"({r['init_done_last_s']['min']:.2f}-{r['init_done_last_s']['max']:.2f}), "
              f"MPI_Init CPU {1e3 * r['init_cpu_median_s']['median']:.0f} ms, "
              f"job {r['job_s']['median']:.2f} s", flush=True)
    write_json(output_dir(a), "pmix_gds.json", {"repeat": a.repeat, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
