"""Jobs for the multi-node test-bed tests: ``python testbed_job.py MODE OUT [args]``.

``farm OUT [KILL_HOST]``: a farm map of 300 tasks; with KILL_HOST, every rank on that node
SIGKILLs itself in its 15th task (run under ULFM). Rank 0 writes the results (index, rank,
host of every result) and the workers' liveness.
``barrier OUT``: ULFM; the last rank dies after a first barrier; each survivor calls a
second barrier and writes whether it reported the failure (OUT.<rank>).
``monitor OUT``: ping-pong matrix of every pair at 1 KiB and 1 MiB; rank 0 writes it.
``coll OUT``: every all-gather algorithm, the tuned dispatch and the zero-copy view against
native MPI at 1, 1,000 and 65,536 doubles per rank; rank 0 writes the mismatches.
"""
import json
import os
import signal
import socket
import sys
import time

import numpy as np
from mpi4py import MPI


_done_here = 0


def _work(i, kill_host):
    global _done_here
    if kill_host and socket.gethostname() == kill_host:
        _done_here += 1
        if _done_here >= 15:
            os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.004)
    return i, MPI.COMM_WORLD.Get_rank(), socket.gethostname()


def farm(out, kill_host=None):
    from pyfw import Farm
    with Farm(MPI.COMM_WORLD) as f:
        if f.is_master:
            results = list(f.map(_work, range(300), [kill_host] * 300))
            stats = f.stats()
            with open(out, "w") as fh:
                json.dump({"results": results,
                           "alive": {w["rank"]: w["alive"] for w in stats["workers"]}}, fh)


def barrier(out):
    w = MPI.COMM_WORLD
    w.Set_errhandler(MPI.ERRORS_RETURN)
    w.Barrier()
    if w.Get_rank() == w.Get_size() - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    try:
        w.Barrier()
        verdict = "barrier returned success"
    except MPI.Exception as exc:
        verdict = f"error {exc.Get_error_class()}"
    with open(f"{out}.{w.Get_rank()}", "w") as fh:
        fh.write(verdict)
    from pyfw.comm import bound_finalize
    bound_finalize()   # a dead peer may hold MPI_Finalize (open-mpi/ompi#11404)


def monitor(out):
    from pyfw.monitor import probe_pairs
    m = probe_pairs(MPI.COMM_WORLD, sizes=(1024, 1 << 20), reps=3, timeout=30)
    if MPI.COMM_WORLD.Get_rank() == 0:
        hosts = MPI.COMM_WORLD.gather(socket.gethostname())
        with open(out, "w") as fh:
            # inf where 1 MiB was no slower than 1 KiB: a fast link the loaded box's
            # scheduling noise hides (json writes Infinity and NaN, and reads them back)
            json.dump({"bandwidth": m.bandwidth.tolist(), "hosts": hosts}, fh)
    else:
        MPI.COMM_WORLD.gather(socket.gethostname())


def coll(out):
    from pyfw import coll as pc
    w = MPI.COMM_WORLD
    c = w.Dup()
    p, r = c.Get_size(), c.Get_rank()
    bad = []
    layout = pc.plan(c).layout
    for n in (1, 1000, 65536):
        send = r * 1e6 + np.arange(n, dtype=float)
        ref = np.empty((p, n))
        c.Allgather(send, ref)
        for algo in pc.ALGORITHMS["allgather"]:
            got = np.full((p, n), np.nan)
            pc.allgather(c, send, got, algorithm=algo)
            if not np.array_equal(got, ref):
                bad.append(f"rank {r}: {algo} at {n} doubles differs from native")
        got = np.full((p, n), np.nan)
        pc.allgather(c, send, got)
        if not np.array_equal(got, ref):
            bad.append(f"rank {r}: tuned dispatch at {n} doubles differs from native")
        view = pc.allgather_view(c, send)
        if not np.array_equal(np.asarray(view).reshape(p, n), ref):
            bad.append(f"rank {r}: allgather_view at {n} doubles differs from native")
    pc.plan(c).free()
    c.Free()
    everything = [b for bs in w.gather(bad) or [] for b in bs] if r == 0 else w.gather(bad)
    if r == 0:
        with open(out, "w") as fh:
            json.dump({"mismatches": everything, "nodes": layout["nodes"]}, fh)


if __name__ == "__main__":
    mode, out, *rest = sys.argv[1:]
    {"farm": farm, "barrier": barrier, "monitor": monitor, "coll": coll}[mode](out, *rest)
