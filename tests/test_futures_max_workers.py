"""``max_workers`` below the ranks started is honoured (mpi4py ignores it there): under
``python -m pyfw.futures`` an executor's tasks run on exactly ``max_workers`` of the
launched workers (while one launched worker stays outside every such executor), and SPMD
(``MPICommExecutor(comm, root, max_workers=k)``) farms over the root and ``k`` other ranks.
Checked from inside the tasks (which ranks ran them, the size of ``get_comm_workers()``),
and the program ends in time with every rank exiting 0: no worker is left waiting, also
when an executor is dropped without ``shutdown``.
"""
import json
import os
import sys

import pytest

from pyfw import launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LAUNCHED = r'''
import json, sys, time
from mpi4py import MPI
from pyfw.futures import MPIPoolExecutor, get_comm_workers

def who(x):
    time.sleep(0.01)
    return MPI.COMM_WORLD.Get_rank(), get_comm_workers().Get_size(), x * x

def ranks(results):
    return sorted({r for r, _, _ in results})

if __name__ == "__main__":
    out = {}
    with MPIPoolExecutor(max_workers=2) as ex:
        got = list(ex.map(who, range(60))) + [ex.submit(who, i).result() for i in range(8)]
        out["two"] = [ranks(got), sorted({c for _, c, _ in got}), ex.num_workers,
                      [v for _, _, v in got[:60]] == [i * i for i in range(60)]]
    with MPIPoolExecutor() as ex:   # no max_workers: every launched worker
        out["all"] = [ranks(ex.map(who, range(60))), ex.num_workers]
    a, b = MPIPoolExecutor(max_workers=1), MPIPoolExecutor(max_workers=2)
    ia, ib = a.map(who, range(30)), b.map(who, range(30))   # at the same time
    out["one"], out["two_more"] = ranks(ia), ranks(ib)
    shared = MPIPoolExecutor()   # meanwhile, the workers outside both
    out["shared"] = ranks(shared.map(who, range(30)))
    a.shutdown()
    b.shutdown()
    shared.shutdown()
    dropped = MPIPoolExecutor(max_workers=2)   # never shut down: closed at the program's end
    out["dropped"] = ranks(dropped.map(who, range(20)))
    dropped.submit(time.sleep, 0.3)
    json.dump(out, open(sys.argv[1], "w"))
'''

SPMD = r'''
import json, sys, time
from mpi4py import MPI
from pyfw.futures import MPICommExecutor, get_comm_workers

def who(x):
    time.sleep(0.01)
    return MPI.COMM_WORLD.Get_rank(), get_comm_workers().Get_size()

if __name__ == "__main__":
    world = MPI.COMM_WORLD
    with MPICommExecutor(world, root=1, max_workers=2) as ex:
        got = None if ex is None else list(ex.map(who, range(40)))
        out = None if ex is None else [sorted({r for r, _ in got}),
                                       sorted({c for _, c in got}), ex.num_workers]
    everyone = world.gather((world.Get_rank(), ex is None), root=1)
    if world.Get_rank() == 1:
        json.dump({"ran": out, "none": sorted(r for r, none in everyone if none)},
                  open(sys.argv[1], "w"))
'''


def _run(tmp_path, nprocs, script, argv_prefix):
    path = tmp_path / "prog.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out.json"
    res = launch.run(nprocs, [sys.executable, *argv_prefix, str(path), str(out)], timeout=120,
                     capture=True, env=env, cwd=str(tmp_path))
    assert not res.timed_out, "a rank was left waiting:\n" + res.stdout + res.stderr[-3000:]
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.launch
def test_max_workers_below_the_launched_workers(tmp_path):
    out = _run(tmp_path, 5, LAUNCHED, ["-m", "pyfw.futures"])
    two_ranks, comm_sizes, num_workers, squares = out["two"]
    assert len(two_ranks) == 2 and set(two_ranks) <= {1, 2, 3, 4}
    assert comm_sizes == [2] and num_workers == 2 and squares
    assert out["all"] == [[1, 2, 3, 4], 4]
    # two executors at once: 1 and 2 workers, never the same one; one left for the others
    assert len(out["one"]) == 1 and len(out["two_more"]) == 2
    assert not set(out["one"]) & set(out["two_more"])
    assert len(out["dropped"]) == 2


@pytest.mark.launch
def test_max_workers_in_spmd_mode(tmp_path):
    out = _run(tmp_path, 5, SPMD, [])
    ranks, comm_sizes, num_workers = out["ran"]
    assert ranks == [0, 2] and comm_sizes == [2] and num_workers == 2   # first 2 but root
    assert out["none"] == [0, 2, 3, 4]   # workers and the ranks left out get None
