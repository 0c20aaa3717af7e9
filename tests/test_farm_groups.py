"""Tasks that run on several ranks (``Farm.map(..., ranks=k)``): the group rule checked on
its own (serial), and real jobs (launched) for the contract, backfill, an exception on one
member, a member's death under ULFM, and the journal."""
import json
import os
import sys
import time

import pytest
from testbed_util import bed_up

from pyfw import Farm, TaskError, launch
from pyfw.farm.core import EngineCore, WorkerRecord
from pyfw.farm.groups import Groups, pick
from pyfw.farm.policies import make_policy
from pyfw.farm.rounds import RoundState

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "group_job.py")


def _workers(hosts):
    out = []
    for r, h in enumerate(hosts, start=1):
        w = WorkerRecord(r, h)
        w.hello = True
        out.append(w)
    return out


def test_pick_keeps_a_group_on_one_node_and_fits_it_tightly():
    ws = _workers(["a", "a", "a", "b", "b", "c"])
    assert [w.rank for w in pick(2, ws)] == [4, 5]          # b fits 2 exactly; a keeps 3
    assert [w.rank for w in pick(3, ws)] == [1, 2, 3]
    assert {w.host for w in pick(4, ws)} == {"a", "b"}      # spread over the biggest nodes
    assert pick(7, ws) is None


def _core(hosts):
    core = EngineCore(0, 0)
    for w in _workers(hosts):
        core.workers[w.rank] = w
    return core


def _round(items, ranks):
    return RoundState(0, items, lambda c, x: x, False, len(items), make_policy("ss"), "r",
                      ranks=ranks)


def test_the_head_reserves_and_narrow_tasks_backfill_the_rest():
    core = _core(["a"] * 4)
    sent, posted = [], []
    groups = Groups(core, lambda msg, r: posted.append((msg[0], r)),
                    lambda g, rnd, ids, items, now: sent.append((g.members, list(ids))))
    busy = core.workers[1]
    busy.inflight.append(object())                 # rank 1 still works on a chunk
    rnd = _round(list(range(3)), lambda x: 4 if x == 0 else 1)
    assert rnd.has_pending() and [k for _, _, k in rnd.wide] == [4]
    assert not groups.dispatch([rnd], 0.0)        # 4 ranks wanted, 3 idle: it waits ...
    assert groups.reserved == {1, 2, 3, 4}        # ... holding all four
    assert all(groups.busy(w) for w in core.workers.values())   # none takes narrow work
    busy.inflight.clear()
    assert groups.dispatch([rnd], 0.0)            # once rank 1 is free it starts
    assert sent == [([1, 2, 3, 4], [0])] and not groups.reserved
    assert [p for p in posted if p[0] == "group"] == [("group", r) for r in (1, 2, 3, 4)]


def test_a_narrower_wide_task_backfills_while_the_head_waits():
    core = _core(["a"] * 4)
    sent = []
    groups = Groups(core, lambda msg, r: None,
                    lambda g, rnd, ids, items, now: sent.append((len(g.members), list(ids))))
    core.workers[1].inflight.append(object())
    core.workers[2].inflight.append(object())
    rnd = _round([0, 1], lambda x: 4 if x == 0 else 2)
    # the 4-wide head cannot start; the 2-wide task fits in ranks 3, 4 ... which the head
    # has reserved (it reserves idle ones first), so it waits too: no starvation of the head
    groups.dispatch([rnd], 0.0)
    assert sent == [] and groups.reserved == {1, 2, 3, 4}
    # six workers, five busy: the head reserves the idle one and the three busy ones with
    # the least in flight; the two others, once free, run the 2-wide task meanwhile
    core2 = _core(["a"] * 6)
    groups2 = Groups(core2, lambda msg, r: None,
                     lambda g, rnd, ids, items, now: sent.append((g.members, list(ids))))
    for r, n in ((1, 1), (2, 1), (3, 1), (4, 3), (5, 3)):
        core2.workers[r].inflight.extend(object() for _ in range(n))
    rnd2 = _round([0, 1], lambda x: 4 if x == 0 else 2)
    groups2.dispatch([rnd2], 0.0)
    assert sent == [] and groups2.reserved == {1, 2, 3, 6}
    for r in (4, 5):
        core2.workers[r].inflight.clear()
    groups2.dispatch([rnd2], 0.0)
    assert sent == [([4, 5], [1])] and groups2.reserved == {1, 2, 3, 6}


def test_a_task_wider_than_the_farm_fails_at_once():
    core = _core(["a"] * 2)
    groups = Groups(core, lambda msg, r: None, lambda *a: None)
    rnd = _round([0], 3)
    groups.dispatch([rnd], 0.0)
    ids, values, errors, _ = rnd.outputs.popleft()
    assert list(ids) == [0] and "asks for 3 ranks" in str(errors[0])


def test_serial_farm_runs_one_rank_tasks_with_a_communicator_and_refuses_wider():
    def with_comm(comm, x):
        return comm.Get_size() * x
    with Farm(None, on_error="collect") as farm:
        assert list(farm.map(with_comm, range(4), ranks=1)) == [0, 1, 2, 3]
        got = list(farm.map(with_comm, range(2), ranks=2))
    assert all(isinstance(g, TaskError) and "asks for 2 ranks" in str(g) for g in got)


def _job(tmp_path, mode, n=5, ft=False, bed=None, **env_extra):
    out = tmp_path / f"{mode}.json"
    env = dict(os.environ, PYFW_FINALIZE_GRACE="2",
               PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)]), **env_extra)
    extra = None
    if bed is not None:
        from pyfw.testbed.agent import launch_options
        from pyfw.testbed.netns import job_env
        env, extra = job_env(bed, env), launch_options(bed)
    t0 = time.time()
    res = launch.run(n, [sys.executable, JOB, mode, str(out)], ft=ft, timeout=90,
                     capture=True, env=env, extra=extra)
    assert not res.timed_out, res.stdout + res.stderr
    return out, res, time.time() - t0


def _results(out, res):
    assert out.exists(), f"no results (exit {res.returncode}):\n{res.stdout}\n{res.stderr}"
    return json.loads(out.read_text())


@pytest.mark.launch
def test_groups_are_sized_disjoint_and_compute_with_their_communicator(tmp_path):
    got = _results(*_job(tmp_path, "contract")[:2])
    for rec in got["fixed"]:
        assert rec["size"] == 2 and len(set(rec["ranks"])) == 2 and 0 not in rec["ranks"]
        assert rec["sum"] == 20 * rec["x"] + 1            # the allreduce over the group
    assert [r["x"] for r in got["fixed"]] == list(range(12))
    for rec in got["mixed"]:
        k = 1 + rec["x"] % 3
        assert rec["size"] == k and len(set(rec["ranks"])) == k
        assert rec["sum"] == k * 10 * rec["x"] + k * (k - 1) // 2
    assert got["tasks"] == [x * (1 + x % 2) for x in range(8)]
    assert got["after"] == [x * x for x in range(10)]
    assert got["stats"]["tasks"] == 42


@pytest.mark.launch
def test_single_rank_tasks_backfill_while_the_wide_task_gathers_its_ranks(tmp_path):
    got = _results(*_job(tmp_path, "backfill")[:2])
    runs = got["runs"]
    assert [r["x"] for r in runs] == list(range(30))       # every task, once, in order
    wide = runs[2]
    assert wide["size"] == got["width"] == 4
    narrow = [r for r in runs if r["size"] == 1]
    assert any(r["t0"] < wide["t0"] for r in narrow if r["x"] > 2)   # later ones ran first
    assert any(r["t0"] > wide["t1"] - 0.05 for r in narrow)          # ... and after it


@pytest.mark.launch
@pytest.mark.parametrize("ft", [True, False], ids=["ft", "no-ft"])
def test_an_exception_on_one_member_fails_the_task_and_releases_the_group(tmp_path, ft):
    # without ULFM the master waits STUCK_GRACE (20 s) for the stuck member: 3 s here
    out, res, took = _job(tmp_path, "raise", ft=ft, STUCK_GRACE="3")
    if ft:   # the other member, in a barrier, is released (revoke); the farm goes on
        got = _results(out, res)
        assert got["values"][:3] == [0, 1, 2] and got["values"][4:] == [4, 5, 6, 7]
        name, cause, text = got["values"][3]
        assert name == "TaskError" and cause == "KeyError" and "bad item 3" in text
        assert got["after"] == [x * x for x in range(6)]
    else:    # nothing can release it: the job ends with the task's error, never hangs
        assert res.returncode != 0 and not out.exists()
        assert "bad item 3" in res.stderr and "cannot be released" in res.stderr
        assert took < 40


@pytest.mark.launch
def test_a_member_killed_mid_task_loses_nothing_and_duplicates_nothing(tmp_path):
    got = _results(*_job(tmp_path, "kill", ft=True)[:2])
    assert got["values"] == [x * x for x in range(10)]
    assert got["after"] == [x * x for x in range(6)]
    assert got["alive"] == 3


@pytest.mark.launch
def test_a_member_dying_before_it_joins_its_group_leaves_no_rank_waiting(tmp_path):
    """Rank 2 dies on its way into the group's communicator call; its partner, rank 1,
    already in that call (which MPI can neither cancel nor time out), sees the death and
    leaves like a killed rank instead of waiting for ever; meanwhile the master gives it
    no new group (whose members would be lost with it). The job ends, every task once,
    the last ones on the two ranks left."""
    out, res, _ = _job(tmp_path, "joinkill", n=5, ft=True)    # asserts it did not time out
    got = _results(out, res)
    assert [v["x"] for v in got["values"] + got["more"]] == list(range(30))
    for v in got["values"] + got["more"]:
        assert v["size"] == 2 and v["sum"] == 20 * v["x"] + 1
        assert not {1, 2} & set(v["ranks"]), v
    assert got["after"] == [x * x for x in range(6)]


def _check_killmix(got, workers):
    # every task once, from a whole group of its width: 10 allreduces of x over k ranks
    assert got["values"] == [[x, 1 + x % 3, 10 * x * (1 + x % 3)] for x in range(16)]
    assert got["after"] == [x * x for x in range(6)]
    assert got["alive"] == workers - 2


@pytest.mark.launch
def test_members_killed_inside_collectives_of_mixed_widths_lose_nothing(tmp_path):
    got = _results(*_job(tmp_path, "killmix", n=7, ft=True)[:2])
    _check_killmix(got, 6)


@pytest.mark.launch
def test_two_level_farms_run_multi_rank_tasks_behind_their_sub_masters_too(tmp_path):
    # blocks of 3 ranks: the master's (direct workers 1, 2) and two sub-masters' (3 with
    # 4, 5; 6 with 7, 8): a pair fits each block
    got = _results(*_job(tmp_path, "nodemode", n=9, PYFW_FARM_NODE_SIZE="3")[:2])
    blocks = set()
    for x, rec in enumerate(got["values"]):
        k = 1 + x % 2
        assert rec["x"] == x and rec["size"] == k and rec["sum"] == k * 10 * x + k * (k - 1) // 2
        assert len({r // 3 for r in rec["ranks"]}) == 1, rec      # inside one block
        if k == 2:
            assert rec["ranks"][0] % 3 != 0, rec    # node workers, never a sub-master
            blocks.add(rec["ranks"][0] // 3)
    assert blocks - {0}, blocks                    # not only the master's direct workers


@pytest.mark.launch
def test_two_level_farms_run_a_multi_rank_task_again_when_a_node_worker_dies(tmp_path):
    got = _results(*_job(tmp_path, "nodemode", n=9, ft=True, PYFW_FARM_NODE_SIZE="3",
                         KILL="1")[:2])
    assert got["values"] == [x * x for x in range(24)]
    assert got["after"] == [x * x for x in range(6)]


@pytest.mark.launch
def test_resume_from_the_journal_skips_finished_multi_rank_tasks(tmp_path):
    out, res, _ = _job(tmp_path, "journal")
    first = _results(out, res)
    assert first["values"][7] == "error" and first["stats"]["tasks"] == 12
    (tmp_path / "second-run").touch()
    out, res, _ = _job(tmp_path, "journal")
    second = _results(out, res)
    assert second["values"][:7] == first["values"][:7]     # read back from the journal
    assert second["values"][7][:2] == [7, 2]                # the failed one ran again


@pytest.mark.launch
def test_futures_submit_and_map_take_ranks(tmp_path):
    out = tmp_path / "futures.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)]))
    res = launch.run(5, [sys.executable, "-m", "pyfw.futures",
                         os.path.join(HERE, "group_futures_job.py"), str(out)],
                     timeout=90, capture=True, env=env)
    got = _results(out, res)
    assert [s[0] for s in got["submit"]] == [0, 10, 20, 30]      # kwargs reach fn
    assert all(s[1] == 2 and len(set(s[2])) == 2 for s in got["submit"])
    assert got["plain"] == 1024
    assert [m[0] for m in got["map"]] == list(range(6))
    assert all(m[1] == 3 and len(set(m[2])) == 3 and 0 not in m[2] for m in got["map"])


# ---------------------------------------------------------------- the test bed


@pytest.fixture(scope="module")
def bed():
    """Nodes A, B, C with two ranks each: the master and one worker on A."""
    yield from bed_up("gr", nodes=3, slots=2)


@pytest.fixture(scope="module")
def bed3():
    """Nodes A, B, C with three ranks each (groups of 3 fit in B and C, not beside the
    master on A)."""
    yield from bed_up("gs", nodes=3, slots=3)


@pytest.mark.launch
def test_test_bed_groups_stay_inside_a_node(bed, tmp_path):
    got = _results(*_job(tmp_path, "nodes", n=6, bed=bed)[:2])
    assert [r["x"] for r in got["fixed"]] == list(range(12))
    for rec in got["fixed"]:
        assert len(set(rec["hosts"])) == 1, rec        # B's pair or C's, never A's one + B
        assert rec["sum"] == 20 * rec["x"] + 1


@pytest.mark.launch
def test_test_bed_a_member_killed_mid_task_loses_nothing(bed, tmp_path):
    got = _results(*_job(tmp_path, "kill", n=6, ft=True, bed=bed)[:2])
    assert got["values"] == [x * x for x in range(10)]
    assert got["after"] == [x * x for x in range(6)]
    assert got["alive"] == 4


@pytest.mark.launch
def test_test_bed_members_killed_in_collectives_across_nodes_lose_nothing(bed3, tmp_path):
    got = _results(*_job(tmp_path, "killmix", n=9, ft=True, bed=bed3)[:2])
    _check_killmix(got, 8)
