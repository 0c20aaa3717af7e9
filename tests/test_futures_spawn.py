"""pyfw.futures spawn mode: ``python script.py`` and ``mpiexec -n 1`` spawn their workers.

Each test starts its program in a subprocess with a hard timeout (a spawn is ~1-3 s).
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pyfw import launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = r'''
import json, os, sys, time
from mpi4py import MPI
from pyfw.futures import MPIPoolExecutor, get_comm_workers

def burn(x):
    t = time.process_time()
    while time.process_time() - t < 0.05:
        pass
    return os.getpid(), x * x

def comm_size(_):
    return get_comm_workers().Get_size()

def flags(_):
    return sys.flags.optimize, __name__

if __name__ == "__main__":
    out = {"parent": os.getpid()}
    n = int(sys.argv[2]) if sys.argv[2] != "none" else None
    with MPIPoolExecutor(n) as ex:
        got = list(ex.map(burn, range(40)))
        out["squares"] = [v for _, v in got]
        out["pids"] = sorted({p for p, _ in got})
        out["num_workers"] = ex.num_workers
        out["comm_size"] = ex.submit(comm_size, 0).result()
    with MPIPoolExecutor(1, python_args=["-O"], globals={"G": 5}) as ex:
        out["flags"] = ex.submit(flags, 0).result()
    json.dump(out, open(sys.argv[1], "w"))
'''


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("MPI4PY_FUTURES_MAX_WORKERS", None)
    env.update(extra)
    return env


def _check(out, workers):
    assert out["squares"] == [i * i for i in range(40)]
    assert out["num_workers"] == workers == out["comm_size"]
    assert len(out["pids"]) == workers and out["parent"] not in out["pids"]
    assert out["flags"] == [1, "__worker__"]   # python_args reach the worker; main imported


def test_singleton_spawns_max_workers(tmp_path):
    """``python script.py`` as a new user starts it (root needs no variable by hand)."""
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    env = _env()
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
              "PRTE_ALLOW_RUN_AS_ROOT", "PRTE_ALLOW_RUN_AS_ROOT_CONFIRM"):
        env.pop(k, None)
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "o.json"), "2"],
                         env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    _check(json.loads((tmp_path / "o.json").read_text()), 2)


@pytest.mark.launch
def test_mpiexec_n1_default_from_universe_and_environment(tmp_path):
    """Under ``mpiexec -n 1`` the default is the universe size minus one (here: the
    machine's cores), and ``$MPI4PY_FUTURES_MAX_WORKERS`` overrides it."""
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    res = launch.run(1, [sys.executable, str(script), str(tmp_path / "a.json"), "none"],
                     timeout=120, capture=True, env=_env(), cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    cores = os.cpu_count() or 1
    _check(json.loads((tmp_path / "a.json").read_text()), max(cores - 1, 1))
    res = launch.run(1, [sys.executable, str(script), str(tmp_path / "b.json"), "none"],
                     timeout=120, capture=True, env=_env(MPI4PY_FUTURES_MAX_WORKERS="3"),
                     cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    _check(json.loads((tmp_path / "b.json").read_text()), 3)


KILLED = r'''
import os, sys, time
from pyfw.futures import MPIPoolExecutor
def pid(_):
    time.sleep(0.05)
    return os.getpid()
if __name__ == "__main__":
    ex = MPIPoolExecutor(2)
    pids = sorted(set(ex.map(pid, range(20))))
    fs = [ex.submit(time.sleep, 120) for _ in range(2)]
    print("ready", os.getpid(), *pids, flush=True)
    time.sleep(120)
'''


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie is gone too
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_exit_when_the_parent_is_sigkilled(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    proc = subprocess.Popen([sys.executable, str(script)], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                            start_new_session=True)
    try:
        line = ""
        deadline = time.monotonic() + 90
        while not line.startswith("ready") and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert line.startswith("ready"), line + proc.stdout.read()
        _, parent, *workers = map(lambda s: int(s) if s.isdigit() else s, line.split())
        assert len(workers) == 2 and all(_alive(w) for w in workers)
        os.kill(parent, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(w) for w in workers), "a spawned worker outlived its parent"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


FAILS = r'''
import sys
from pyfw.futures import MPIPoolExecutor, BrokenExecutor
if __name__ == "__main__":
    ex = MPIPoolExecutor(1, python_exe="/nonexistent/python")
    try:
        ex.submit(abs, -1).result(timeout=60)
    except BrokenExecutor as exc:
        print("broken:", exc)
    ex.shutdown()
    with MPIPoolExecutor(in_process=True) as ex:   # asked for: no spawning
        print("in-process:", ex.num_workers, ex.submit(abs, -3).result())
'''


def test_spawn_failure_is_a_clear_error_and_in_process_only_when_asked(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(FAILS)
    res = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "broken: " in res.stdout and "could not spawn 1 worker" in res.stdout, res.stdout
    assert "pyfw-run -n 2 -- python -m pyfw.futures" in res.stdout   # the fix is named
    assert "in-process: 1 3" in res.stdout


DROPPED = r'''
import gc, os, sys, time
from pyfw.futures import MPIPoolExecutor

def pid(_):
    time.sleep(0.02)
    return os.getpid()

def alive(p):
    try:
        with open(f"/proc/{p}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] not in "ZX"
    except OSError:
        return False

if __name__ == "__main__":
    ex = MPIPoolExecutor(2)
    pids = sorted(set(ex.map(pid, range(20))))
    fut = ex.submit(pid, 0)
    del ex             # dropped without shutdown: its queued work still runs
    gc.collect()
    ran = fut.result(timeout=60) in pids
    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    print("collected", len(pids), ran, not any(alive(p) for p in pids), flush=True)
    # the one-liner idiom: the executor is dropped while its map is being consumed
    print("one-liner", list(MPIPoolExecutor(1).map(abs, [-1, -2, -3])), flush=True)
    kept = MPIPoolExecutor(2)    # never shut down, still referenced at exit
    later = sorted(set(kept.map(pid, range(20))))
    kept.submit(time.sleep, 0.5)
    print("at-exit", *later, flush=True)
'''


def test_dropped_executors_release_their_workers(tmp_path):
    """An executor dropped without ``shutdown`` (mpi4py closes it on garbage collection):
    queued work finishes, the spawned workers leave while the program goes on, and one still
    referenced at exit is closed then, without hanging the exit."""
    script = tmp_path / "dropped.py"
    script.write_text(DROPPED)
    res = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = {ln.split()[0]: ln.split()[1:] for ln in res.stdout.splitlines() if ln}
    assert lines["collected"] == ["2", "True", "True"], res.stdout + res.stderr
    assert lines["one-liner"] == ["[1,", "2,", "3]"]
    later = [int(p) for p in lines["at-exit"]]
    assert len(later) == 2
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in later) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in later), "a spawned worker outlived the program"
