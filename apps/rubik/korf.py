"""Korf's (1997) pattern databases: all corners and two groups of six edges.

===========  ===================================  ===========  =========
table        index                                entries      4-bit size
===========  ===================================  ===========  =========
corners      cp * 2187 + twist                    88,179,840   44.1 MB
edges A      rank(positions of UR UF UL UB DR DF)  42,577,920   21.3 MB
             * 64 + their 6 flip bits
edges B      same for DL DB FR FL BL BR           42,577,920   21.3 MB
===========  ===================================  ===========  =========

Each entry is the exact number of moves (HTM) needed to solve that part, found by a
breadth-first search from solved (level by level over a byte array; forward while less
than half the entries are set, then backward: an unset entry with a neighbour at the
current depth gets depth + 1). ``max_depth`` truncates the search: unset entries get
``max_depth + 1``, still a lower bound (used by the tests). Tables are stored packed,
two entries per byte (low nibble = even index).
"""
import numpy as np
from numba import njit

from .cache import Progress, load_or_build
from .coords import (E6A_SOLVED, E6B_SOLVED, EDGES_A, EDGES_B, N_CP, N_E6, N_TWIST,
                     cp_coord, e6_coord, move_tables, twist_coord)

VERSION = 1
N_CORNER = N_CP * N_TWIST
N_EDGE6 = N_E6 * 64
UNSET = 255


@njit(cache=True)
def _corner_level(tab, d, cpm, twm, forward):
    n = 0
    for idx in range(tab.size):
        if forward:
            if tab[idx] != d:
                continue
            c = idx // 2187
            t = idx - c * 2187
            for m in range(18):
                j = cpm[c, m] * 2187 + twm[t, m]
                if tab[j] == UNSET:
                    tab[j] = d + 1
                    n += 1
        else:
            if tab[idx] != UNSET:
                continue
            c = idx // 2187
            t = idx - c * 2187
            for m in range(18):
                j = cpm[c, m] * 2187 + twm[t, m]
                if tab[j] == d:
                    tab[idx] = d + 1
                    n += 1
                    break
    return n


@njit(cache=True)
def _edge_level(tab, d, e6, e6x, forward):
    n = 0
    for idx in range(tab.size):
        if forward:
            if tab[idx] != d:
                continue
            r = idx >> 6
            f = idx & 63
            for m in range(18):
                j = (e6[r, m] << 6) | (f ^ e6x[r, m])
                if tab[j] == UNSET:
                    tab[j] = d + 1
                    n += 1
        else:
            if tab[idx] != UNSET:
                continue
            r = idx >> 6
            f = idx & 63
            for m in range(18):
                j = (e6[r, m] << 6) | (f ^ e6x[r, m])
                if tab[j] == d:
                    tab[idx] = d + 1
                    n += 1
                    break
    return n


@njit(cache=True)
def _pack4(tab):
    out = np.empty((tab.size + 1) // 2, np.uint8)
    for i in range(tab.size // 2):
        out[i] = tab[2 * i] | (tab[2 * i + 1] << 4)
    if tab.size % 2:
        out[-1] = tab[-1]
    return out


@njit(cache=True, inline="always")
def _nib(tab, idx):
    return (tab[idx >> 1] >> ((idx & 1) << 2)) & 15


def unpack4(packed, n):
    """Unpack a 4-bit table to one byte per entry (for tests and statistics)."""
    p = np.asarray(packed)
    out = np.empty(2 * p.size, np.uint8)
    out[0::2] = p & 15
    out[1::2] = p >> 4
    return out[:n]


def bfs(n, start, level, args, max_depth=None, progress=None):
    """Generic level-synchronous BFS; returns (uint8 depths, histogram list)."""
    tab = np.full(n, UNSET, np.uint8)
    tab[start] = 0
    hist = [1]
    filled, d = 1, 0
    while True:
        if max_depth is not None and d >= max_depth:
            break
        forward = filled < n // 2
        new = level(tab, d, *args, forward)
        if new == 0:
            break
        hist.append(int(new))
        filled += new
        d += 1
        if progress:
            progress.update(filled, f"depth {d}")
    if max_depth is not None and filled < n:
        tab[tab == UNSET] = max_depth + 1
    return tab, hist


def build_corners(max_depth=None, progress=None):
    """Unpacked corner depths (uint8, 88,179,840 entries) and the depth histogram."""
    t = move_tables()
    return bfs(N_CORNER, 0, _corner_level, (t["cp"], t["twist"]), max_depth, progress)


def build_edges(group, max_depth=None, progress=None):
    """Unpacked depths of edge group ``"A"`` or ``"B"`` and the depth histogram."""
    t = move_tables()
    start = (E6A_SOLVED if group == "A" else E6B_SOLVED) * 64
    return bfs(N_EDGE6, start, _edge_level, (t["e6"], t["e6x"]), max_depth, progress)


class KorfTables:
    """The three packed tables plus the move tables the search needs."""

    name = "korf"

    def __init__(self, corners, edges_a, edges_b, status=None):
        self.corners, self.edges_a, self.edges_b = corners, edges_a, edges_b
        self.status = status or {}
        self.moves = move_tables()

    @classmethod
    def load(cls, directory=None, progress=True, max_depth=None, log=None, cached_only=False):
        """Load from the cache (building what is missing, unless ``cached_only``: then
        LookupError). ``max_depth`` gives truncated tables, built in memory, never cached."""
        parts, status = [], {}
        for name, n, builder in (("corners", N_CORNER, build_corners),
                                 ("edges_a", N_EDGE6, lambda **k: build_edges("A", **k)),
                                 ("edges_b", N_EDGE6, lambda **k: build_edges("B", **k))):
            def build(show, builder=builder, name=name, n=n):
                bar = Progress(f"korf {name}", n, enabled=bool(show))
                tab, _ = builder(max_depth=max_depth, progress=bar)
                bar.close()
                return _pack4(tab)
            if max_depth is not None:
                parts.append(build(progress))
                status[name] = f"built in memory (max_depth={max_depth})"
            else:
                arr, st = load_or_build(f"korf_{name}", VERSION, {"entries": n},
                                        None if cached_only else build,
                                        directory, progress, log=log)
                parts.append(arr)
                status[name] = st
        return cls(*parts, status=status)

    def h(self, cube):
        """max(corners, edges A, edges B) for a Cube."""
        return max(self.parts(cube))

    def parts(self, cube):
        """(corner, edges A, edges B) lower bounds for a Cube."""
        ci = cp_coord(cube) * 2187 + twist_coord(cube)
        ra, fa = e6_coord(cube, EDGES_A)
        rb, fb = e6_coord(cube, EDGES_B)
        return (int(_nib(self.corners, ci)), int(_nib(self.edges_a, ra * 64 + fa)),
                int(_nib(self.edges_b, rb * 64 + fb)))
