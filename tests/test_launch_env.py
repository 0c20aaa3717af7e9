"""What pyfw-run sets for a job on this host alone beside the fabric choice
(tests/test_fabric.py): PMIx's hash store for the job's data (``PMIX_MCA_gds=hash``; PMIx's
default shared-memory store costs every rank more in MPI_Init on one host,
benchmarks/pmix_gds.py), never for a job across hosts, never over the caller's choice."""
import os
import sys

import pytest

from pyfw import fabric, launch

pytestmark = pytest.mark.launch

LOCAL = ["mpiexec", "-n", "4", "python", "x.py"]
HOSTS = ["mpiexec", "-n", "4", "--host", "a:2,b:2", "python", "x.py"]


def _job_env(argv, env):
    return launch.mpi_env(dict(env), 4, local=fabric.launch_is_local(argv, env))


def test_a_job_on_this_host_alone_uses_pmix_hash_store():
    assert _job_env(LOCAL, {})[launch.PMIX_GDS_VAR] == "hash"


@pytest.mark.parametrize("argv, env", [(HOSTS, {}), (LOCAL, {"SLURM_JOB_ID": "7"})])
def test_a_job_across_hosts_or_in_an_allocation_keeps_pmix_default(argv, env):
    assert launch.PMIX_GDS_VAR not in _job_env(argv, env)


def test_the_callers_choice_of_store_is_kept():
    env = {launch.PMIX_GDS_VAR: "shmem2,hash"}
    assert _job_env(LOCAL, env)[launch.PMIX_GDS_VAR] == "shmem2,hash"


def _gds_priorities(env_extra):
    """PMIx's own account of the stores it chose for a real 2-rank job (its verbose list)."""
    env = dict(os.environ, PMIX_MCA_gds_base_verbose="10")
    env.pop(launch.PMIX_GDS_VAR, None)
    env.update(env_extra)
    res = launch.run(2, [sys.executable, "-c", "from mpi4py import MPI; "
                         "MPI.COMM_WORLD.Barrier()"],
                     timeout=120, capture=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    text = res.stdout + res.stderr
    return {name for name in ("hash", "shmem2") if f"gds: {name} Priority" in text}


def test_pmix_really_uses_the_hash_store_and_the_default_still_runs():
    assert _gds_priorities({}) == {"hash"}                  # pyfw-run's default took effect
    peer = _gds_priorities({launch.PMIX_GDS_VAR: "shmem2,hash"})
    assert peer == {"hash", "shmem2"}                         # PMIx's own default, working
