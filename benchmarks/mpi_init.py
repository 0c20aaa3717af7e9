"""MPI_Init with Open MPI's libfabric BTL left out, pyfw's default on a host without an RDMA
fabric (:mod:`pyfw.fabric`), against Open MPI's own default, side by side.

    python benchmarks/mpi_init.py [--repeat 7] [--ranks 2] [--publish | --out DIR]

Open MPI 5 opens its libfabric BTL at every ``MPI_Init``; where there is no fabric for it,
the component is closed again, and its close sleeps one second. Measured in fresh
processes, the two settings alternating (load drifts hit both alike):

* ``alone``: ``from mpi4py import MPI`` (``MPI_Init``) in a process no launcher started;
* ``job``: the same in rank 0 of a ``pyfw-run -n R`` job, and the job's whole wall time.

The peer is Open MPI's default (``PYFW_KEEP_OFI=1``, no ``OMPI_MCA_btl``); pyfw's arm is
what ``import pyfw`` and ``pyfw-run`` set on this host (``OMPI_MCA_btl=^ofi``).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw import fabric
from pyfw.monitor.results import add_output_options, output_dir, write_json
from pyfw.monitor.stats import spread

PROGRAM = ("import json, time\n"
           "t0 = time.perf_counter()\n"
           "from mpi4py import MPI\n"
           "t1 = time.perf_counter()\n"
           "MPI.COMM_WORLD.Barrier()\n"
           "if MPI.COMM_WORLD.rank == 0:\n"
           "    print(json.dumps({'init_s': t1 - t0}))\n")


def _env(left_out: bool) -> dict:
    env = dict(os.environ)
    for k in (fabric.BTL_VAR, fabric.DEFAULT_MARK, "PYFW_KEEP_OFI"):
        env.pop(k, None)     # this script's own `import pyfw` set pyfw's default here
    if left_out:
        env[fabric.BTL_VAR] = "^ofi"        # what import pyfw sets on such a host
    else:
        env["PYFW_KEEP_OFI"] = "1"          # pyfw-run leaves Open MPI's default alone
    return env


def _alone(left_out: bool) -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PROGRAM], env=_env(left_out), capture_output=True,
                       text=True, timeout=120)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return dict(json.loads(p.stdout.strip().splitlines()[-1]), wall_s=wall)


def _job(left_out: bool, ranks: int) -> dict:
    env = _env(False)
    if left_out:
        env.pop("PYFW_KEEP_OFI")            # pyfw-run's own default on this host
    t = time.perf_counter()
    p = subprocess.run(["pyfw-run", "-n", str(ranks), "--timeout", "120", "--",
                        sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                       text=True, timeout=180)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return dict(rows[-1], wall_s=wall)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--ranks", type=int, default=2)
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    if fabric.fabric_devices():
        print("this host has an RDMA device: pyfw keeps the component here, nothing to compare",
              file=sys.stderr)
        return 1
    arms = {"Open MPI's default": False, "pyfw (btl ^ofi)": True}
    runs = {(how, arm): [] for how in ("alone", "job") for arm in arms}
    for _ in range(a.repeat):
        for arm, left_out in arms.items():
            runs["alone", arm].append(_alone(left_out))
            runs["job", arm].append(_job(left_out, a.ranks))
    rows = []
    for (how, arm), got in runs.items():
        rows.append({"how": how if how == "alone" else f"job of {a.ranks} ranks", "arm": arm,
                     "init_s": spread(r["init_s"] for r in got),
                     "wall_s": spread(r["wall_s"] for r in got), "runs": got})
        print(f"{rows[-1]['how']:>16} {arm:>20}: MPI_Init {rows[-1]['init_s']['median']:.3f} s,"
              f" whole {rows[-1]['wall_s']['median']:.3f} s", flush=True)
    write_json(output_dir(a), "mpi_init.json", {"repeat": a.repeat, "ranks": a.ranks,
                                                 "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
