"""``python -m apps.rubik --file PATH``: a batch of cubes on the farm (see :mod:`.batch`).

Prints one line per cube as it is solved (one JSON object per line with ``--json``), a
line per bad input line (with its number), and a summary. Exit status 1 if a line was bad
or a solution failed its check, else 0.
"""
import json
import sys
import time

from .batch import BatchSolver, read_entries, summary


def read_lines(path):
    """The lines of a batch file (``-``: standard input). A byte-order mark is dropped and
    bytes that are not UTF-8 are replaced, so such a line is reported as bad with its number
    instead of failing the whole file; OSError if the file cannot be read."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    return data.decode("utf-8-sig", errors="replace").splitlines()


def read_on_master(path, comm):
    """:func:`read_lines` on rank 0 of ``comm``; every rank gets ``(lines, problem)``, with
    lines None on the other ranks and problem a message naming the file and why it cannot be
    read (then every rank stops, none waits for the others)."""
    lines = problem = None
    if comm.rank == 0:
        try:
            lines = read_lines(path)
        except OSError as exc:
            problem = f"cannot read the batch file {path!r}: {exc.strerror or exc}"
    if comm.size > 1:
        problem = comm.mpi.bcast(problem, root=0)
    return lines, problem


def _print_result(r, args, out):
    if args.json:
        print(json.dumps(r), file=out, flush=True)
        return
    if r["length"] is None:
        what = f"no solution of at most {r['lower_bound'] - 1} moves (proven)"
    else:
        what = f"{r['length']:2d} moves  {r['moves'] or '(already solved)'}"
    note = "  (from the journal)" if r.get("resumed") else f"  ({r['seconds']:.2f} s)"
    print(f"line {r['line']}: {what}{note}", file=out, flush=True)


def _print_error(e, args, out):
    print(f"line {e.line}: error: {e.error}: {e.text!r}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"line": e.line, "input": e.text, "error": e.error}), file=out,
              flush=True)


def _print_summary(s, args, out):
    if args.json:
        print(json.dumps({"summary": s}), file=out, flush=True)
        return
    rate = s["cubes_per_second"] or 0.0
    print(f"{s['cubes']} cubes in {s['seconds']:.2f} s: {rate:.3f} cubes/s on "
          f"{s['workers']} worker(s) ({rate / s['workers']:.3f} per worker); "
          f"{s['errors']} bad line(s)", file=out)
    print("lengths   " + ", ".join(f"{k}: {v}" for k, v in s["lengths"].items()), file=out)
    if s["slowest"]:
        print(f"slowest   line {s['slowest']['line']}: {s['slowest']['seconds']:.2f} s", file=out)
    if s["resumed"]:
        print(f"resumed   {s['resumed']} cube(s) from the journal", file=out)


def solve_file(args, comm, out, log, lines):
    """Solve the batch of ``lines`` read from ``args.file`` (every rank calls this; rank 0 is
    the master, the only rank that needs ``lines``)."""
    from pyfw.farm import Farm
    from .farm_search import preload
    from .solver import Heuristic
    mpi = comm.mpi if comm.size > 1 and not args.serial else None
    if args.serial and comm.size > 1:
        if comm.rank != 0:
            return 0
        from mpi4py import MPI
        mpi = MPI.COMM_SELF
    spec = (args.heuristic, args.cache_dir, args.table_depth, args.inverse, args.table_memory)
    with Farm(mpi, setup=preload, setup_args=spec, journal=args.journal) as farm:
        if not farm.is_master:
            return 0
        entries = read_entries(lines)
        errors = [e for e in entries if e.error is not None]
        for e in errors:
            _print_error(e, args, out)
        # the master's tables give each cube's lower bound (its place in the order) only
        h = Heuristic(args.heuristic, args.cache_dir, progress=True, max_depth=args.table_depth,
                      log=log, inverse=args.inverse, memory="shared")
        solver = BatchSolver(farm, h, spec[:4] + (args.table_memory,), limit=args.prove_depth,
                             symmetry=args.symmetry)
        t0 = time.perf_counter()
        results, bad = [], len(errors)
        for _, r in solver.solve(entries):
            results.append(r)
            if r["length"] is not None and not r.get("verified"):
                bad += 1
            _print_result(r, args, out)
        s = summary(results, errors, time.perf_counter() - t0, farm.num_workers)
        _print_summary(s, args, out)
    return 1 if bad else 0
