"""The start-up timer slack: given to a job whose ranks far outnumber the cores, taken back
by each rank once MPI is up (pyfw.timerslack)."""
import os
import sys

import pytest

from pyfw import launch, timerslack

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="timer slack is a Linux prctl")


def test_the_slack_is_given_from_sixteen_ranks_a_core(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert timerslack.wanted(31, {}) == 0
    assert timerslack.wanted(32, {}) == timerslack.START_SLACK_NS
    assert timerslack.wanted(256, {"PYFW_START_TIMER_SLACK_NS": "0"}) == 0
    assert timerslack.wanted(4, {"PYFW_START_TIMER_SLACK_NS": "2000000"}) == 2_000_000
    with pytest.raises(ValueError, match="PYFW_START_TIMER_SLACK_NS"):
        timerslack.wanted(4, {"PYFW_START_TIMER_SLACK_NS": "5ms"})


@linux_only
def test_the_launcher_keeps_its_own_slack_and_tells_the_job_what_it_was():
    before = timerslack.current()
    env = {"PYFW_START_TIMER_SLACK_NS": "3000000"}
    with timerslack.raised_for_start(2, env):
        assert timerslack.current() == 3_000_000
    assert timerslack.current() == before
    assert env[timerslack.RESTORE_ENV] == str(before)
    env = {}
    with timerslack.raised_for_start(2, env):   # 2 ranks: not oversubscribed enough
        assert timerslack.current() == before
    assert timerslack.RESTORE_ENV not in env


# Each rank reads its slack at start, after MPI_Init without pyfw, after importing pyfw (its
# communication layer), and in a thread it starts then. (Importing pyfw initializes MPI.)
RANK = """
import ctypes, threading
libc = ctypes.CDLL(None)
slack = lambda: libc.prctl(30, 0, 0, 0, 0)   # PR_GET_TIMERSLACK
at_start = slack()
from mpi4py import MPI
after_init = slack()
import pyfw
after_pyfw = slack()
seen = []
t = threading.Thread(target=lambda: seen.append(slack()))
t.start(); t.join()
print("SLACK", MPI.COMM_WORLD.rank, at_start, after_init, after_pyfw, seen[0], flush=True)
"""


@linux_only
@pytest.mark.launch
def test_a_job_starts_with_the_slack_and_every_rank_puts_it_back():
    mine = timerslack.current()
    env = dict(os.environ, PYFW_START_TIMER_SLACK_NS="3000000")
    res = launch.run(2, [sys.executable, "-c", RANK], timeout=120, capture=True, env=env)
    assert res.returncode == 0, res.stderr
    rows = sorted(line.split()[1:] for line in res.stdout.splitlines()
                  if line.startswith("SLACK"))
    assert [r[0] for r in rows] == ["0", "1"], res.stdout
    for _, at_start, after_init, after_pyfw, in_thread in rows:
        assert int(at_start) == int(after_init) == 3_000_000   # inherited through mpiexec
        assert int(after_pyfw) == int(in_thread) == mine       # back to the launcher's
    assert timerslack.current() == mine
