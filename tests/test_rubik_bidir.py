"""apps.rubik.bidir_kernel: a direction per node (the position's moves or its inverse's).

A node reached by moves of both sides must carry the row of the position it stands for
(checked against rows built from that position's own cubies), a solution assembled from
both ends must solve the cube, lengths stay optimal (against the certified distances of
test_rubik_naive, independent of every table), and a paused search's remainder, whose
pieces hold moves of the inverse, covers the rest exactly."""
import random

import numpy as np
import pytest

import test_rubik_naive as naive
from apps.rubik import Cube, Solver
from apps.rubik.bidir_kernel import (BACK, BIDIR_COLS, LAST_X, LAST_Y, LOW, SIDE, Y0,
                                     _complete_root, inverse_move, prefix_root,
                                     solution_moves)
from apps.rubik.cube import invert_moves
from apps.rubik.inverse import TABLES as INV_TABLES
from apps.rubik.nx import SEP_OF_MASK
from apps.rubik.phase1_kernel import INV_COL, SEP_COL, UP_COL, _index, _value
from apps.rubik.phase1_rows import nx_args, phase1_row
from apps.rubik.search import DONE, FOUND, PAUSED
from test_rubik_ordered import certified_long  # noqa: F401  (a fixture)
from test_rubik_search import _scrambles


def _heuristics():
    base = {"phase1": naive.heuristic("phase1"), "nx": naive.heuristic("nx")}
    return {k: h.variant(bidir=True) for k, h in base.items()}


HEURISTICS = pytest.mark.parametrize("name", ["phase1", "nx"])


def _encoded_prefix(rng, n):
    """A random prefix of ``n`` moves, each of the position or of its inverse, canonical
    on each side."""
    out, last = [], {0: None, BACK: None}
    while len(out) < n:
        side = rng.choice([0, BACK])
        m = rng.randrange(18)
        lf = last[side]
        if lf is not None and (m // 3 == lf or (m // 3 % 3 == lf % 3 and m // 3 < lf)):
            continue
        out.append(side + m)
        last[side] = m // 3
    return out


def test_a_prefix_of_both_sides_leads_where_its_solution_undoes():
    rng = random.Random(3)
    for _ in range(50):
        scramble = [rng.randrange(18) for _ in range(rng.randint(0, 12))]
        cube = Cube.from_moves(scramble)
        prefix = _encoded_prefix(rng, rng.randint(0, 8))
        root, lfx, lfy = prefix_root(cube, prefix)
        fwd = [m for m in prefix if m < BACK]
        back = [m - BACK for m in prefix if m >= BACK]
        # root = cj^-1 .. c1^-1 cube M, so root^-1 = M^-1 cube^-1 c1 .. cj
        rest = invert_moves(fwd) + invert_moves(scramble) + back
        assert root.apply(rest).is_solved
        assert cube.apply(solution_moves(prefix + rest)).is_solved
        assert lfx == (fwd[-1] // 3 if fwd else 6) and lfy == (back[-1] // 3 if back else 6)
    assert [inverse_move(m) for m in range(18)] == invert_moves(list(range(17, -1, -1)))


def _fresh_row(h, cube, prefix):
    """The two-block row of the position ``prefix`` leads ``cube`` to, from its cubies."""
    root, lfx, lfy = prefix_root(cube, prefix)
    row, _ = phase1_row(h.tables, root, [], True)
    full = np.zeros(BIDIR_COLS, np.int64)
    full[:row.size] = row
    t = h.tables
    _complete_root(full, lfx, lfy, t.separation, t.sorted_slice, INV_TABLES[11], SEP_OF_MASK)
    return full


def _true_lower(h, row, block, axis):
    t = h.tables
    nx_base, fallback, _, sepconj, _ = nx_args(t)
    b = block * SIDE
    sp = row[b + SEP_COL + axis] if t.separation else 0
    idx = _index(row[b + 3 * axis], row[b + 3 * axis + 1], row[b + 3 * axis + 2], sp,
                 t.route, t.separation, sepconj)
    return _value(t.table, idx, nx_base, fallback)


@HEURISTICS
def test_rows_carried_down_a_path_are_the_rows_of_the_positions_themselves(name):
    # every node of the stack, paused at many places: coordinates, words, separations
    # and last faces of both sides as the position's own cubies give them; every value
    # it holds is the table's for that position (a lower bound where looked up, an upper
    # bound not below the true one)
    h = _heuristics()[name]
    rng = random.Random(11)
    both_sides = 0
    for seq in _scrambles(3, 9, 12, seed=13):
        cube = Cube.from_moves(seq)
        bound = h.h(cube) + 1
        whole = h.subtree(cube, [], bound)
        whole.run(1 << 40)
        for budget in sorted(rng.sample(range(1, max(2, whole.generated)), 12)):
            s = h.subtree(cube, [], bound)
            if s.step(budget) != PAUSED:
                continue
            path = [int(m) for m in s.path[1:int(s.box[0]) + 1]]
            both_sides += any(m >= BACK for m in path) and any(m < BACK for m in path)
            for level in range(int(s.box[0]) + 1):
                got, want = s.node[level], _fresh_row(h, cube, path[:level])
                for b in (0, Y0):
                    cols = list(range(b, b + 9)) + list(range(b + INV_COL, b + INV_COL + 6))
                    if h.tables.separation:
                        cols += list(range(b + SEP_COL, b + SEP_COL + 3))
                    assert (got[cols] == want[cols]).all(), (path[:level], b)
                assert (got[LAST_X], got[LAST_Y]) == (want[LAST_X], want[LAST_Y])
                for block in (0, 1):
                    for a in range(3):
                        lower, upper = _true_lower(h, want, block, a)
                        low = got[block * SIDE + LOW + a]
                        assert low in (-1, lower)
                        assert got[block * SIDE + UP_COL + a] >= lower
    assert both_sides >= 5


@HEURISTICS
def test_direction_solves_are_optimal(name, certified_long):  # noqa: F811
    h = _heuristics()[name]
    solver = Solver(tables=h)
    for cube, dist in certified_long:
        for symmetry in (True, False):
            r = solver.solve(cube, symmetry=symmetry)
            assert r.length == dist and cube.apply(r.solution).is_solved
    for seq in _scrambles(6, 1, 5, seed=2):          # inside the leaf depth: plain searches
        cube = Cube.from_moves(seq)
        r = solver.solve(cube)
        assert r.length == naive.distance(naive.apply(naive.SOLVED, seq))
        assert cube.apply(r.solution).is_solved


@HEURISTICS
def test_remainders_with_moves_of_the_inverse_cover_the_rest_exactly(name):
    h = _heuristics()[name]
    rng = random.Random(7)
    with_back = 0
    for seq in _scrambles(4, 9, 12, seed=17):
        cube = Cube.from_moves(seq)
        for bound in (h.h(cube) + 1, h.h(cube) + 2):
            whole = h.subtree(cube, [], bound)
            sols = []
            while whole.run(1 << 40) == FOUND:
                sols.append(whole.solution)
            for _ in range(4):
                s = h.subtree(cube, [], bound)
                got, pieces = [], []
                while True:
                    st = s.step(rng.randint(1, max(2, whole.generated // 5)))
                    if st == FOUND:
                        got.append(s.solution)
                    elif st == DONE:
                        break
                    elif rng.random() < 0.5:
                        pieces = s.remainder()
                        break
                gen, exp = s.generated, s.expanded
                with_back += any(m >= BACK for p, f in pieces for m in list(p) + [f])
                for prefix, first in pieces:
                    t = h.subtree(cube, prefix, bound, first)
                    while t.run(1 << 40) == FOUND:
                        got.append(t.solution)
                    gen, exp = gen + t.generated, exp + t.expanded
                assert (gen, exp) == (whole.generated, whole.expanded)
                assert got == sols and all(cube.apply(x).is_solved for x in got)
    assert with_back >= 3


def test_a_direction_search_needs_the_inverse():
    h = naive.heuristic("phase1")
    assert not h.variant(inverse=False, bidir=True).bidir
    with pytest.raises(ValueError, match="0..35"):
        h.variant(bidir=True).subtree(Cube.from_moves("R U"), [36], 5)
    with pytest.raises(TypeError, match="unknown"):
        h.variant(fast=True)
