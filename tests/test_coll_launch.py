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
