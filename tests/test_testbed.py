"""The namespace test bed: ranks on distinct nodes over TCP (skips where netns is unavailable)."""
import os
import subprocess
import sys
import time

import pytest

from pyfw.testbed import TestBed
from pyfw.testbed.netns import refuse_reason

REASON = refuse_reason()

PROBE = ("from mpi4py import MPI; import socket; c=MPI.COMM_WORLD; "
         "s=c.Split_type(MPI.COMM_TYPE_SHARED); "
         "print('R', c.rank, socket.gethostname(), s.size, c.allreduce(c.rank), flush=True)")


@pytest.fixture
def bed():
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    tb = TestBed("pfwci")
    tb.up(nodes=2, slots=2, links={1: "100mbit"})
    yield tb
    tb.down()


def test_two_nodes_two_ranks_each(bed):
    out = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", "pfwci", "run",
                          "--timeout", "90", "--", sys.executable, "-c", PROBE],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = sorted(line.split()[1:] for line in out.stdout.splitlines() if line.startswith("R "))
    assert rows == [["0", "pfwci-0", "2", "6"], ["1", "pfwci-0", "2", "6"],
                    ["2", "pfwci-1", "2", "6"], ["3", "pfwci-1", "2", "6"]]
    assert "OSC UCX" not in out.stdout + out.stderr


def test_down_is_idempotent_and_complete(bed):
    bed.down()
    bed.down()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "pfwci" not in names and "pfwci" not in links


def test_down_leaves_a_test_bed_whose_prefix_starts_the_same_alone():
    # `down` of prefix "pfwt" once also deleted "pfwtx"'s host-side veths ("pfwtx0h" starts
    # with "pfwt" and ends with "h"): a concurrent test bed lost its network mid-job
    if REASON:
        print(f"test bed unavailable: {REASON}")
        pytest.skip(REASON)
    other = TestBed("pfwtx")
    try:
        other.up(nodes=1, slots=1)
        host_end = other.veth(0)[0]
        TestBed("pfwt").down()
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert host_end in links and other.status() is not None
    finally:
        other.down()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "pfwtx" not in links


def test_job_shims_call_the_real_mpiexec_not_themselves():
    """A batch job on the test bed puts its shim directory first on PATH. Where no mpiexec
    sits beside Python (a venv over a system Open MPI), the shim's own lookup found the shim
    and called itself until the job's timeout: the shims carry the real mpiexec."""
    import shutil

    from pyfw.launch import find_mpiexec
    from pyfw.testbed.cli import _shim_dir
    d = _shim_dir("pfwt", {})
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
          "lease.hold('pfwlk')\n"
          "print(os.getpid(), flush=True)\n"
          "sys.stdin.read()\n")


def _holder(detach):
    """A process holding a lease on ``pfwlk`` until its stdin closes, and its pid."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(detach=detach)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def _let_go(proc, lease):
    proc.stdin.close()
    for _ in range(300):   # a detached holder is not our child: wait for its lease to go
        if not lease.holders("pfwlk"):
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
    tb = TestBed("pfwlk")
    holder, pid = _holder(detach=True)
    try:
        assert lease.holders("pfwlk") == [pid]
        with pytest.raises(TestBedBusy, match=f"pid {pid}"):
            tb.up(nodes=1, slots=1)
        cli = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", "pfwlk",
                              "down"], capture_output=True, text=True, timeout=60)
        assert cli.returncode != 0 and "in use" in cli.stderr and str(pid) in cli.stderr
    finally:
        _let_go(holder, lease)
        tb.down()   # had `up` not refused, its nodes would be left behind
    mine = lease.hold("pfwlk")   # now this process holds it: its child may bring it up
    try:
        cli = subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", "pfwlk",
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
    assert tb.status() is None and lease.holders("pfwlk") == []
