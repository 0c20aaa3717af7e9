"""pyfw.futures.Executor: the concurrent.futures contract, serially, SPMD and -m launched."""
import concurrent.futures as cf
import json
import os
import sys
import time

import pytest
from mpi4py import MPI

import farm_tasks as ft
from pyfw import TaskError, launch
from pyfw.futures import BrokenExecutor, Executor

HERE = os.path.dirname(os.path.abspath(__file__))


def exercise(ex):
    out = {}
    fs = [ex.submit(ft.add, i, 1) for i in range(50)]
    out["submit"] = sorted(f.result(timeout=60) for f in cf.as_completed(fs))
    out["map"] = list(ex.map(ft.square, range(300)))
    out["chunked"] = list(ex.map(ft.square, range(300), chunksize=16))
    out["two"] = list(ex.map(ft.add, range(5), range(10, 15)))
    out["star"] = list(ex.starmap(ft.add, [(1, 2), (5, 5)]))
    out["unordered"] = sorted(ex.map(ft.square, range(20), unordered=True))
    err = ex.submit(ft.fail_on_seven, 7).exception(timeout=60)
    out["error"] = (type(err).__name__, type(err.__cause__).__name__, "fail_on_seven" in str(err.__cause__))
    with pytest.raises(TaskError, match="seven"):
        list(ex.map(ft.fail_on_seven, range(10)))
    with pytest.raises(cf.TimeoutError):
        list(ex.map(ft.sleepy, [5.0], timeout=0.2))
    return out


def check(out):
    assert out["submit"] == list(range(1, 51))
    assert out["map"] == out["chunked"] == [i * i for i in range(300)]
    assert out["two"] == [10, 12, 14, 16, 18] and out["star"] == [3, 10]
    assert out["unordered"] == [i * i for i in range(20)]
    assert out["error"] == ("TaskError", "RemoteTraceback", True)


def test_serial_executor():
    with Executor(comm=MPI.COMM_SELF) as ex:
        check(exercise(ex))
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(ft.square, 1)


def test_initializer_and_broken_initializer_serial():
    with Executor(comm=MPI.COMM_SELF, initializer=ft.init_counter, initargs=(42,)) as ex:
        assert list(ex.map(ft.read_init, range(3))) == [42, 42, 42]
    ex = Executor(comm=MPI.COMM_SELF, initializer=ft.bad_init)
    err = ex.submit(ft.square, 2).exception(timeout=30)
    assert isinstance(err, TaskError) and "weights.bin" in str(err)
    with pytest.raises(BrokenExecutor, match="initializer failed"):
        ex.submit(ft.square, 3)
    ex.shutdown()


def test_shutdown_cancel_futures():
    ex = Executor(comm=MPI.COMM_SELF)
    first = ex.submit(ft.sleepy, 0.3)
    time.sleep(0.05)
    rest = [ex.submit(ft.sleepy, 0.3) for _ in range(20)]
    ex.shutdown(wait=True, cancel_futures=True)
    assert first.result() == 0.3
    assert sum(f.cancelled() for f in rest) >= 15


@pytest.mark.mpi(min_size=2)
def test_spmd_executor_like_mpicommexecutor():
    comm = MPI.COMM_WORLD
    out = None
    with Executor(comm=comm) as ex:
        if ex is not None:
            out = exercise(ex)
    out = comm.bcast(out, root=0)
    check(out)


@pytest.mark.launch
def test_module_launch_mode(tmp_path):
    out = tmp_path / "out.json"
    res = launch.run(3, [sys.executable, "-m", "pyfw.futures",
                         os.path.join(HERE, "futures_script.py"), str(out)],
                     timeout=120, capture=True)
    assert res.returncode == 0 and not res.timed_out, res.stdout + res.stderr
    got = json.loads(out.read_text())
    assert got["map"] == [3 * i for i in range(100)] and got["submit"] == 1024
    assert got["workers"] == 2 and got["second"] == [0, 3, 6, 9, 12]
