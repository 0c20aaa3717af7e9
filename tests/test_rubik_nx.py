"""apps.rubik's nx table (phase-1 coordinates plus the corners' U/D separation, 2 bits):
its coordinate tables against cubie arithmetic, its BFS code against the phase-1 table,
the kernel's lookups against a plain reference, the search's optimality through it, and
the default table's bounds, symmetries, admissibility and optimal solves: the 2.47 GB
table where it is cached, else the same build stopped at depth 7 (CI)."""
import copy
import random

import numpy as np
import pytest

import test_rubik_naive as naive
from apps.rubik import Cube, Solver, nx, reid
from apps.rubik import coords as C
from apps.rubik.packing import unpack4
from apps.rubik.phase1_rows import INV_H_COL, UP_COL, phase1_row, target_moves
from apps.rubik.symmetry import UD_SYM_INV, UD_SYMS, axis_cube, conjugate

U_AND_D = sum(1 << m for m in (0, 1, 2, 9, 10, 11))     # U U2 U' D D2 D'


def _random_cubes(n, seed):
    rng = random.Random(seed)
    return [Cube.from_moves([rng.randrange(18) for _ in range(rng.randrange(1, 25))])
            for _ in range(n)]


def test_separation_coordinate_follows_moves_and_symmetries_as_the_cubies_do():
    sepm, sepconj = nx.sep_move_table(), nx.sep_conj_table()
    _, _, _, tconj = reid.sym_tables()
    assert nx.sep_coord(Cube.solved()) == nx.SEP_SOLVED
    assert sorted(set(sepm.ravel())) == list(range(nx.N_SEP))
    for c in _random_cubes(40, 1):
        k = nx.sep_coord(c)
        for m in range(18):
            assert nx.sep_coord(c.apply([m])) == sepm[k, m]
        for s in range(16):
            x = conjugate(c, UD_SYMS[s], UD_SYMS[UD_SYM_INV[s]])
            # the same convention as the twist's conjugation table, which the table shares
            assert C.twist_coord(x) == tconj[C.twist_coord(c), s]
            assert nx.sep_coord(x) == sepconj[k, s]
    # the moves that keep every corner in its layer: U and D turns only (R2 swaps layers)
    moves = [m for m in range(18) if sepm[nx.SEP_SOLVED, m] == nx.SEP_SOLVED]
    assert moves == [0, 1, 2, 9, 10, 11]


def test_the_table_code_rebuilds_the_phase1_table_forward_and_backward():
    """With one separation value the nx BFS is a BFS of the phase-1 table: it must give
    reid's depths entry for entry (levels 6 and 7 forced backward)."""
    depth = 7
    tab, counts = nx.build_depths(1, max_depth=depth, backward=(6, 7))
    ours = unpack4(tab, reid.N_ENTRIES)[:reid.N_ENTRIES]
    ref, hist = reid.build(max_depth=depth)
    ref = ref.copy()
    ref[ref > depth] = nx.UNSET
    assert counts == hist[:depth + 1]
    assert np.array_equal(ours, ref)


def test_choose_base_minimises_korfs_node_estimate():
    hist = np.zeros((16, 16), np.int64)
    hist[9, 7] = 10          # a few shallow entries with weak phase-1 values
    hist[11, 9] = 1000
    hist[12, 9] = 5000
    hist[13, 9] = 100
    b = nx.choose_base(hist)
    cost = {}
    for base in range(13):        # the estimate written out: P(max of 3 values <= k)
        h = [p if d <= base else min(d, base + 3) for d in range(16) for p in range(16)
             for _ in range(hist[d, p])]
        cost[base] = sum(nx.BRANCHING ** -k * (sum(v <= k for v in h) / len(h)) ** 3
                         for k in range(20))
        assert nx.node_estimate(hist, base) == pytest.approx(cost[base])
    assert cost[b] == min(cost.values())
    assert b == 10      # 11, 12 and 13 exact; 9 on its phase-1 value


def _sparse_nx_tables(cubes, seed):
    """An nx table of untouched zero pages (no RAM) with random codes at exactly the
    entries ``cubes`` and their inverses look up, and its Python reference lookups."""
    table = np.zeros((nx.N_ENTRIES + 3) // 4 + 1, np.uint8)
    table[-1] = 7                                   # the base
    tables = nx.NxTables(table, naive.heuristic("phase1").tables)
    rng = np.random.default_rng(seed)
    cl, _, stab, tconj = reid.sym_tables()
    for c in cubes:
        for x in (c, c.inverse()):
            for a in range(3):
                y = axis_cube(x, a)
                w = int(cl[(C.slice_coord(y) << 11) | C.flip_coord(y)])
                k, S = w >> 4, w & 15
                t, p = int(tconj[C.twist_coord(y), S]), int(tables.sepconj[nx.sep_coord(y), S])
                code = int(rng.integers(4))
                # the entries the representative's own symmetries relate hold one value (as
                # the BFS sets them); a route may reach any of them
                for S2 in range(16):
                    if stab[k] >> S2 & 1:
                        idx = (k * C.N_TWIST + int(tconj[t, S2])) * nx.N_SEP \
                            + int(tables.sepconj[p, S2])
                        byte, sh = idx >> 2, (idx & 3) * 2
                        table[byte] = (int(table[byte]) & ~(3 << sh) & 255) | (code << sh)
    return tables


def test_kernel_rows_look_up_what_the_reference_looks_up_directly_and_on_the_inverse():
    cubes = _random_cubes(12, 2)
    tables = _sparse_nx_tables(cubes, 3)
    for c in cubes:
        row, h = phase1_row(tables, c, [], inverse=True)
        for a in range(3):
            assert row[UP_COL + a] == tables.bounds(c, a)[1]
            assert row[INV_H_COL + a] == tables.bounds(c.inverse(), a)[0]
        assert h == tables.h(c, inverse=True)


def test_kernel_rows_follow_moves_to_the_same_lookups():
    """The separation columns and the inverse's separation, moved along a prefix by the
    move tables and the words, index what the reference finds for the moved cube."""
    rng = random.Random(4)
    starts = _random_cubes(6, 5)
    prefixes = [[rng.randrange(18) for _ in range(rng.randrange(1, 6))] for _ in starts]
    tables = _sparse_nx_tables([c.apply(p) for c, p in zip(starts, prefixes)], 6)
    for c, p in zip(starts, prefixes):
        row, h = phase1_row(tables, c, p, inverse=True)
        moved = c.apply(p)
        for a in range(3):
            assert row[UP_COL + a] == tables.bounds(moved, a)[1]
            assert row[INV_H_COL + a] == tables.bounds(moved.inverse(), a)[0]
        assert h == tables.h(moved, inverse=True)


def test_search_through_the_nx_kernel_is_optimal_and_skips_only_u_and_d_when_tight():
    """All codes 0 with base 20: every lookup falls back on the phase-1 table and no
    lookup is ever skipped, so the nx kernel must solve as the phase-1 heuristic does."""
    table = np.zeros((nx.N_ENTRIES + 3) // 4 + 1, np.uint8)
    table[-1] = 20
    tables = nx.NxTables(table, naive.heuristic("phase1").tables)
    assert target_moves(tables)[0] == U_AND_D
    ref = Solver(tables=naive.heuristic("phase1"))
    heuristic = copy.copy(naive.heuristic("phase1"))
    heuristic.tables, heuristic.name, heuristic._target_moves = tables, "nx", None
    solver = Solver(tables=heuristic)
    for seq in ([0, 4, 7, 11, 14], [3, 8, 12, 15, 1, 6, 10], [17, 5, 9, 2, 13, 7]):
        cube = Cube.from_moves(seq)
        r = solver.solve(cube)
        assert cube.apply(r.solution).is_solved
        assert r.length == ref.solve(cube).length


# ------------------------- the default table: the real one where cached, else truncated
def _real():
    # the real table where it is cached; else the same BFS and packing stopped at depth 7
    # (nx.build_truncated: base 5, every entry not reached reads as >= 8): never skipped
    return naive.heuristic("nx").tables


def test_default_table_bounds_are_consistent_and_moves_change_them_by_one():
    tables = _real()
    base = tables.base
    rng = random.Random(8)
    # positions of known depth: scrambles' coordinates are within their length
    for c in _random_cubes(200, 9):
        for a in range(3):
            lo, up = tables.bounds(c, a)
            assert lo <= up
            for m in range(18):
                lo2, up2 = tables.bounds(c.apply([m]), a)
                assert lo2 <= up + 1 and lo <= up2 + 1      # one move: distance +-1
    for n in range(1, base + 1):                        # short scrambles sit at or under base
        c = Cube.from_moves([rng.randrange(18) for _ in range(n)])
        assert tables.bounds(c, 0)[1] == base
    assert tables.bounds(Cube.solved(), 0) == (0, base)


def test_default_table_is_symmetric():
    tables = _real()
    for c in _random_cubes(10, 10):
        want = tables.bounds(c, 0)
        for s in UD_SYMS:
            assert tables.bounds(conjugate(c, s), 0) == want
        for a in (1, 2):
            assert tables.bounds(c, a) == tables.bounds(axis_cube(c, a), 0)


def test_default_table_is_admissible_and_solves_optimally_on_certified_positions():
    _real()
    solver = Solver(tables=naive.heuristic("nx"))
    rng = random.Random(12)
    for _ in range(4):
        seq = [rng.randrange(18) for _ in range(rng.randrange(5, 9))]
        dist = naive.distance(naive.apply(naive.SOLVED, seq))    # meet in the middle
        cube = Cube.from_moves(seq)
        assert solver.heuristic.h(cube) <= dist
        r = solver.solve(cube)
        assert r.length == dist and cube.apply(r.solution).is_solved
