"""pyfw.fabric: Open MPI's libfabric BTL (whose close sleeps a second in every MPI_Init that
does not use it) is left out only where this host has no fabric and the user chose no BTLs."""
import os
import subprocess
import sys

import pytest

from pyfw import fabric, launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Open MPI's BTL framework names every component it opens at this verbosity
VERBOSE = {"OMPI_MCA_btl_base_verbose": "10"}
OFI_OPENED = "component ofi open function successful"


def _host(tmp_path, *devices):
    for d in devices:
        p = tmp_path / d.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.mkdir() if d.startswith("/sys") else p.write_text("")
    return str(tmp_path)


def _clean_env(tmp_path, **extra):
    env = {"HOME": str(tmp_path)}   # no ~/.openmpi/mca-params.conf of the real user
    env.update(extra)
    return env


@pytest.mark.parametrize("device", ["/sys/class/infiniband/mlx5_0", "/sys/class/infiniband/efa_0",
                                    "/sys/class/cxi/cxi0", "/dev/hfi1_0"])
def test_a_host_with_a_fabric_keeps_the_component(tmp_path, device):
    root = _host(tmp_path, device)
    assert fabric.fabric_devices(root) == [root + device]
    env = _clean_env(tmp_path)
    assert not fabric.exclude_idle_ofi(env, root)
    assert fabric.BTL_VAR not in env


def test_a_host_without_one_leaves_it_out(tmp_path):
    root = _host(tmp_path, "/sys/class/net/eth0")
    env = _clean_env(tmp_path)
    assert fabric.exclude_idle_ofi(env, root)
    assert env[fabric.BTL_VAR] == "^ofi"


def test_the_users_choice_wins(tmp_path):
    root = _host(tmp_path)
    env = _clean_env(tmp_path, OMPI_MCA_btl="self,tcp")
    assert not fabric.exclude_idle_ofi(env, root) and env[fabric.BTL_VAR] == "self,tcp"
    env = _clean_env(tmp_path, PYFW_KEEP_OFI="1")
    assert not fabric.exclude_idle_ofi(env, root) and fabric.BTL_VAR not in env


def test_a_btl_line_in_a_parameter_file_is_a_choice(tmp_path):
    root = _host(tmp_path)
    other = tmp_path / "other.conf"
    other.write_text("# tuning\nbtl_tcp_if_include = lo\n")
    env = _clean_env(tmp_path, OMPI_MCA_mca_base_param_files=str(other))
    assert fabric.exclude_idle_ofi(dict(env), root)        # a btl_* parameter is not a choice
    chosen = tmp_path / "chosen.conf"
    chosen.write_text("btl = self,sm,tcp   # ours\n")
    env["OMPI_MCA_mca_base_param_files"] = f"{other}:{chosen}"
    assert not fabric.exclude_idle_ofi(env, root)
    home = tmp_path / ".openmpi"
    home.mkdir()
    (home / "mca-params.conf").write_text(" btl=^tcp\n")
    assert fabric.user_chose_btl(_clean_env(tmp_path))


def test_pyfws_own_default_is_taken_back_and_never_the_users(tmp_path):
    root = _host(tmp_path)
    env = _clean_env(tmp_path)
    assert fabric.exclude_idle_ofi(env, root, mark=True)
    assert env[fabric.DEFAULT_MARK] == "1"
    assert fabric.forget_default(env)
    assert fabric.BTL_VAR not in env and fabric.DEFAULT_MARK not in env
    users = _clean_env(tmp_path, OMPI_MCA_btl="self,tcp")
    assert not fabric.forget_default(users) and users[fabric.BTL_VAR] == "self,tcp"


@pytest.mark.parametrize("argv, env, local", [
    (["mpiexec", "-n", "4", "python", "x.py"], {}, True),
    (["mpiexec", "-n", "4", "--host", "a,b", "python"], {}, False),
    (["mpiexec", "-H", "a:2", "python"], {}, False),
    (["mpiexec", "--hostfile=hosts", "python"], {}, False),
    (["mpiexec", "--machinefile", "m", "python"], {}, False),
    (["mpiexec", "-n", "4", "python"], {"SLURM_JOB_ID": "7"}, False),
    (["mpiexec", "-n", "4", "python"], {"PBS_JOBID": "7.server"}, False),
])
def test_only_a_job_on_this_host_alone_gets_the_launchers_default(argv, env, local):
    assert fabric.launch_is_local(argv, env) is local
    job = launch.mpi_env(dict(env), 4, local=fabric.launch_is_local(argv, env))
    if fabric.fabric_devices() or not local:
        assert fabric.BTL_VAR not in job
    elif not fabric.user_chose_btl(env):
        assert job[fabric.BTL_VAR] == "^ofi"


def test_a_default_inherited_from_the_launching_process_is_not_passed_on(tmp_path):
    """A process that imported pyfw (its own MPI not up) launches a job on other hosts: the
    ranks there must decide for their host, not get this one's default."""
    env = {fabric.BTL_VAR: "^ofi", fabric.DEFAULT_MARK: "1", "HOME": str(tmp_path)}
    job = launch.mpi_env(env, 4, local=False)
    assert fabric.BTL_VAR not in job and fabric.DEFAULT_MARK not in job


needs_no_fabric = pytest.mark.skipif(bool(fabric.fabric_devices()),
                                     reason="this host has an RDMA device: the component stays")


def _stderr_of_init(code, **env):
    e = dict(os.environ, **VERBOSE, **env)
    for k in (fabric.BTL_VAR, fabric.DEFAULT_MARK, "PYFW_KEEP_OFI"):
        if k not in env:
            e.pop(k, None)
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stderr


@needs_no_fabric
def test_import_pyfw_leaves_it_out_of_its_own_mpi_init():
    code = ("import os, pyfw.comm; from mpi4py import MPI; assert MPI.Is_initialized(); "
            "assert 'OMPI_MCA_btl' not in os.environ")     # taken back once MPI is up
    assert OFI_OPENED not in _stderr_of_init(code)
    assert OFI_OPENED in _stderr_of_init(code, PYFW_KEEP_OFI="1")       # the test can fail
    # mpi4py initialised first: pyfw cannot (and does not) change anything
    assert OFI_OPENED in _stderr_of_init("from mpi4py import MPI; import pyfw")


@needs_no_fabric
def test_a_launched_job_works_without_it(tmp_path):
    """pyfw-run's environment leaves it out for any program (here one that never imports
    pyfw), and the ranks still talk."""
    script = tmp_path / "ping.py"
    script.write_text("from mpi4py import MPI\n"
                      "c = MPI.COMM_WORLD\n"
                      "print('sum', c.allreduce(c.rank + 1))\n")
    env = dict(os.environ, **VERBOSE)
    env.pop(fabric.BTL_VAR, None)
    env.pop(fabric.DEFAULT_MARK, None)
    r = launch.run(2, [sys.executable, str(script)], timeout=60, capture=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("sum 3") == 2
    assert OFI_OPENED not in r.stderr
