"""Run the pyfw.coll MPI tests at 3 and 5 ranks (the suite's own runs use 2 and 4), so every
algorithm is checked against native MPI on 1 to 5 ranks, odd counts included, and the link
re-ranking on emulated links at odd counts."""
import os
import sys

import pytest

from pyfw import launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.launch
@pytest.mark.parametrize("nprocs", [3, 5])
def test_coll_mpi_tests_at(nprocs):
    cmd = [sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-x", "-q", "-m",
           "mpi", "-p", "no:cacheprovider", os.path.join("tests", "test_coll.py"),
           os.path.join("tests", "test_coll_model.py")]
    res = launch.run(nprocs, cmd, timeout=240, capture=True, cwd=ROOT)
    tail = (res.stdout or "")[-3000:] + (res.stderr or "")[-3000:]
    assert not res.timed_out, f"timed out at {nprocs} ranks:\n{tail}"
    assert res.returncode == 0, f"failed at {nprocs} ranks:\n{tail}"
    assert " passed" in res.stdout and " failed" not in res.stdout, tail


@pytest.mark.launch
def test_smp_view_over_tcp_does_not_hang():
    """Issue 11 regression: SMP all-gather views at 1 to 65,536 doubles with TCP as the only
    transport (2 emulated nodes), each still right after the next call; hard timeout."""
    res = launch.run(4, [sys.executable, os.path.join("tests", "smp_view_tcp.py")],
                     timeout=120, capture=True, cwd=ROOT, env=dict(os.environ, OMPI_MCA_btl="tcp,self"))
    tail = (res.stdout or "")[-3000:] + (res.stderr or "")[-3000:]
    assert not res.timed_out, f"timed out (hang):\n{tail}"
    assert res.returncode == 0 and "smp view over tcp: ok" in res.stdout, tail
