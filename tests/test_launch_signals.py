"""A job ends when its launcher is told to stop, the way Slurm tells it (``scancel`` and the
time limit send SIGTERM): SIGTERM, SIGINT or SIGHUP to ``pyfw-run`` (and to ``pyfw-cluster
run``/``job`` on the test bed) ends mpiexec and every rank within a few seconds, with exit
status 128 + signum and one line on stderr; a farm's journal keeps what was computed. Every
process of a job carries a unique marker in its command line, so a leftover is found by
looking for it."""
import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from pyfw import launch
from pyfw.testbed.netns import refuse_reason

pytestmark = pytest.mark.launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: how long a stopped job may take to disappear: the launcher's grace, plus slack for a
#: loaded machine
GONE_WITHIN = launch.STOP_GRACE + 3.0
#: the test bed's prefix here (the suite's test beds start with $PYFW_TEST_TESTBED_PREFIX)
PREFIX = os.environ.get("PYFW_TEST_TESTBED_PREFIX", "pfw") + "sg"

#: every rank writes READY_DIR/<rank> once it runs, then waits (rank 0 spins, the others in
#: a receive from it): a job that never ends on its own
WAITER = textwrap.dedent("""
    import os, sys, time
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    open(os.path.join(sys.argv[1], str(comm.rank)), "w").close()
    if comm.rank == 0:
        while True:
            time.sleep(0.02)
    comm.recv(source=0)
""")

#: a farm of N tasks (squares, 20 ms each) with a result journal; the master writes the
#: results and how many came from the journal to OUT
FARM = textwrap.dedent("""
    import json, sys, time
    from mpi4py import MPI
    import pyfw

    class Square(pyfw.Task):
        def __init__(self, i):
            self.i = i

        def run(self, ctx):
            time.sleep(0.02)
            return self.i * self.i

    out, journal, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with pyfw.Farm(MPI.COMM_WORLD, journal=journal) as farm:
        if farm.is_master:
            values = list(farm.map([Square(i) for i in range(n)]))
            with open(out, "w") as fh:
                json.dump({"values": values, "resumed": farm.journal.resumed}, fh)
""")


def _marked(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def _gone(marker: str, within: float) -> list[int]:
    """Wait up to ``within`` seconds for every process marked ``marker`` to end; returns
    those still there."""
    deadline = time.monotonic() + within
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _start(cmd, tmp_path, env=None):
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    ready = tmp_path / "ready"
    ready.mkdir()
    script = tmp_path / "waiter.py"
    script.write_text(WAITER)
    argv = cmd + [sys.executable, str(script), str(ready), marker]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env=env)
    return proc, marker, ready


def _wait_ready(proc, ready, nranks, timeout=60):
    deadline = time.monotonic() + timeout
    while len(os.listdir(ready)) < nranks:
        if proc.poll() is not None:
            pytest.fail(f"the job ended before it was stopped (status {proc.returncode}):\n"
                        f"{proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the job's ranks did not start")
        time.sleep(0.05)


def _stop_and_check(proc, marker, sig, prog):
    prterun = [p for p in _marked(marker) if b"prterun" in _cmdline(p)
               or b"mpiexec" in _cmdline(p)]
    assert prterun, "no mpiexec of the job was found"
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=GONE_WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{prog} still runs {GONE_WITHIN} s after {sig.name}")
    took = time.monotonic() - t0
    err = proc.stderr.read()
    left = _gone(marker, GONE_WITHIN)
    assert left == [], f"left running after {sig.name}: " + \
        "; ".join(_cmdline(p).decode(errors="replace")[:200] for p in left)
    assert not _alive(prterun), "mpiexec outlived the job"
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert "Traceback" not in err, err
    ours = [line for line in err.splitlines() if line.startswith(f"{prog}:")]
    assert ours == [f"{prog}: {sig.name} received: the job was stopped "
                    f"(exit {128 + sig})"], err
    return took, err


def _cmdline(pid) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ")
    except OSError:
        return b""


def _alive(pids) -> list[int]:
    return [p for p in pids if _cmdline(p)]


PYFW_RUN = [sys.executable, "-m", "pyfw.launch", "-n", "3", "--timeout", "120", "--"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: s.name)
def test_a_stop_signal_to_pyfw_run_ends_every_rank(tmp_path, sig):
    proc, marker, ready = _start(PYFW_RUN, tmp_path)
    _wait_ready(proc, ready, 3)
    took, err = _stop_and_check(proc, marker, sig, "pyfw-run")
    assert took < GONE_WITHIN
    if sig == signal.SIGINT:   # Ctrl-C: one line, nothing else
        assert err.strip().splitlines() == ["pyfw-run: SIGINT received: the job was stopped "
                                            "(exit 130)"], err


def test_sigterm_mid_farm_keeps_the_journal_and_a_rerun_resumes(tmp_path):
    script, out, journal = tmp_path / "farm.py", tmp_path / "out.json", tmp_path / "run.h5"
    script.write_text(FARM)
    n = 300   # 20 ms each on 2 workers: about 3 s of work
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    argv = PYFW_RUN + [sys.executable, str(script), str(out), str(journal), str(n), marker]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while len(glob.glob(f"{journal}.d/seg-*.h5")) < 2:   # a segment every 0.5 s
        if proc.poll() is not None:
            pytest.fail(f"the farm ended before it was stopped:\n{proc.stderr.read()}")
        assert time.monotonic() < deadline, "no journal segments appeared"
        time.sleep(0.02)
    _stop_and_check(proc, marker, signal.SIGTERM, "pyfw-run")
    assert not out.exists()

    from pyfw.farm.journal import Journal
    kept = Journal(str(journal)).completed("round-0")
    assert 0 < len(kept) < n and all(v == i * i for i, v in kept.items())

    again = launch.run(3, [sys.executable, str(script), str(out), str(journal), str(n)],
                       timeout=120, capture=True, cwd=ROOT)
    assert again.returncode == 0, again.stderr
    got = json.loads(out.read_text())
    assert got["values"] == [i * i for i in range(n)] and got["resumed"] >= len(kept)


STUBBORN = ("trap '' TERM INT HUP; "
            "setsid sh -c 'trap \"\" TERM INT HUP; while :; do sleep 0.2; done' {m} & "
            "while :; do sleep 0.2; done")


def test_what_ignores_the_signal_is_killed_after_the_grace(tmp_path):
    # a job whose leader and a child in a session of its own ignore every stop signal: the
    # launcher kills both after its grace; found through $PYFW_JOB_TAG, not the session
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    code = ("import os; from pyfw import launch; "
            "r = launch.supervise(['sh', '-c', os.environ['JOB'], os.environ['MARKER']], "
            "grace=1.0, reraise=False); "
            "print(r.returncode, r.stopped_by.name, flush=True)")
    # the marker only in the job's command lines, not the driver's
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, JOB=STUBBORN.format(m=marker), MARKER=marker))
    deadline = time.monotonic() + 20
    while len(_marked(marker)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(0.3)   # the child's traps are set
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    took = time.monotonic() - t0
    assert out.split() == ["143", "SIGTERM"], err
    assert 1.0 <= took < 1.0 + 3.0
    assert _gone(marker, 2.0) == []


def test_the_api_stops_the_job_then_lets_the_caller_see_the_signal(tmp_path):
    # launch.run/supervise in a program: Ctrl-C still raises KeyboardInterrupt there, but
    # only once the job is gone
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    # Ctrl-C raises KeyboardInterrupt, as in a program started from a terminal (a suite
    # started in the background by a shell inherits SIGINT ignored: then nothing would)
    code = ("import signal, sys; from pyfw import launch\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "try:\n"
            "    launch.supervise(['sh', '-c', 'sleep 60', os.environ['MARKER']])\n"
            "except KeyboardInterrupt:\n"
            "    print('KeyboardInterrupt', flush=True)\n")
    # the marker only in the job's command line, not the driver's
    proc = subprocess.Popen([sys.executable, "-c", "import os\n" + code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=dict(os.environ, MARKER=marker))
    deadline = time.monotonic() + 20
    while not _marked(marker):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert out.split() == ["KeyboardInterrupt"] and proc.returncode == 0, err
    assert _marked(marker) == []   # gone before the exception was raised


def test_leftovers_of_a_job_that_ended_are_ended(tmp_path):
    # the leader exits, a child it started in a session of its own would run on
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    res = launch.supervise(["sh", "-c", "setsid sh -c 'sleep 60' {m} & exit 3".format(m=marker)],
                           grace=1.0, capture=True)
    assert res.returncode == 3 and res.stopped_by is None and not res.timed_out
    assert _gone(marker, 2.0) == []


def test_a_rank_that_dies_ends_the_job_at_once_with_mpiexecs_message(tmp_path):
    # without --ft: rank 1 exits with status 9 while the others wait for it
    code = textwrap.dedent("""
        import os, sys, time
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            time.sleep(0.5)
            os._exit(9)
        comm.recv(source=1)
    """)
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    t0 = time.monotonic()
    res = subprocess.run(PYFW_RUN + [sys.executable, "-c", code, marker],
                         capture_output=True, text=True, timeout=90, cwd=ROOT)
    took = time.monotonic() - t0
    assert res.returncode not in (0, launch.TIMEOUT_STATUS), res.stderr
    assert took < 30, f"the job took {took:.0f} s to end"
    assert "Exit code:    9" in res.stderr or "non-zero status" in res.stderr, res.stderr
    assert _gone(marker, 2.0) == []


# --- on the test bed -------------------------------------------------------------------

@pytest.fixture(scope="module")
def bed():
    reason = refuse_reason()
    if reason:
        print(f"test bed unavailable: {reason}")
        pytest.skip(reason)
    from pyfw.testbed import TestBed
    tb = TestBed(PREFIX)
    info = tb.up(nodes=2, slots=2)
    yield info
    tb.down()


CLUSTER = [sys.executable, "-m", "pyfw.testbed.cli", "--prefix", PREFIX]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_to_pyfw_cluster_run_ends_every_rank_on_every_node(bed, tmp_path, sig):
    proc, marker, ready = _start(CLUSTER + ["run", "--timeout", "120", "--"], tmp_path)
    _wait_ready(proc, ready, 4)
    daemons = [p for p in _pids_with(b"prted") if f"{PREFIX}-agent".encode() in _cmdline(p)]
    _stop_and_check(proc, marker, sig, "pyfw-cluster run")
    assert _gone_pids(daemons, GONE_WITHIN) == [], "a node's Open MPI daemon outlived the job"


def test_sigterm_to_pyfw_cluster_job_ends_the_batch_script_and_every_rank(bed, tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    (tmp_path / "waiter.py").write_text(WAITER)
    marker = f"pyfwsig-{uuid.uuid4().hex[:12]}"
    script = tmp_path / "job.slurm"
    script.write_text(f"#!/bin/bash\nmpiexec -n 4 python {tmp_path / 'waiter.py'} {ready} "
                      f"{marker}\n")
    proc = subprocess.Popen(CLUSTER + ["job", "--scheduler", "slurm", "--timeout", "120",
                                       str(script)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    _wait_ready(proc, ready, 4)
    _stop_and_check(proc, marker, signal.SIGTERM, "pyfw-cluster job")


def _pids_with(word: bytes) -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and word in _cmdline(e)]


def _gone_pids(pids, within) -> list[int]:
    deadline = time.monotonic() + within
    while (left := _alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
