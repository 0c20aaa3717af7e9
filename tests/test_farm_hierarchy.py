"""The two-level farm (``Farm(hierarchy="node")``): the flat farm's promises through a
sub-master, and the failure of a node worker and of a sub-master under ULFM.

On one machine the node split is forced with ``PYFW_FARM_NODE_SIZE`` (blocks of consecutive
ranks); on the test bed it is the real ``COMM_TYPE_SHARED`` split.

A sub-master killed while its node's workers are inside a chunk (issue 36): the master gets
every result once, no survivor raises, and the node's workers rejoin the master as direct
workers. A task (or the setup) raising ``SystemExit``/``KeyboardInterrupt`` on a node worker
or on a sub-master is that rank leaving the farm (docs/farm.md, "When a worker dies").
"""
import json
import math
import os
import re
import socket
import sys

import pytest
from testbed_util import bed_up
from mpi4py import MPI

from pyfw import Farm, launch
from pyfw.errors import ConfigurationError
from pyfw.farm import auto
from pyfw.farm.hierarchy import AUTO_MIN_WORKERS, Layout, resolve

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JOB = os.path.join(HERE, "hier_job.py")


def test_layout_roles():
    # nodes {0,1} {2,3} {4}: master 0, direct workers 1 and 4, sub-master 2 over worker 3
    lay = Layout([0, 0, 2, 2, 4], master=0)
    assert [lay.role(r) for r in range(5)] == ["master", "worker", "submaster",
                                               "node-worker", "worker"]
    assert lay.top_workers == [1, 2, 4] and lay.submasters == {2: 2}
    big = Layout([0] * 4 + [4] * 4 + [8] * 4, master=5)   # master on the middle node
    assert big.top_workers == [0, 4, 6, 7, 8] and big.role(4) == "worker"


def test_top_widths_count_each_sub_masters_node():
    lay = Layout([0, 0, 2, 2, 2, 5], master=0)      # nodes {0,1} {2,3,4} {5}
    assert lay.top_widths() == {1: 1, 2: 3, 5: 1}


def test_a_sub_master_is_sized_as_the_ranks_it_stands_for():
    # a node of 8 ranks beside 7 direct workers: 15 ranks in all. First chunks: one task per
    # rank (8 to the node); once measured (the node 8x as fast per task), factoring gives
    # the node 8 direct workers' share, and a direct worker R / 2P with P = 15, not 8
    from pyfw.farm.policies import WorkerStats, make_policy
    direct = [WorkerStats(r) for r in range(1, 8)]
    node = WorkerStats(8, width=8)
    everyone = direct + [node]
    for name, first in (("adaptive", 8), ("af", 8), ("ss", 8), ("static", 8 * 20)):
        pol = make_policy(name)
        pol.start(300, sum(w.width for w in everyone))
        assert pol.chunk(node, 300, everyone, task_time=None) == first, name
        assert pol.chunk(direct[0], 300, everyone, task_time=None) == first // 8, name
    for w in direct:
        w.record(1, 0.1, 0.01, 0.1, 0.0)
    node.record(8, 0.1, 0.01, 0.1, 0.0)               # 8 tasks in 0.1 s: 12.5 ms per task
    pol = make_policy("adaptive")
    pol.start(300, 15)
    assert pol.chunk(direct[0], 300, everyone, task_time=0.1) == math.ceil(300 / 30)
    assert pol.chunk(node, 300, everyone, task_time=0.0125) == math.ceil(8 * 300 / 30)


def test_auto_rule_unmeasured_goes_by_worker_count():
    two_nodes = [0] * 200 + [200] * 200
    assert resolve("auto", two_nodes, 0)[0] == "node"
    assert resolve("auto", [0] * 400, 0)[0] == "flat"                    # one node
    assert resolve("auto", [0] * 8 + [8] * 8, 0)[0] == "flat"             # few workers
    assert resolve("node", [0] * 8, 0) == ("node", "asked for")
    assert AUTO_MIN_WORKERS <= 400
    with pytest.raises(ConfigurationError):
        resolve("tree", [0, 0], 0)


def test_auto_rule_follows_the_measured_flat_master_load():
    # busy 0.3 with 64 workers: c*W/t scales with W, 0.7 is reached at about 150 workers
    rec = {"workers": 64, "busy": 0.3}
    assert auto.predicted_busy(rec, 128) == pytest.approx(0.6)
    assert resolve("auto", [0] * 65 + [65] * 64, 0, rec)[0] == "flat"     # 128 workers
    mode, why = resolve("auto", [0] * 100 + [100] * 100, 0, rec)           # 199 workers
    assert mode == "node" and "0.30" in why and "0.93" in why
    # a master measured nearly idle keeps 400 workers flat, against the count rule
    idle = {"workers": 200, "busy": 0.05}
    assert resolve("auto", [0] * 200 + [200] * 201, 0, idle)[0] == "flat"
    assert resolve("auto", [0] * 400, 0, {"workers": 10, "busy": 0.9})[0] == "flat"  # 1 node


def test_auto_records_a_flat_master_per_program(tmp_path):
    path = str(tmp_path / "sub" / "auto.json")
    assert auto.lookup("prog", path) is None                              # no file yet
    load = {"busy": 0.42, "cpu_per_result_us": 7.5, "results": 1000, "wall_s": 2.0}
    assert auto.remember(load, 63, "prog", path)
    assert auto.remember(dict(load, busy=0.1), 15, "other", path)
    rec = auto.lookup("prog", path)
    assert rec["workers"] == 63 and rec["busy"] == 0.42 and rec["results_per_s"] == 500.0
    open(path, "w").write("{not json")                                    # a damaged file
    assert auto.lookup("prog", path) is None
    assert not auto.remember(load, 63, "prog", str(tmp_path))            # a directory: no


def test_bad_hierarchy_is_refused_and_serial_farm_stays_flat():
    with pytest.raises(ConfigurationError, match="hierarchy"):
        Farm(MPI.COMM_SELF, hierarchy="tree")
    with Farm(MPI.COMM_SELF, hierarchy="node") as farm:
        assert farm.hierarchy == "flat" and list(farm.map(abs, [-1, -2])) == [1, 2]


def test_sub_master_reply_lists_ids_ascending():
    # the node's pieces finish in any order; the master's in-order delivery reads a reply
    # whose first and last ids fit as one consecutive block as that block, in order
    from pyfw.farm.hierarchy import SubMaster, _Forward
    # (and its stats give the node's time per task, 10 ms here, not the 1 s since t_got)
    sent = []
    sub = SubMaster.__new__(SubMaster)
    sub.reply = lambda cid, rid, ids, values, errors, stats, status: sent.append(
        (ids, values, stats))
    sub._node_task_time = lambda rnd: 0.01
    f = _Forward(7, 1, range(100, 112), 0.0, None)
    for piece in ([0, 1, 2], [6, 7, 8], [3, 4, 5], [9, 10, 11]):   # first and last in place
        f.pending += [(pos, pos * pos, None) for pos in piece]
    sub._send(f, "ok", 1.0)
    (ids, values, stats), = sent
    assert ids == list(range(100, 112)) and values == [p * p for p in range(12)]
    assert stats.ntasks == 12 and stats.busy_s == pytest.approx(0.12)


def test_a_node_s_time_per_task_sums_its_ranks_rates():
    from types import SimpleNamespace as NS

    from pyfw.farm.hierarchy import SubMaster
    sub = SubMaster.__new__(SubMaster)
    worker = lambda mean, alive=True: NS(alive=alive, stats=NS(mean_recent=mean))
    sub.engine = NS(workers={1: worker(0.1), 2: worker(0.05), 3: worker(None),
                             4: worker(0.01, alive=False)})
    sub.local_tasks, sub.local_busy = 0, 0.0
    rnd = NS(task_time={})
    assert sub._node_task_time(NS(task_time={})) == pytest.approx(1 / (10 + 20 + 1 / 0.075))
    sub.local_tasks, sub.local_busy = 4, 0.4                          # itself: 0.1 s a task
    rnd.task_time = {1: 0.2}                                          # this round's, first
    assert sub._node_task_time(rnd) == pytest.approx(1 / (5 + 20 + 1 / 0.1167 + 10), rel=1e-3)
    sub.engine.workers = {1: worker(None)}
    sub.local_tasks = 0
    assert sub._node_task_time(NS(task_time={})) is None


def test_a_sub_master_runs_a_long_piece_only_while_its_workers_have_work_past_it():
    # nothing is dispatched while a piece runs here: a piece of one 100 ms task waits until
    # every node worker has more than that queued (else they run dry behind it); pieces of
    # short tasks (about LOCAL_CHUNK_S) run whenever there is work
    from types import SimpleNamespace as NS

    from pyfw.farm.hierarchy import LOCAL_CHUNK_S, SubMaster, _Forward
    from pyfw.farm.policies import make_policy
    from pyfw.farm.rounds import RoundState
    delivered, queued = [], {"s": 0.0}
    sub = SubMaster.__new__(SubMaster)
    sub.engine = NS(all_busy_for=lambda s: queued["s"] >= s, pipeline=NS(margin=0.0),
                    deliver=lambda rnd, ids, values, errs, rank: delivered.append(list(ids)))
    sub.margin, sub.ctx, sub.local_tasks, sub.local_busy = 0.0, None, 0, 0.0
    sub.comm = NS(rank=2, size=4, host="here")
    rnd = RoundState(1, range(10), abs, False, 10, make_policy("adaptive"), "chunk-1")
    sub.forwards = {1: _Forward(1, 1, range(10), 0.0, rnd)}
    sub.local_k, sub.local_per = 1, 0.1                      # one task of 100 ms a piece
    assert not sub._work_locally() and delivered == []       # the workers hold nothing
    queued["s"] = 0.05
    assert not sub._work_locally() and delivered == []       # less than the piece
    queued["s"] = 0.2
    assert sub._work_locally() and delivered == [[0]]
    sub.local_k, sub.local_per, queued["s"] = 4, LOCAL_CHUNK_S / 4, 0.0   # short tasks
    assert sub._work_locally() and delivered[-1] == [1, 2, 3, 4]
    # a piece's length comes from this round's measured task times: the last piece's
    # (another map's 100 ms tasks) must not keep the sub-master from a map of short ones
    sub.local_k, sub.local_per = 1, 0.1
    rnd.task_time = {1: LOCAL_CHUNK_S / 10, 2: LOCAL_CHUNK_S / 10}
    assert sub._work_locally() and delivered[-1] == [5]
    sub.local_k, sub.local_per = 1, LOCAL_CHUNK_S / 10
    rnd.task_time = {1: 0.1}
    assert not sub._work_locally() and delivered[-1] == [5]


def _run(tmp_path, mode, n, env, ft=False, extra=None, args=(), timeout=90):
    """Run hier_job.py MODE on ``n`` ranks: (the master's summary, the completed launch,
    the ranks other than the master that left the farm quietly)."""
    out = tmp_path / f"{mode}.json"
    res = launch.run(n, [sys.executable, JOB, mode, str(out), *args], ft=ft, timeout=timeout,
                     capture=True, env=env, extra=extra, cwd=ROOT)
    assert not res.timed_out, res.stdout + res.stderr
    assert out.exists(), f"no results (exit {res.returncode}):\n{res.stdout}\n{res.stderr}"
    quiet = sorted(r for r in range(1, n) if (tmp_path / f"{mode}.json.rank{r}").exists())
    return json.loads(out.read_text()), res, quiet


def _env(node_size, extra_env=None):
    return dict(os.environ, PYFW_FARM_NODE_SIZE=str(node_size), PYFW_FINALIZE_GRACE="2",
                PYTHONPATH=os.pathsep.join([HERE, ROOT]), **(extra_env or {}))


def _job(tmp_path, mode, n=5, node_size=2, ft=False, extra_env=None, args=()):
    return _run(tmp_path, mode, n, _env(node_size, extra_env), ft, args=args)[0]


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
    # the summary's rows add up to the runs its header states, each rank's role said
    head, _, *table = got["summary"].split("\n")
    assert f"the rows count {got['executions']:,} task runs" in head
    assert sum(int(r.split()[4]) for r in table) == got["executions"]
    assert [r.split()[2] for r in table] == ["worker", "sub-master", "via:2", "worker"]


@pytest.mark.launch
def test_auto_measures_a_flat_master_then_goes_two_level_where_it_would_be_busy(tmp_path):
    cache = str(tmp_path / "farm_cache.json")     # (the job writes auto.json)
    env = {auto.CACHE_ENV: cache}
    got = _job(tmp_path, "auto", extra_env=env)           # 4 workers, never measured: flat
    assert got["hierarchy"] == "flat" and "not measured" in got["reason"]
    assert got["values"] == [x * x for x in range(1000)]
    rec = auto.lookup(os.path.abspath(JOB), cache)         # its master, measured at close
    assert rec["workers"] == 4 and 0 < rec["busy"] <= 2 and rec["cpu_per_result_us"] > 0
    # a record of a master busy 0.9 with one worker: 3.6 predicted with 4, so two-level
    auto.remember({"busy": 0.9, "results": 300, "wall_s": 1.0}, 1, os.path.abspath(JOB), cache)
    got = _job(tmp_path, "auto", extra_env=env)
    assert got["hierarchy"] == "node" and "3.60 predicted" in got["reason"]
    assert got["values"] == [x * x for x in range(1000)]
    assert auto.lookup(os.path.abspath(JOB), cache)["busy"] == 0.9   # node runs keep it


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


def _check_rejoined(got, res, quiet, host_of_node_workers):
    """The issue-36 reproduction's promises, from hier_job.py's ``rejoin`` summary."""
    detail = f"{json.dumps(got)}\n{res.stdout}\n{res.stderr}"
    killed, seconds, sub = got["killed"], got["seconds"], got["submaster"]
    node_workers = got["node_workers"]
    assert killed is not None, detail
    assert set(node_workers) <= set(killed["running"]), detail    # killed mid-chunk
    results = got["results"]
    ids = [tid for tid, _, _, _ in results]
    assert sorted(ids) == list(range(got["ntasks"])), detail     # every result exactly once
    assert all(value[0] == tid for tid, value, _, _ in results), detail
    assert got["alive"][str(sub)] is False, detail
    survivors = [r for r in range(1, 6) if r != sub]
    assert all(got["alive"][str(r)] for r in survivors), detail
    assert res.returncode == 0 and "FarmBroken" not in res.stderr, detail
    assert quiet == survivors, detail                # each left its `with Farm` quietly
    # ranks 4 and 5 rejoined: they computed tasks and sent them to the master themselves
    direct = {value[1] for _, value, via, at in results
              if via == value[1] and at > killed["at"]}
    assert set(node_workers) <= direct, detail
    assert re.search(rf"pyfw farm: worker rank {sub} on \S+ died; [1-9]\d* tasks? run again "
                     rf"elsewhere", res.stderr), detail     # the master says so
    assert all(got["hosts"][str(r)] == host_of_node_workers for r in node_workers), detail
    # with the two direct workers alone (1 and 2, each inside a task at the kill) the rest
    # would take ceil(left / 2) task times after the kill; with the rejoined workers less
    left = got["ntasks"] - killed["done"] - 2
    alone = math.ceil(left / 2) * seconds
    after = got["wall"] - killed["at"]
    print(f"rejoin: killed at {killed['at']:.2f} s with {killed['done']} results; "
          f"{after:.2f} s after the kill (two survivors alone: >= {alone:.2f} s); "
          f"wall {got['wall']:.2f} s")
    assert after < 0.8 * alone, detail


@pytest.mark.launch
def test_sub_master_killed_mid_chunk_node_workers_rejoin(tmp_path):
    # nodes {0,1,2} {3,4,5}: sub-master 3 dies while 4 and 5 are inside a task of 0.8 s
    got, res, quiet = _run(tmp_path, "rejoin", 6, _env(3), ft=True)
    _check_rejoined(got, res, quiet, socket.gethostname())


@pytest.mark.launch
def test_sub_master_killed_as_the_master_closes(tmp_path):
    # the master cannot know of the death when it says stop: ranks 4 and 5 still leave
    got, res, quiet = _run(tmp_path, "kill-submaster-at-end", 6, _env(3), ft=True,
                           timeout=60)
    assert got["values"] == [x * x for x in range(200)]
    assert quiet == [1, 2, 4, 5], res.stdout + res.stderr


@pytest.mark.launch
@pytest.mark.parametrize("mode, rank, kind, says", [
    ("exit-in-task", 4, "SystemExit", "SystemExit(3) in task exiting("),         # node worker
    ("exit-in-task", 3, "KeyboardInterrupt", "KeyboardInterrupt() in task exiting("),  # sub
    ("exit-in-setup", 1, "SystemExit", "SystemExit(3) in setup"),                # direct
    ("exit-in-setup", 4, "KeyboardInterrupt", "KeyboardInterrupt() in setup"),
    ("exit-in-setup", 3, "SystemExit", "SystemExit(3) in setup"),
])
def test_an_exit_in_a_task_or_setup_is_the_rank_leaving(tmp_path, mode, rank, kind, says):
    # nodes {0,1,2} {3,4,5}; the others serve on, each result arrives once, status 0
    got, res, quiet = _run(tmp_path, mode, 6, _env(3, {"HIER_EXIT_RANK": str(rank),
                                                     "HIER_EXIT_KIND": kind}), ft=True)
    detail = f"{json.dumps(got)}\n{res.stdout}\n{res.stderr}"
    assert got["values"] == list(range(60)), detail
    assert got["alive"][str(rank)] is False, detail
    assert all(alive for r, alive in got["alive"].items() if r != str(rank)), detail
    assert f"pyfw: rank {rank} on {socket.gethostname()} left the farm: {says}" in res.stderr
    assert res.returncode == 0, detail
    assert quiet == [r for r in range(1, 6) if r != rank], detail
    # a rank died, so MPI_Finalize may wait for it on every rank (open-mpi/ompi#11404): each
    # bounds it, a node worker too although its sub-master alone heard of the death
    bounded = {r: (tmp_path / f"{mode}.json.rank{r}").read_text() for r in quiet}
    assert set(bounded.values()) == {"bounded"}, bounded
    if mode == "exit-in-task" and rank != 3:   # (a sub-master's own results may die with it)
        assert rank in got["ranks"], detail    # it ran tasks before it left
    died = f"pyfw farm: worker rank {rank} "
    if rank == 4:                              # its sub-master says so, naming it
        died += "(behind sub-master 3) "
    if mode == "exit-in-task":                 # (a rank that left in setup: no host known)
        died += f"on {socket.gethostname()} "
    assert died + "died;" in res.stderr, detail
    if rank == 3:                              # 4 and 5 went on serving the master
        assert {4, 5} <= set(got["ranks"]), detail


# ---------------------------------------------------------------- the test bed


@pytest.fixture(scope="module")
def bed():
    """Nodes A and B with three ranks each: the node split is COMM_TYPE_SHARED's."""
    yield from bed_up("hr", nodes=2, slots=3)


@pytest.mark.launch
def test_test_bed_sub_master_killed_mid_chunk_node_workers_rejoin(bed, tmp_path):
    from pyfw.testbed.agent import launch_options
    from pyfw.testbed.netns import job_env
    base = dict(os.environ, PYFW_FINALIZE_GRACE="2", PYTHONPATH=os.pathsep.join([ROOT, HERE]))
    base.pop("PYFW_FARM_NODE_SIZE", None)
    got, res, quiet = _run(tmp_path, "rejoin", 6, job_env(bed, base), ft=True,
                           extra=launch_options(bed))
    assert got["submaster"] == 3 and got["node_workers"] == [4, 5]
    _check_rejoined(got, res, quiet, bed["nodes"][1]["name"])


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
