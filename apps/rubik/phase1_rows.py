"""Coordinate rows of the phase-1 kernel: a subtree root's row with its exact table
values (:func:`phase1_row`), and the moves tight inverse values rule out at a node
(:func:`target_moves`, :func:`tight_skip`)."""
import numpy as np
from numba import njit

from .coords import flip_coord, twist_coord
from .inverse import TABLES as INV_TABLES
from .inverse import _advance as _advance_inverse, _coords, inverse_words
from .nx import SEP_OF_MASK, sep_coord
from .phase1_kernel import (INV_COL, INV_H_COL, SEP_COL, UNKNOWN_H, UP_COL, _index,
                            _inverse_sep, _value)
from .symmetry import AXIS_MOVE_CONJ, axis_cube

_NO_TABLE = np.zeros(1, np.uint8)
_NO_SEP = (np.zeros((1, 18), np.int64), np.zeros((1, 16), np.int64), np.zeros(256, np.int64))


def nx_args(tables):
    """The kernels' nx arguments (nx_base, fallback, sepm, sepconj, sep_of_mask): the nx
    table's (``tables.separation``), or placeholders with nx_base -1 that switch it off."""
    if tables.separation:
        return tables.base, tables.fallback, tables.sepm, tables.sepconj, SEP_OF_MASK
    return (-1, _NO_TABLE) + _NO_SEP


def target_moves(tables):
    """Per axis, the bitmask of the moves inside that axis's target subgroup of the
    phase-1 ``tables`` (moves that leave the solved cube's coordinates solved): what
    :func:`.phase1_kernel._search_reid` skips at a node whose inverse is tight on that
    axis."""
    mt = tables.moves
    flipm, slicem, twm = mt["flip"], mt[tables.slice_move], mt["twist"]
    sepm = tables.sepm if tables.separation else None
    out = []
    for a in range(3):
        mask = 0
        for m in range(18):
            ma = AXIS_MOVE_CONJ[a, m]
            if (flipm[0, ma] == 0 and slicem[tables.slice_solved, ma] == tables.slice_solved
                    and twm[0, ma] == 0 and (sepm is None or sepm[0, ma] == 0)):
                mask |= 1 << m
        out.append(mask)
    return tuple(out)


def tight_skip(inverse_values, left, masks):
    """The moves (bitmask) the kernel does not expand a node by: ``inverse_values`` its
    inverse's exact values on the three axes (its row's columns ``INV_H_COL..+2``),
    ``left`` the moves its cost bound leaves, ``masks`` :func:`target_moves`."""
    skip = 0
    for a in range(3):
        if inverse_values[a] >= left:
            skip |= masks[a]
    return skip


def root_state(tables, cube):
    """The coordinate row the kernel's stack starts from for ``cube``."""
    row = []
    for a in range(3):
        x = axis_cube(cube, a)
        row += [flip_coord(x), tables.slice_coord(x), twist_coord(x)]
    row += [UNKNOWN_H] * 3
    row += inverse_words(cube)
    row += [-1] * 3
    if tables.separation:
        row += [sep_coord(axis_cube(cube, a)) for a in range(3)]
    return np.array(row, np.int64)


@njit(cache=True)
def _advance_reid(row, moves, flipm, slicem, twm, amc, sepm):
    """Apply ``moves`` to the coordinate columns of a phase-1 row in place (and to its
    separation columns, where it has them)."""
    nx = row.size > SEP_COL
    for m in moves:
        for a in range(3):
            ma = amc[a, m]
            row[3 * a] = flipm[row[3 * a], ma]
            row[3 * a + 1] = slicem[row[3 * a + 1], ma]
            row[3 * a + 2] = twm[row[3 * a + 2], ma]
            if nx:
                row[SEP_COL + a] = sepm[row[SEP_COL + a], ma]


@njit(cache=True)
def _reid_row_h(row, ct, tab, use_inv, sorted_slice, slice_of_mask, nx_base, fallback,
                sepconj, sep_of_mask):
    """Look the row's three axes (and with ``use_inv`` the three axes of the inverse) up,
    store the upper bounds in its UP_COL columns (the inverse's lower bounds in its
    INV_H_COL columns) and return the heuristic (max of the lower bounds, de Bondt's +1 when all
    three axes of a side agree; exact for the 4-bit tables)."""
    nx = nx_base >= 0
    lo = np.empty(3, np.int64)
    for a in range(3):
        sp = row[SEP_COL + a] if nx else 0
        lo[a], row[UP_COL + a] = _value(tab, _index(row[3 * a], row[3 * a + 1], row[3 * a + 2], sp,
                                                ct, nx, sepconj), nx_base, fallback)
    h = max(lo[0], max(lo[1], lo[2]))
    if h > 0 and lo[0] == lo[1] and lo[1] == lo[2]:
        h += 1
    row[INV_H_COL:INV_H_COL + 3] = -1
    if use_inv:
        v = np.empty(3, np.int64)
        for a in range(3):
            cw = row[INV_COL + 2 * a + 1]
            fl, sl, tw = _coords(row[INV_COL + 2 * a], cw, sorted_slice, slice_of_mask)
            sp = _inverse_sep(cw, sep_of_mask) if nx else 0
            v[a] = _value(tab, _index(fl, sl, tw, sp, ct, nx, sepconj), nx_base, fallback)[0]
            row[INV_H_COL + a] = v[a]
        hi = max(v[0], max(v[1], v[2]))
        if hi > 0 and v[0] == v[1] and v[1] == v[2]:
            hi += 1
        h = max(h, hi)
    return h


_BASE_ROWS = {}


def _base_row(tables, cube):
    """root_state of the search's start cube, cached (the workers of a solve receive many
    subtrees of the same cube)."""
    key = (tables.name, cube.cp.tobytes(), cube.co.tobytes(), cube.ep.tobytes(),
           cube.eo.tobytes())
    row = _BASE_ROWS.get(key)
    if row is None:
        if len(_BASE_ROWS) > 64:
            _BASE_ROWS.clear()
        row = _BASE_ROWS[key] = root_state(tables, cube)
    return row


def phase1_row(tables, cube, prefix, inverse=True):
    """(coordinate row with exact values, heuristic) of ``cube`` after ``prefix`` for the
    phase-1 tables (``inverse``: also look the inverse position up)."""
    row = _base_row(tables, cube).copy()
    mt = tables.moves
    moves = np.asarray(prefix, np.int64)
    nx_base, fallback, sepm, sepconj, sep_of_mask = nx_args(tables)
    _advance_reid(row, moves, mt["flip"], mt[tables.slice_move], mt["twist"],
                  AXIS_MOVE_CONJ, sepm)
    _advance_inverse(row[INV_COL:INV_COL + 6], moves, AXIS_MOVE_CONJ, *INV_TABLES[:11])
    h = int(_reid_row_h(row, tables.route, tables.table, bool(inverse), tables.sorted_slice,
                        INV_TABLES[11], nx_base, fallback, sepconj, sep_of_mask))
    return row, h
