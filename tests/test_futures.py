"""pyfw.futures: mpi4py.futures' MPIPoolExecutor contract, serially, SPMD and -m launched."""
import concurrent.futures as cf
import json
import os
import re
import sys
import threading

import pytest
from mpi4py import MPI
from mpi4py.futures import MPIPoolExecutor as Mpi4pyExecutor

import farm_tasks as ft
from pyfw import launch
from pyfw.errors import RemoteTraceback
from pyfw.futures import BrokenExecutor, Executor, MPICommExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def exercise(ex):
    out = {}
    fs = [ex.submit(ft.add, i, 1) for i in range(50)]
    out["submit"] = sorted(f.result(timeout=60) for f in cf.as_completed(fs, timeout=60))
    done, _ = cf.wait(fs, timeout=60)
    out["waited"] = len(done)
    out["map"] = list(ex.map(ft.square, range(300)))
    out["chunked"] = list(ex.map(ft.square, range(300), chunksize=16))
    out["two"] = list(ex.map(ft.add, range(5), range(10, 15)))
    out["star"] = list(ex.starmap(ft.add, [(1, 2), (5, 5)]))
    out["unordered"] = sorted(ex.map(ft.square, range(20), unordered=True))
    out["nothing"] = list(ex.map(ft.square))
    err = ex.submit(ft.fail_on_seven, 7).exception(timeout=60)
    out["error"] = (type(err).__name__, type(err.__cause__).__name__,
                    "fail_on_seven" in str(err.__cause__), err.pyfw_task["attempts"],
                    any("pyfw" in n for n in err.__notes__))
    got = []
    with pytest.raises(ValueError, match="seven"):   # raised at its own position
        for value in ex.map(ft.fail_on_seven, range(10)):
            got.append(value)
    out["before_error"] = got
    with pytest.raises(TypeError):   # an item that cannot be pickled fails its map only
        list(ex.map(ft.square, [1, threading.Lock()]))
    out["after_bad_item"] = ex.submit(ft.square, 5).result(timeout=60)
    with pytest.raises(cf.TimeoutError):
        list(ex.map(ft.sleepy, [1.0], timeout=0.1))
    with pytest.raises(cf.TimeoutError):
        ex.submit(ft.sleepy, 1.0).result(timeout=0.05)
    return out


def check(out):
    assert out["submit"] == list(range(1, 51)) and out["waited"] == 50
    assert out["map"] == out["chunked"] == [i * i for i in range(300)]
    assert out["two"] == [10, 12, 14, 16, 18] and out["star"] == [3, 10]
    assert out["unordered"] == [i * i for i in range(20)] and out["nothing"] == []
    assert out["error"] == ("ValueError", "RemoteTraceback", True, 1, True)
    assert out["before_error"] == list(range(7)) and out["after_bad_item"] == 25


def test_serial_executor():
    with Executor() as ex:
        check(exercise(ex))
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(ft.square, 1)
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.map(ft.square, [1])


BAD_MAPS = [dict(chunksize=0), dict(chunksize=-1), dict(chunksize="2"),
            dict(buffersize="1"), dict(buffersize=0), dict(buffersize=2, unordered=True)]
BAD_INITS = [dict(max_workers=0), dict(max_workers=-1), dict(max_workers="x"),
             dict(max_workers=[2]), dict(initializer=123)]


@pytest.mark.parametrize("kwargs", BAD_INITS, ids=str)
def test_constructor_validation_matches_mpi4py(kwargs):
    with pytest.raises(Exception) as theirs:
        Mpi4pyExecutor(**kwargs)
    with pytest.raises(type(theirs.value), match=re.escape(str(theirs.value))):
        Executor(**kwargs)


@pytest.mark.parametrize("kwargs", BAD_MAPS, ids=str)
def test_map_validation_matches_mpi4py(kwargs):
    theirs_ex = Mpi4pyExecutor()   # map validates before anything is spawned
    with pytest.raises(Exception) as theirs:
        theirs_ex.map(ft.square, range(3), **kwargs)
    theirs_ex.shutdown(wait=False)
    with Executor() as ex:
        with pytest.raises(type(theirs.value)):
            ex.map(ft.square, range(3), **kwargs)
        with pytest.raises(TypeError):
            ex.map(ft.square, range(3), timeout="1")


def test_initializer_and_broken_initializer_serial():
    with Executor(initializer=ft.init_counter, initargs=(42,)) as ex:
        assert list(ex.map(ft.read_init, range(3))) == [42, 42, 42]
    ex = Executor(initializer=ft.bad_init)
    first = ex.submit(ft.square, 2)
    with pytest.raises(BrokenExecutor, match="initializer failed") as info:
        first.result(timeout=30)
    assert "weights.bin" in str(info.value.__cause__)
    with pytest.raises(BrokenExecutor):
        ex.submit(ft.square, 3)
    assert ex.num_workers == 0
    ex.shutdown()


def test_shutdown_cancel_futures_and_cancel():
    ex = Executor()
    first = ex.submit(ft.sleepy, 0.3)
    started = threading.Event()
    first.add_done_callback(lambda f: None)
    for _ in range(3000):                 # wait (bounded) until it left the queue
        if first.running() or first.done():
            started.set()
            break
        threading.Event().wait(0.01)
    assert started.is_set()
    rest = [ex.submit(ft.sleepy, 0.3) for _ in range(20)]
    assert rest[-1].cancel() and rest[-1].cancelled()
    ex.shutdown(wait=True, cancel_futures=True)
    assert first.result() == 0.3
    # at most 2 x workers calls are handed to the farm ahead; the rest stayed cancellable
    assert sum(f.cancelled() for f in rest) >= len(rest) - 2
    assert all(f.cancelled() or f.result() == 0.3 for f in rest)
    cf.wait(rest, timeout=30)             # cancelled futures count as done for wait()


def test_leaving_with_after_an_exception_and_a_second_executor():
    with pytest.raises(ZeroDivisionError):
        with Executor() as ex:
            fut = ex.submit(ft.sleepy, 0.2)
            1 / 0
    assert fut.result(timeout=0) == 0.2    # leaving `with` waited for it
    with Executor() as ex2:
        assert list(ex2.map(ft.square, range(4))) == [0, 1, 4, 9]


def test_mpicommexecutor_on_comm_self():
    with MPICommExecutor(MPI.COMM_SELF) as ex:
        assert ex.submit(ft.square, 3).result(timeout=30) == 9
    with pytest.raises(ValueError, match="root"):
        MPICommExecutor(MPI.COMM_SELF, root=1)


@pytest.mark.mpi(min_size=2)
def test_spmd_executor_like_mpicommexecutor():
    comm = MPI.COMM_WORLD
    out = None
    with MPICommExecutor(comm, root=0) as ex:
        if ex is not None:
            out = exercise(ex)
    out = comm.bcast(out, root=0)
    check(out)


def _launch(tmp_path, *args, env=None):
    out = tmp_path / "out.json"
    res = launch.run(3, [sys.executable, "-m", "pyfw.futures", *args[:-1], str(out),
                         *args[-1:]], timeout=120, capture=True, cwd=str(tmp_path),
                     env=dict(os.environ, PYFW_SCRIPT_ENV="seen",
                              PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)])))
    assert res.returncode == 0 and not res.timed_out, res.stdout + res.stderr
    return json.loads(out.read_text())


@pytest.mark.launch
def test_module_launch_mode(tmp_path):
    got = _launch(tmp_path, os.path.join(HERE, "futures_script.py"), "extra-arg")
    assert got["master_argv"] == [str(tmp_path / "out.json"), "extra-arg"]
    assert got["map"] == [3 * i for i in range(100)] and got["submit"] == 1024
    assert got["workers"] == 2 and got["second"] == [0, 3, 6, 9, 12]
    assert got["nested_master"] == [0, 3, 6] and got["nested_worker"] == 18
    assert got["escaped"] == ["KeyError('k')", "RemoteTraceback"]
    assert got["after_escape"] == [0, 3, 6]
    assert got["comm_workers"] == 2 and got["comm_workers_on_master"] == "RuntimeError"
    assert got["timed_out"] and got["ranks_after_timeout"] == [1, 2]
    view = got["view"]   # as under mpi4py.futures: workers keep their own argv
    assert view["name"] == "__worker__" and view["main_has_triple"]
    assert view["argv_tail"] == [str(tmp_path / "out.json"), "extra-arg"]
    assert view["cwd"] == str(tmp_path) and view["env"] == "seen"


@pytest.mark.launch
def test_module_launch_dash_m_and_dash_c(tmp_path):
    got = _launch(tmp_path, "-m", "futures_script", "x")
    assert got["map"][:3] == [0, 3, 6] and got["view"]["name"] == "__worker__"
    code = ("import sys, json; from pyfw.futures import Executor\n"
            "with Executor() as ex: r = list(ex.map(abs, [-1, -2]))\n"
            "json.dump([sys.argv, r], open(sys.argv[1], 'w'))")
    out = tmp_path / "c.json"
    res = launch.run(3, [sys.executable, "-m", "pyfw.futures", "-c", code, str(out)],
                     timeout=60, capture=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(out.read_text()) == [["-c", str(out)], [1, 2]]


@pytest.mark.launch
def test_worker_death_neither_hangs_nor_duplicates(tmp_path):
    out, marker = tmp_path / "fault.json", tmp_path / "killed"
    res = launch.run(3, [sys.executable, "-m", "pyfw.futures",
                         os.path.join(HERE, "futures_fault_script.py"), str(out), str(marker)],
                     ft=True, timeout=90, capture=True,
                     env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                         [HERE, os.path.dirname(HERE)])))
    # survivors of dead ranks may stall in MPI_Finalize after the results (ompi#11404)
    assert out.exists(), f"no results (exit {res.returncode}):\n{res.stdout}\n{res.stderr}"
    got = json.loads(out.read_text())
    assert marker.exists() and got["results"] == [x * x for x in range(200)]
    assert got["workers_left"] == 1
    assert got["broken"] == "BrokenExecutor"   # raised, not a 60 s timeout
    assert set(got["pending"]) <= {"BrokenExecutor", "NoneType"}   # each one resolved
    assert got["map_broken"] and got["next_executor"] == "BrokenExecutor"


@pytest.mark.launch
def test_master_failure_ends_the_job(tmp_path):
    code = ("import time; from pyfw.futures import Executor\n"
            "ex = Executor(); fs = [ex.submit(time.sleep, 0.01) for _ in range(50)]\n"
            "raise ValueError('the master gives up')")
    res = launch.run(3, [sys.executable, "-m", "pyfw.futures", "-c", code], timeout=60,
                     capture=True)
    assert not res.timed_out and res.returncode != 0
    assert "the master gives up" in res.stdout + res.stderr


@pytest.mark.launch
def test_worker_failing_to_import_the_program_ends_the_job(tmp_path):
    # no `if __name__ == "__main__":` guard: each worker's import of the script makes an
    # Executor and fails; the master, already in the farm's first collective, must not wait
    script = tmp_path / "noguard.py"
    script.write_text("from pyfw.futures import Executor\n"
                      "with Executor() as ex:\n    print(list(ex.map(abs, [-1])))\n")
    res = launch.run(3, [sys.executable, "-m", "pyfw.futures", str(script)], timeout=60,
                     capture=True)
    assert not res.timed_out and res.returncode != 0
    assert "if __name__ == '__main__'" in res.stdout + res.stderr
