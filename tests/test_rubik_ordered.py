"""apps.rubik.ordered: iterations searched as the subtrees 4 moves deep, densest first.

The order must change nothing but where the first solution is met: an exhausted iteration
generates and expands exactly the nodes of one plain search from the cube (the frontier
walk and the leaf searches counted as the kernel counts), every leaf's count is that of
its own subtree search, what a paused leaf search hands on covers the rest exactly, and
lengths stay optimal (against the certified distances of test_rubik_naive)."""
import random

import numpy as np
import pytest

import test_rubik_naive as naive
from apps.rubik import Cube, Solver
from apps.rubik.ordered import (LEAF_DEPTH, N_LEAVES, URF_DENSITY, LeafSearch,
                                is_leaf_piece, leaf_prefixes, leaves_piece)
from apps.rubik.phase1_rows import phase1_row
from apps.rubik.pruning import canonical_sequences, count_canonical
from apps.rubik.search import DONE, FOUND, PAUSED
from test_rubik_search import _scrambles, _without_inverse, _without_tight


def test_the_leaves_are_the_canonical_sequences_four_moves_long():
    leaves = leaf_prefixes()
    assert leaves.shape == (count_canonical(LEAF_DEPTH)[LEAF_DEPTH], LEAF_DEPTH) == (43254, 4)
    assert [list(x) for x in leaves] == sorted(canonical_sequences(LEAF_DEPTH))
    assert is_leaf_piece(*leaves_piece([7, 0])) and list(leaves_piece([7, 0])[0]) == [7, 0]
    assert not is_leaf_piece([0, 3, 6, 9], 4) and not is_leaf_piece([0, 3, 6, 9], None)


def _variants(variant):
    if variant == 3:        # the default table (its separation columns), truncated in CI
        return naive.heuristic("nx")
    h = naive.heuristic("phase1")
    return [h, _without_tight(h), _without_inverse(h)][variant]


VARIANTS = pytest.mark.parametrize("variant", [0, 1, 2, 3],
                                   ids=["tight", "inverse", "forward", "nx"])


@VARIANTS
def test_an_exhausted_iteration_counts_the_nodes_of_one_plain_search(variant):
    h = _variants(variant)
    for seq in _scrambles(4, 9, 12, seed=8):
        cube = Cube.from_moves(seq)
        leaves = h.leaf_order(cube)
        for bound in range(max(h.h(cube), LEAF_DEPTH + 1), h.h(cube) + 3):
            plain = h.subtree(cube, [], bound)
            if plain.run(1 << 40) == FOUND:
                break
            ordered = leaves.iteration(bound)
            assert ordered.run() == DONE
            assert (ordered.generated, ordered.expanded) == (plain.generated, plain.expanded)


def test_leaf_counts_are_their_subtrees_and_the_next_iteration_goes_densest_first():
    h = naive.heuristic("phase1")
    cube = Cube.from_moves("R2 U' F' D2 R F2 L' B U R' F D")
    bound = max(h.h(cube), LEAF_DEPTH + 1)
    while len(h.leaf_order(cube).frontier(bound)[0]) < 100:
        bound += 1                                    # an iteration of many leaves ...
    assert h.subtree(cube, [], bound).run(1 << 40) == DONE      # ... that fails
    leaves = h.leaf_order(cube)
    assert leaves.iteration(bound).run() == DONE
    alive, _, _ = leaves.frontier(bound)
    rng = random.Random(1)
    for i in rng.sample(list(alive), 20):             # each count: its own subtree search
        s = h.subtree(cube, [int(m) for m in leaf_prefixes()[i]], bound)
        s.run(1 << 40)
        assert leaves.counts[i] == s.generated
    pruned = min(set(range(len(leaf_prefixes()))) - set(alive.tolist()))
    with pytest.raises(ValueError, match="pruned"):
        leaves.search(bound, [alive[0], pruned])
    nxt = leaves.iteration(bound + 1)
    urf = leaf_prefixes()[nxt.order, -1] // 3 < 3
    density = leaves.counts[nxt.order] * np.where(urf, URF_DENSITY, 1.0)
    assert np.all(np.diff(density) <= 0) and density[0] > density[-1]
    assert sorted(nxt.order) == sorted(leaves.frontier(bound + 1)[0])


@VARIANTS
def test_leaves_handed_to_a_process_that_never_walked_the_cube_are_judged_as_the_walk(variant):
    # a worker handed leaves of a cube it never searched computes only their paths
    # (LeafOrder.search): a leaf must be accepted exactly when the whole frontier walk
    # keeps it, with the same row and heuristic value
    h = _variants(variant)
    cube = Cube.from_moves("R2 U' F' D2 R F2 L' B U R' F D")
    bound = max(h.h(cube), LEAF_DEPTH + 1)
    walked = h.leaf_order(cube)
    while len(walked.frontier(bound)[0]) < 100:
        bound += 1                          # a frontier of many leaves, and many pruned
    alive = set(walked.frontier(bound)[0].tolist())
    assert len(alive) < N_LEAVES - 400
    fresh, first = h.leaf_order(cube), walked._tree.first_leaf
    for i in range(N_LEAVES):
        try:
            fresh.search(bound, [i])
        except ValueError as e:
            assert i not in alive and "pruned" in str(e)
        else:
            assert i in alive
            assert (fresh.rows[first + i] == walked.rows[first + i]).all()
            assert fresh.hv[first + i] == walked.hv[first + i]
    # the walk's rows against phase1_row's, made move by move from the cube's own row
    for i in sorted(alive)[::7]:
        row, hv = phase1_row(h.tables, cube, leaf_prefixes()[i], h.inverse)
        assert (walked.rows[first + i] == row).all() and walked.hv[first + i] == hv


def test_remainders_of_a_paused_leaf_search_cover_the_rest_exactly():
    h = naive.heuristic("phase1")
    rng = random.Random(5)
    for seq in _scrambles(2, 10, 11, seed=6):
        cube = Cube.from_moves(seq)
        leaves = h.leaf_order(cube)
        bound = max(h.h(cube), LEAF_DEPTH + 1)
        while len(leaves.frontier(bound)[0]) < 100:
            bound += 1
        whole = leaves.iteration(bound)
        sols = []
        while whole.run(1 << 40) == FOUND:
            sols.append(whole.solution)
        leaves.take_counts(None)                      # the same order again
        again = leaves.iteration(bound)
        gen, exp = again.stats[0], again.stats[1]     # the frontier's own nodes
        s, got, queue = LeafSearch(leaves, bound, again.order), [], []
        assert s.order.size >= 100
        while True:                                   # pause at random, hand the rest on
            st = s.step(rng.randint(1, max(2, whole.generated // 100)))
            if st == FOUND:
                got.append(s.solution)
            elif st == DONE:
                break
            elif st == PAUSED and s.leaves_done > s.order.size // 3 and rng.random() < 0.2:
                queue = s.remainder()
                break
        gen, exp = gen + s.generated, exp + s.expanded
        assert queue and any(is_leaf_piece(p, f) for p, f in queue)
        for prefix, first in queue:                   # each leaf as a plain subtree
            subtrees = ([([int(m) for m in leaf_prefixes()[i]], None) for i in prefix]
                        if is_leaf_piece(prefix, first) else [(prefix, first)])
            for p, f in subtrees:
                t = h.subtree(cube, p, bound, f)
                while t.run(1 << 40) == FOUND:
                    got.append(t.solution)
                gen, exp = gen + t.generated, exp + t.expanded
        assert (gen, exp) == (whole.generated, whole.expanded)
        assert got == sols and all(cube.apply(x).is_solved for x in got)


def test_ordered_solves_are_optimal_and_exhaust_the_same_iterations(certified_long):
    h = naive.heuristic("phase1")
    plain, ordered = Solver(tables=h, ordered=False), Solver(tables=h)
    for cube, dist in certified_long:
        a, b = plain.solve(cube, symmetry=False), ordered.solve(cube, symmetry=False)
        assert a.length == b.length == dist and cube.apply(b.solution).is_solved
        assert [(i.bound, i.generated) for i in a.iterations[:-1]] == \
            [(i.bound, i.generated) for i in b.iterations[:-1]]


@pytest.fixture(scope="module")
def certified_long():
    """Positions whose last iteration is above the leaf depth: 6-8 move scrambles with
    their exact distance (meet in the middle, independent of every table)."""
    out = []
    for seq in _scrambles(6, 6, 8, seed=21):
        d = naive.distance(naive.apply(naive.SOLVED, seq))
        if d is not None and d > LEAF_DEPTH:
            out.append((Cube.from_moves(seq), d))
    assert len(out) >= 4
    return out
