"""Phase-1 lookups on the inverse position, followed through the search move by move.

A position and its inverse are equally far from solved, so the phase-1 table looked up on
the three axes of ``C^-1`` bounds the distance of ``C`` too, and the larger of the two
three-axis values is still admissible (nxopt and Cube Explorer do the same). A child
``C * M`` has the inverse ``M^-1 * C^-1``, a premove, which coordinate move tables cannot
follow. But the inverse's phase-1 coordinates are simple functions of the *forward*
cubies: with ``C`` holding cubie ``p`` with orientation ``o`` in slot ``q``, ``C^-1``
holds cubie ``q`` in slot ``p`` with orientation ``-o``. So

- flip(C^-1) has bit ``10 - p`` set for each edge slot of C holding cubie ``p < 11`` with
  orientation 1: a move toggles the bits of the edges it flips (F and B quarter turns);
- twist(C^-1) is the sum over the corner slots of ``(-o mod 3) * 3^(6 - p)`` (cubie
  ``p < 7``): a move changes the terms of the corners it twists;
- the sorted slice of C^-1 (ordered slots of FR, FL, BL, BR) is the list of the cubies
  in C's slots FR, FL, BL, BR; the unsorted one is the set of them.

For each axis frame ``A C A^-1`` (A = :data:`~.symmetry.AXIS_SYMS`) the search keeps two
words: the 12 edge codes (cubie * 2 + flip, 5 bits a slot) and the 8 corner codes
(cubie * 3 + twist, 5 bits a slot) with the inverse's flip (bits 40-50) and twist
(bits 51-62). A move rewrites the 4 edge and 4 corner slots it touches and updates the
flip and twist from those alone, so a child's inverse costs a few dozen integer
operations per axis, and its table index no more than a direct one.

Only children that survive the direct lookups are looked up on the inverse. A move of C is
a premove of C^-1, after which the inverse's phase-1 distance need not be within one of
its parent's, so no bound of it passes from parent to child: it is looked up afresh.
"""
import numpy as np
from numba import njit

from .coords import _flip_rank, _slice_rank, _twist_rank
from .cube import MOVE_CUBES
from .symmetry import axis_cube


def _moved_slots(perm, ori, what):
    """(destination slots, source slots, orientation added, mask of the untouched 5-bit
    fields) of the 4 slots a move's ``perm``/``ori`` (edges or corners) fills."""
    dst, src, add = [], [], []
    mask = (1 << (5 * len(perm))) - 1
    for i in range(len(perm)):
        if perm[i] != i:
            dst.append(i)
            src.append(perm[i])
            add.append(ori[i])
            mask &= ~(31 << (5 * i))
        elif ori[i]:
            raise AssertionError(f"a move turns one of the {what} it does not move")
    if len(dst) != 4:
        raise AssertionError(f"a move moves {len(dst)} {what}")
    return dst, src, add, mask


def _move_tables():
    """Per move: the 4 edge and 4 corner slots it fills (destination, source, flip/twist
    added) and the masks of the words' untouched fields."""
    tabs = [np.zeros((18, 4), np.int64) for _ in range(6)]
    ekeep = np.zeros(18, np.int64)
    ckeep = np.zeros(18, np.int64)
    for m in range(18):
        mv = MOVE_CUBES[m]
        *edge, ekeep[m] = _moved_slots(mv.ep, mv.eo, "edges")
        *corner, ckeep[m] = _moved_slots(mv.cp, mv.co, "corners")
        for t, v in zip(tabs, edge + corner):
            t[m] = v
    return (*tabs, ekeep, ckeep)


def _term_tables():
    """flip_bit[p]: the inverse's flip bit of edge cubie p; twist_term[code]: a corner
    slot's term of the inverse's twist; add_twist[code, k]: the code twisted by k;
    slice_of_mask[mask]: unsorted slice rank of a set of 4 edge slots."""
    flip_bit = np.array([1 << (10 - p) if p < 11 else 0 for p in range(12)], np.int64)
    twist_term = np.zeros(24, np.int64)
    add_twist = np.zeros((24, 3), np.int64)
    for code in range(24):
        p, o = divmod(code, 3)
        twist_term[code] = ((3 - o) % 3) * 3 ** (6 - p) if p < 7 else 0
        for k in range(3):
            add_twist[code, k] = p * 3 + (o + k) % 3
    slice_of_mask = np.full(4096, -1, np.int64)
    for mask in range(4096):
        if bin(mask).count("1") == 4:      # slots of the slice edges: rank as coords does
            ep = np.zeros(12, np.int64)
            ep[[p for p in range(12) if mask >> p & 1]] = 8
            slice_of_mask[mask] = _slice_rank(ep)
    return flip_bit, twist_term, add_twist, slice_of_mask


#: the tables the kernels take, in this order (see :func:`_move_tables`, :func:`_term_tables`)
TABLES = _move_tables() + _term_tables()


def frame_words(cube):
    """The two words of ``cube`` in one axis frame (the cube given already in that frame):
    (edge codes, corner codes | inverse flip << 40 | inverse twist << 51)."""
    inv = cube.inverse()
    ew = 0
    for i in range(12):
        ew |= (int(cube.ep[i]) * 2 + int(cube.eo[i])) << (5 * i)
    cw = 0
    for i in range(8):
        cw |= (int(cube.cp[i]) * 3 + int(cube.co[i])) << (5 * i)
    cw |= int(_flip_rank(inv.eo.astype(np.int64))) << 40
    cw |= int(_twist_rank(inv.co.astype(np.int64))) << 51
    return ew, cw


def inverse_words(cube):
    """The six words (two per axis frame) a search row carries for ``cube``."""
    out = []
    for a in range(3):
        out += frame_words(axis_cube(cube, a))
    return out


@njit(cache=True, inline="always")
def _step(ew, cw, m, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep, flip_bit, twist_term,
          add_twist):
    """The two words of a frame after move ``m`` (a move of that frame)."""
    flip = (cw >> 40) & 2047
    tw = (cw >> 51) & 4095
    ne = ew & ekeep[m]
    for k in range(4):
        code = (ew >> (5 * esrc[m, k])) & 31
        if eflip[m, k]:
            code ^= 1
            flip ^= flip_bit[code >> 1]
        ne |= code << (5 * edst[m, k])
    nc = cw & ckeep[m]
    for k in range(4):
        code = (cw >> (5 * csrc[m, k])) & 31
        t = ctw[m, k]
        if t:
            new = add_twist[code, t]
            tw += twist_term[new] - twist_term[code]
            code = new
        nc |= code << (5 * cdst[m, k])
    return ne, nc | (flip << 40) | (tw << 51)


@njit(cache=True, inline="always")
def _coords(ew, cw, sorted_slice, slice_of_mask):
    """(flip, slice, twist) of the inverse of the frame's position."""
    p0 = (ew >> 41) & 15            # cubies in slots FR, FL, BL, BR (codes at bits 40..59)
    p1 = (ew >> 46) & 15
    p2 = (ew >> 51) & 15
    p3 = (ew >> 56) & 15
    if sorted_slice:                # as coords._positions_rank([p0, p1, p2, p3])
        c1 = p1 - (p0 < p1)
        c2 = p2 - (p0 < p2) - (p1 < p2)
        c3 = p3 - (p0 < p3) - (p1 < p3) - (p2 < p3)
        sl = ((p0 * 11 + c1) * 10 + c2) * 9 + c3
    else:
        sl = slice_of_mask[(1 << p0) | (1 << p1) | (1 << p2) | (1 << p3)]
    return (cw >> 40) & 2047, sl, (cw >> 51) & 4095


@njit(cache=True)
def _advance(words, moves, amc, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep, flip_bit,
             twist_term, add_twist):
    """Apply ``moves`` to the six words in place."""
    for m in moves:
        for a in range(3):
            words[2 * a], words[2 * a + 1] = _step(
                words[2 * a], words[2 * a + 1], amc[a, m], edst, esrc, eflip, cdst, csrc, ctw,
                ekeep, ckeep, flip_bit, twist_term, add_twist)


@njit(cache=True)
def _all_coords(words, sorted_slice, slice_of_mask):
    out = np.empty((3, 3), np.int64)
    for a in range(3):
        out[a, 0], out[a, 1], out[a, 2] = _coords(words[2 * a], words[2 * a + 1], sorted_slice,
                                                  slice_of_mask)
    return out


def inverse_coords(cube, moves, sorted_slice):
    """(flip, slice, twist) of the inverse of ``cube.apply(moves)`` on each axis, the way the
    search follows them (for tests: compare with ``axis_cube(...inverse(), a)``)."""
    from .symmetry import AXIS_MOVE_CONJ
    words = np.array(inverse_words(cube), np.int64)
    _advance(words, np.asarray(moves, np.int64), AXIS_MOVE_CONJ, *TABLES[:11])
    return [tuple(int(v) for v in r) for r in _all_coords(words, sorted_slice, TABLES[11])]
