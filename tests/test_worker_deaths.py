"""Every way a worker can die, under ``pyfw-run --ft`` and without it, on one node and on the
multi-node test bed (docs/farm.md, "When a worker dies").

Each job (``worker_death_job.py``) farms 40 tasks of 10 ms over 4 ranks; the 6th task that
rank 2 runs ends the rank: ``os._exit``, ``sys.exit`` or ``KeyboardInterrupt`` inside the
task, SIGKILL, SIGTERM, a segfault, C ``exit()``, or a fault of the worker loop itself. Under ``--ft`` the rank must be seen
dead, every result must come back exactly once and the job must end at once with status 0;
without it the job must end at once, non-zero, with stderr naming rank 2 and how it died.
The test-bed tests skip, with the reason printed, where network namespaces are unavailable.
"""
import json
import os
import socket
import sys
import time

import pytest
from testbed_util import bed_up

from pyfw import launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JOB = os.path.join(HERE, "worker_death_job.py")
TIMEOUT = 60       # a hang is caught long before it; a good job ends in a few seconds
PROMPT = 30        # "at once": well before the timeout even on a loaded machine

#: kind -> what stderr says of rank 2 (the guard's line, or Open MPI's for a signal)
LEAVES = {
    "os_exit": "left the farm: os._exit(9)",
    "sys_exit": "left the farm: SystemExit(3) in task Work(",
    "keyboard_interrupt": "left the farm: KeyboardInterrupt() in task Work(",
    "c_exit": "left the farm: exit(3) from native code",
    "loop_fault": "left the farm: its worker loop failed while serving: RuntimeError: "
                  "the worker loop's own fault",
}
SIGNALS = {"sigkill": 9, "sigterm": 15, "segfault": 11}
KINDS = list(LEAVES) + list(SIGNALS)

pytestmark = pytest.mark.launch


def _death_job(tmp_path, kind, ft, extra=None, env=None, nprocs=4):
    """Run the job once; (summary or None, CompletedProcess, seconds)."""
    out = tmp_path / f"{kind}-{'ft' if ft else 'noft'}.json"
    env = dict(os.environ if env is None else env, PYFW_FINALIZE_GRACE="5")
    t0 = time.monotonic()
    res = launch.run(nprocs, [sys.executable, JOB, kind, str(out)], ft=ft, timeout=TIMEOUT,
                     extra=extra, env=env, capture=True, cwd=ROOT)
    took = time.monotonic() - t0
    print(f"{kind} ft={ft}: exit {res.returncode} after {took:.1f} s")
    assert not res.timed_out, f"{kind}: job hung ({took:.0f} s):\n{res.stdout}\n{res.stderr}"
    summary = json.loads(out.read_text()) if out.exists() else None
    return summary, res, took


def _says_how_rank_2_died(stderr, kind, host):
    if kind in LEAVES:
        return f"pyfw: rank 2 on {host} {LEAVES[kind]}" in stderr
    flat = " ".join(stderr.split())     # Open MPI wraps its message
    return "process rank 2 " in flat and f"signal {SIGNALS[kind]} " in flat


def _check_survived(summary, res, took, kind, host):
    detail = f"{kind}:\n{res.stdout}\n{res.stderr}"
    assert summary is not None, f"no results: {detail}"
    assert sorted(summary["indices"]) == list(range(40)), detail     # each exactly once
    assert summary["alive"] == [True, False, True], detail           # rank 2 seen dead
    assert 2 in summary["ranks"], detail     # it did work before it died
    assert res.returncode == 0, detail
    assert took < PROMPT, detail
    if kind in LEAVES:
        assert _says_how_rank_2_died(res.stderr, kind, host), detail


def _check_ended(res, took, kind, host):
    detail = f"{kind}:\n{res.stdout}\n{res.stderr}"
    assert res.returncode != 0, detail
    assert took < PROMPT, detail
    assert _says_how_rank_2_died(res.stderr, kind, host), detail


@pytest.mark.parametrize("kind", KINDS)
def test_under_ft_a_dying_worker_is_seen_dead_and_loses_nothing(tmp_path, kind):
    summary, res, took = _death_job(tmp_path, kind, ft=True)
    _check_survived(summary, res, took, kind, socket.gethostname())


@pytest.mark.parametrize("kind", KINDS)
def test_without_ft_a_dying_worker_ends_the_job_at_once_saying_how(tmp_path, kind):
    _, res, took = _death_job(tmp_path, kind, ft=False)
    _check_ended(res, took, kind, socket.gethostname())


# ---------------------------------------------------------------- the test bed
@pytest.fixture(scope="module")
def bed():
    """Nodes A and B with two ranks each: rank 2, the one that dies, is B's first."""
    yield from bed_up("wd", nodes=2, slots=2)


def _bed_job(tmp_path, info, kind, ft):
    from pyfw.testbed.agent import launch_options
    from pyfw.testbed.netns import job_env
    env = job_env(info, dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE])))
    return _death_job(tmp_path, kind, ft, extra=launch_options(info), env=env)


def _node_of_rank_2(info):
    return info["nodes"][1]["name"]


@pytest.mark.parametrize("kind", ["os_exit", "sys_exit", "c_exit", "segfault"])
def test_test_bed_under_ft_a_dying_worker_is_seen_dead_and_loses_nothing(bed, tmp_path,
                                                                         kind):
    summary, res, took = _bed_job(tmp_path, bed, kind, ft=True)
    _check_survived(summary, res, took, kind, _node_of_rank_2(bed))


@pytest.mark.parametrize("kind", ["os_exit", "keyboard_interrupt"])
def test_test_bed_without_ft_a_dying_worker_ends_the_job_at_once(bed, tmp_path, kind):
    _, res, took = _bed_job(tmp_path, bed, kind, ft=False)
    _check_ended(res, took, kind, _node_of_rank_2(bed))
