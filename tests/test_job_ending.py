"""A job that is going down ends even when Open MPI's abort hangs (pyfw.jobguard's ending
marks, pyfw.launch.run's choice of them): once the job's stderr shows that it is ending
(Open MPI's fatal-error or MPI_Abort banner; without fault tolerance, a farm rank's "left
the farm" line), mpiexec gets ``end_grace`` seconds to end it, then the job is stopped.
The stand-in jobs print the mark and then never end, as the hung abort did (every survivor
printed the banner, mpiexec waited until the test's timeout)."""
import os
import signal
import sys
import textwrap
import time

import pytest

from pyfw import launch
from pyfw.exitguard import LEFT_MARK
from pyfw.jobguard import FATAL_MARKS, supervise

pytestmark = pytest.mark.launch

GRACE = 1.0           # the ending grace and the kill grace used here
SLACK = 8.0           # a loaded machine's start-up and polling

#: prints ARGV[1] to stderr in two writes split inside it, starts a child that sleeps too,
#: then sleeps (or exits with status ARGV[2] when given; ARGV[2] "term0": exits 0 on SIGTERM)
HANGER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    text = sys.argv[1]
    if sys.argv[2:] == ["term0"]:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        del sys.argv[2]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print("pid", child.pid, flush=True)
    half = len(text) // 2
    os.write(2, ("*** " + text[:half]).encode()); time.sleep(0.3)
    os.write(2, (text[half:] + "\\n").encode())
    if len(sys.argv) > 2:
        sys.exit(int(sys.argv[2]))
    time.sleep(300)
""")


def _job(tmp_path, text, *extra, marks=FATAL_MARKS, timeout=60, capture=True):
    script = tmp_path / "hanger.py"
    script.write_text(HANGER)
    t0 = time.monotonic()
    res = supervise([sys.executable, str(script), text, *extra], timeout=timeout,
                    capture=capture, grace=GRACE, ending_marks=marks, end_grace=GRACE)
    return res, time.monotonic() - t0


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("mark", FATAL_MARKS)
def test_a_job_that_shows_it_is_ending_but_hangs_is_stopped(tmp_path, mark):
    res, took = _job(tmp_path, f"{mark} (and then nothing)")
    assert not res.timed_out and res.ended_by == mark, res
    assert took < 2 * GRACE + SLACK, took
    assert res.returncode == 128 + signal.SIGTERM, res.returncode   # the leader's SIGTERM
    assert "but mpiexec has not ended it" in res.stderr, res.stderr
    child = int(res.stdout.split()[1])
    assert not _alive(child)          # nothing of the job is left


def test_a_stopped_job_never_reports_success(tmp_path):
    res, _ = _job(tmp_path, FATAL_MARKS[0], "term0")   # its leader exits 0 on SIGTERM
    assert res.ended_by == FATAL_MARKS[0] and res.returncode == 1, res


def test_without_capture_the_mark_is_seen_in_the_copied_stderr(tmp_path, capfd):
    res, took = _job(tmp_path, FATAL_MARKS[0], capture=False)
    assert res.ended_by == FATAL_MARKS[0] and took < 2 * GRACE + SLACK
    assert FATAL_MARKS[0] in capfd.readouterr().err   # still copied to the terminal


def test_without_the_mark_the_same_job_runs_on_to_its_timeout(tmp_path):
    res, took = _job(tmp_path, "an ordinary line", timeout=3 * GRACE + 1)
    assert res.timed_out and res.ended_by is None, res
    assert took >= 3 * GRACE + 1


def test_a_job_that_ends_by_itself_keeps_its_status(tmp_path):
    res, took = _job(tmp_path, FATAL_MARKS[0], "14")
    assert res.ended_by is None and res.returncode == 14, res


HANGING_RANK = textwrap.dedent(f"""
    import os, time
    os.write(2, b"pyfw: rank 0 on here {LEFT_MARK} os._exit(9)\\n")
    time.sleep(300)
""")


@pytest.mark.parametrize("ft", [False, True])
def test_a_rank_that_left_ends_a_job_only_without_fault_tolerance(tmp_path, ft):
    script = tmp_path / "rank.py"
    script.write_text(HANGING_RANK)
    # a job without --ft is stopped about 1.5 s in; one with it runs to the timeout
    timeout = 5 * GRACE if ft else 60
    res = launch.run(1, [sys.executable, str(script)], timeout=timeout, ft=ft, capture=True,
                     grace=GRACE, end_grace=GRACE)
    if ft:      # the farm goes on without the rank: nothing to stop
        assert res.timed_out and res.ended_by is None, res
    else:
        assert not res.timed_out and res.ended_by == LEFT_MARK, res
        assert res.returncode != 0


def test_fault_tolerance_is_read_from_mpiexecs_arguments_and_the_environment():
    ft = launch._fault_tolerant
    assert ft(["mpiexec", "-n", "2", "--with-ft", "ulfm"], {})
    assert ft(["mpiexec", "--with-ft=ulfm"], {})
    assert ft(["mpiexec"], {"OMPI_MCA_mpi_ft_enable": "true"})
    assert not ft(["mpiexec", "-n", "2"], {"OMPI_MCA_mpi_ft_enable": "0"})

