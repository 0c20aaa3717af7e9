"""Measure the collectives on this machine and process count, and write the decision table.

Run it under MPI with the process count you will use, e.g.:

    pyfw-run -n 4 -- python -m pyfw.coll.tune

(mpiexec -n 4 python -m pyfw.coll.tune on a cluster). Every algorithm and native MPI is
timed at each size; the table goes to $PYFW_COLL_CACHE (default ~/.cache/pyfw/coll) and
the dispatch (pyfw.coll.allgather, ...) uses it from then on.
"""
from __future__ import annotations

import argparse
import sys

from mpi4py import MPI


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m pyfw.coll.tune`` command line."""
    from .dispatch import COLLECTIVES
    ap = argparse.ArgumentParser(prog="python -m pyfw.coll.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default=",".join(COLLECTIVES), metavar="LIST",
                    help="comma-separated collectives to tune (default: all: %(default)s)")
    ap.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
                    help="comma-separated block sizes in bytes (per rank for allgather, "
                         "gather, alltoall; default: 0 and powers of 4 up to 1 MiB)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="measurement rounds per size (default: %(default)s)")
    ap.add_argument("--budget", type=float, default=0.02, metavar="SECONDS",
                    help="time per measured size and round (default: %(default)s)")
    ap.add_argument("--cache-dir", default=None, metavar="DIR",
                    help="where to write the table (default: $PYFW_COLL_CACHE or "
                         "~/.cache/pyfw/coll)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the decisions, write nothing")
    return ap


def main(argv: list[str] | None = None) -> int:
    """The ``python -m pyfw.coll.tune`` entry point (collective over the job's ranks)."""
    from . import tuner
    from .dispatch import COLLECTIVES
    ap = build_parser()
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
