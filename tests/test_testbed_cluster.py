"""Jobs across the multi-node test bed (network namespaces as nodes, real Open MPI daemons,
TCP between nodes, tc-capped links): farm, ULFM when a whole node dies, collectives against
native, the monitor against the tc ground truth, domain and knee runs across node counts,
and the batch templates under a faked scheduler. Skips, with the reason printed, where the
test bed cannot be built (not root, no ip netns)."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import pytest

from pyfw import launch
from pyfw.testbed import TestBed
from pyfw.testbed.agent import launch_options
from pyfw.testbed.netns import job_env, refuse_reason

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JOB = os.path.join(HERE, "testbed_job.py")
REASON = refuse_reason()
#: the test beds' prefixes start with this (set it to run beside another session's suite)
P = os.environ.get("PYFW_TEST_TESTBED_PREFIX", "pfw")
KNEE = [sys.executable, "-m", "apps.knee", "--shape", "50", "30", "30", "--dx", "3",
        "--length", "60", "--no-plots", "--quiet"]

pytestmark = pytest.mark.launch


def _bed(prefix, **kw):
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    tb = TestBed(prefix)
    info = tb.up(**kw)
    return tb, info


@pytest.fixture(scope="module")
def bed3():
    """Nodes A, B, C with one rank each; B's link capped at 100 Mbit/s both ways."""
    tb, info = _bed(f"{P}c3", nodes=3, slots=1, links={"B": "100mbit"})
    yield info
    tb.down()


@pytest.fixture(scope="module")
def bed2():
    """Nodes A, B with two ranks each."""
    tb, info = _bed(f"{P}c2", nodes=2, slots=2)
    yield info
    tb.down()


def _env(info=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]),
               PYFW_FINALIZE_GRACE="2")   # survivors of a dead node: see ompi#11404
    return env if info is None else job_env(info, env)


def _run(info, command, n=None, ft=False, timeout=90):
    """Run ``command`` across the test bed (``info=None``: on this machine, one node)."""
    extra = launch_options(info) if info is not None else None
    n = n or sum(node["slots"] for node in info["nodes"])
    res = launch.run(n, command, timeout=timeout, ft=ft, extra=extra, env=_env(info),
                     capture=True, cwd=ROOT)
    assert not res.timed_out, f"job hung:\n{res.stdout}\n{res.stderr}"
    return res


def test_cli_names_nodes_by_letter_and_records_the_ground_truth():
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    cli = [sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}cli"]
    try:
        up = subprocess.run(cli + ["up", "--nodes", "3", "--slots", "1", "--link", "B:50mbit",
                                   "--slow", "C:4", "--delay", "A:0.003"],
                            capture_output=True, text=True, timeout=60, env=_env())
        assert up.returncode == 0, up.stderr
        got = json.loads(subprocess.run(cli + ["status"], capture_output=True, text=True,
                                        timeout=30, env=_env()).stdout)
        nodes = {n["letter"]: n for n in got["nodes"]}
        assert nodes["B"]["rate_bytes_per_s"] == 50e6 / 8 and nodes["A"]["rate"] is None
        assert nodes["C"]["cpu_cores"] == 0.25 and got["cpu_method"].startswith("cgroup")
        assert nodes["A"]["delay_s"] == 0.003 and got["delay_method"]
        assert got["binding"].startswith("none")
        tc = subprocess.run(["tc", "qdisc", "show", "dev", f"{P}cli-1h"], capture_output=True,
                            text=True).stdout
        assert "tbf" in tc and "50Mbit" in tc
        if got["delay_method"].startswith("in-process"):   # no netem in this kernel
            assert job_env(got, {})["PYFW_EMULATE_LINKS"] == "0-1:0.003,0-2:0.003"
        bad = subprocess.run(cli + ["up", "--link", "Q:1mbit"], capture_output=True,
                             text=True, timeout=30, env=_env())
        assert bad.returncode != 0 and "Q" in bad.stderr
    finally:
        subprocess.run(cli + ["down"], timeout=60, env=_env())
    left = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{P}cli" not in left and not os.path.exists(f"/sys/fs/cgroup/cpu/{P}cli-2")


def test_monitor_finds_the_capped_node_within_20_percent_of_tc(bed3, tmp_path):
    out = tmp_path / "monitor.json"
    res = _run(bed3, [sys.executable, JOB, "monitor", str(out)])
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert got["hosts"] == [f"{P}c3-0", f"{P}c3-1", f"{P}c3-2"]
    bw = np.array(got["bandwidth"])
    cap = bed3["nodes"][1]["rate_bytes_per_s"]
    for i, j in ((0, 1), (1, 2)):   # B's links
        assert abs(bw[i, j] / cap - 1) < 0.2, (i, j, bw[i, j], cap)
    # A-C is not capped: far above B's cap, or so fast that no slope shows at 1 MiB (inf;
    # seen at load 7 on 2 cores, where a 1 KiB round trip waits for the scheduler)
    assert bw[0, 2] > 3 * cap


def test_farm_across_nodes_with_a_capped_link(bed3, tmp_path):
    out = tmp_path / "farm.json"
    res = _run(bed3, [sys.executable, JOB, "farm", str(out)])
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert sorted(r[0] for r in got["results"]) == list(range(300))   # each exactly once
    assert {r[2] for r in got["results"]} == {f"{P}c3-1", f"{P}c3-2"}   # both worker nodes


def test_ulfm_a_whole_node_killed_every_result_exactly_once(bed2, tmp_path):
    out = tmp_path / "kill.json"
    _run(bed2, [sys.executable, JOB, "farm", str(out), f"{P}c2-1"], ft=True)
    got = json.loads(out.read_text())
    assert sorted(r[0] for r in got["results"]) == list(range(300))
    assert got["alive"] == {"1": True, "2": False, "3": False}


def test_ulfm_every_survivor_sees_the_failure_in_a_collective(bed2, tmp_path):
    # with Open MPI's default han collectives this Barrier returned success at all three
    # survivors; pyfw-run --ft launches without han
    out = tmp_path / "barrier"
    _run(bed2, [sys.executable, JOB, "barrier", str(out)], ft=True)
    verdicts = {r: (tmp_path / f"barrier.{r}").read_text() for r in range(3)}
    assert all(v.startswith("error") for v in verdicts.values()), verdicts


def test_ulfm_the_only_rank_of_a_node_dies_and_the_job_still_ends(bed3, tmp_path):
    # open-mpi/ompi#11404: survivors hang in MPI_Finalize; the finalize guard ends them
    out = tmp_path / "barrier"
    _run(bed3, [sys.executable, JOB, "barrier", str(out)], ft=True, timeout=60)
    assert (tmp_path / "barrier.0").exists() and (tmp_path / "barrier.1").exists()


def test_smp_allgather_and_tuned_dispatch_equal_native_on_two_nodes(bed2, tmp_path):
    out = tmp_path / "coll.json"
    res = _run(bed2, [sys.executable, JOB, "coll", str(out)])
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert got["nodes"] == 2 and got["mismatches"] == []


def _temperature(out_dir):
    with h5py.File(os.path.join(out_dir, "ckpt.h5"), "r") as f:
        return int(f.attrs["step"]), f["T"][...]


def test_domain_bitwise_on_one_and_two_nodes_and_knee_restart_elsewhere(bed2, tmp_path):
    two, one = str(tmp_path / "two"), str(tmp_path / "one")
    half, rest = str(tmp_path / "half"), str(tmp_path / "rest")
    assert _run(bed2, KNEE + ["--steps", "40", "--out", two]).returncode == 0
    assert _run(None, KNEE + ["--steps", "40", "--out", one], n=4).returncode == 0
    step, t_two = _temperature(two)
    assert step == 40 and np.array_equal(t_two, _temperature(one)[1])
    # checkpoint on 2 nodes x 2 ranks, finish on 1 node with 2 ranks: the same field
    assert _run(bed2, KNEE + ["--steps", "20", "--out", half]).returncode == 0
    assert _run(None, KNEE + ["--steps", "40", "--restart", os.path.join(half, "ckpt.h5"),
                              "--out", rest], n=2).returncode == 0
    step, t_rest = _temperature(rest)
    assert step == 40 and np.array_equal(t_rest, t_two)


@pytest.mark.parametrize("scheduler,script", [("slurm", "farm.slurm"), ("pbs", "farm.pbs")])
def test_batch_template_runs_unchanged_on_the_test_bed(bed2, tmp_path, scheduler, script):
    env = dict(_env(), RESULTS=str(tmp_path))
    shims = os.path.join(tempfile.gettempdir(), f"pyfw-cluster-{P}c2-*")
    before = set(glob.glob(shims))
    res = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}c2", "job",
                          "--timeout", "120", "--scheduler", scheduler,
                          os.path.join(ROOT, "jobs", script)],
                         capture_output=True, text=True, timeout=150, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    stats = json.loads(next(tmp_path.glob("stats-*.json")).read_text())
    hosts = {w["host"] for w in stats["workers"]}
    assert hosts == {f"{P}c2-0", f"{P}c2-1"} and stats["tasks"] == 20000
    assert set(glob.glob(shims)) <= before, "the job's shim directory outlived it"


@pytest.mark.parametrize("scheduler,script", [("slurm", "rubik.slurm"), ("pbs", "rubik.pbs")])
def test_rubik_template_solves_a_file_of_cubes_and_resumes_from_its_journal(
        bed2, tmp_path, scheduler, script):
    cubes = tmp_path / "cubes.txt"
    cubes.write_text("# a batch\nR U R' U'\nF2 D L' U R2\nR U Q\nB2 L' D (3f*)\n")
    env = dict(_env(), RESULTS=str(tmp_path / "results"), CUBES=str(cubes), HEURISTIC="phase1",
               PYFW_RUBIK_CACHE=str(tmp_path / "tables"))
    runs = []
    for _ in range(2):   # the second job, as after a requeue, takes every cube from the journal
        res = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}c2",
                              "job", "--timeout", "240", "--scheduler", scheduler,
                              os.path.join(ROOT, "jobs", script)],
                             capture_output=True, text=True, timeout=270, env=env, cwd=tmp_path)
        assert res.returncode == 1, res.stdout + res.stderr     # 1: the bad line
        runs.append(res)
    first, second = sorted((tmp_path / "results").glob("batch-*.jsonl"),
                           key=lambda f: f.stat().st_mtime)
    rows = [json.loads(x) for x in first.read_text().splitlines()]
    assert {r["line"]: r["length"] for r in rows if "length" in r} == {2: 4, 3: 5, 5: 3}
    assert [r["line"] for r in rows if "error" in r] == [4]
    assert all(r["verified"] for r in rows if "length" in r)
    again = json.loads(second.read_text().splitlines()[-1])["summary"]
    assert again["resumed"] == 3 and again["generated"] == 0, again
    assert '"summary"' in runs[1].stdout          # the template prints the summary


SPAWNING = """
import json, os, socket, sys
from mpi4py import MPI
from pyfw.futures import MPIPoolExecutor

def where(x):
    return socket.gethostname(), os.getpid()

if __name__ == "__main__":
    with MPIPoolExecutor() as ex:     # no max_workers: the allocation's universe decides
        got = list(ex.map(where, range(40)))
        out = {"workers": ex.num_workers, "universe": MPI.COMM_WORLD.Get_attr(MPI.UNIVERSE_SIZE),
               "hosts": sorted({h for h, _ in got}), "pids": len({p for _, p in got})}
    json.dump(out, open(sys.argv[1], "w"))
"""


#: Open MPI 5.0.11's runtime (its bundled PRRTE) prints "PMIX ERROR ... pmix_server_dyn.c"
#: (its handling of the spawn's connect) in every two-node spawn here, mpi4py.futures' own
#: included, and now and then crashes after it: a heap error ("corrupted size vs.
#: prev_size", "free(): invalid pointer", "double free or corruption") aborts prterun, the
#: job script's mpiexec, or leaves it stuck in "Abort is in progress" until the job's
#: timeout; or it loses its remote daemon and ends the job with status 0 before the
#: program's output; or the job's mpiexec dies of a segmentation fault after
#: "PMIX_ERR_OUT_OF_RESOURCE" (once, 2026-11-29, in a fresh-clone suite). Measured
#: 2026-11-28: 4 of 80 runs of a loop of this job, none in 90 alternating runs of this job
#: and mpi4py.futures' equivalent, 1 of 10 runs of the test from a fresh clone, 3 of 4 in
#: one fresh-clone suite. A job that died that way is run again; if every attempt did, the
#: test is an expected failure that names the crash.
SPAWN_ATTEMPTS = 4
_HEAP_ERRORS = ("double free", "free(): invalid", "corrupted", "malloc(): ", "munmap_chunk")


def _open_mpi_spawn_crash(res) -> bool:
    out = res.stdout + res.stderr
    heap = any(m in out for m in _HEAP_ERRORS)
    aborted = (res.returncode == 134 and heap
               and re.search(r"Aborted( \(core dumped\))?\s+mpiexec ", out) is not None)
    stuck = res.returncode == 124 and heap          # killed at the job's timeout
    spawn = "pmix_server_dyn.c" in out
    lost = spawn and "lost communication with a remote daemon" in out
    segv = (spawn and res.returncode == 139
            and re.search(r"Segmentation fault( \(core dumped\))?\s+mpiexec ", out) is not None)
    return aborted or stuck or lost or segv


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_spawn_mode_in_a_batch_allocation_takes_its_universe(bed2, tmp_path, scheduler):
    # mpiexec -n 1 in a (faked) Slurm/PBS job: MPIPoolExecutor() spawns universe - 1
    # workers over the allocation's nodes, as mpi4py's rule says
    prog, out, job = tmp_path / "prog.py", tmp_path / "out.json", tmp_path / "job.sh"
    prog.write_text(SPAWNING)
    job.write_text(f"#!/bin/bash\nmpiexec -n 1 {sys.executable} {prog} {out}\n")
    for attempt in range(SPAWN_ATTEMPTS):
        out.unlink(missing_ok=True)
        res = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}c2",
                              "job", "--timeout", "45", "--scheduler", scheduler, str(job)],
                             capture_output=True, text=True, timeout=75, env=_env(),
                             cwd=tmp_path)
        if not _open_mpi_spawn_crash(res):
            break
        print(f"attempt {attempt + 1}: Open MPI's runtime crashed in MPI_Comm_spawn "
              f"(prterun, not pyfw):\n{res.stderr[-1500:]}")
    else:
        pytest.xfail(f"Open MPI's runtime crashed in all {SPAWN_ATTEMPTS} attempts "
                     f"(see the output above)")
    assert res.returncode == 0, res.stdout + res.stderr
    assert out.exists(), f"the job ended 0 without its output:\n{res.stdout}\n{res.stderr}"
    got = json.loads(out.read_text())
    assert got["universe"] >= 4 and got["workers"] == got["universe"] - 1, got
    assert got["pids"] == got["workers"] and got["hosts"] == [f"{P}c2-0", f"{P}c2-1"], got


def test_two_level_farm_on_real_nodes_and_its_sub_master_killed(bed2, tmp_path):
    # node A: master 0 + direct worker 1; node B: sub-master 2 (lowest rank) + worker 3
    hier = os.path.join(HERE, "hier_job.py")
    out = tmp_path / "contract.json"
    assert _run(bed2, [sys.executable, hier, "contract", str(out)]).returncode == 0
    got = json.loads(out.read_text())
    assert got["hierarchy"] == "node" and got["ordered"] and got["ranks"] == [1, 2, 3]
    out = tmp_path / "kill.json"
    _run(bed2, [sys.executable, hier, "kill-submaster", str(out)], ft=True)
    got = json.loads(out.read_text())
    assert got["values"] == [x * x for x in range(600)] and got["alive"]["2"] is False
