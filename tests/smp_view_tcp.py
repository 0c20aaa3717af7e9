"""Run by test_coll_launch.py under mpiexec over TCP only (``OMPI_MCA_btl=tcp,self``): the
zero-copy SMP all-gather view at 1, 1,000 and 65,536 doubles per rank, on the real node split
and on 2 emulated nodes (leaders exchange over TCP), each view checked against its known
answer both right away and after the next, larger call (which grows the shared window).
On a real multi-node layout only the real split is checked. Issue 11: on 2 nodes x 2 ranks over TCP the 65,536-double view hung. Exits non-zero with the
reasons on any rank's mismatch (every rank learns every failure)."""
import sys

import numpy as np
from mpi4py import MPI

from pyfw import coll


def expected(p, n, shift):
    return np.arange(p)[:, None] + shift + np.arange(n)[None, :] * 1e-3


def check(view_of, label, failures):
    w = MPI.COMM_WORLD
    p, r = w.Get_size(), w.Get_rank()
    prev = None
    for k, n in enumerate((1, 1000, 65536, 65536)):
        v = view_of(r + 10 * k + np.arange(n) * 1e-3)
        if not np.array_equal(v, expected(p, n, 10 * k)):
            failures.append(f"{label}: rank {r}: view of {n} doubles differs from the answer")
        if prev is not None and not np.array_equal(prev[1], expected(p, prev[0], prev[2])):
            failures.append(f"{label}: rank {r}: the {prev[0]}-double view changed under "
                            f"the next call")
        prev = (n, v, 10 * k)


def main():
    w = MPI.COMM_WORLD
    c = w.Dup()
    failures = []
    pl = coll.plan(c, table={})
    check(lambda x: coll.allgather_view(c, x), "allgather_view", failures)
    if pl.layout["nodes"] == 1:  # emulated nodes need every rank in one shared memory
        s = coll.SmpAllgather(c, nodes=2)
        check(s.view, "2 emulated nodes", failures)
        s.free()
    coll.plan(c).free()
    c.Free()
    everything = [f for fs in w.allgather(failures) for f in fs]
    if w.Get_rank() == 0:
        print("\n".join(everything) or "smp view over tcp: ok", flush=True)
    sys.exit(1 if everything else 0)


if __name__ == "__main__":
    main()
