"""apps.rubik IDA*: node counting, resumable slices, optimality against certified
distances, admissibility, all-solutions, prove mode, cancellation, CLI. Korf's solver
(tests/rubik_korf.py) is the independent oracle, and is checked the same way."""
import copy
import io
import json
import random

import numpy as np
import pytest

import rubik_korf
import test_rubik_naive as naive
from apps.rubik import HEURISTICS, Cube, InvalidCubeError, Solver
from apps.rubik import huge, nx, reid
from apps.rubik.coords import flip_coord, slice_coord, sslice_coord, twist_coord
from apps.rubik.inverse import inverse_coords
from apps.rubik.cli import main
from apps.rubik.pruning import count_canonical
from apps.rubik.search import DONE, FOUND, PAUSED, SubtreeSearch
from apps.rubik.symmetry import axis_cube

#: the solver's heuristics and the oracle
NAMES = ("phase1", "huge", "nx", "korf")


def test_the_solver_offers_phase1_huge_and_nx_only():
    assert sorted(HEURISTICS) == ["huge", "nx", "phase1"]


def _scrambles(n, lo, hi, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        seq, last = [], None
        for _ in range(rng.randint(lo, hi)):
            m = rng.choice([m for m in range(18) if last is None or m // 3 != last // 3])
            seq.append(m)
            last = m
        out.append(seq)
    return out


@pytest.fixture(scope="module")
def certified():
    """(cube, exact distance) for scrambles of 5..8 moves; distances by meet-in-the-middle
    search over the geometric simulator, independent of every table."""
    out = []
    for seq in _scrambles(6, 5, 8, seed=11):
        d = naive.distance(naive.apply(naive.SOLVED, seq))
        assert d is not None and d <= len(seq)
        out.append((Cube.from_moves(seq), d))
    return out


def test_with_a_zero_heuristic_the_kernels_generate_exactly_the_canonical_tree():
    counts = count_canonical(4)
    cube = Cube.from_moves("R U F")
    zero_r = reid.ReidTables(np.zeros(reid.N_ENTRIES // 2 + 1, np.uint8))
    zero_h = huge.HugeTables(np.zeros(huge.N_ENTRIES // 2, np.uint8))  # untouched pages: no RAM
    zero_n = nx.NxTables(np.zeros(nx.N_ENTRIES // 4 + 2, np.uint8), zero_r)   # base 0
    searches = [SubtreeSearch(t, cube, [], 4) for t in (zero_r, zero_h, zero_n)]
    for s in searches + [rubik_korf.KorfSearch(rubik_korf.zero_tables(), cube, [], 4)]:
        sols = []
        while True:
            st = s.step(1000)
            if st == FOUND:
                sols.append(s.solution)
            elif st == DONE:
                break
        assert s.generated == sum(counts[1:5])          # 18 + 243 + 3240 + 43254
        assert s.expanded == sum(counts[0:4])
        assert all(cube.apply(x).is_solved and len(x) == 4 for x in sols)
        assert len(sols) == len({tuple(x) for x in sols})


@pytest.mark.parametrize("name", NAMES)
def test_solutions_are_optimal_on_certified_positions(name, certified):
    solver = Solver(tables=naive.heuristic(name))
    for cube, dist in certified:
        assert solver.heuristic.h(cube) <= dist                # admissible
        r = solver.solve(cube)
        assert r.length == dist and cube.apply(r.solution).is_solved
        assert r.iterations[-1].bound == dist and r.lower_bound == dist


@pytest.fixture(scope="module")
def walks():
    """Random walks with their exact distance (<= 8, meet in the middle) or, for the
    longer ones, the walk length as an upper bound."""
    out = []
    for seq in _scrambles(16, 1, 8, seed=2):
        d = naive.distance(naive.apply(naive.SOLVED, seq), max_half=4) if len(seq) > 3 else None
        out.append((seq, d if d is not None else len(seq)))
    for seq in _scrambles(30, 9, 14, seed=4):
        out.append((seq, len(seq)))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_heuristics_are_admissible_along_random_walks(name, walks):
    h = naive.heuristic(name)
    for seq, d in walks:
        assert h.h(Cube.from_moves(seq)) <= d
    assert h.h(Cube.solved()) == 0


def _reference_ida(h, cube, bound):
    """Plain recursive IDA* iteration in Python with full heuristic lookups on every
    generated node (h.h: all three axes, de Bondt's +1): (generated, expanded). With
    ``h.inverse and h.tight``, a node whose inverse (Cube.inverse) is on some axis as far
    from that axis's target subgroup as the moves left is not expanded by the moves of
    that subgroup (those leaving the solved cube's value on that axis at 0)."""
    gen = exp = 0
    tight = h.inverse and h.tight

    def in_target(c, a):      # nx values are lower bounds: its target adds the corner layers
        return h.tables.parts(c)[a] == 0 and (
            not h.tables.separation or nx.sep_coord(axis_cube(c, a)) == nx.SEP_SOLVED)
    in_h = [{m for m in range(18) if in_target(Cube.from_moves([m]), a)} for a in range(3)]

    def visit(c, g, last):
        nonlocal gen, exp
        exp += 1
        skip = set()
        if tight:
            for a, v in enumerate(h.tables.parts(c.inverse())):
                if v >= bound - g:
                    skip |= in_h[a]
        for m in range(18):
            if last is not None and (m // 3 == last or (m // 3) % 3 == last % 3 and m // 3 < last):
                continue
            if m in skip:
                continue
            gen += 1
            x = c.apply([m])
            if g + 1 == bound:
                continue                       # at the bound only "solved?" counts
            if g + 1 + h.h(x) <= bound:
                visit(x, g + 1, m // 3)
    if h.h(cube) <= bound:
        visit(cube, 0, None)
    return gen, exp


def _without_inverse(h):
    h2 = copy.copy(h)
    h2.inverse = False
    return h2


def _without_tight(h):
    h2 = copy.copy(h)
    h2.tight = False
    return h2


@pytest.mark.parametrize("inverse,tight", [(True, True), (True, False), (False, False)])
def test_lazy_lookups_generate_the_nodes_of_full_lookups(inverse, tight):
    """The kernel skips lookups that cannot change the outcome, follows the inverse
    position move by move and skips the moves tight inverse values rule out; a plain IDA*
    that looks every node up (the inverse through Cube.inverse) must generate and expand
    exactly the same nodes."""
    for name in ("phase1", "huge", "nx"):
        try:
            h = naive.heuristic(name)
        except pytest.skip.Exception:
            continue
        h = h if inverse else _without_inverse(h)
        _lazy_equals_full(h if tight else _without_tight(h))


def test_tight_inverse_values_cut_nodes_and_keep_every_optimal_solution():
    """The moves skipped at tight nodes lead to no solution of the bound's length: with
    and without the rule, an iteration finds the same set of solutions (all of them), and
    the rule generates fewer nodes."""
    h = naive.heuristic("phase1")
    loose = _without_tight(h)
    cut = 0
    for seq in _scrambles(3, 8, 9, seed=13):
        cube = Cube.from_moves(seq)
        bound = Solver(tables=h).solve(cube).length
        found, gen = [], []
        for tables in (h, loose):
            s = SubtreeSearch(tables.tables, cube, [], bound, tight=tables.tight)
            sols = []
            while (st := s.step(1 << 30)) != DONE:
                if st == FOUND:
                    sols.append(tuple(s.solution))
            found.append(sorted(sols))
            gen.append(s.generated)
        assert found[0] == found[1] and found[0]
        assert gen[0] <= gen[1]
        cut += gen[1] - gen[0]
    assert cut > 0


def test_the_search_follows_the_inverse_position_on_every_axis():
    """The inverse's (flip, slice, twist) that the kernel carries through moves equal
    those computed from scratch from Cube.inverse, on all three axes, for both slice
    coordinates."""
    rng = np.random.default_rng(5)
    for _ in range(60):
        cube = Cube.random(rng)
        moves = [int(m) for m in rng.integers(0, 18, int(rng.integers(0, 9)))]
        target = cube.apply(moves).inverse()
        for sorted_slice, slice_of in ((True, sslice_coord), (False, slice_coord)):
            got = inverse_coords(cube, moves, sorted_slice)
            for a in range(3):
                x = axis_cube(target, a)
                assert got[a] == (flip_coord(x), slice_of(x), twist_coord(x))


def test_inverse_lookups_prune_a_subset_of_the_nodes_and_keep_lengths_optimal():
    """max(direct, inverse) >= direct, so every iteration generates at most the nodes of the
    direct heuristic (and here fewer in total), and the solutions have the same length."""
    h = naive.heuristic("phase1")
    h0 = _without_inverse(h)
    total, total0 = 0, 0
    for seq in _scrambles(4, 11, 12, seed=8):
        cube = Cube.from_moves(seq)
        assert h.h(cube) >= h0.h(cube)
        r, r0 = Solver(tables=h).solve(cube), Solver(tables=h0).solve(cube)
        assert r.length == r0.length and cube.apply(r.solution).is_solved
        direct = {it.bound: it.generated for it in r0.iterations}
        for it in r.iterations:              # the inverse may start at a higher bound
            assert it.generated <= direct[it.bound]
        total, total0 = total + r.generated, total0 + r0.generated
    assert total < total0


def _lazy_equals_full(h):
    for i, seq in enumerate(_scrambles(3, 9, 10, seed=21)):
        cube = Cube.from_moves(seq)
        b = h.h(cube) + 1 + (i == 0)
        s = SubtreeSearch(h.tables, cube, [], b, inverse=h.inverse, tight=h.tight)
        s.run(1 << 30)
        while s.step(1 << 30) != DONE:      # all solutions: the whole iteration
            pass
        assert (s.generated, s.expanded) == _reference_ida(h, cube, b)
        per_node = 6 if h.inverse else 3           # 3 axes, and 3 more on the inverse
        assert s.stats[2] <= per_node * s.generated      # never more than that per node


def test_a_private_table_copy_searches_exactly_as_the_shared_mapping():
    h = naive.heuristic("phase1")
    hp = copy.copy(h)
    hp.tables, hp.status = copy.copy(h.tables), dict(h.status)
    hp._go_private([(hp.tables, "table")])
    assert hp.memory == "private" and "private copy" in hp.status["memory"]
    assert not np.shares_memory(hp.tables.table, h.tables.table)
    for seq in _scrambles(3, 9, 11, seed=5):
        cube = Cube.from_moves(seq)
        r, rp = Solver(tables=h).solve(cube), Solver(tables=hp).solve(cube)
        assert rp.solution == r.solution and rp.table_memory.startswith("private")
        assert [(i.bound, i.generated, i.expanded) for i in rp.iterations] == \
            [(i.bound, i.generated, i.expanded) for i in r.iterations]


def _auto_phase1(monkeypatch, seconds_per_byte, memory_bytes):
    """A phase-1 heuristic under memory="auto" on a node with ``memory_bytes`` free."""
    from apps.rubik import solver
    monkeypatch.setattr(solver, "available_memory", lambda: memory_bytes)
    monkeypatch.setattr(solver, "local_processes", lambda: 1)
    monkeypatch.setattr(solver, "COPY_SECONDS_PER_BYTE", seconds_per_byte)
    try:
        return solver.Heuristic("phase1", progress=False, memory="auto", cached_only=True)
    except LookupError:
        return solver.Heuristic("phase1", progress=False, memory="auto",
                                max_depth=naive.TRUNCATED_DEPTH)


def test_auto_table_memory_copies_once_the_search_has_paid_for_the_copy(monkeypatch):
    from apps.rubik import solver
    nbytes = naive.heuristic("phase1").tables.table.nbytes
    # a copy of 1 s, gaining 1.5x: the shared mapping has cost that much after 3 s
    h = _auto_phase1(monkeypatch, 1.0 / nbytes, 1e12)
    assert solver.PRIVATE_GAIN == 1.5 and h.memory == "shared"
    h.searched(2.9)
    assert h.memory == "shared"
    h.searched(0.2)
    assert h.memory == "private" and not np.shares_memory(
        h.tables.table, naive.heuristic("phase1").tables.table)
    # a copy that pays at once: the solve moves to it between slices, and finds the
    # same nodes and solution as the shared mapping
    h = _auto_phase1(monkeypatch, 1e-30, 1e12)
    cube = Cube.from_moves("R2 U' F' D2 R F2 L' B D")
    r, ra = Solver(tables=naive.heuristic("phase1")).solve(cube), Solver(tables=h).solve(cube)
    assert h.memory == "private" and ra.solution == r.solution
    assert [(i.generated, i.expanded) for i in ra.iterations] == \
        [(i.generated, i.expanded) for i in r.iterations]
    # where one copy per process would take over half of the free memory: never
    h = _auto_phase1(monkeypatch, 1e-30, 1.5 * nbytes)
    h.searched(1e6)
    assert h.memory == "shared"


def test_resumed_slices_give_the_same_counts_and_solution():
    h = naive.heuristic("phase1")
    cube = Cube.from_moves("R2 U' F' D2 R F2 L' B")
    ref = SubtreeSearch(h.tables, cube, [], 8)
    assert ref.run(1 << 30) == FOUND
    sliced = SubtreeSearch(h.tables, cube, [], 8)
    steps = 0
    while (st := sliced.step(1)) == PAUSED:
        steps += 1
    assert st == FOUND and steps > 3
    assert sliced.solution == ref.solution and sliced.generated == ref.generated
    assert ref.run(1 << 30) == DONE and sliced.run(7) == DONE
    assert ref.generated == sliced.generated


@pytest.mark.parametrize("inverse", [True, False])
def test_remainders_cover_the_rest_of_a_search_exactly(inverse):
    """Work stealing hands on what a paused search has left as (prefix, first move) pieces.
    Pausing at random points and searching the remainders (themselves paused and handed on)
    must generate and expand exactly the nodes of one uninterrupted search -- no subtree
    lost, none searched twice -- and find the same solutions."""
    h = naive.heuristic("phase1")
    h = h if inverse else _without_inverse(h)
    rng = random.Random(3)
    for seq in _scrambles(3, 9, 10, seed=4):
        cube = Cube.from_moves(seq)
        bound = h.h(cube) + 3
        whole = h.subtree(cube, [], bound)
        sols = []
        while whole.step(1 << 30) == FOUND:
            sols.append(whole.solution)
        queue, gen, exp, got, pieces = [([], None)], 0, 0, [], 0
        slice_max = max(2, whole.generated // 50)   # ~50 slices with full or truncated tables
        while queue:
            prefix, first = queue.pop(0)
            s = h.subtree(cube, prefix, bound, first)
            pieces += 1
            while True:
                st = s.step(rng.randint(1, slice_max))
                if st == FOUND:
                    got.append(s.solution)
                elif st == DONE:
                    break
                elif rng.random() < 0.3:
                    rest = s.remainder()
                    assert rest and [len(p) for p, _ in rest] == sorted(
                        (len(p) for p, _ in rest), reverse=True)     # deepest first
                    queue = rest + queue
                    break
            gen, exp = gen + s.generated, exp + s.expanded
        assert pieces > 10
        assert (gen, exp) == (whole.generated, whole.expanded)
        assert got == sols          # in the same order: the pieces keep the search's order
    with pytest.raises(ValueError, match="paused"):
        h.subtree(cube, [], bound).remainder()            # not started


def test_all_optimal_solutions_match_brute_force_enumeration():
    solver = Solver(tables=naive.heuristic("korf"))
    solver_p = Solver(tables=naive.heuristic("phase1"))
    for seq in _scrambles(5, 2, 4, seed=5) + [[0, 9], [1, 10, 4]]:
        state = naive.apply(naive.SOLVED, seq)
        d = naive.distance(state, 2)
        brute = sorted(s for s in naive.canonical_sequences(d)
                       if np.array_equal(naive.apply(state, s), naive.SOLVED))
        for sv in (solver, solver_p):
            r = sv.solve(Cube.from_moves(seq), all_solutions=True)
            assert sorted(r.solutions) == brute and r.length == d


@pytest.mark.parametrize("other", ["phase1", "huge", "nx"])
def test_two_independent_heuristics_agree_on_longer_positions(other):
    a, b = Solver(tables=naive.heuristic("korf")), Solver(tables=naive.heuristic(other))
    for seq in _scrambles(2, 10, 11, seed=9):
        cube = Cube.from_moves(seq)
        ra, rb = a.solve(cube), b.solve(cube)
        assert ra.length == rb.length <= len(seq)
        assert cube.apply(ra.solution).is_solved and cube.apply(rb.solution).is_solved
        # the bounds below the optimum are complete iterations: both heuristics prove them
        assert ra.iterations[-2].bound == ra.length - 1 or ra.iterations[0].bound == ra.length


def test_prove_mode_and_cancellation(certified):
    solver = Solver(tables=naive.heuristic("phase1"))
    cube, d = max(certified, key=lambda x: x[1])
    r = solver.solve(cube, max_length=d - 1)
    assert r.solution is None and r.lower_bound == d
    r = solver.solve(cube, max_length=d)
    assert r.length == d
    calls = []
    hard = Cube.from_moves("R2 U' F' D2 R F2 R' D2 B' R2 F U L2 B")
    r = solver.solve(hard, budget=100, cancelled=lambda: calls.append(1) or True)
    # the first slice of leaves, after the frontier 4 moves deep (see apps.rubik.ordered)
    frontier = solver.heuristic.leaf_order(hard).frontier(r.iterations[-1].bound)[1]
    assert r.solution is None and calls and r.iterations[-1].generated <= frontier + 200
    r = Solver(tables=solver.heuristic, ordered=False).solve(
        hard, budget=100, cancelled=lambda: calls.append(1) or True)
    assert r.solution is None and r.iterations[-1].generated <= 200
    with pytest.raises(ValueError):
        solver.solve(cube, max_length=99)
    with pytest.raises(InvalidCubeError):
        solver.solve("R U X")
    assert solver.solve(Cube.solved()).length == 0


def test_cli_json_and_text(monkeypatch):
    out = io.StringIO()
    assert main(["--scramble", "R U2 F' L", "--json", "--table-depth", "5", "--serial",
                 "--heuristic", "phase1"], out=out) == 0
    d = json.loads(out.getvalue())
    assert d["length"] == 4 and d["verified"] and d["moves"] == "L' F U2 R'"
    assert d["iterations"][-1]["bound"] == 4 and d["generated"] > 0
    out = io.StringIO()
    f = Cube.from_moves("D2 B").facelets()
    assert main(["--facelets", f, "--prove-depth", "1", "--table-depth", "5", "--serial",
                 "--heuristic", "phase1"], out=out) == 0
    assert "no solution with at most 1 moves (proven)" in out.getvalue()
    with pytest.raises(SystemExit):         # Korf's tables are a test oracle only
        main(["--scramble", "R U", "--heuristic", "korf"], out=io.StringIO())
    bad = Cube.from_moves("R").facelets()
    bad = bad[:8] + bad[9] + bad[8] + bad[10:]            # swap two stickers of a corner
    assert main(["--facelets", bad, "--serial"], out=io.StringIO()) == 2


def _axis_coords(c, a):
    x = axis_cube(c, a)
    return (flip_coord(x), slice_coord(x), sslice_coord(x), twist_coord(x), nx.sep_coord(x))


def test_a_move_inside_an_axis_target_leaves_the_inverse_axis_coordinates_alone():
    """The premise of the tight-move rule (:func:`apps.rubik.phase1_rows.target_moves`):
    a move m whose axis-a frame keeps the solved cube's coordinates solved (U or D for the
    UD axis) is a premove of the inverse, and leaves all of the inverse's axis-a
    coordinates (flip, both slices, twist, corner separation) as they are, so its value;
    the other moves change them. (A kernel that took such a child's inverse value from
    its parent instead of a probe was measured and not kept: docs/rubik.md.)"""
    solved = Cube.solved()
    inside = [[m for m in range(18)
               if _axis_coords(solved.apply([m]), a) == _axis_coords(solved, a)]
              for a in range(3)]
    assert [len(x) for x in inside] == [6, 6, 6]            # the two faces of the axis
    assert sorted(sum(inside, [])) == list(range(18))      # every move in one axis only
    changed = 0
    for seq in _scrambles(30, 8, 20, seed=40):
        p = Cube.from_moves(seq)
        for a in range(3):
            before = _axis_coords(p.inverse(), a)
            for m in range(18):
                after = _axis_coords(p.apply([m]).inverse(), a)
                if m in inside[a]:
                    assert after == before
                else:
                    changed += after != before
    assert changed > 0.9 * 30 * 3 * 12
