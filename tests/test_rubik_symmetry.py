"""apps.rubik symmetric positions: the 48 symmetries, stabilizers with known sizes, and a
search that drops equivalent subtrees yet keeps a conjugate of every optimal solution and
finds the distances of an independent breadth-first search."""
import pytest

import test_rubik_naive as naive
from apps.rubik import Cube, Solver
from apps.rubik.pruning import is_canonical
from apps.rubik.position_symmetry import (MOVE_CONJ, SYM_INV, SYMS, SymmetryFilter,
                                          complete_blocks, random_symmetric, stabilizer)
from apps.rubik.symmetry import conjugate

SUPERFLIP = "U R2 F B R B2 R U2 L B2 R U' D' R2 F R' L B2 U2 F2"
U, U2, Ui, R, R2, Ri, F, F2, Fi, D, D2, Di, L, L2, Li, B, B2, Bi = range(18)


def test_the_48_symmetries_are_a_group_that_maps_turns_to_turns_of_the_same_kind():
    keys = {s.key() for s in SYMS}
    assert len(keys) == 48
    for a in SYMS[::5]:
        for b in SYMS:
            assert (a * b).key() in keys
    for row in MOVE_CONJ:
        assert sorted(row) == list(range(18))
        for m in range(18):
            # a quarter turn stays a quarter turn, a half turn a half turn, and the two
            # faces of an axis go to one axis (a block maps to a block); m + 9 is the same
            # turn of the opposite face
            assert (m % 3 == 1) == (row[m] % 3 == 1)
            assert row[m] // 3 % 3 == row[(m + 9) % 18] // 3 % 3


@pytest.mark.parametrize("moves,order", [
    (SUPERFLIP, 48),                       # every symmetry of the cube
    ("U2 D2 F2 B2 R2 L2", 48),             # pons asinorum
    ("U D'", 8),                           # a slice turn: 4 rotations about UD, 4 reflections
    ("U2 D2", 16),                         # every symmetry keeping the UD axis
    ("R U2 F' L D B2 R'", 1),
])
def test_stabilizers_have_their_known_orders(moves, order):
    assert len(stabilizer(Cube.from_moves(moves))) + 1 == order


def test_stabilizer_is_every_symmetry_whose_conjugate_is_the_position():
    # the definition, checked symmetry by symmetry with whole cube products (the function
    # compares the permutations of all 48 at once before conjugating any)
    cubes = [Cube.random(seed) for seed in range(10)]
    cubes += [random_symmetric(seed, 8, 1 + seed % 3)[1] for seed in range(24)]
    cubes += [Cube.from_moves(m) for m in (SUPERFLIP, "U D'", "U2 D2", "F2 B2")]
    symmetric = 0
    for cube in cubes:
        plain = tuple(i for i in range(1, len(SYMS))
                      if conjugate(cube, SYMS[i], SYMS[SYM_INV[i]]) == cube)
        assert stabilizer(cube) == plain
        symmetric += bool(plain)
    assert symmetric >= 28


def test_random_positions_have_no_symmetry_to_prune():
    for seed in range(20):
        assert not SymmetryFilter(Cube.random(seed))


def test_complete_blocks_leave_out_a_last_turn_its_opposite_face_may_still_join():
    assert complete_blocks([]) == []
    assert complete_blocks([U]) == []                 # U D is canonical: not complete yet
    assert complete_blocks([D]) == [(D,)]             # D U is not
    assert complete_blocks([U, Di]) == [(U, Di)]
    assert complete_blocks([U, R]) == [(U,)]
    assert complete_blocks([Ui, R, L2, F]) == [(Ui,), (R, L2)]
    assert complete_blocks([B2, U2]) == [(B2,)]


def _conjugate_canonical(seq, conj):
    """The canonical form of a move sequence conjugated move by move (opposite-face turns
    in a row sorted by face, as the search orders them)."""
    out = [conj[m] for m in seq]
    i = 0
    while i + 1 < len(out):
        a, b = out[i], out[i + 1]
        if a // 3 % 3 == b // 3 % 3 and a // 3 > b // 3:
            out[i], out[i + 1] = b, a
        i += 1
    assert is_canonical(out)
    return out


@pytest.fixture(scope="module")
def symmetric_certified():
    """(moves, cube, distance) of symmetric positions, distances by the geometric
    simulator's meet-in-the-middle search."""
    seqs = [random_symmetric(seed, blocks=3 + seed % 2, generators=1 + seed % 3)[0]
            for seed in range(10)]
    out = []
    for seq in [s for s in seqs if len(s) <= 8] + [
            [U2, D2, F2, B2, R2, L2], [U, Di, R, Li, F, Bi, U, Di]]:
        d = naive.distance(naive.apply(naive.SOLVED, seq))
        cube = Cube.from_moves(seq)
        assert d is not None and stabilizer(cube)
        out.append((seq, cube, d))
    assert len(out) >= 8
    return out


def test_every_optimal_solution_has_a_conjugate_whose_prefixes_are_all_kept(symmetric_certified):
    solver = Solver(tables=naive.heuristic("phase1"))
    for _, cube, d in symmetric_certified:
        every = solver.solve(cube, all_solutions=True)
        assert every.length == d
        keep = SymmetryFilter(cube)
        conjugators = [list(range(18))] + [MOVE_CONJ[s].tolist() for s in keep.symmetries]
        for sol in every.solutions:
            assert any(all(keep.keeps(c[:k]) for k in range(len(c) + 1))
                       for c in (_conjugate_canonical(sol, t) for t in conjugators)), sol


@pytest.mark.parametrize("name", ["phase1", "korf"])       # korf: the test oracle
def test_pruned_search_finds_the_distance_and_generates_fewer_nodes(name, symmetric_certified):
    solver = Solver(tables=naive.heuristic(name))
    for seq, cube, d in symmetric_certified:
        r = solver.solve(cube)
        assert r.length == d and cube.apply(r.solution).is_solved
        full = solver.solve(cube, symmetry=False)
        assert full.length == d
        # a proof one move short: every subtree of the full search, a share of them pruned
        pruned = solver.solve(cube, max_length=d - 1)
        unpruned = solver.solve(cube, max_length=d - 1, symmetry=False)
        assert pruned.solution is None and pruned.lower_bound == d
        assert pruned.generated <= unpruned.generated


def test_superflip_proof_generates_a_fraction_of_the_nodes():
    """Superflip's 48 symmetries leave few of the subtrees: a proof two bounds above its
    heuristic value searches over ten times fewer nodes in its last iteration."""
    solver = Solver(tables=naive.heuristic("phase1"))
    cube = Cube.from_moves(SUPERFLIP)
    depth = solver.heuristic.h(cube) + 1
    pruned = solver.solve(cube, max_length=depth)
    full = solver.solve(cube, max_length=depth, symmetry=False)
    assert pruned.lower_bound == full.lower_bound == depth + 1
    assert pruned.symmetries == 48 and full.symmetries == 1
    assert [i.bound for i in pruned.iterations] == [i.bound for i in full.iterations]
    assert pruned.iterations[-1].generated * 10 < full.iterations[-1].generated


def test_cli_says_when_it_prunes_by_symmetry():
    import io
    import json

    from apps.rubik.cli import main
    out = io.StringIO()
    assert main(["--scramble", "U2 D2 F2 B2 R2 L2", "--table-depth", "5", "--serial",
                 "--heuristic", "phase1"], out=out) == 0
    assert "48 symmetries of the position" in out.getvalue()
    out = io.StringIO()
    assert main(["--scramble", "U2 D2 F2 B2 R2 L2", "--table-depth", "5", "--serial",
                 "--heuristic", "phase1", "--json", "--no-symmetry"], out=out) == 0
    d = json.loads(out.getvalue())
    assert d["length"] == 6 and d["verified"] and d["symmetries"] == 1


def test_a_deeper_frontier_only_where_it_prunes_clearly_more():
    from apps.rubik.frontier import prefixes_at, symmetric_split
    superflip = SymmetryFilter(Cube.from_moves(SUPERFLIP))
    # its 48 symmetries split the 45 possible first blocks into 6 orbits (by hand: every
    # quarter turn is conjugate to U, every half turn to U2; pairs of quarter turns in the
    # same sense to U D, in opposite senses to U D', a quarter and a half turn to U D2,
    # two half turns to U2 D2): the kept prefixes start with those 6 only
    firsts = {complete_blocks(p)[0] for p in prefixes_at(2)
              if superflip.keeps(p) and complete_blocks(p)}
    assert firsts == {(U,), (U2,), (U, D), (U, Di), (U, D2), (U2, D2)}
    # a lone first turn of U, R or F is kept (D, L or B may still join it), of D, L, B not
    assert [p for p in prefixes_at(1) if superflip.keeps(p)] == [[m] for m in range(9)]
    assert symmetric_split(superflip, 2) == 3
    one = SymmetryFilter(random_symmetric(0, 40, 1)[1])
    assert len(one.symmetries) == 1 and symmetric_split(one, 2) == 2
    assert symmetric_split(SymmetryFilter(Cube.random(1)), 2) == 2
