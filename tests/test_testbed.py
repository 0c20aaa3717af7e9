"""The namespace test bed: ranks on distinct nodes over TCP (skips where netns is unavailable)."""
import os
import subprocess
import sys
import time

import pytest

from pyfw.testbed import TestBed
from pyfw.testbed.netns import refuse_reason

REASON = refuse_reason()
#: the test beds' prefixes start with this (set it to run beside another session's suite)
P = os.environ.get("PYFW_TEST_TESTBED_PREFIX", "pfw")

PROBE = ("from mpi4py import MPI; import socket; c=MPI.COMM_WORLD; "
         "s=c.Split_type(MPI.COMM_TYPE_SHARED); "
         "print('R', c.rank, socket.gethostname(), s.size, c.allreduce(c.rank), flush=True)")


@pytest.fixture
def bed():
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    tb = TestBed(f"{P}ci")
    tb.up(nodes=2, slots=2, links={1: "100mbit"})
    yield tb
    tb.down()


def test_two_nodes_two_ranks_each(bed):
    out = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}ci", "run",
                          "--timeout", "90", "--", sys.executable, "-c", PROBE],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = sorted(line.split()[1:] for line in out.stdout.splitlines() if line.startswith("R "))
    assert rows == [["0", f"{P}ci-0", "2", "6"], ["1", f"{P}ci-0", "2", "6"],
                    ["2", f"{P}ci-1", "2", "6"], ["3", f"{P}ci-1", "2", "6"]]
    assert "OSC UCX" not in out.stdout + out.stderr


def test_down_is_idempotent_and_complete(bed):
    bed.down()
    bed.down()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{P}ci" not in names and f"{P}ci" not in links


def test_down_leaves_a_test_bed_whose_prefix_starts_the_same_alone():
    # `down` of prefix "pfwt" once also deleted "pfwtx"'s host-side veths ("pfwtx0h" starts
    # with "pfwt" and ends with "h"): a concurrent test bed lost its network mid-job
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    other = TestBed(f"{P}tx")
    try:
        other.up(nodes=1, slots=1)
        host_end = other.veth(0)[0]
        TestBed(f"{P}t").down()
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert host_end in links and other.status() is not None
    finally:
        other.down()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{P}tx" not in links


def test_job_shims_call_the_real_mpiexec_not_themselves():
    """A batch job on the test bed puts its shim directory first on PATH. Where no mpiexec
    sits beside Python (a venv over a system Open MPI), the shim's own lookup found the shim
    and called itself until the job's timeout: the shims carry the real mpiexec."""
    import shutil

    from pyfw.launch import find_mpiexec
    from pyfw.testbed.cli import _shim_dir
    d = _shim_dir(f"{P}t", {})
    try:
        for name in ("mpiexec", "mpirun"):
            text = open(os.path.join(d, "bin", name)).read()
            assert f'PYFW_MPIEXEC="${{PYFW_MPIEXEC:-{find_mpiexec()}}}"' in text
            assert text.index("export PYFW_MPIEXEC") < text.index("exec ")
        assert os.path.dirname(find_mpiexec()) != os.path.join(d, "bin")
    finally:
        shutil.rmtree(d)


HOLDER = ("import os, sys\n"
          "if {detach} and os.fork():\n"
          "    os._exit(0)   # detached: not a descendant of the test\n"
          "from pyfw.testbed import lease\n"
          f"lease.hold('{P}lk')\n"
          "print(os.getpid(), flush=True)\n"
          "sys.stdin.read()\n")


def _holder(detach):
    """A process holding a lease on ``<P>lk`` until its stdin closes, and its pid."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(detach=detach)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def _let_go(proc, lease):
    proc.stdin.close()
    for _ in range(300):   # a detached holder is not our child: wait for its lease to go
        if not lease.holders(f"{P}lk"):
            break
        time.sleep(0.1)
    proc.wait(timeout=30)


def test_a_bed_in_use_by_another_process_is_neither_replaced_nor_torn_down():
    """Two suites on one machine once shared a prefix: one's `up` replaced the other's nodes
    mid-job. A process using a bed holds a lease; `up`/`down` elsewhere refuse and name it,
    while the holder's own children (a README command under the docs test) may go on, and
    a process may tear down a bed its own job still holds."""
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    from pyfw.errors import TestBedBusy
    from pyfw.testbed import lease
    tb = TestBed(f"{P}lk")
    holder, pid = _holder(detach=True)
    try:
        assert lease.holders(f"{P}lk") == [pid]
        with pytest.raises(TestBedBusy, match=f"pid {pid}"):
            tb.up(nodes=1, slots=1)
        cli = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}lk",
                              "down"], capture_output=True, text=True, timeout=60)
        assert cli.returncode != 0 and "in use" in cli.stderr and str(pid) in cli.stderr
        assert "sys.stdin.read()" in cli.stderr   # the holder's whole command (was cut short)
    finally:
        _let_go(holder, lease)
        tb.down()   # had `up` not refused, its nodes would be left behind
    mine = lease.hold(f"{P}lk")   # now this process holds it: its child may bring it up
    try:
        cli = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}lk",
                              "up", "--nodes", "1", "--slots", "1"],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0, cli.stderr
        assert tb.status() is not None
    finally:
        lease.release(mine)
    child, _ = _holder(detach=False)
    try:
        tb.down()
    finally:
        _let_go(child, lease)
        tb.down()
    assert tb.status() is None and lease.holders(f"{P}lk") == []


def test_status_of_a_test_bed_that_is_not_up_says_so():
    cli = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", f"{P}no",
                          "status"], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1 and cli.stdout == ""
    assert cli.stderr.strip() == f"pyfw-cluster: no test bed with prefix '{P}no' is up"


def test_batch_jobs_get_job_ids_of_their_own(tmp_path):
    # every job was 4242, so a template's stats-$SLURM_JOB_ID.json overwrote the last one's
    if not os.access(os.path.dirname(lease_dir()), os.W_OK):
        pytest.skip("needs write access to /run (root)")
    from pyfw.testbed.cli import scheduler_env
    info = {"prefix": f"{P}id", "slots": 1, "nodes": [{"name": f"{P}id-0", "slots": 1}]}
    slurm = [int(scheduler_env(info, "slurm", str(tmp_path), str(tmp_path))["SLURM_JOB_ID"])
             for _ in range(3)]
    pbs = scheduler_env(info, "pbs", str(tmp_path), str(tmp_path))["PBS_JOBID"]
    assert slurm[0] < slurm[1] < slurm[2] and int(pbs.split(".")[0]) > slurm[2]


def lease_dir():
    from pyfw.testbed.lease import STATE_DIR
    return STATE_DIR
