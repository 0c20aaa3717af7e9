"""The two-level farm (``Farm(hierarchy="node")``): the flat farm's promises through a
sub-master, and the failure of a node worker and of a sub-master under ULFM.

On one machine the node split is forced with ``PYFW_FARM_NODE_SIZE`` (blocks of consecutive
ranks); on the test bed it is the real ``COMM_TYPE_SHARED`` split.
"""
import json
import os
import sys

import pytest
from mpi4py import MPI

from pyfw import Farm, launch
from pyfw.errors import ConfigurationError
from pyfw.farm.hierarchy import AUTO_MIN_WORKERS, Layout, resolve

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "hier_job.py")


def test_layout_roles():
    # nodes {0,1} {2,3} {4}: master 0, direct workers 1 and 4, sub-master 2 over worker 3
    lay = Layout([0, 0, 2, 2, 4], master=0)
    assert [lay.role(r) for r in range(5)] == ["master", "worker", "submaster",
                                               "node-worker", "worker"]
    assert lay.top_workers == [1, 2, 4] and lay.submasters == {2: 2}
    big = Layout([0] * 4 + [4] * 4 + [8] * 4, master=5)   # master on the middle node
    assert big.top_workers == [0, 4, 6, 7, 8] and big.role(4) == "worker"


def test_auto_rule():
    two_nodes = [0] * 200 + [200] * 200
    assert resolve("auto", two_nodes, 0) == "node"
    assert resolve("auto", [0] * 400, 0) == "flat"                       # one node
    assert resolve("auto", [0] * 8 + [8] * 8, 0) == "flat"                # few workers
    assert AUTO_MIN_WORKERS <= 400
    with pytest.raises(ConfigurationError):
        resolve("tree", [0, 0], 0)


def test_bad_hierarchy_is_refused_and_serial_farm_stays_flat():
    with pytest.raises(ConfigurationError, match="hierarchy"):
        Farm(MPI.COMM_SELF, hierarchy="tree")
    with Farm(MPI.COMM_SELF, hierarchy="node") as farm:
        assert farm.hierarchy == "flat" and list(farm.map(abs, [-1, -2])) == [1, 2]


def test_sub_master_reply_lists_ids_ascending():
    # the node's pieces finish in any order; the master's in-order delivery reads a reply
    # whose first and last ids fit as one consecutive block as that block, in order
    from pyfw.farm.hierarchy import SubMaster, _Forward
    sent = []
    sub = SubMaster.__new__(SubMaster)
    sub.reply = lambda cid, rid, ids, values, errors, stats, status: sent.append((ids, values))
    f = _Forward(7, 1, range(100, 112), 0.0, None)
    for piece in ([0, 1, 2], [6, 7, 8], [3, 4, 5], [9, 10, 11]):   # first and last in place
        f.pending += [(pos, pos * pos, None) for pos in piece]
    sub._send(f, "ok", 1.0)
    (ids, values), = sent
    assert ids == list(range(100, 112)) and values == [p * p for p in range(12)]


def _job(tmp_path, mode, n=5, node_size=2, ft=False, extra_env=None, args=()):
    out = tmp_path / f"{mode}.json"
    env = dict(os.environ, PYFW_FARM_NODE_SIZE=str(node_size), PYFW_FINALIZE_GRACE="2",
               PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)]), **(extra_env or {}))
    res = launch.run(n, [sys.executable, JOB, mode, str(out), *args], ft=ft, timeout=90,
                     capture=True, env=env)
    assert not res.timed_out, res.stdout + res.stderr
    assert out.exists(), f"no results (exit {res.returncode}):\n{res.stdout}\n{res.stderr}"
    return json.loads(out.read_text())


@pytest.mark.launch
def test_contract_through_a_sub_master(tmp_path):
    got = _job(tmp_path, "contract")
    assert got["hierarchy"] == "node" and got["ordered"]
    assert got["ranks"] == [1, 2, 3, 4]           # the sub-master (2) schedules and computes
    assert got["unordered"] == list(range(300)) and got["kept"]
    kind, cause, index, rank = got["error"]
    assert (kind, cause, index) == ("TaskError", "KeyError", 7) and rank in (1, 2, 3, 4)
    assert got["cancel_s"] < 10               # cancel reaches tasks behind the sub-master
    rows = {r: (role, via, n) for r, role, via, n in got["workers"]}
    assert set(rows) == {1, 2, 3, 4}          # the master sees every worker
    assert rows[2][0] == "submaster" and rows[3][1] == 2
    assert got["executions"] >= got["tasks"] >= 1000 + 300 + 200   # every run counted once
    assert rows[2][1] is None and got["computed_by_submaster"] > 0


@pytest.mark.launch
def test_retries_and_timeout_copies_through_a_sub_master(tmp_path):
    assert _job(tmp_path, "retries")["values"] == list(range(40))
    got = _job(tmp_path, "timeout")
    assert got["values"] == list(range(20))
    assert got["stragglers_won"] == 0 and got["duplicates"] >= 1   # a copy beat it


@pytest.mark.launch
def test_journal_resume_in_two_level_mode(tmp_path):
    journal = str(tmp_path / "journal.h5")
    first = _job(tmp_path, "journal", extra_env={"PYFW_RUN_ID": "a"}, args=(journal,))
    again = _job(tmp_path, "journal", extra_env={"PYFW_RUN_ID": "b"}, args=(journal,))
    assert first["values"] == again["values"] == list(range(300))
    assert again["runs"] == ["a"] and again["resumed"] == 300


@pytest.mark.launch
def test_sub_master_death_loses_and_duplicates_nothing(tmp_path):
    got = _job(tmp_path, "kill-submaster", ft=True)
    assert got["values"] == [x * x for x in range(600)]
    assert got["alive"]["2"] is False and got["alive"]["1"] and got["alive"]["4"]


@pytest.mark.launch
def test_node_worker_death_is_handled_inside_its_node(tmp_path):
    # nodes {0,1,2} {3,4,5}: rank 4 (behind sub-master 3) dies; 3 and 5 carry on
    got = _job(tmp_path, "kill-node-worker", n=6, node_size=3, ft=True,
               extra_env={"HIER_KILL_RANK": "4"})
    assert got["values"] == list(range(600))
    assert got["alive"] == {"1": True, "2": True, "3": True, "4": False, "5": True}


@pytest.mark.launch
def test_futures_executor_over_a_two_level_farm(tmp_path):
    code = ("import json, sys\nfrom mpi4py import MPI\nfrom pyfw.futures import Executor\n"
            "with Executor(comm=MPI.COMM_WORLD, hierarchy='node') as ex:\n"
            "    if ex is not None:\n"
            "        got = list(ex.map(abs, range(-300, 0)))\n"
            "        json.dump(got, open(sys.argv[1], 'w'))\n")
    out = tmp_path / "f.json"
    res = launch.run(5, [sys.executable, "-c", code, str(out)], timeout=60, capture=True,
                     env=dict(os.environ, PYFW_FARM_NODE_SIZE="2"))
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text()) == list(range(300, 0, -1))
