"""Coordinates (integer encodings of parts of a cube) and their move tables.

The solved cube's value of each coordinate is in the ``*_SOLVED`` constants.

=================  ==================  ========================================
coordinate         range               encodes
=================  ==================  ========================================
corner perm  cp    8! = 40,320          Lehmer rank of the corner permutation
twist              3^7 = 2,187          base-3 digits of co[0..6]
flip               2^11 = 2,048         base-2 digits of eo[0..10]
slice              C(12,4) = 495        the positions of the 4 UD-slice edges
sorted slice       12P4 = 11,880        where each UD-slice edge (FR FL BL BR) is
=================  ==================  ========================================

The tables ``T[coord, move]`` give the coordinate after the move. They are built by
the private numba kernels below from the cubie move definitions of :mod:`.cube`.
"""
import numpy as np
from numba import njit

from .cube import MOVE_CUBES, N_MOVES

N_CP, N_TWIST, N_FLIP, N_SLICE = 40320, 2187, 2048, 495
N_SSLICE = 11880


def move_arrays():
    """(cp, co, ep, eo) of the 18 moves as int64 arrays of shape (18, 8|12)."""
    cp = np.array([m.cp for m in MOVE_CUBES], np.int64)
    co = np.array([m.co for m in MOVE_CUBES], np.int64)
    ep = np.array([m.ep for m in MOVE_CUBES], np.int64)
    eo = np.array([m.eo for m in MOVE_CUBES], np.int64)
    return cp, co, ep, eo


# ---------------------------------------------------------------- rank / unrank kernels
@njit(cache=True)
def _cp_rank(cp):
    r = 0
    for i in range(8):
        c = 0
        for j in range(i + 1, 8):
            if cp[j] < cp[i]:
                c += 1
        r = r * (8 - i) + c
    return r


@njit(cache=True)
def _partial_perm_unrank(r, n, k, out):
    """The k-of-n arrangement of rank ``r`` (Lehmer code, mixed radix n, n-1, ...)."""
    digits = np.empty(k, np.int64)
    for i in range(k - 1, -1, -1):
        digits[i] = r % (n - i)
        r //= (n - i)
    used = np.zeros(n, np.bool_)
    for i in range(k):
        c = digits[i]
        for v in range(n):
            if not used[v]:
                if c == 0:
                    out[i] = v
                    used[v] = True
                    break
                c -= 1


@njit(cache=True)
def _cp_unrank(r, out):
    _partial_perm_unrank(r, 8, 8, out)


@njit(cache=True)
def _twist_rank(co):
    r = 0
    for i in range(7):
        r = r * 3 + co[i]
    return r


@njit(cache=True)
def _twist_unrank(r, out):
    s = 0
    for i in range(6, -1, -1):
        out[i] = r % 3
        s += out[i]
        r //= 3
    out[7] = (3 - s % 3) % 3


@njit(cache=True)
def _flip_rank(eo):
    r = 0
    for i in range(11):
        r = r * 2 + eo[i]
    return r


@njit(cache=True)
def _flip_unrank(r, out):
    s = 0
    for i in range(10, -1, -1):
        out[i] = r & 1
        s += out[i]
        r >>= 1
    out[11] = s & 1


@njit(cache=True)
def _binom(n, k):
    if k < 0 or k > n:
        return 0
    r = 1
    for i in range(k):
        r = r * (n - i) // (i + 1)
    return r


@njit(cache=True)
def _slice_rank(ep):
    """Combinatorial rank of the set of positions holding edges 8..11."""
    r = 0
    k = 0
    for p in range(12):
        if ep[p] >= 8:
            k += 1
            r += _binom(p, k)
    return r


@njit(cache=True)
def _slice_unrank(r, out):
    """Some edge permutation whose slice edges occupy the positions of rank ``r``."""
    pos = np.empty(4, np.int64)
    for k in range(4, 0, -1):
        p = k - 1
        while _binom(p + 1, k) <= r:
            p += 1
        pos[k - 1] = p
        r -= _binom(p, k)
    nxt_s, nxt_o = 8, 0
    for p in range(12):
        inslice = False
        for k in range(4):
            if pos[k] == p:
                inslice = True
        if inslice:
            out[p] = nxt_s
            nxt_s += 1
        else:
            out[p] = nxt_o
            nxt_o += 1


@njit(cache=True)
def _positions_rank(pos):
    """Rank of k distinct ordered positions in 0..11 (mixed radix 12*11*..*(13-k))."""
    r = 0
    for k in range(pos.size):
        c = pos[k]
        for j in range(k):
            if pos[j] < pos[k]:
                c -= 1
        r = r * (12 - k) + c
    return r


@njit(cache=True)
def _sslice_rank(ep):
    """Rank of the ordered positions of edges 8, 9, 10, 11 (mixed radix 12*11*10*9)."""
    pos = np.empty(4, np.int64)
    for p in range(12):
        if ep[p] >= 8:
            pos[ep[p] - 8] = p
    return _positions_rank(pos)


@njit(cache=True)
def _sslice_unrank(r, out):
    """Some edge permutation whose slice edges 8..11 sit where the rank ``r`` says."""
    pos = np.empty(4, np.int64)
    _partial_perm_unrank(r, 12, 4, pos)
    for p in range(12):
        out[p] = -1
    for k in range(4):
        out[pos[k]] = 8 + k
    nxt = 0
    for p in range(12):
        if out[p] < 0:
            out[p] = nxt
            nxt += 1


# ---------------------------------------------------------------- move-table kernels
CP, TWIST, FLIP, SLICE, SSLICE = range(5)     # coordinate kinds of _move_table


@njit(cache=True)
def _unrank(kind, r, out):
    if kind == CP:
        _cp_unrank(r, out)
    elif kind == TWIST:
        _twist_unrank(r, out)
    elif kind == FLIP:
        _flip_unrank(r, out)
    elif kind == SLICE:
        _slice_unrank(r, out)
    else:
        _sslice_unrank(r, out)


@njit(cache=True)
def _rank(kind, a):
    if kind == CP:
        return _cp_rank(a)
    if kind == TWIST:
        return _twist_rank(a)
    if kind == FLIP:
        return _flip_rank(a)
    if kind == SLICE:
        return _slice_rank(a)
    return _sslice_rank(a)


@njit(cache=True)
def _move_table(kind, n, mperm, mori, mod, dtype_probe):
    """T[r, m]: coordinate ``r`` of kind ``kind`` (``n`` values) after move m. A piece
    moves as the cube does: position i takes the piece from mperm[m, i], whose
    orientation (mod ``mod``; 1 for permutation coordinates) gains mori[m, i]."""
    t = np.empty((n, N_MOVES), dtype_probe.dtype)
    k = mperm.shape[1]
    a = np.empty(k, np.int64)
    b = np.empty(k, np.int64)
    for r in range(n):
        _unrank(kind, r, a)
        for m in range(N_MOVES):
            for i in range(k):
                b[i] = (a[mperm[m, i]] + mori[m, i]) % mod if mod > 1 else a[mperm[m, i]]
            t[r, m] = _rank(kind, b)
    return t


# ---------------------------------------------------------------- Python-level helpers
def cp_coord(c):
    """Corner-permutation coordinate of cube ``c`` (0 .. 8! - 1)."""
    return int(_cp_rank(c.cp.astype(np.int64)))


def twist_coord(c):
    """Corner-orientation coordinate of cube ``c`` (0 .. 3^7 - 1)."""
    return int(_twist_rank(c.co.astype(np.int64)))


def flip_coord(c):
    """Edge-orientation coordinate of cube ``c`` (0 .. 2^11 - 1)."""
    return int(_flip_rank(c.eo.astype(np.int64)))


def slice_coord(c):
    """Which 4 positions hold the UD-slice edges (0 .. 494, order ignored)."""
    return int(_slice_rank(c.ep.astype(np.int64)))


def sslice_coord(c):
    """Positions and order of the UD-slice edges (0 .. 11,879)."""
    return int(_sslice_rank(c.ep.astype(np.int64)))


CP_SOLVED = 0
TWIST_SOLVED = 0
FLIP_SOLVED = 0
SLICE_SOLVED = int(_slice_rank(np.arange(12, dtype=np.int64)))
SSLICE_SOLVED = int(_sslice_rank(np.arange(12, dtype=np.int64)))

_TABLES = {}


def move_tables():
    """Dict of the coordinate move tables (built once, then read from the derived cache)."""
    if not _TABLES:
        from .derived import cached_arrays
        _TABLES.update(cached_arrays("move-tables", _build_move_tables))
    return _TABLES


def _build_move_tables():
    mcp, mco, mep, meo = move_arrays()
    i16 = np.zeros(1, np.int16)
    return {"twist": _move_table(TWIST, N_TWIST, mcp, mco, 3, i16),
            "flip": _move_table(FLIP, N_FLIP, mep, meo, 2, i16),
            "slice": _move_table(SLICE, N_SLICE, mep, meo, 1, i16),
            "sslice": _move_table(SSLICE, N_SSLICE, mep, meo, 1, i16)}
