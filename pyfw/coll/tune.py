"""``mpiexec -n N python -m pyfw.coll.tune``: measure the collectives, write the table.

Options: ``--collectives allgather,gather`` (default: all), ``--sizes 0,1,64,4096``
(per-rank block bytes; default 0 and powers of 4 to 1 MiB), ``--rounds`` (default 3),
``--budget`` seconds per measured point and round (default 0.02), ``--cache-dir`` (default
``$PYFW_COLL_CACHE`` or ``~/.cache/pyfw/coll``), ``--dry-run`` (print, write nothing).
"""
from __future__ import annotations

import argparse
import sys

from mpi4py import MPI


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    from . import tuner
    from .dispatch import COLLECTIVES
    ap = argparse.ArgumentParser(prog="python -m pyfw.coll.tune", description=__doc__)
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--sizes", type=_sizes, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.02)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    colls = [c for c in args.collectives.split(",") if c]
    bad = [c for c in colls if c not in COLLECTIVES]
    if bad:
        ap.error(f"unknown collectives {bad}; known: {', '.join(COLLECTIVES)}")
    log = (lambda m: print(f"pyfw.coll.tune: {m}", flush=True))
    table = tuner.tune(comm, colls, args.sizes, rounds=args.rounds, budget=args.budget, log=log)
    if comm.Get_rank() == 0:
        for line in tuner.summary(table):
            print(line)
        if not args.dry_run:
            print(f"pyfw.coll.tune: wrote {tuner.save_table(table, args.cache_dir)}")
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
