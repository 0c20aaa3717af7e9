"""Command line: ``[mpiexec -n N] python -m apps.rubik --scramble "R U R' ..."``.

One process solves serially; under mpiexec rank 0 is the master of a pyfw farm and the
other ranks search subtrees. Prints the solution, its length, nodes, nodes/s, the time
per iteration and the per-worker load, or one JSON object with ``--json``.
"""
import argparse
import json
import sys
import threading
import time

from .cube import Cube, InvalidCubeError, format_moves
from .search import MAX_DEPTH
from .solver import (DEFAULT_HEURISTIC, HEURISTICS, SMALL_HEURISTIC, TABLE_MEMORY, Heuristic,
                     Solver, check_cube, choose_heuristic)


def parser():
    """The ``python -m apps.rubik`` command line."""
    p = argparse.ArgumentParser(prog="python -m apps.rubik",
                                description="Optimal (half-turn metric) Rubik's cube solver.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scramble", help="move string applied to a solved cube, e.g. \"R U2 F'\"")
    src.add_argument("--facelets", help="54 stickers in URFDLB face order")
    src.add_argument("--random", nargs="?", const=-1, type=int, metavar="SEED",
                     help="a uniformly random position (optional seed)")
    src.add_argument("--file", metavar="PATH",
                     help="solve a batch: one scramble or one 54-facelet string per line "
                          "('-': standard input; blank lines and # comments skipped); a bad "
                          "line is reported with its number and the others are solved")
    src.add_argument("--build-tables", action="store_true",
                     help="build (or verify) the tables of --heuristic in the cache and exit "
                          "(e.g. once before a batch job)")
    p.add_argument("--prove-depth", type=int, metavar="D",
                   help="prove that no solution of at most D moves exists (or find one)")
    p.add_argument("--all", action="store_true", help="find every optimal (canonical) solution")
    p.add_argument("--heuristic", choices=sorted(HEURISTICS), default=None,
                   help="; ".join(f"{k}: {v}" for k, v in HEURISTICS.items()) +
                   f" (default {DEFAULT_HEURISTIC}, or {SMALL_HEURISTIC} where its table is "
                   f"not built and too little memory is free to build it)")
    p.add_argument("--no-inverse", dest="inverse", action="store_false",
                   help="do not look the phase-1 tables up on the inverse position too (the "
                        "default does: fewer nodes; this is for comparisons)")
    p.add_argument("--split", default="adaptive",
                   help="--order serial/largest: frontier depth for workers (2 = 243 "
                        "subtrees, 3 = 3,240), or 'adaptive': depth 2, then subtrees that "
                        "dominated the previous iteration split further (default)")
    p.add_argument("--order", choices=("dense", "serial", "largest"), default="dense",
                   help="order of the subtrees on the farm: 'dense' (default) the subtrees 4 "
                        "moves deep, densest first by the iteration before, as the serial "
                        "solver searches them, handed on to idle workers; 'serial' depth-first "
                        "as a plain search, or 'largest' first by the previous iteration's "
                        "sizes, in rounds of subtrees under the master's frontier (--split, "
                        "--no-steal apply to these two; --all uses 'serial')")
    p.add_argument("--no-steal", dest="steal", action="store_false",
                   help="--order serial: every subtree runs to its end on one worker "
                        "(default: a subtree still running after 0.5 s hands its rest back, "
                        "and idle workers take it up)")
    p.add_argument("--no-symmetry", dest="symmetry", action="store_false",
                   help="search every subtree of a symmetric position (default: subtrees "
                        "that a symmetry of the position maps onto another are searched "
                        "once; this is for comparisons)")
    p.add_argument("--table-memory", choices=TABLE_MEMORY, default="auto",
                   help="where each searching process keeps the tables: a private copy in "
                        "2 MB pages (about twice as fast per probe, one copy per process), "
                        "the node's shared page cache (one copy per node), or auto: the "
                        "shared one until a process has searched long enough to pay for "
                        "its copy (22 s for nx), then private where one copy per process on "
                        "the node takes at most half of the free memory (default auto)")
    p.add_argument("--cache-dir", help="table cache directory (default $PYFW_RUBIK_CACHE or "
                                       "~/.cache/pyfw/rubik)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (with --file: one JSON line per cube as it is "
                        "solved, then a line with the summary)")
    p.add_argument("--journal", metavar="PATH",
                   help="with --file: record each solved cube in this farm journal (HDF5); "
                        "run the same command again after a kill and the cubes already "
                        "solved are taken from it, not solved again")
    p.add_argument("--table-depth", type=int, help=argparse.SUPPRESS)  # truncated tables (tests)
    p.add_argument("--serial", action="store_true", help="do not use the farm even under mpiexec")
    return p


class _Alone:
    """The world of a process started without a launcher: one rank, MPI left alone (mpi4py
    and ``MPI_Init`` cost 0.1 s or more of wall time and give one process nothing)."""
    rank, size, mpi = 0, 1, None


def _world():
    from pyfw import under_launcher
    if under_launcher():
        from pyfw.comm import world
        return world()
    return _Alone()


def _cube(args):
    if args.scramble is not None:
        return Cube.from_moves(args.scramble)
    if args.facelets is not None:
        return Cube.from_facelets(args.facelets)
    return Cube.random(None if args.random < 0 else args.random)


def _report(cube, res, args, out):
    d = res.to_dict()
    d.update(facelets=cube.facelets(), prove_depth=args.prove_depth,
             iterations=[dict(vars(i)) for i in res.iterations])
    if res.solution is not None:
        d["verified"] = bool(cube.apply(res.solution).is_solved)
    if args.json:
        d.pop("subtrees", None)
        print(json.dumps(d, default=str), file=out)
        return
    print(f"position  {cube.facelets()}", file=out)
    print(f"heuristic {res.heuristic}", file=out)
    if res.symmetries > 1:
        print(f"symmetry  {res.symmetries} symmetries of the position: subtrees they map onto "
              f"each other searched once", file=out)
    for it in res.iterations:
        extra = f"  {it.tasks} tasks" if hasattr(it, "tasks") else ""
        print(f"  bound {it.bound:2d}: {it.generated:>14,} nodes  {it.seconds:8.3f} s{extra}", file=out)
    if res.solution is not None:
        print(f"solution  {format_moves(res.solution) or '(already solved)'}  "
              f"({res.length} moves, optimal, verified={d['verified']})", file=out)
        if len(res.solutions) > 1:
            print(f"all {len(res.solutions)} optimal solutions:", file=out)
            for s in res.solutions:
                print(f"  {format_moves(s)}", file=out)
    else:
        print(f"no solution with at most {res.lower_bound - 1} moves (proven)", file=out)
    if res.table_memory:
        print(f"tables    {res.table_memory}", file=out)
    print(f"nodes     {res.generated:,} generated, {res.expanded:,} expanded, "
          f"{res.nodes_per_second / 1e6:.2f} M nodes/s, {res.seconds:.2f} s", file=out)
    for rank, w in res.workers.items():
        print(f"  worker {rank}: {w['tasks']} tasks, {w['generated']:,} nodes, "
              f"{w['seconds']:.2f} s busy, {w.get('tables') or 'shared'} tables", file=out)


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


class _Heartbeat:
    """A line on stderr every ``every`` seconds while a solve runs (an iteration of a deep
    search can take minutes; a batch log should show the job is alive)."""

    def __init__(self, every=10.0):
        self.every, self.bound, self.t0 = every, None, time.perf_counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _run(self):
        while not self.stop.wait(self.every):
            where = f"searching bound {self.bound}" if self.bound is not None else "searching"
            _log(f"  ... {where}, {time.perf_counter() - self.t0:.0f} s so far")


def _build_tables(args, out):
    t0 = time.perf_counter()
    h = Heuristic(args.heuristic, args.cache_dir, progress=True, log=_log)
    for name, status in h.status.items():
        print(f"table {name}: {status}", file=out)
    print(f"heuristic {args.heuristic} ready in {time.perf_counter() - t0:.1f} s", file=out)
    return 0


def main(argv=None, out=None):
    """Entry point (returns the exit status)."""
    out = out or sys.stdout
    args = parser().parse_args(argv)
    if args.prove_depth is not None and not 0 <= args.prove_depth <= MAX_DEPTH:
        print(f"error: --prove-depth must be 0..{MAX_DEPTH}", file=sys.stderr)
        return 2
    comm = _world()
    if args.journal and not args.file:
        print("error: --journal goes with --file", file=sys.stderr)
        return 2
    lines = None
    if args.file and not args.build_tables:
        from .batch_cli import read_on_master
        lines, problem = read_on_master(args.file, comm)
        if problem:
            if comm.rank == 0:
                print(f"error: {problem}", file=sys.stderr)
            return 2
    cube = None
    if not args.build_tables and not args.file:
        try:
            cube = check_cube(_cube(args))
        except InvalidCubeError as e:
            print(f"error: invalid cube: {e}", file=sys.stderr)
            return 2
    choice = choose_heuristic(args.heuristic, args.cache_dir,
                              _log if comm.rank == 0 else None)
    # every rank loads the same tables, whatever memory its own node has free
    args.heuristic = comm.mpi.bcast(choice, root=0) if comm.size > 1 else choice
    if args.build_tables:
        return _build_tables(args, out)
    if args.file:
        from .batch_cli import solve_file
        return solve_file(args, comm, out, _log, lines)
    beat = _Heartbeat()
    if comm.size == 1 or args.serial:
        return _solve_serial(cube, args, beat, out)
    return _solve_on_farm(cube, args, beat, out)


def _on_iteration(beat):
    """Progress of a long solve: each finished iteration as it completes (on stderr, so
    --json output on stdout stays clean); the heartbeat names the bound being searched."""
    def progress(it):
        beat.bound = it.bound + 1
        print(f"  ... bound {it.bound}: {it.generated:,} nodes, {it.seconds:.2f} s",
              file=sys.stderr, flush=True)
    return progress


def _solve_serial(cube, args, beat, out):
    tables = Heuristic(args.heuristic, args.cache_dir, progress=True,
                       max_depth=args.table_depth, log=_log, inverse=args.inverse,
                       memory=args.table_memory)
    t0 = time.perf_counter()
    with beat:
        res = Solver(tables=tables).solve(cube, max_length=args.prove_depth,
                                          all_solutions=args.all,
                                          on_iteration=_on_iteration(beat),
                                          symmetry=args.symmetry)
    res.seconds = time.perf_counter() - t0
    _report(cube, res, args, out)
    return 0


def _solve_on_farm(cube, args, beat, out):
    from pyfw.farm import Farm
    from .parallel import preload, solve_parallel
    split = args.split if args.split == "adaptive" else int(args.split)
    with Farm(None, setup=preload,
              setup_args=(args.heuristic, args.cache_dir, args.table_depth,
                          args.inverse, args.table_memory)) as farm:
        if farm.is_master:
            # in the rounds of the serial orders the master searches the first iterations
            # alone: its tables follow the same --table-memory rule as a worker's; in the
            # dense order it only takes the cube's lower bound
            searches = args.order != "dense" or args.all
            tables = Heuristic(args.heuristic, args.cache_dir, progress=True,
                               max_depth=args.table_depth, log=_log, inverse=args.inverse,
                               memory=args.table_memory if searches else "shared")
            with beat:
                res = solve_parallel(cube, farm, heuristic=args.heuristic,
                                     max_length=args.prove_depth, all_solutions=args.all,
                                     split=split, order=args.order, steal=args.steal,
                                     symmetry=args.symmetry,
                                     cache_dir=args.cache_dir,
                                     max_depth=args.table_depth, tables=tables,
                                     on_iteration=_on_iteration(beat))
            _report(cube, res, args, out)
    return 0
