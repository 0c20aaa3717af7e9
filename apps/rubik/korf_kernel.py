"""IDA* kernel (numba) over Korf's tables: corners plus two 6-edge tables.

One call searches one subtree to a cost bound with an explicit stack and returns after at
most ``budget`` generated nodes (see :mod:`.search`, which drives it).
"""
import numpy as np
from numba import njit

from .coords import E6A_SOLVED, E6B_SOLVED
from .korf import _nib
from .pruning import _allowed
from .status import DONE, FOUND, PAUSED, _descend


@njit(cache=True)
def _expand_korf(L, node, path, kids, kidm, nk, ki, g0, last0, bound, cpm, twm, e6, e6x,
                 pc, pa, pb, tmp, tmpm, wb):
    """Children of the node at level L with f <= bound go to kids[L] (batched lookups).
    Returns (number generated, found); found means path[L+1] completes a solution."""
    lf = last0 if L == 0 else path[L] // 3
    r = node[L]
    n = 0
    m = 0
    while m < 18:
        if not _allowed(lf, m // 3):
            m += 3
            continue
        tmp[n, 0] = cpm[r[0], m]
        tmp[n, 1] = twm[r[1], m]
        tmp[n, 2] = e6[r[2], m]
        tmp[n, 3] = r[3] ^ e6x[r[2], m]
        tmp[n, 4] = e6[r[4], m]
        tmp[n, 5] = r[5] ^ e6x[r[4], m]
        tmpm[n] = m
        n += 1
        m += 1
    rem = bound - (g0 + L + 1)
    nk[L] = 0
    ki[L] = 0
    if rem == 0:
        for j in range(n):
            if (tmp[j, 0] == 0 and tmp[j, 1] == 0 and tmp[j, 3] == 0 and tmp[j, 5] == 0
                    and tmp[j, 2] == E6A_SOLVED and tmp[j, 4] == E6B_SOLVED):
                path[L + 1] = tmpm[j]
                return n, True
        return n, False
    for j in range(n):
        wb[j, 0] = _nib(pc, tmp[j, 0] * 2187 + tmp[j, 1])
        wb[j, 1] = _nib(pa, (tmp[j, 2] << 6) | tmp[j, 3])
        wb[j, 2] = _nib(pb, (tmp[j, 4] << 6) | tmp[j, 5])
    cnt = 0
    for j in range(n):
        if wb[j, 0] > rem or wb[j, 1] > rem or wb[j, 2] > rem:
            continue
        for i in range(6):
            kids[L, cnt, i] = tmp[j, i]
        kidm[L, cnt] = tmpm[j]
        cnt += 1
    nk[L] = cnt
    return n, False


@njit(cache=True)
def _search_korf(cpm, twm, e6, e6x, pc, pa, pb, node, path, kids, kidm, nk, ki, box, g0,
                 last0, bound, budget, stats):
    tmp = np.empty((18, 6), np.int64)
    tmpm = np.empty(18, np.int64)
    wb = np.empty((18, 3), np.int64)
    gen = 0
    exp = 0
    L = box[0]
    status = DONE
    if box[1] == 0:
        box[1] = 1
        exp += 1
        n, found = _expand_korf(0, node, path, kids, kidm, nk, ki, g0, last0, bound, cpm, twm,
                                e6, e6x, pc, pa, pb, tmp, tmpm, wb)
        gen += n
        if found:
            box[0] = 0
            stats[0] += gen
            stats[1] += exp
            return FOUND
    while True:
        if ki[L] >= nk[L]:
            if L == 0:
                status = DONE
                break
            L -= 1
            continue
        if gen >= budget:
            status = PAUSED
            break
        _descend(L, node, path, kids, kidm, ki, 6)
        L += 1
        exp += 1
        n, found = _expand_korf(L, node, path, kids, kidm, nk, ki, g0, last0, bound, cpm, twm,
                                e6, e6x, pc, pa, pb, tmp, tmpm, wb)
        gen += n
        if found:
            status = FOUND
            break
    box[0] = L
    stats[0] += gen
    stats[1] += exp
    return status
