"""Ensembles of MPI-parallel knee simulations: pyfw against the per-launch peers, side by side
in one run (issue 38, item 5).

    python benchmarks/ensemble_peers.py [--ranks 2] [--short 20] [--long 2] [--mixed 6]
                                        [--arms pyfw libensemble shell parsl]
                                        [--out DIR | --publish]
    python benchmarks/ensemble_peers.py --testbed PREFIX [--slow 3] [workloads] [--out DIR]

Arms, each given the same simulations and the same ``--ranks`` R ranks:

* **pyfw**: one job, ``pyfw-run -n R+1`` (a master and R workers); every simulation is a farm
  task of k ranks (``Farm.map(..., ranks=...)``, mixed widths in one round) that calls
  :func:`apps.knee.run_scenario` on its group's communicator in warm processes.
* **libensemble**: libEnsemble 1.x as its docs show for MPI applications: an ``MPIExecutor``
  with the app registered, the simulations as a given sample (``H0``, no generator,
  ``give_pregenerated_sim_work``) with ``resource_sets`` = k each, R workers over R
  resource sets (``--comms local``), and a ``sim_f`` that submits
  ``mpiexec -n k python -m apps.knee ...`` and waits for it.
* **shell**: a plain bash loop of ``mpiexec -n k python -m apps.knee ...``, one after another
  (what people do without a framework).
* **parsl**: Parsl's ``MPIExecutor`` (a ``LocalProvider`` block of R ranks) with
  ``bash_app`` s and ``parsl_resource_specification={"num_ranks": k}``. Two adaptations, as
  Parsl stands (2026.10): its MPI mode takes its nodes only from a Slurm or PBS job, so
  without one the arm writes a one-node ``PBS_NODEFILE`` (this host); and its
  ``$PARSL_MPI_PREFIX`` for ``mpi_launcher="mpiexec"`` is MPICH/Hydra syntax
  (``-ppn``, ``-hosts``) that Open MPI's mpiexec refuses (exit 213), so the app runs Open
  MPI's ``mpiexec -n $PARSL_NUM_RANKS`` (the rank count Parsl assigned). If it fails, its
  row says why.

Workloads (counts are options; the defaults fit a shared 2-core box): ``short`` 2-rank runs
(a 3 mm grid, 90 min of cooling: about 1 s on 2 idle cores), ``long`` 2-rank runs (the
default 2 mm grid, 50 min: about 20 s), ``mixed`` short runs alternating 1 and 2 ranks. Every simulation differs (the pack's
start temperature moves by 0.01 C a run) so nothing is cached.

Reported per arm and workload: the makespan (the arm's whole command, launches included),
ideal = the simulations' rank-seconds / R, makespan / ideal, and the overhead per
simulation = (makespan - ideal) x R / (sum of the simulations' widths): the seconds each
simulation's ranks were held beyond its own computation. A simulation's seconds are what
:func:`run_scenario` takes inside the pyfw arm (one warm group, set-up and steady state
included), the one measure every arm shares; the pyfw arm's drops are checked against the
CLI's summaries of the shell arm (equal bitwise).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

from pyfw import launch
from pyfw.monitor.results import add_output_options, output_dir, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ARMS = ("pyfw", "libensemble", "shell", "parsl")
SHORT = ["--dx", "3", "--shape", "67", "56", "56", "--minutes", "90"]
LONG = ["--dx", "2", "--minutes", "50"]
POINT = "suprapatellar_pouch"
WARM = ["--dx", "6", "--shape", "34", "30", "30", "--steps", "5"]


def workloads(a) -> dict:
    """name -> simulations ({"ranks": k, "args": knee CLI options})."""
    def sims(n, base, widths, start):
        return [{"ranks": widths[i % len(widths)],
                 "args": base + ["--pack-temp", f"{-1.0 - 0.01 * (start + i):.2f}"]}
                for i in range(n)]
    out = {}
    if a.short:
        out["short"] = sims(a.short, SHORT, [2], 0)
    if a.long:
        out["long"] = sims(a.long, LONG, [2], 1000)
    if a.mixed:
        out["mixed"] = sims(a.mixed, SHORT, [1, 2], 2000)
    return out


# ------------------------------------------------------------------ pyfw (child)
def pyfw_task(comm, sim):
    """One simulation on its group: (seconds inside run_scenario, the pouch drops)."""
    from mpi4py import MPI

    from pyfw.apps.knee import run_scenario          # apps/ as the editable install has it
    from pyfw.apps.knee.cli import params_of, parser
    a = parser().parse_args(sim["args"])
    t0 = MPI.Wtime()
    doc = run_scenario(params_of(a), comm, minutes=a.minutes, steps=a.steps,
                       history_every=a.history_every)
    return {"seconds": MPI.Wtime() - t0, "drop": {m: d[POINT] for m, d in
                                                  doc["summary"]["drop"].items()},
            "hosts": comm.allgather(MPI.Get_processor_name())}


def _width(sim):
    return sim["ranks"]


def pyfw_child(sims, out):
    from mpi4py import MPI

    from pyfw import Farm
    with Farm(MPI.COMM_WORLD, progress=False) as farm:
        if farm.is_master:
            # one tiny run on every worker first (numba compiles the kernel once a
            # process), so the simulations' own seconds, the ideal's measure, are warm; the
            # warm-up counts in this arm's makespan
            list(farm.map(pyfw_task, [{"ranks": farm.size - 1, "args": WARM}],
                          ranks=farm.size - 1))
            t0 = time.time()
            res = list(farm.map(pyfw_task, sims, ranks=_width))
            with open(out, "w") as fh:
                json.dump({"inner_s": time.time() - t0, "results": res}, fh)


# ------------------------------------------------------------------ libEnsemble (child)
def libe_sim(H, persis_info, sim_specs, libE_info):
    """libEnsemble sim_f: ``mpiexec -n k python -m apps.knee ...`` through its MPIExecutor
    (k from the worker's resource sets), waits, reads the pouch's 90-min drop."""
    import numpy as np
    from libensemble.resources.resources import Resources
    sims = sim_specs["user"]["sims"]
    exctr = libE_info["executor"]
    out = np.zeros(len(H), dtype=sim_specs["out"])
    for i, idx in enumerate(H["x"]):
        sim = sims[int(idx)]
        nprocs = Resources.resources.worker_resources.num_rsets
        with tempfile.TemporaryDirectory() as d:
            args = sim["args"] + ["--no-plots", "--quiet", "--snapshot-every", "0", "--out", d]
            task = exctr.submit(app_name="knee", num_procs=nprocs,
                                app_args=" ".join(shlex.quote(x) for x in args),
                                extra_args=" ".join(_mpiexec_flags()))
            task.wait()
            with open(os.path.join(d, "summary.json")) as fh:
                drop = json.load(fh)["summary"]["drop"]
        out["f"][i] = drop[max(drop, key=float)][POINT]
    return out, persis_info


def libe_child(sims, ranks, out):
    import numpy as np
    from libensemble import Ensemble
    from libensemble.alloc_funcs.give_pregenerated_work import give_pregenerated_sim_work
    from libensemble.executors.mpi_executor import MPIExecutor
    from libensemble.specs import AllocSpecs, ExitCriteria, LibeSpecs, SimSpecs
    exctr = MPIExecutor(custom_info={"mpi_runner": "openmpi",
                                     "runner_name": launch.find_mpiexec()})
    exctr.register_app(full_path="apps.knee", app_name="knee", precedent=f"{sys.executable} -m")
    n = len(sims)
    H0 = np.zeros(n, dtype=[("x", float), ("resource_sets", int), ("sim_id", int),
                            ("sim_started", bool)])
    H0["x"] = range(n)
    H0["resource_sets"] = [s["ranks"] for s in sims]
    H0["sim_id"] = range(n)
    ens = Ensemble(executor=exctr, libE_specs=LibeSpecs(
        comms="local", nworkers=ranks, num_resource_sets=ranks,
        resource_info={"cores_on_node": (ranks, ranks)},
        ensemble_dir_path=os.path.join(os.path.dirname(out), "libe_ensemble"),
        reuse_output_dir=True, save_H_and_persis_on_abort=False))
    ens.H0 = H0
    ens.sim_specs = SimSpecs(sim_f=libe_sim, inputs=["x"], out=[("f", float)],
                             user={"sims": sims})
    ens.alloc_specs = AllocSpecs(alloc_f=give_pregenerated_sim_work)
    ens.exit_criteria = ExitCriteria(sim_max=n)
    t0 = time.time()
    ens.run()
    with open(out, "w") as fh:
        json.dump({"inner_s": time.time() - t0, "flag": ens.flag,
                   "f": [float(v) for v in ens.H["f"]]}, fh)


# ------------------------------------------------------------------ Parsl (child)
def parsl_child(sims, ranks, out):
    import parsl
    from parsl.app.app import bash_app
    from parsl.config import Config
    from parsl.executors import MPIExecutor
    from parsl.launchers import SimpleLauncher
    from parsl.providers import LocalProvider
    run_dir = os.path.join(os.path.dirname(out), "parsl_runinfo")
    if not (os.environ.get("SLURM_NODELIST") or os.environ.get("PBS_NODEFILE")):
        # Parsl's MPI mode takes its nodes from a Slurm or PBS job only: give it what a
        # one-node PBS job would (this host, once per rank)
        nodefile = os.path.join(os.path.dirname(out), "pbs_nodefile")
        with open(nodefile, "w") as fh:
            fh.write((platform.node() + "\n") * ranks)
        os.environ["PBS_NODEFILE"] = nodefile
    config = Config(run_dir=run_dir, executors=[MPIExecutor(
        max_workers_per_block=ranks, mpi_launcher="mpiexec",
        provider=LocalProvider(launcher=SimpleLauncher(), init_blocks=1, max_blocks=1))])

    # $PARSL_MPI_PREFIX is MPICH/Hydra syntax ("mpiexec -n k -ppn k -hosts h"), which Open
    # MPI's mpiexec refuses (exit 213); the app launches Open MPI's with the rank count
    # Parsl's MPI executor assigned it ($PARSL_NUM_RANKS, from the resource specification)
    @bash_app
    def knee(command, parsl_resource_specification=None):
        return command      # runs in Parsl's worker: self-contained

    t0 = time.time()
    with parsl.load(config):
        futs = []
        for i, s in enumerate(sims):
            d = os.path.join(os.path.dirname(out), f"parsl_sim{i}")
            cmd = (shlex.quote(launch.find_mpiexec()) + " -n $PARSL_NUM_RANKS " + shlex.join(
                _mpiexec_flags() + [sys.executable, "-m", "apps.knee"] + s["args"]
                + ["--no-plots", "--quiet", "--snapshot-every", "0", "--out", d]))
            futs.append(knee(cmd, parsl_resource_specification={"num_ranks": s["ranks"],
                                                           "num_nodes": 1}))
        codes = [f.result() for f in futs]
    with open(out, "w") as fh:
        json.dump({"inner_s": time.time() - t0, "codes": codes}, fh)


# ------------------------------------------------------------------ the shell loop
def _mpiexec_flags():
    """What pyfw-run adds to mpiexec on this machine (root, oversubscription): the peers
    get the same launcher flags."""
    argv = launch.mpiexec_argv(2, ["true"])
    return [x for x in argv[3:-1] if x != "--oversubscribe"]


def shell_script(sims, workdir):
    lines = ["set -e", f"cd {shlex.quote(ROOT)}"]
    for i, s in enumerate(sims):
        d = os.path.join(workdir, f"shell_sim{i}")
        cmd = ([launch.find_mpiexec(), "-n", str(s["ranks"])] + _mpiexec_flags()
               + [sys.executable, "-m", "apps.knee"] + s["args"]
               + ["--no-plots", "--quiet", "--snapshot-every", "0", "--out", d])
        lines.append(shlex.join(cmd))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ driver
def run_arm(arm, sims, ranks, workdir, timeout, testbed=None):
    """Run one arm on ``sims``: (makespan s, details or the reason it did not run); the pyfw
    arm on the test bed of prefix ``testbed`` if given."""
    spec = os.path.join(workdir, f"{arm}_sims.json")
    out = os.path.join(workdir, f"{arm}_out.json")
    with open(spec, "w") as fh:
        json.dump(sims, fh)
    me = os.path.abspath(__file__)
    env = dict(os.environ)
    if arm == "pyfw":
        bed = ["--testbed", testbed] if testbed else []
        cmd = ["pyfw-run", "-n", str(ranks + 1), *bed, "--timeout", str(timeout), "--",
               sys.executable, me, "--child", arm, "--sims", spec, "--child-out", out]
    elif arm == "shell":
        script = os.path.join(workdir, "loop.sh")
        with open(script, "w") as fh:
            fh.write(shell_script(sims, workdir))
        cmd = ["bash", script]
        env = launch.mpi_env(env, nprocs=ranks)
    else:
        cmd = [sys.executable, me, "--child", arm, "--sims", spec, "--child-out", out,
               "--ranks", str(ranks)]
        env = launch.mpi_env(env, nprocs=ranks)
        # libEnsemble writes its logs, stats and machinefiles where it starts: the work
        # directory, with the checkout on the path for python -m apps.knee
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT if arm in ("pyfw", "shell") else workdir, env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, {"error": f"timed out after {timeout} s"}
    makespan = time.time() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
        return None, {"error": f"exit {p.returncode}", "stderr_tail": tail}
    detail = {}
    if os.path.exists(out):
        with open(out) as fh:
            detail = json.load(fh)
    if arm == "shell":
        detail["drop"] = []
        for i in range(len(sims)):
            with open(os.path.join(workdir, f"shell_sim{i}", "summary.json")) as fh:
                drop = json.load(fh)["summary"]["drop"]
            detail["drop"].append({m: d[POINT] for m, d in drop.items()})
    return makespan, detail


def testbed_run(a, out) -> int:
    """The pyfw arm alone on a test bed of 3 nodes x 2 slots, node C slowed ``--slow`` times
    (a CPU quota): where the groups ran, what each node did, and the makespan against the
    ideal of uneven nodes, the simulations' work at full speed over the ranks' speeds."""
    from pyfw.testbed import TestBed
    from pyfw.testbed.netns import refuse_reason
    reason = refuse_reason()
    if reason:
        raise SystemExit(f"test bed unavailable: {reason}")
    bed = TestBed(a.testbed)
    info = bed.up(nodes=3, slots=2, slow={"C": a.slow})
    try:
        hosts = [n["name"] for n in info["nodes"]]
        slow_host = hosts[2]
        ranks = 3 * 2 - 1                         # the master takes a slot of node A
        rows = []
        for name, sims in workloads(a).items():
            with tempfile.TemporaryDirectory() as workdir:
                span, detail = run_arm("pyfw", sims, ranks, workdir, a.timeout, a.testbed)
            if span is None:
                raise SystemExit(f"the pyfw arm failed on {name}: {detail}")
            res = detail["results"]
            # a simulation's work at full speed: its seconds, divided by the slowdown of
            # the node it ran on (groups never span nodes: checked below)
            speed = {h: (a.slow if h == slow_host else 1.0) for h in hosts}
            work = sum(s["ranks"] * r["seconds"] / speed[r["hosts"][0]]
                       for s, r in zip(sims, res))
            # the workers' speeds, counting a node's workers only if the narrowest task
            # fits them (A has one worker beside the master: none for a 2-rank workload)
            workers = {hosts[0]: 1, hosts[1]: 2, hosts[2]: 2}
            narrowest = min(s["ranks"] for s in sims)
            capacity = sum(n / speed[h] for h, n in workers.items() if n >= narrowest)
            ideal = work / capacity
            per_node = {h: {"sims": 0, "rank_seconds": 0.0} for h in hosts}
            for s, r in zip(sims, res):
                node = per_node[r["hosts"][0]]
                node["sims"] += 1
                node["rank_seconds"] += s["ranks"] * r["seconds"]
            row = {"workload": name, "sims": len(sims), "ranks": ranks,
                   "slowed": {slow_host: a.slow}, "makespan_s": span,
                   "inner_s": detail["inner_s"], "ideal_s": ideal,
                   "makespan_over_ideal": span / ideal,
                   "inner_over_ideal": detail["inner_s"] / ideal,
                   "groups_inside_nodes": all(len(set(r["hosts"])) == 1 for r in res),
                   "per_node": per_node}
            rows.append(row)
            print(f"{name:6s} pyfw on the test bed: {span:6.1f} s ({detail['inner_s']:.1f} s "
                  f"in the map), ideal {ideal:.1f} s: {span / ideal:.2f} x "
                  f"({detail['inner_s'] / ideal:.2f} x in the map); groups inside nodes: "
                  f"{row['groups_inside_nodes']}; sims per node "
                  f"{ {h: v['sims'] for h, v in per_node.items()} }", flush=True)
        write_json(out, "ensemble_testbed.json", {
            "rows": rows, "testbed": {"nodes": hosts, "slots": 2, "slow": {slow_host: a.slow}},
            "note": "ideal = the simulations' rank-seconds at full speed (each divided by its "
                    "node's slowdown) / the speeds of the workers the tasks fit (A: 1 worker "
                    "beside the master, for 1-rank tasks only; B: 2; C: 2 at 1/slow); "
                    "makespan includes the job's start on the test bed"})
    finally:
        bed.down()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2, help="ranks every arm gets (default 2)")
    ap.add_argument("--short", type=int, default=20, help="short 2-rank runs (default 20)")
    ap.add_argument("--long", type=int, default=2, help="long 2-rank runs (default 2)")
    ap.add_argument("--mixed", type=int, default=6, help="short runs of 1 and 2 ranks "
                                                          "(default 6)")
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    ap.add_argument("--timeout", type=float, default=1800.0, help="per arm and workload, s")
    ap.add_argument("--testbed", metavar="PREFIX", help="instead: the pyfw arm alone on a "
                    "test bed of this prefix (3 nodes x 2 slots, node C slowed), brought up "
                    "and torn down here")
    ap.add_argument("--slow", type=float, default=3.0, help="node C's slowdown with --testbed")
    ap.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    ap.add_argument("--sims", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    if a.child:
        with open(a.sims) as fh:
            sims = json.load(fh)
        {"pyfw": lambda: pyfw_child(sims, a.child_out),
         "libensemble": lambda: libe_child(sims, a.ranks, a.child_out),
         "parsl": lambda: parsl_child(sims, a.ranks, a.child_out)}[a.child]()
        return 0
    out = output_dir(a)
    if a.testbed:
        return testbed_run(a, out)
    arms = ["pyfw"] + [x for x in a.arms if x != "pyfw"]   # pyfw first: it measures the sims
    rows = []
    for name, sims in workloads(a).items():
        with tempfile.TemporaryDirectory() as workdir:
            results = {arm: run_arm(arm, sims, a.ranks, workdir, a.timeout) for arm in arms}
        span, pyfw = results["pyfw"]
        if span is None:
            raise SystemExit(f"the pyfw arm failed on {name}: {pyfw}")
        seconds = [r["seconds"] for r in pyfw["results"]]
        rank_s = sum(s["ranks"] * t for s, t in zip(sims, seconds))
        ideal = rank_s / a.ranks
        widths = sum(s["ranks"] for s in sims)
        shell = results.get("shell", (None, {}))[1]
        same = (None if "drop" not in shell else
                [r["drop"] for r in pyfw["results"]] == shell["drop"])
        for arm in arms:
            makespan, detail = results[arm]
            row = {"workload": name, "arm": arm, "sims": len(sims),
                   "widths": sorted({s["ranks"] for s in sims}), "ranks": a.ranks,
                   "sim_rank_seconds": rank_s, "ideal_s": ideal, "makespan_s": makespan}
            if makespan is None:
                row["error"] = detail
            else:
                row["makespan_over_ideal"] = makespan / ideal
                row["overhead_per_sim_s"] = (makespan - ideal) * a.ranks / widths
                if "inner_s" in detail:
                    row["inner_s"] = detail["inner_s"]
            if arm == "pyfw":
                row["drops_equal_shell_bitwise"] = same
            rows.append(row)
            shown = ("did not run: " + json.dumps(detail)[:300] if makespan is None else
                     f"{makespan:7.1f} s, {makespan / ideal:5.2f} x ideal ({ideal:.1f} s), "
                     f"overhead {row['overhead_per_sim_s']:.2f} s/sim")
            print(f"{name:6s} {arm:12s} {shown}", flush=True)
    by = {(r["workload"], r["arm"]): r for r in rows}
    for name in workloads(a):
        p = by[(name, "pyfw")]["makespan_s"]
        for arm in arms[1:]:
            m = by[(name, arm)]["makespan_s"]
            if m is not None:
                print(f"{name:6s} {arm} / pyfw makespan: {m / p:.2f}")
    write_json(out, "ensemble_peers.json", {
        "rows": rows, "ranks": a.ranks,
        "workloads": {k: {"sims": len(v), "args": v[0]["args"][:-2]}
                      for k, v in workloads(a).items()},
        "note": "ideal = sum of ranks x seconds of each simulation inside run_scenario "
                "(pyfw arm) / ranks; makespan = the arm's whole command"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
