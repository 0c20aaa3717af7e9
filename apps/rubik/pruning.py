"""Canonical move pruning: which move may follow which.

Rule 1: never the same face twice in a row. Rule 2: of two opposite faces (U/D, R/L,
F/B) turned consecutively, only the order U-then-D (R-then-L, F-then-B) is allowed. With
both rules the search tree has 18, 243, 3,240, ... nodes at depths 1, 2, 3 and
asymptotic branching factor 6 + sqrt(54) = 13.34847.
"""
import numpy as np
from numba import njit

NO_FACE = 6  # "last face" of the root: every move is allowed
#: canonical sequences per move, asymptotically (Korf 1997: 13.34847)
BRANCHING = 13.34847


@njit(cache=True, inline="always")
def _allowed(last_face, face):
    """May a turn of ``face`` follow a turn of ``last_face``? (faces U R F D L B = 0..5)"""
    if last_face == NO_FACE:
        return True
    if face == last_face:
        return False
    if face % 3 == last_face % 3 and face < last_face:
        return False
    return True


def allowed(last_face, face):
    """Python view of the rule (``last_face`` may be None for the root)."""
    return bool(_allowed(NO_FACE if last_face is None else last_face, face))


def is_canonical(moves):
    """True if the move sequence obeys both pruning rules."""
    last = None
    for m in moves:
        if not allowed(last, m // 3):
            return False
        last = m // 3
    return True


def canonical_sequences(depth, last_face=None):
    """All canonical move sequences of exactly ``depth`` moves (as lists of indices)."""
    out = [[]]
    for _ in range(depth):
        nxt = []
        for s in out:
            lf = s[-1] // 3 if s else last_face
            for m in range(18):
                if allowed(lf, m // 3):
                    nxt.append(s + [m])
        out = nxt
    return out


@njit(cache=True)
def _count_canonical(depth):
    """Number of canonical sequences of each length 0..depth (dynamic programming)."""
    counts = np.zeros(depth + 1, np.int64)
    ways = np.zeros(7, np.int64)
    ways[NO_FACE] = 1
    counts[0] = 1
    for d in range(1, depth + 1):
        nw = np.zeros(7, np.int64)
        for lf in range(7):
            if ways[lf] == 0:
                continue
            for f in range(6):
                if _allowed(lf, f):
                    nw[f] += 3 * ways[lf]
        ways = nw
        counts[d] = ways.sum()
    return counts


def count_canonical(depth):
    """Nodes of the pruned search tree at each depth 0..depth (Korf's Table 1)."""
    if depth < 0:
        raise ValueError("depth must be >= 0")
    return [int(x) for x in _count_canonical(depth)]
