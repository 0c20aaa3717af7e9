"""``max_workers`` below the ranks started is honoured in SPMD form (mpi4py ignores it):
``MPICommExecutor(comm, root, max_workers=k)`` farms over the root and ``k`` other ranks.
Checked from inside the tasks (which ranks ran them, the size of ``get_comm_workers()``),
and the program ends in time with every rank exiting 0: no rank is left waiting. (Under
``python -m pyfw.futures`` it is not honoured yet: see ``pyfw.futures._subset``.)
"""
import json
import os
import sys

import pytest

from pyfw import launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

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
def test_max_workers_in_spmd_mode(tmp_path):
    out = _run(tmp_path, 5, SPMD, [])
    ranks, comm_sizes, num_workers = out["ran"]
    assert ranks == [0, 2] and comm_sizes == [2] and num_workers == 2   # first 2 but root
    assert out["none"] == [0, 2, 3, 4]   # workers and the ranks left out get None
