"""``pyfw-run -n 5 -- python -m pyfw.futures group_futures_job.py OUT``: pyfw.futures with
multi-rank calls (``submit(..., ranks=k)``, ``map(..., ranks=k)``) beside ordinary ones."""
import json
import sys

from mpi4py import MPI

from pyfw.futures import MPIPoolExecutor


def members(comm, x, scale=1):
    return [x * scale, comm.Get_size(), sorted(comm.allgather(MPI.COMM_WORLD.Get_rank()))]


if __name__ == "__main__":
    with MPIPoolExecutor() as ex:
        futs = [ex.submit(members, x, ranks=2, scale=10) for x in range(4)]
        plain = ex.submit(pow, 2, 10)
        out = {"submit": [f.result() for f in futs], "plain": plain.result(),
               "map": list(ex.map(members, range(6), ranks=3))}
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh)
