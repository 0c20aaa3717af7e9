"""Batches of cubes (apps/rubik/batch.py, ``python -m apps.rubik --file``): parsing, optimal
lengths against the serial solver, exact node counts when cubes are split into pieces,
the journal's resume, and the command line."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from mpi4py import MPI

from apps.rubik.batch import BatchSolver, read_entries, search_cube
from apps.rubik.cube import Cube
from apps.rubik.ordered import N_LEAVES
from apps.rubik.solver import Heuristic, Solver
from pyfw import launch
from pyfw.farm import Farm
from mpi_util import agree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPTH = 5                     # truncated phase-1 tables, built in memory in seconds
SCRAMBLES = ["F2 D L' U R2 B D' R F U2 L", "R U2 F' L D B2 R' U L2 F", "U F R2 D' B L",
             "D2 B' R U' F2 L D R'", "L2 U B' R D2 F' U2 R B"]

_H = {}


def tables():
    if "h" not in _H:
        _H["h"] = Heuristic("phase1", progress=False, max_depth=DEPTH)
    return _H["h"]


def share_tables(ctx):
    """Farm setup (one process): the worker context takes the test's tables."""
    h = tables()
    ctx.resource(f"rubik:phase1:None:{DEPTH}:True", lambda: h)


def test_read_entries_skips_blanks_and_comments_and_numbers_bad_lines():
    solved = "U" * 9 + "R" * 9 + "F" * 9 + "D" * 9 + "L" * 9 + "B" * 9
    lines = ["# header", "", "R U R' U'", "  ", "R U X", solved + "  # solved",
             "F2 B' # a comment", "U" * 54]
    es = read_entries(lines)
    assert [e.line for e in es] == [3, 5, 6, 7, 8]
    assert [e.error is None for e in es] == [True, False, True, True, False]
    assert "X" in es[1].error
    assert es[0].scramble_length == 4 and es[2].scramble_length is None
    assert es[2].cube.is_solved and es[3].cube == Cube.from_moves("F2 B'")


def test_read_entries_takes_colour_letter_facelets_and_counts_unspaced_scrambles():
    cube = Cube.from_moves("R U F'")
    # the colours a cuber writes (white up, green front): facelets, not moves
    colours = cube.facelets().translate(str.maketrans("URFDLB", "wrgyob"))
    es = read_entries([colours, "RU2F'", "U1 R3 F2 (3f*)", "wwwwwwwwwrrrrrrrrr"])
    assert es[0].error is None and es[0].cube == cube and es[0].scramble_length is None
    assert es[1].cube == Cube.from_moves("R U2 F'") and es[1].scramble_length == 3
    assert es[2].cube == Cube.from_moves("U R' F2") and es[2].scramble_length == 3
    assert es[3].error is not None                    # 18 letters: neither moves nor facelets


class _Farm:
    """A one-process farm that claims two workers: the batch splits its tail as on two."""

    def __init__(self, farm, workers):
        self._farm, self.num_workers = farm, workers

    def __getattr__(self, name):
        return getattr(self._farm, name)


def _serial_iterations(cube, h):
    s = Solver(tables=h).solve(cube, symmetry=False)
    return s, {i.bound: i.generated for i in s.iterations}


@pytest.mark.parametrize("workers", [1, 2])
def test_batch_lengths_are_optimal_and_split_pieces_count_the_serial_nodes(workers):
    # tiny yields: every task hands its remainder back after one slice, so the cubes are
    # searched as many pieces (split at the tail with two workers); every length must be
    # the serial solver's and every exhausted iteration must count exactly its nodes
    h = tables()
    spec = ("phase1", None, DEPTH, True, "shared")
    entries = read_entries(SCRAMBLES + ["nonsense"])
    with Farm(MPI.COMM_SELF, setup=share_tables) as farm:
        solver = BatchSolver(_Farm(farm, workers), h, spec, whole_yield=0.0, piece_yield=0.0,
                             symmetry=False)
        got = {e.line: r for e, r in solver.solve(entries)}
    assert sorted(got) == [1, 2, 3, 4, 5]
    tasks = pieces = 0
    for e in entries[:-1]:
        s, serial = _serial_iterations(e.cube, h)
        r = got[e.line]
        assert r["length"] == s.length and r["verified"]
        exhausted = {b: n for b, n in r["iterations"].items() if b < r["length"]}
        assert exhausted == {b: n for b, n in serial.items() if b < s.length}
        tasks += r["tasks"]
        pieces += r["pieces"]
    assert tasks > 2 * len(SCRAMBLES)           # cubes went out in many tasks
    assert (pieces > 0) == (workers > 1)        # ... split at the tail on two workers


def test_search_cube_resumes_exactly_where_it_yielded():
    h = tables()
    cube = Cube.from_moves(SCRAMBLES[0])
    s, serial = _serial_iterations(cube, h)
    bound, pieces, total = h.h(cube), None, {}
    for _ in range(10_000):
        r = search_cube(h, cube, bound, pieces, 40, True, 0.0, symmetry=False)
        for b, n in r["iterations"].items():
            total[b] = total.get(b, 0) + n
        if r["status"] == "solved":
            break
        bound, pieces = r["bound"], r["rest"]
    assert len(r["solution"]) == s.length
    assert {b: n for b, n in total.items() if b < s.length} == \
        {b: n for b, n in serial.items() if b < s.length}


def test_a_journaled_batch_resumes_without_solving_a_reported_cube_again(tmp_path):
    h = tables()
    spec = ("phase1", None, DEPTH, True, "shared")
    entries = read_entries(SCRAMBLES)
    path = str(tmp_path / "batch.h5")
    first = {}
    with Farm(MPI.COMM_SELF, journal=path, setup=share_tables) as farm:
        gen = BatchSolver(farm, h, spec, symmetry=False).solve(entries)
        for e, r in gen:                     # "killed" after two cubes
            first[e.line] = r
            if len(first) == 2:
                break
        gen.close()
    with Farm(MPI.COMM_SELF, journal=path, setup=share_tables) as farm:
        again = {e.line: r for e, r in BatchSolver(farm, h, spec, symmetry=False).solve(entries)}
    assert sorted(again) == [1, 2, 3, 4, 5]
    assert {k for k, r in again.items() if r.get("resumed")} == set(first)
    for k, r in first.items():
        assert again[k]["moves"] == r["moves"]


def _cli(args, stdin=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "apps.rubik", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_batch_from_stdin_reports_bad_lines_and_a_summary(tmp_path):
    text = "# three cubes and a bad line\nR U R' U'\n\nR U Q\nF2 D L' U R2\nB2 L' D\n"
    common = ["--file", "-", "--heuristic", "phase1", "--table-depth", str(DEPTH),
              "--cache-dir", str(tmp_path), "--json"]
    p = _cli(common, text)
    assert p.returncode == 1, p.stderr           # a bad line: exit status 1
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    cubes = [r for r in rows if "length" in r]
    assert sorted(r["line"] for r in cubes) == [2, 5, 6]
    assert {r["line"]: r["length"] for r in cubes} == {2: 4, 5: 5, 6: 3}
    assert [r["line"] for r in rows if "error" in r] == [4] and "line 4" in p.stderr
    s = rows[-1]["summary"]
    assert s["cubes"] == 3 and s["errors"] == 1 and s["lengths"] == {"3": 1, "4": 1, "5": 1}
    # a proof: no solution of <= 3 moves for the 5-mover (not more than asked), 3 moves
    # for the 3-mover
    p = _cli(common + ["--prove-depth", "3"], "F2 D L' U R2\nB2 L' D\n")
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    got = {r["line"]: (r["length"], r["lower_bound"]) for r in rows[:-1]}
    assert got[2] == (3, 3) and got[1][0] is None
    assert 4 <= got[1][1] <= 5          # proven past the limit, and never past the distance
    # resumed from a journal: nothing solved again
    journal = str(tmp_path / "j.h5")
    good = "R U R' U'\nF2 D L' U R2\n"
    p1 = _cli(common + ["--journal", journal], good)
    p2 = _cli(common + ["--journal", journal], good)
    assert p1.returncode == p2.returncode == 0, p1.stderr + p2.stderr
    s2 = json.loads(p2.stdout.splitlines()[-1])["summary"]
    assert s2["resumed"] == 2 and s2["generated"] == 0


def test_cli_batch_file_that_cannot_be_read_or_decoded(tmp_path):
    common = ["--heuristic", "phase1", "--table-depth", str(DEPTH), "--cache-dir",
              str(tmp_path), "--json"]
    missing = str(tmp_path / "no-such-file.txt")
    p = _cli(["--file", missing] + common, timeout=60)
    assert p.returncode == 2 and "no-such-file.txt" in p.stderr
    assert "No such file" in p.stderr and "Traceback" not in p.stderr
    # a byte-order mark is not a bad first line; bytes that are not UTF-8 make their line
    # bad (with its number), and the other lines are solved
    path = tmp_path / "cubes.txt"
    path.write_bytes(b"\xef\xbb\xbfR U R' U'\n\xff\xfeR\nF2 D L'\n")
    p = _cli(["--file", str(path)] + common)
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    assert p.returncode == 1, p.stderr
    assert {r["line"]: r["length"] for r in rows if "length" in r} == {1: 4, 3: 3}
    assert [r["line"] for r in rows if "error" in r] == [2]


@pytest.mark.launch
def test_a_batch_file_that_cannot_be_read_ends_every_rank(tmp_path):
    missing = str(tmp_path / "no-such-file.txt")
    res = launch.run(3, [sys.executable, "-m", "apps.rubik", "--file", missing, "--heuristic",
                         "phase1", "--table-depth", str(DEPTH), "--cache-dir", str(tmp_path)],
                     timeout=120, capture=True, cwd=ROOT)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.count("cannot read the batch file") == 1   # said once, by the master


@pytest.mark.mpi(min_size=2)
def test_batch_on_the_farm_is_optimal():
    ok, msg = True, ""
    h = tables()
    spec = ("phase1", None, DEPTH, True, "shared")
    from apps.rubik.parallel import preload
    with Farm(MPI.COMM_WORLD, setup=preload, setup_args=spec) as farm:
        if farm.is_master:
            try:
                entries = read_entries(SCRAMBLES)
                got = {e.line: r for e, r in BatchSolver(farm, h, spec, whole_yield=0.0,
                                                         piece_yield=0.0).solve(entries)}
                for e in entries:
                    s = Solver(tables=h).solve(e.cube)
                    assert got[e.line]["length"] == s.length and got[e.line]["verified"]
            except AssertionError as e:
                ok, msg = False, str(e) or repr(e)
    agree(ok, msg)


def test_leaf_counts_travel_with_the_cube_so_any_worker_orders_its_iterations_alike():
    """A cube's tasks may run on any worker: each returns its leaves' counts and the next
    whole task carries the master's merge, so a worker that never saw the cube (its leaf
    orders dropped before every task here) searches in the same order, to the same nodes,
    as one that kept the cube; searching a handed-on leaf there needs its rows rebuilt.
    Without the counts a whole task searches its iteration in lexicographic order."""
    from apps.rubik import batch
    h = tables()
    cube = Cube.from_moves(SCRAMBLES[0] + " B2")     # iterations of several tasks each

    def solve(ship, forget):
        batch._LEAF_ORDERS.clear()
        bound, pieces, counts, total, tasks = h.h(cube), None, None, {}, 0
        while True:
            if forget:
                batch._LEAF_ORDERS.clear()
            r = search_cube(h, cube, bound, pieces, 40, True, 0.0, symmetry=False,
                            counts=counts if ship else None)
            tasks += 1
            if "leaf_counts" in r:
                counts = np.zeros(N_LEAVES, np.float32) if counts is None else counts
                counts[r["leaf_counts"][0]] = r["leaf_counts"][1]
            for b, n in r["iterations"].items():
                total[b] = total.get(b, 0) + n
            if r["status"] == "solved":
                assert cube.apply(r["solution"]).is_solved
                return total, len(r["solution"]), tasks
            bound, pieces = r["bound"], r["rest"]

    kept, length, tasks = solve(ship=True, forget=False)
    assert tasks > 5 and length == Solver(tables=h).solve(cube).length
    assert solve(ship=True, forget=True)[:2] == (kept, length)
    lost = solve(ship=False, forget=True)[0]          # no counts: the lexicographic order
    assert lost[length] != kept[length] and lost[length - 1] == kept[length - 1]
