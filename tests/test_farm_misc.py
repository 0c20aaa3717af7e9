"""Journal files, progress line, summary table, launcher flags, workers' priority."""
import io
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from pyfw import launch
from pyfw.farm.journal import Journal
from pyfw.farm.progress import Progress, format_summary


def test_journal_records_survive_reopen_and_merge(tmp_path):
    path = str(tmp_path / "run.h5")
    j = Journal(path, interval=0.0)
    assert j.next_round() == 0
    j.record("round-0", (range(0, 3), ["a", {"b": 1}, np.arange(3)], None, 1))
    j.record("round-0", ([5, 7], [5.5, None], {1: RuntimeError("x")}, 2))  # errors not kept
    j.record("round-1", (range(0, 2), [10, 11], None, 1))
    assert len(j.segments) == 3                  # one atomic segment per flush
    open(j.segdir + "/seg-000099.h5.tmp-123", "w").write("half-written")
    again = Journal(path)                        # a restart before close: segments only
    got = again.completed("round-0")
    assert sorted(got) == [0, 1, 2, 5] and got[1] == {"b": 1} and got[5] == 5.5
    assert list(got[2]) == [0, 1, 2]
    assert not os.path.exists(j.segdir + "/seg-000099.h5.tmp-123")   # leftovers removed
    again.close()                                # merges into run.h5, removes segments
    assert not os.path.exists(j.segdir)
    with h5py.File(path, "r") as f:              # readable without pyfw
        assert list(f["rounds/round-1/index"][()]) == [0, 1]
    assert Journal(path).completed("round-1") == {0: 10, 1: 11}


def test_progress_line_and_eta():
    p = Progress("round-0", 200, enabled=False, stream=io.StringIO())
    p.t0 -= 10.0
    p.update(50)
    line = p.line(p.t0 + 10.0)
    assert "50/200" in line and "25.0%" in line and "5 tasks/s" in line and "ETA 0:30" in line
    q = Progress("stream", None, enabled=True, stream=_Terminal())   # no total: a count
    q.update(3)
    q.close()
    assert "3 tasks" in q.stream.getvalue()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_summary_table_lists_every_worker():
    stats = {"tasks": 3, "elapsed_s": 1.0, "duplicates": 0, "quarantined": [],
             "workers": [{"rank": r, "host": "h", "alive": r != 2, "tasks": 1, "chunks": 1,
                          "busy_s": 0.5, "idle_s": 0.1, "bytes_to": 10, "bytes_from": 20}
                         for r in (1, 2, 3)]}
    text = format_summary(stats)
    assert text.count("\n") == 4 and "False" in text


def test_launcher_flags(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    argv = launch.mpiexec_argv(4, ["python", "x.py"], ft=True)
    assert "--allow-run-as-root" in argv and "--oversubscribe" in argv
    assert argv[argv.index("--with-ft") + 1] == "ulfm" and argv[-2:] == ["python", "x.py"]
    env = launch.mpi_env({}, nprocs=4)
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_MCA_mpi_yield_when_idle"] == "1"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    argv = launch.mpiexec_argv(2, ["python"])
    assert "--allow-run-as-root" not in argv and "--oversubscribe" not in argv


def _fake_mpiexec(tmp_path, failures, message):
    """An 'mpiexec' that fails at start-up ``failures`` times with ``message``, then runs
    its command; it counts its calls in a file."""
    count = tmp_path / "calls"
    script = tmp_path / "mpiexec"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}\n"
        f"if [ $n -le {failures} ]; then echo \"{message}\" >&2; exit 213; fi\n"
        "while [ \"$1\" != \"--\" ]; do shift; done; shift; exec \"$@\"\n")
    script.chmod(0o755)
    return str(script), count


def test_launcher_retries_a_start_up_fault_only(tmp_path, monkeypatch):
    fake, count = _fake_mpiexec(tmp_path, 1, launch.STARTUP_FAILURES[0])
    monkeypatch.setenv("PYFW_MPIEXEC", fake)
    # the fake drops mpiexec's own flags up to a "--" we put before the command
    res = launch.run(2, ["--", "sh", "-c", "echo ran"], timeout=30, capture=True)
    assert res.returncode == 0 and res.stdout.strip() == "ran" and count.read_text() == "2\n"

    fake, count = _fake_mpiexec(_fresh(tmp_path, "b"), 5, launch.STARTUP_FAILURES[0])
    monkeypatch.setenv("PYFW_MPIEXEC", fake)
    res = launch.run(2, ["--", "true"], timeout=30, capture=True, launch_retries=2)
    assert res.returncode == 213 and count.read_text() == "3\n"     # gives up after 2 retries

    fake, count = _fake_mpiexec(_fresh(tmp_path, "c"), 1, "some rank failed")
    monkeypatch.setenv("PYFW_MPIEXEC", fake)
    res = launch.run(2, ["--", "true"], timeout=30)                  # a real failure: no retry
    assert res.returncode == 213 and count.read_text() == "1\n"


def _fresh(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    return d


YIELD_PROBE = """
import os
from pyfw.farm.worker import yield_to_schedulers
before = os.nice(0)
with yield_to_schedulers():
    inside = os.nice(0)
print(before, inside, os.nice(0))
"""


@pytest.mark.parametrize("local, knob, lowered", [
    ("100000", None, True),      # far more ranks than cores: the worker yields
    ("1", None, False),          # a core each: nothing changes
    ("100000", "0", False),      # PYFW_WORKER_NICE=0 turns it off
    (None, None, False),         # no launcher information: nothing changes
])
def test_workers_yield_to_the_master_only_on_an_oversubscribed_node(local, knob, lowered):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMPI_COMM_WORLD_LOCAL_SIZE", "PYFW_WORKER_NICE")}
    if local is not None:
        env["OMPI_COMM_WORLD_LOCAL_SIZE"] = local
    if knob is not None:
        env["PYFW_WORKER_NICE"] = knob
    out = subprocess.run([sys.executable, "-c", YIELD_PROBE], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    before, inside, after = map(int, out)
    from pyfw.farm.worker import WORKER_NICE
    assert inside == min(19, before + WORKER_NICE) if lowered else inside == before
    if os.geteuid() == 0:        # only a privileged process may raise its priority back
        assert after == before


def test_idle_workers_look_for_work_less_often_on_an_oversubscribed_node(monkeypatch):
    from pyfw.farm import worker
    monkeypatch.setattr(worker.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    alone = worker.idle_backoff()                      # no launcher information: as always
    assert alone.tmax == worker.IDLE_SLEEP_MAX and alone.spin > 0
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")     # a core per rank
    assert worker.idle_backoff().tmax == worker.IDLE_SLEEP_MAX
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8")     # 4 ranks a core: 4x longer
    shared = worker.idle_backoff()
    assert shared.tmax == pytest.approx(4 * worker.IDLE_SLEEP_MAX) and shared.spin == 0
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "256")   # capped
    assert worker.idle_backoff().tmax == worker.IDLE_SLEEP_MAX_SHARED
    # the sleeps still start short: work that comes soon is taken up soon
    slept = []
    monkeypatch.setattr("time.sleep", slept.append)
    b = worker.idle_backoff()
    for _ in range(20):
        b.sleep()
    assert slept[0] < 1e-5 and max(slept) == worker.IDLE_SLEEP_MAX_SHARED
