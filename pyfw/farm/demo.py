"""Example farm job: estimate pi from uneven Monte Carlo batches, with a per-worker summary.

    pyfw-run -n 4 -- python -m pyfw.farm.demo [--tasks 2000] [--policy adaptive]
                                              [--json stats.json] [--journal run.h5]

Batch sizes vary 100-fold, so a static split would leave workers idle; the adaptive policy
keeps every worker busy. The same command without pyfw-run runs serially.
"""
import argparse
import math
import sys

import numpy as np
from mpi4py import MPI

from . import Farm, Task
from .progress import format_summary


class PiBatch(Task):
    """Count random points of the unit square inside the quarter circle."""

    def __init__(self, seed: int, points: int):
        self.seed, self.points = seed, points

    def run(self, ctx):
        """Count random points of this batch inside the unit circle."""
        rng = np.random.default_rng(self.seed)
        xy = rng.random((self.points, 2))
        return int(np.count_nonzero((xy * xy).sum(axis=1) <= 1.0)), self.points


def build_parser() -> argparse.ArgumentParser:
    """The demo's command line."""
    parser = argparse.ArgumentParser(prog="python -m pyfw.farm.demo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000,
                        help="batches of random points to farm out (default: %(default)s)")
    parser.add_argument("--policy", default="adaptive",
                        help="scheduling policy (pyfw.farm.POLICIES; default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    parser.add_argument("--json", help="write the per-worker summary here")
    parser.add_argument("--journal", help="HDF5 result journal: a rerun skips finished tasks")
    return parser


def main(argv=None) -> int:
    """Run the demo farm job (rank 0 prints pi and the per-worker summary)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    sizes = (10 ** rng.uniform(3, 5, args.tasks)).astype(int)   # 1e3 .. 1e5 points
    with Farm(MPI.COMM_WORLD, policy=args.policy, journal=args.journal) as farm:
        if farm.is_master:
            tasks = (PiBatch(args.seed * 1_000_003 + i, int(n)) for i, n in enumerate(sizes))
            inside = total = 0
            # a generator has no len(): total= gives the progress line and the dashboard
            # their "left" and ETA
            for hits, points in farm.map(tasks, unordered=False, total=args.tasks):
                inside += hits
                total += points
            pi = 4.0 * inside / total
            stats = farm.stats()
            print(f"pi ~ {pi:.6f} (error {abs(pi - math.pi):.2e}) from {total:,} points in "
                  f"{args.tasks} uneven tasks, policy {args.policy}")
            print(format_summary(stats))
            if args.json:
                farm.write_stats(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
