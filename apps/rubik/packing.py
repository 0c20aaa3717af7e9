"""Pattern databases as byte tables: the breadth-first search that fills them and their
4-bit packing, shared by every table (:mod:`.reid`, :mod:`.huge`, :mod:`.nx`).

A table is filled level by level over one byte per entry (:func:`bfs`; ``UNSET`` marks an
entry not reached yet), then stored two entries per byte, the even index in the low
nibble (:func:`_pack4`); the search reads an entry with :func:`_nib`.
"""
import numpy as np
from numba import njit

#: a byte-table entry the breadth-first search has not reached yet
UNSET = 255


@njit(cache=True)
def _pack4(tab):
    """Pack a byte table (values < 16) two entries per byte, low nibble = even index."""
    out = np.empty((tab.size + 1) // 2, np.uint8)
    for i in range(tab.size // 2):
        out[i] = tab[2 * i] | (tab[2 * i + 1] << 4)
    if tab.size % 2:
        out[-1] = tab[-1]
    return out


@njit(cache=True, inline="always")
def _nib(tab, idx):
    """Entry ``idx`` of a 4-bit packed table."""
    return (tab[idx >> 1] >> ((idx & 1) << 2)) & 15


def unpack4(packed, n):
    """Unpack a 4-bit table to one byte per entry (for tests and statistics)."""
    p = np.asarray(packed)
    out = np.empty(2 * p.size, np.uint8)
    out[0::2] = p & 15
    out[1::2] = p >> 4
    return out[:n]


def bfs(n, start, level, args, max_depth=None, progress=None):
    """Level-synchronous breadth-first search over ``n`` entries from ``start``; returns
    (uint8 depths, histogram list). ``level(tab, d, *args, forward)`` fills depth d + 1
    from depth d and returns how many it set: forward (from the entries at d) while less
    than half the entries are set, then backward (an unset entry with a neighbour at d).
    ``max_depth`` stops early: the entries not reached get ``max_depth + 1``, still a
    lower bound."""
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
