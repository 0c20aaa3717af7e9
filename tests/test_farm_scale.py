"""The farm at scale on one box (issue 41): a 64-rank flat farm and a 64-rank two-level farm
(blocks of 16 ranks as nodes: 3 sub-masters of 15 workers, 15 direct workers) return every
result exactly once; ``import pyfw`` loads none of the heavy modules a farm does not need.

The job is this file run under ``pyfw-run``: ``python test_farm_scale.py OUT``. The rank
count is ``$PYFW_TEST_SCALE_RANKS`` (64), the block size ``$PYFW_TEST_SCALE_NODE`` (16).
"""
import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RANKS = int(os.environ.get("PYFW_TEST_SCALE_RANKS", "64"))
NODE = int(os.environ.get("PYFW_TEST_SCALE_NODE", "16"))
TASKS_PER_WORKER = 20


def test_import_pyfw_loads_no_heavy_module():
    # start-up at 256 ranks is the sum of every rank's import CPU over two cores: numpy,
    # h5py, the monitor's probes and dataclasses (the dashboard's snapshots) cost ~0.15 s
    # per rank and a farm needs none of them
    code = ("import mpi4py; mpi4py.rc.initialize = False\n"
            "import sys, pyfw\n"
            "from pyfw import Farm\n"
            "print(sorted(m for m in ('numpy', 'h5py', 'numba', 'pyfw.monitor.probes', "
            "'pyfw.monitor.online', 'pyfw.snapshots', 'pyfw.dashboard', 'pyfw.linkemu') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def test_lazy_monitor_names_are_the_real_ones():
    import pyfw.monitor as monitor
    from pyfw.monitor.forecast import ForecasterBank
    from pyfw.monitor.profile import Profiler
    assert monitor.ForecasterBank is ForecasterBank and monitor.Profiler is Profiler
    assert callable(monitor.profile) and not isinstance(monitor.profile, type(monitor))
    with pytest.raises(AttributeError):
        monitor.no_such_name


def _square(x):
    time.sleep(0.002)
    from mpi4py import MPI
    return x * x, MPI.COMM_WORLD.Get_rank()


def _run_farm(world, mode: str) -> dict:
    from pyfw import Farm
    with Farm(world, hierarchy=mode) as farm:
        if not farm.is_master:
            return {}
        n = TASKS_PER_WORKER * (farm.size - 1)
        t0 = time.perf_counter()
        got = list(farm.map(_square, range(n), unordered=True))
        ordered = [v for v, _ in farm.map(_square, range(n // 4))]
        wall = time.perf_counter() - t0
        st = farm.stats()
    return {"hierarchy": farm.hierarchy, "n": n, "indices": sorted(i for i, _ in got),
            "values_ok": all(v == i * i for i, (v, _) in got),
            "ranks": sorted({r for _, (_, r) in got}), "ordered_ok": ordered == [
                i * i for i in range(n // 4)], "tasks": st["tasks"],
            "executions": st["executions"],
            "rows": sorted(w["rank"] for w in st["workers"]),
            "submasters": sorted(w["rank"] for w in st["workers"]
                                 if w.get("role") == "submaster"), "wall_s": wall,
            "load": st["master_load"]}


def job(out: str) -> None:
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    result = {"flat": _run_farm(world, "flat")}
    os.environ["PYFW_FARM_NODE_SIZE"] = str(NODE)   # every rank alike, before the layout
    result["node"] = _run_farm(world, "node")
    if world.Get_rank() == 0:
        with open(out, "w") as fh:
            json.dump(result, fh)


@pytest.mark.launch
@pytest.mark.slow
def test_flat_and_node_farm_at_64_ranks_every_result_once(tmp_path):
    from pyfw import launch
    out = tmp_path / "scale.json"
    t0 = time.monotonic()
    res = launch.run(RANKS, [sys.executable, os.path.abspath(__file__), str(out)],
                     timeout=600, capture=True, cwd=ROOT,
                     env=dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, ROOT])))
    took = time.monotonic() - t0
    assert not res.timed_out, (res.stdout or "") + (res.stderr or "")
    assert out.exists(), f"no results (exit {res.returncode}):\n{res.stderr}"
    got = json.loads(out.read_text())
    workers = list(range(1, RANKS))
    for mode in ("flat", "node"):
        g = got[mode]
        n = g["n"]
        assert g["hierarchy"] == mode
        assert g["indices"] == list(range(n)), f"{mode}: a result missing or twice"
        assert g["values_ok"] and g["ordered_ok"]
        assert g["tasks"] == n + n // 4 <= g["executions"]
        assert g["rows"] == workers        # the master's statistics list every worker once
        assert set(g["ranks"]) <= set(workers)
        load = g["load"]              # the master's own CPU over the last map (n // 4 results)
        assert load["round"] and load["results"] == n // 4 and load["cpu_per_result_us"] > 0
        assert 0 < load["busy"] and load["wall_s"] <= g["wall_s"]
    assert got["flat"]["submasters"] == []
    assert got["node"]["submasters"] == list(range(NODE, RANKS, NODE))
    print(f"{RANKS} ranks: job {took:.1f} s, flat {got['flat']['wall_s']:.2f} s, "
          f"node {got['node']['wall_s']:.2f} s")


if __name__ == "__main__":
    job(sys.argv[1])


def test_the_benchmarks_floor_is_forked_sleepers_with_their_even_share():
    # farm_scale.py's "floor" mode: the box's own limit beside the farm (no MPI, no scheduler)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import farm_scale
    finally:
        sys.path.pop(0)
    (phase,) = farm_scale.floor_one(3, [0.01], 0.05)["phases"]
    assert phase["tasks"] == 2 * 5 and phase["ideal_s"] == pytest.approx(0.05)
    assert phase["makespan_over_ideal"] >= 1.0      # each sleeper slept 5 x 10 ms at least
    assert phase["cpu_us_per_task"]["workers"] > 0


def test_the_benchmarks_unordered_suffix_keeps_the_hierarchy_and_lifts_the_window():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import farm_scale
    finally:
        sys.path.pop(0)
    assert farm_scale.parse_mode("flat:unordered") == ("flat", None)
    assert farm_scale.parse_mode("node32:unordered") == ("node", 32)
    assert farm_scale.unordered("flat:unordered") and not farm_scale.unordered("node32")
    # a policy beside the default, alone or with unordered maps
    assert farm_scale.parse_mode("flat:fac2+unordered") == ("flat", None)
    assert farm_scale.policy_of("flat:fac2+unordered") == "fac2"
    assert farm_scale.unordered("flat:fac2+unordered")
    assert farm_scale.policy_of("flat") is None
    assert farm_scale.again("flat:again+fac2") and not farm_scale.again("flat:fac2")
    assert farm_scale.policy_of("flat:again+fac2") == "fac2"
    assert farm_scale.policy_of("node32:unordered") is None
    with pytest.raises(ValueError, match="unknown option 'fastest'"):
        farm_scale.policy_of("flat:fastest")


def test_the_benchmarks_summary_takes_ratios_within_each_repeat():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import farm_scale
    finally:
        sys.path.pop(0)

    def run(mode, rep, wall):
        return {"ranks": 256, "mode": mode, "repeat": rep, "phases": [
            {"task_s": 0.01, "wall_s": wall, "makespan_over_ideal": wall / 2.0,
             "tasks_per_s": 51000 / wall, "cpu_us_per_task_total": 50.0 * wall}]}

    # a slow second repeat: the ratios follow each repeat's own floor and flat run
    results = [run("floor", 0, 2.1), run("flat", 0, 2.52), run("node32", 0, 4.2),
               run("flat", 1, 4.0), run("node32", 1, 6.0), run("floor", 1, 3.2)]
    rows = {r["mode"]: r for r in farm_scale.summarise(results)}
    assert list(rows) == ["floor", "flat", "node32"]
    flat, node = rows["flat"], rows["node32"]
    assert flat["over_floor"]["runs"] == pytest.approx([2.52 / 2.1, 4.0 / 3.2])
    assert node["over_flat"]["runs"] == pytest.approx([4.2 / 2.52, 6.0 / 4.0])
    assert flat["makespan_over_ideal"] == pytest.approx({"median": 1.63, "min": 1.26,
                                                         "max": 2.0})
    assert "over_floor" not in rows["floor"] and "over_flat" not in rows["floor"]
    assert farm_scale.runs_at("node32", 64) and not farm_scale.runs_at("node32", 32)
    assert "| 256 | flat | 10 ms | 2 | 1.63 [1.26-2.00] | 1.23 [1.20-1.25] |  |" in \
        farm_scale.summary_table(farm_scale.summarise(results))


def test_the_model_reads_every_mode_the_benchmark_writes(tmp_path):
    # farm_scale.py's default modes start with "floor" and may carry options: the model
    # fits the farms only, a mode with options apart from the plain one
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import farm_scale_model as model
    finally:
        sys.path.pop(0)

    def run(mode, cpu):
        return {"ranks": 256, "mode": mode, "phases": [
            {"task_s": 0.01, "tasks": 51000, "wall_s": 3.0, "ideal_s": 2.0,
             "cpu_s": {"master": cpu, "submasters": cpu / 2 if mode.startswith("node32")
                       else 0.0, "workers": 4 * cpu}}]}

    path = tmp_path / "farm_scale.json"
    path.write_text(json.dumps({"results": [run("floor", 0.0), run("flat", 1.0),
                                            run("flat:again", 2.0), run("node32:again", 3.0),
                                            run("node32", 4.0), run("node", 5.0)]}))
    rows = model.scale_runs([str(path)])
    assert [(r["mode"], r["family"]) for r in rows] == [
        ("flat", "flat"), ("flat:again", "flat:again"), ("node32:again", "node32:again"),
        ("node32", "node32"), ("node", "node")]
    fits = model.fit_scale(rows)
    assert fits["flat:again/0.01/master"]["a_s"] == pytest.approx(2.0 / 51000)
    assert fits["flat/0.01/master"]["a_s"] == pytest.approx(1.0 / 51000)
    # a block of 32 ranks: 7 sub-masters route the tasks of the 224 ranks beside them
    node32 = rows[3]
    assert node32["c_sub_routed"] == pytest.approx(2.0 / (51000 * (256 - 32) / 255))
    assert model.compute_ranks({}, "node32:again", 0.01, 256) == 255
    assert model.compute_ranks({"node32:again/0.01": 0.5}, "node32:again", 0.01, 256) == \
        pytest.approx(255 - 7 * 0.5)
