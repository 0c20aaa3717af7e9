"""The solver's start-up (issue 40, item 3): a process started without a launcher leaves
mpi4py (``MPI_Init``, about a second of wall time) and h5py alone; under mpiexec the farm
path initialises MPI as before; only the command line's own process skips what
:mod:`apps.rubik.startup` skips. ``benchmarks/rubik_startup.py`` measures the times."""
import json
import os
import subprocess
import sys

import pytest

from pyfw import launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: a 4-mover on truncated phase-1 tables built in memory: no cached table needed (CI)
SOLVE = ["--scramble", "R U2 F' L", "--json", "--heuristic", "phase1", "--table-depth", "5"]


def _alone_env():
    """This environment without a launcher's variables: a process started on its own."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "PMI_"))}


def _imported(stderr):
    """The modules ``python -X importtime`` reports in ``stderr`` (every rank's)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def _packages(modules, *names):
    return sorted(m for m in modules if m.split(".")[0] in names)


def test_a_serial_solve_imports_neither_mpi4py_nor_h5py():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "apps.rubik", *SOLVE],
                          cwd=ROOT, env=_alone_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads(proc.stdout)
    assert d["length"] == 4 and d["verified"] and d["moves"] == "L' F U2 R'"
    imported = _imported(proc.stderr)
    assert {"numba", "apps.rubik.cli"} <= imported       # the report lists what ran
    assert _packages(imported, "mpi4py", "h5py") == []


def test_pyfw_alone_loads_its_runtime_on_first_use():
    code = ("import sys, pyfw\n"
            "before = sorted(m for m in sys.modules if m.startswith(('mpi4py', 'h5py')))\n"
            "from pyfw import Farm, Task\n"
            "print(before, Farm.__module__, Task is pyfw.farm.Task, 'mpi4py.MPI' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_alone_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[]", "pyfw.farm.master", "True", "True"]


def test_the_command_line_is_told_from_the_interpreter_s_arguments():
    from apps.rubik.startup import is_command_line
    py = sys.executable
    assert is_command_line([py, "-m", "apps.rubik", "--random", "1"], ["-m"])
    assert is_command_line([py, "-X", "importtime", "-m", "pyfw.apps.rubik"], ["-m"])
    assert is_command_line([py, "/venv/bin/pyfw-rubik"], ["/venv/bin/pyfw-rubik", "--file", "-"])
    assert not is_command_line([py, "-m", "pytest", "apps.rubik"], ["pytest"])
    assert not is_command_line([py, "-c", "import apps.rubik"], ["-c"])
    assert not is_command_line([py, "-m", "apps.knee"], ["-m"])


@pytest.mark.parametrize("command_line", [True, False])
def test_only_the_command_line_skips_blas_threads_gc_and_scipy(command_line):
    # apps.rubik decides from the interpreter's own argv; emulate ``python -m apps.rubik``
    fake = "sys.orig_argv[:] = [sys.executable, '-m', 'apps.rubik']\n" if command_line else ""
    code = ("import gc, os, sys\n" + fake +
            "import apps.rubik\n"              # loads kernels: numba probes for a BLAS
            "print(gc.isenabled(), gc.get_freeze_count() > 0, "
            "os.environ.get('OPENBLAS_NUM_THREADS'), 'scipy.linalg' in sys.modules)\n"
            "import scipy.linalg\n"            # anyone else's scipy import still works
            "print(scipy.linalg.norm([3.0, 4.0]))\n")
    env = _alone_env()
    env.pop("OPENBLAS_NUM_THREADS", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # collection is back on after the imports either way; only the command line froze them
    want = (["True", "True", "1", "False"] if command_line
            else ["True", "False", "None", "True"])
    assert proc.stdout.split() == want + ["5.0"]


@pytest.mark.launch
def test_under_mpiexec_the_farm_solves_with_mpi():
    res = launch.run(2, [sys.executable, "-X", "importtime", "-m", "apps.rubik", *SOLVE],
                     timeout=300, capture=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    d = json.loads(res.stdout.strip().splitlines()[-1])
    assert d["length"] == 4 and d["verified"] and d["workers"]
    assert "mpi4py.MPI" in _imported(res.stderr)
