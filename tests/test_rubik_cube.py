"""apps.rubik cube model: move algebra, parsing, facelets, validation, move pruning."""
import random

import numpy as np
import pytest

import test_rubik_naive as naive
from apps.rubik.cube import (MOVE_CUBES, SOLVED, Cube, InvalidCubeError, format_moves,
                             invert_moves, parse_moves)
from apps.rubik.pruning import canonical_sequences, count_canonical, is_canonical


def test_four_quarter_turns_are_the_identity_and_inverses_cancel():
    for m in range(0, 18, 3):
        c = Cube.solved()
        for k in range(4):
            assert c.is_solved == (k == 0)
            c = c * MOVE_CUBES[m]
        assert c.is_solved
    rng = random.Random(7)
    for _ in range(20):
        seq = [rng.randrange(18) for _ in range(rng.randrange(1, 30))]
        assert Cube.from_moves(seq).apply(invert_moves(seq)).is_solved
        c = Cube.from_moves(seq)
        assert (c * c.inverse()).is_solved and (c.inverse() * c).is_solved


def test_famous_orders():
    def order(seq):
        c, k = Cube.from_moves(seq), 1
        while not c.is_solved:
            c, k = c.apply(seq), k + 1
        return k
    assert order("R U") == 105
    assert order("R U R' U'") == 6
    assert order("R U2 D' B D'") == 1260


def test_cubie_moves_agree_with_the_geometric_facelet_simulator():
    rng = random.Random(3)
    for _ in range(40):
        seq = [rng.randrange(18) for _ in range(rng.randrange(0, 40))]
        assert Cube.from_moves(seq).facelets() == naive.to_string(naive.apply(naive.SOLVED, seq))


def test_facelet_round_trip_and_known_strings():
    assert Cube.from_moves("U").facelets() == (
        "UUUUUUUUU" "BBBRRRRRR" "RRRFFFFFF" "DDDDDDDDD" "FFFLLLLLL" "LLLBBBBBB")
    sf = Cube.from_facelets("UBULURUFURURFRBRDRFUFLFRFDFDFDLDRDBDLULBLFLDLBUBRBLBDB")
    assert sf.eo.tolist() == [1] * 12 and sf.cp.tolist() == list(range(8))
    for seed in range(20):
        c = Cube.random(seed)
        assert Cube.from_facelets(c.facelets()) == c
    # colours are named by centres: any six letters work
    f = Cube.from_moves("R U F'").facelets()
    recol = f.translate(str.maketrans("URFDLB", "WRGYOB"))
    assert Cube.from_facelets(recol) == Cube.from_moves("R U F'")


def test_parse_moves_is_tolerant_and_precise():
    assert parse_moves("R U2 F'") == [3, 1, 8]
    assert parse_moves("RU2F'") == parse_moves("  R  U2   F' ") == [3, 1, 8]
    assert parse_moves("R2' U3 F’") == [4, 2, 8]
    assert parse_moves("U1 R3 F2") == parse_moves("U R' F2") == [0, 5, 7]   # turn counts
    assert parse_moves("") == []
    assert format_moves(parse_moves("D L2 B'")) == "D L2 B'"
    with pytest.raises(InvalidCubeError, match="position 2"):
        parse_moves("R X U")
    with pytest.raises(InvalidCubeError, match="0..17"):
        parse_moves([3, 18])


@pytest.mark.parametrize("mutate, message", [
    (lambda f: f[:8] + "R" + f[9:], "appears"),                  # 10 R stickers, 8 U
    (lambda f: f[:53], "54 stickers"),
    (lambda f: f[:4] + "R" + f[5:13] + "U" + f[14:], None),       # swapped centres: recoloured, still valid? no: counts ok
    (lambda f: f.replace("U", "X", 1), "match no centre"),
])
def test_bad_facelet_strings_are_rejected_with_a_reason(mutate, message):
    f = Cube.solved().facelets()
    g = mutate(f)
    if message is None:
        # swapping two centres relabels colours; the corner/edge stickers then name no piece
        with pytest.raises(InvalidCubeError, match="no corner piece|no edge piece|appears"):
            Cube.from_facelets(g)
    else:
        with pytest.raises(InvalidCubeError, match=message):
            Cube.from_facelets(g)


def _twist_corner(c):
    c = c.copy()
    c.co[0] = (c.co[0] + 1) % 3
    return c


def _flip_edge(c):
    c = c.copy()
    c.eo[0] ^= 1
    return c


def _swap_edges(c):
    c = c.copy()
    c.ep[[0, 1]] = c.ep[[1, 0]]
    return c


@pytest.mark.parametrize("breaker, message", [
    (_twist_corner, "corner is twisted"),
    (_flip_edge, "edge is flipped"),
    (_swap_edges, "two pieces are swapped"),
])
def test_impossible_positions_are_rejected_from_facelets_and_cubies(breaker, message):
    for seed in range(3):
        bad = breaker(Cube.random(seed))
        with pytest.raises(InvalidCubeError, match=message):
            Cube.from_facelets(bad.facelets())
        with pytest.raises(InvalidCubeError, match=message):
            Cube(bad.cp, bad.co, bad.ep, bad.eo)


def test_duplicate_pieces_are_named():
    f = list(Cube.solved().facelets())
    # paint UF like UR and DR like DF: sticker counts stay right, UR and DF appear twice
    f[7], f[19] = "U", "R"
    f[32], f[16] = "D", "F"
    with pytest.raises(InvalidCubeError, match="UR appears twice"):
        Cube.from_facelets("".join(f))


def test_random_states_are_valid_and_cover_both_parities():
    par = set()
    for seed in range(40):
        c = Cube.random(seed)
        c.validate()
        par.add(naive_parity(c.cp))
    assert par == {0, 1}


def naive_parity(p):
    p, seen, s = list(p), set(), 0
    for i in range(len(p)):
        j, n = i, 0
        while j not in seen:
            seen.add(j)
            j, n = p[j], n + 1
        s += max(n - 1, 0)
    return s % 2


def test_canonical_pruning_counts_match_korf_table_1():
    assert count_canonical(6) == [1, 18, 243, 3240, 43254, 577368, 7706988]
    assert [len(canonical_sequences(d)) for d in range(4)] == [1, 18, 243, 3240]
    assert len(naive.canonical_sequences(3)) == 3240
    c = count_canonical(15)
    assert abs(c[15] / c[14] - 13.348469) < 1e-6
    assert c[15] == 103697388221736960
    assert is_canonical(parse_moves("U D R L F B")) and not is_canonical(parse_moves("D U"))
    assert not is_canonical(parse_moves("R R2"))


def test_solved_constants():
    assert SOLVED.is_solved and Cube.solved().facelets() == "".join(c * 9 for c in "URFDLB")
    assert np.array_equal(Cube.from_moves("").cp, np.arange(8))
