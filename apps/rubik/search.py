"""IDA* kernels (numba) and a resumable subtree search around them.

One call of a kernel searches one subtree (the position after a prefix of moves, at
depth ``g0``) to a cost bound, depth first, with an explicit stack, and returns after at
most ``budget`` generated nodes: PAUSED (call again to continue where it stopped), FOUND
(the stack holds a solution; calling again continues the search after it) or DONE.
So a caller can cancel between slices, and "all optimal solutions" is just "keep calling".

Counting follows Korf: a node is *generated* when it is created as a child after move
pruning, *expanded* when its children are generated -- the same for every heuristic. (The
phase-1 kernel skips lookups that cannot change a child's fate, ~1.4 per generated node
instead of 3, but counts every generated child; ``stats[2]`` counts its table probes.)
"""
import numpy as np
from numba import njit

from .coords import (E6A_SOLVED, E6B_SOLVED, EDGES_A, EDGES_B, cp_coord, e6_coord,
                     flip_coord, move_arrays, twist_coord)
from .cube import Cube, parse_moves
from .inverse import TABLES as INV_TABLES
from .inverse import _advance as _advance_inverse, _coords, _step, inverse_words
from .korf import _nib
from .pruning import NO_FACE, _allowed
from .symmetry import AXIS_MOVE_CONJ, axis_cube

DONE, FOUND, PAUSED = 0, 1, 2
MAX_DEPTH = 40


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
        k = ki[L]
        ki[L] = k + 1
        for i in range(6):
            node[L + 1, i] = kids[L, k, i]
        path[L + 1] = kidm[L, k]
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


@njit(cache=True)
def _apply_cubies(cp, co, ep, eo, moves, mcp, mco, mep, meo):
    """Apply ``moves`` to int64 cubie arrays in place (as Cube.apply)."""
    ncp = np.empty(8, np.int64)
    nco = np.empty(8, np.int64)
    nep = np.empty(12, np.int64)
    neo = np.empty(12, np.int64)
    for mm in moves:
        for i in range(8):
            j = mcp[mm, i]
            ncp[i] = cp[j]
            nco[i] = (co[j] + mco[mm, i]) % 3
        for i in range(12):
            j = mep[mm, i]
            nep[i] = ep[j]
            neo[i] = (eo[j] + meo[mm, i]) & 1
        cp[:] = ncp
        co[:] = nco
        ep[:] = nep
        eo[:] = neo


@njit(cache=True)
def _replay_solved(rcp, rco, rep, reo, mv, sp, m, mcp, mco, mep, meo):
    """Is the subtree root followed by mv[1..sp], m the solved cube?"""
    cp = rcp.copy()
    co = rco.copy()
    ep = rep.copy()
    eo = reo.copy()
    moves = np.empty(sp + 1, np.int64)
    for k in range(1, sp + 1):
        moves[k - 1] = mv[k]
    moves[sp] = m
    _apply_cubies(cp, co, ep, eo, moves, mcp, mco, mep, meo)
    for i in range(8):
        if cp[i] != i or co[i] != 0:
            return False
    for i in range(12):
        if ep[i] != i or eo[i] != 0:
            return False
    return True


# Row layout of a phase-1 node: flip, slice, twist of axis 0, 1, 2 (columns 0..8), the
# corner permutation (9, only kept with the corner table), then upper bounds of the
# node's axis values and corner value (10..13), then two words per axis frame from which
# the inverse position's coordinates follow (14..19, see :mod:`.inverse`), then the
# inverse position's exact values on the three axes (20..22; -1: not looked up). Every
# table here is an exact distance in a quotient graph, so one move changes a value by at
# most one: a child's value is at most its parent's bound + 1, and a lookup that cannot
# change the outcome is skipped. Rows are int64 (the words need 63 bits).
REID_COLS = 23
INV_COL = 14
INV_H_COL = 20
UNKNOWN_H = 60              # bound of a value never looked up (the subtree root)


@njit(cache=True, inline="always")
def _pick(a, x0, x1, x2):
    return x0 if a == 0 else (x1 if a == 1 else x2)


@njit(cache=True, inline="always")
def _p1_index(fl, sl, tw, ct):
    """Phase-1 table index of (flip, slice, twist) through the class tables' route
    ``ct = (srep, sxor, fperm, cls2, symmul, cbase, tconj)`` (``tables.route``): the class
    is ``cbase[orbit] + cls2[orbit, flip'] >> 4``."""
    srep, sxor, fperm, cls2, symmul, cbase, tconj = ct
    w1 = srep[sl]
    s1 = w1 & 15
    k = w1 >> 4
    w = cls2[k, fperm[s1, fl] ^ sxor[sl]]
    return (cbase[k] + np.int64(w >> 4)) * 2187 + tconj[tw, symmul[w & 15, s1]]


@njit(cache=True)
def _search_reid(flipm, slicem, slice_solved, twm, cpm, amc, ct, tab, pc, use_pc, node, path,
                 kids, kidm, nk, ki, box, g0, last0, bound, budget, stats,
                 rcp, rco, rep, reo, mcp, mco, mep, meo,
                 use_inv, sorted_slice, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                 flip_bit, twist_term, add_twist, slice_of_mask, tight, in_h):
    """IDA* below node[0] to ``bound`` (see the module docstring).

    Expanding the node at stack level L generates its children and keeps those with
    f <= bound in kids[L]. Which lookups are needed depends only on the parent's bounds
    (all children share them): axis a is looked up if its value could exceed the remaining
    budget ``rem`` (prune), or if all three could equal ``rem`` (de Bondt's +1); a skipped
    value keeps the bound (parent's + 1). The children kept and the node counts are those
    of full lookups. Most children are pruned, so the axis most likely to prune (largest
    bound) is looked up first, for all siblings in one batch (independent loads whose
    cache misses overlap); only the survivors get their other coordinates and lookups.
    The expansion is written inline (not a function call): a call passing ~25 arrays
    cost as much as the expansion itself (reference counting of every argument).

    With ``use_inv`` a child that survives those lookups is also looked up on the three
    axes of its inverse position (followed as words, see :mod:`.inverse`; the slice
    coordinate is the sorted one if ``sorted_slice``), with de Bondt's +1 there too.

    With ``use_inv`` and ``tight``, a node whose inverse is exactly as far from an axis's
    target subgroup H as the moves left (value = remaining budget) is not expanded by the
    moves in H (Rokicki's nxopt; Tronto's H48 notes): the next move is the inverse's last,
    and a last move inside H would put the inverse in H one move earlier. For the huge
    table's UD axis that drops the six U and D turns; two tight axes drop twelve.
    ``in_h[a]``: the bitmask of the moves in axis a's H (:func:`target_moves`)."""
    tmp = np.empty((18, REID_COLS), np.int64)
    tmpm = np.empty(18, np.int64)
    wb = np.empty((18, 3), np.int64)
    alive = np.empty(18, np.bool_)
    gen = 0
    exp = 0
    probes = 0
    L = box[0]
    status = DONE
    expand = box[1] == 0         # the subtree root is not expanded yet
    box[1] = 1
    while True:
        if expand:
            # ---- expand the node at level L into kids[L] ----
            lf = last0 if L == 0 else path[L] // 3
            resumed = L == 0 and box[2] > 0   # a resumed root: its moves from box[2] - 1 on
            mlo = box[2] - 1 if resumed else 0
            skip = np.int64(0)
            if use_inv and tight:
                left = bound - (g0 + L)
                for a in range(3):
                    if node[L, INV_H_COL + a] >= left:
                        skip |= in_h[a]
            n = 0
            m = 0
            while m < 18:
                if not _allowed(lf, m // 3):
                    m += 3
                    continue
                if m >= mlo and not (skip >> m) & 1:
                    tmpm[n] = m
                    n += 1
                m += 1
            if not resumed:       # a resumed root's children were counted where it paused
                exp += 1
                gen += n
            rem = bound - (g0 + L + 1)
            nk[L] = 0
            ki[L] = 0
            if rem == 0:
                hit = -1
                for j in range(n):
                    m = tmpm[j]
                    ok = True
                    for a in range(3):
                        ma = amc[a, m]
                        if (flipm[node[L, 3 * a], ma] != 0
                                or slicem[node[L, 3 * a + 1], ma] != slice_solved
                                or twm[node[L, 3 * a + 2], ma] != 0):
                            ok = False
                    if ok and _replay_solved(rcp, rco, rep, reo, path, L, m, mcp, mco, mep, meo):
                        hit = m
                        break
                if hit >= 0:
                    path[L + 1] = hit
                    status = FOUND
                    break
            else:
                u0 = min(node[L, 10] + 1, UNKNOWN_H)
                u1 = min(node[L, 11] + 1, UNKNOWN_H)
                u2 = min(node[L, 12] + 1, UNKNOWN_H)
                uc = min(node[L, 13] + 1, UNKNOWN_H)
                db = u0 >= rem and u1 >= rem and u2 >= rem
                o0, o1, o2 = 0, 1, 2                # axes by decreasing bound
                if _pick(o1, u0, u1, u2) > _pick(o0, u0, u1, u2):
                    o0, o1 = o1, o0
                if _pick(o2, u0, u1, u2) > _pick(o1, u0, u1, u2):
                    o1, o2 = o2, o1
                if _pick(o1, u0, u1, u2) > _pick(o0, u0, u1, u2):
                    o0, o1 = o1, o0
                # round 1: the first axis of every child
                c = 3 * o0
                need = _pick(o0, u0, u1, u2) > rem or db
                x0 = node[L, c]
                x1 = node[L, c + 1]
                x2 = node[L, c + 2]
                for j in range(n):
                    ma = amc[o0, tmpm[j]]
                    fl = flipm[x0, ma]
                    sl = slicem[x1, ma]
                    tw = twm[x2, ma]
                    tmp[j, c] = fl
                    tmp[j, c + 1] = sl
                    tmp[j, c + 2] = tw
                    tmp[j, 10] = u0
                    tmp[j, 11] = u1
                    tmp[j, 12] = u2
                    tmp[j, 13] = uc
                    alive[j] = True
                    if need:
                        wb[j, 0] = _p1_index(fl, sl, tw, ct)
                if need:
                    probes += n
                    for j in range(n):
                        h = _nib(tab, wb[j, 0])
                        tmp[j, 10 + o0] = h
                        if h > rem:
                            alive[j] = False
                # round 2: the other two axes (and the corner table) of the survivors
                need1 = _pick(o1, u0, u1, u2) > rem or db
                need2 = _pick(o2, u0, u1, u2) > rem or db
                for j in range(n):
                    if alive[j]:
                        m = tmpm[j]
                        for q in range(2):          # wb[j, 1]: axis o1, wb[j, 2]: axis o2
                            o = o1 if q == 0 else o2
                            c = 3 * o
                            ma = amc[o, m]
                            fl = flipm[node[L, c], ma]
                            sl = slicem[node[L, c + 1], ma]
                            tw = twm[node[L, c + 2], ma]
                            tmp[j, c] = fl
                            tmp[j, c + 1] = sl
                            tmp[j, c + 2] = tw
                            if need1 if q == 0 else need2:
                                wb[j, 1 + q] = _p1_index(fl, sl, tw, ct)
                        if use_pc:
                            tmp[j, 9] = cpm[node[L, 9], m]
                cnt = 0
                for j in range(n):
                    if not alive[j]:
                        continue
                    alive[j] = False             # until it passes every check below
                    if need1:
                        h = _nib(tab, wb[j, 1])
                        tmp[j, 10 + o1] = h
                        probes += 1
                        if h > rem:
                            continue
                    if need2:
                        h = _nib(tab, wb[j, 2])
                        tmp[j, 10 + o2] = h
                        probes += 1
                        if h > rem:
                            continue
                    if db and tmp[j, 10] == rem and tmp[j, 11] == rem and tmp[j, 12] == rem:
                        continue             # de Bondt: all three axes at exactly rem
                    if use_pc and uc > rem:
                        h = _nib(pc, tmp[j, 9] * 2187 + tmp[j, 2])
                        tmp[j, 13] = h
                        probes += 1
                        if h > rem:
                            continue
                    if use_inv:
                        alive[j] = True          # round 3 decides
                        continue
                    for i in range(REID_COLS):
                        kids[L, cnt, i] = tmp[j, i]
                    kidm[L, cnt] = tmpm[j]
                    cnt += 1
                if use_inv:
                    # round 3: the inverse of every survivor on three axes, all indices
                    # first and then all loads (the search waits on table probes: these
                    # can all be in flight together)
                    for j in range(n):
                        if alive[j]:
                            m = tmpm[j]
                            for a in range(3):
                                c = INV_COL + 2 * a
                                ew, cw = _step(node[L, c], node[L, c + 1], amc[a, m], edst,
                                               esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                                               flip_bit, twist_term, add_twist)
                                tmp[j, c] = ew
                                tmp[j, c + 1] = cw
                                fl, sl, tw = _coords(ew, cw, sorted_slice, slice_of_mask)
                                wb[j, a] = _p1_index(fl, sl, tw, ct)
                    for j in range(n):
                        if alive[j]:
                            h0 = _nib(tab, wb[j, 0])
                            h1 = _nib(tab, wb[j, 1])
                            h2 = _nib(tab, wb[j, 2])
                            probes += 3
                            if h0 > rem or h1 > rem or h2 > rem or (
                                    h0 == rem and h1 == rem and h2 == rem):
                                continue
                            tmp[j, INV_H_COL] = h0
                            tmp[j, INV_H_COL + 1] = h1
                            tmp[j, INV_H_COL + 2] = h2
                            for i in range(REID_COLS):
                                kids[L, cnt, i] = tmp[j, i]
                            kidm[L, cnt] = tmpm[j]
                            cnt += 1
                nk[L] = cnt
            expand = False
        # ---- depth-first step ----
        if ki[L] >= nk[L]:
            if L == 0:
                status = DONE
                break
            L -= 1
            continue
        if gen >= budget:
            status = PAUSED
            break
        k = ki[L]
        ki[L] = k + 1
        for i in range(REID_COLS):
            node[L + 1, i] = kids[L, k, i]
        path[L + 1] = kidm[L, k]
        L += 1
        expand = True
    box[0] = L
    stats[0] += gen
    stats[1] += exp
    stats[2] += probes
    return status


_MOVE_ARRAYS = move_arrays()
_NO_TABLE = np.zeros(1, np.uint8)


def target_moves(tables):
    """Per axis, the bitmask of the moves inside that axis's target subgroup of the
    phase-1 ``tables`` (moves that leave the solved cube's coordinates solved): what
    ``_search_reid`` skips at a node whose inverse is tight on that axis."""
    mt = tables.moves
    flipm, slicem, twm = mt["flip"], mt[tables.slice_move], mt["twist"]
    out = []
    for a in range(3):
        mask = 0
        for m in range(18):
            ma = AXIS_MOVE_CONJ[a, m]
            if (flipm[0, ma] == 0 and slicem[tables.slice_solved, ma] == tables.slice_solved
                    and twm[0, ma] == 0):
                mask |= 1 << m
        out.append(mask)
    return tuple(out)


def tight_skip(row, left, masks):
    """The moves (bitmask) the kernel does not expand a node by: ``row`` its phase-1 row,
    ``left`` the moves its cost bound leaves, ``masks`` :func:`target_moves`."""
    skip = 0
    for a in range(3):
        if row[INV_H_COL + a] >= left:
            skip |= masks[a]
    return skip


def root_state(tables, cube):
    """The coordinate row a kernel's stack starts from for ``cube``."""
    if tables.name == "korf":
        ra, fa = e6_coord(cube, EDGES_A)
        rb, fb = e6_coord(cube, EDGES_B)
        return np.array([cp_coord(cube), twist_coord(cube), ra, fa, rb, fb], np.int32)
    row = []
    for a in range(3):
        x = axis_cube(cube, a)
        row += [flip_coord(x), tables.slice_coord(x), twist_coord(x)]
    row.append(cp_coord(cube))
    row += [UNKNOWN_H] * 4
    row += inverse_words(cube)
    row += [-1] * 3
    return np.array(row, np.int64)


@njit(cache=True)
def _advance_reid(row, moves, flipm, slicem, twm, cpm, amc):
    """Apply ``moves`` to the coordinate columns of a phase-1 row in place."""
    for m in moves:
        for a in range(3):
            ma = amc[a, m]
            row[3 * a] = flipm[row[3 * a], ma]
            row[3 * a + 1] = slicem[row[3 * a + 1], ma]
            row[3 * a + 2] = twm[row[3 * a + 2], ma]
        row[9] = cpm[row[9], m]


@njit(cache=True)
def _reid_row_h(row, ct, tab, pc, use_pc, use_inv, sorted_slice, slice_of_mask):
    """Look the row's three axes (and corners, and with ``use_inv`` the three axes of the
    inverse) up, store the exact values in row[10..13] (and row[20..22] for the inverse's)
    and return the heuristic
    (max, de Bondt's +1 when all three axes of a side agree)."""
    for a in range(3):
        row[10 + a] = _nib(tab, _p1_index(row[3 * a], row[3 * a + 1], row[3 * a + 2], ct))
    h = max(row[10], max(row[11], row[12]))
    if h > 0 and row[10] == row[11] and row[11] == row[12]:
        h += 1
    if use_pc:
        row[13] = _nib(pc, row[9] * 2187 + row[2])
        h = max(h, row[13])
    else:
        row[13] = 0
    row[INV_H_COL:INV_H_COL + 3] = -1
    if use_inv:
        v = np.empty(3, np.int64)
        for a in range(3):
            fl, sl, tw = _coords(row[INV_COL + 2 * a], row[INV_COL + 2 * a + 1], sorted_slice,
                                 slice_of_mask)
            v[a] = _nib(tab, _p1_index(fl, sl, tw, ct))
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


def phase1_row(tables, corners, cube, prefix, inverse=True):
    """(coordinate row with exact values, heuristic) of ``cube`` after ``prefix`` for the
    phase-1 tables (``corners``: a KorfTables or None; ``inverse``: also look the
    inverse position up)."""
    row = _base_row(tables, cube).copy()
    mt = tables.moves
    moves = np.asarray(prefix, np.int64)
    _advance_reid(row, moves, mt["flip"], mt[tables.slice_move], mt["twist"], mt["cp"],
                  AXIS_MOVE_CONJ)
    _advance_inverse(row[INV_COL:], moves, AXIS_MOVE_CONJ, *INV_TABLES[:11])
    pc = corners.corners if corners is not None else _NO_TABLE
    h = int(_reid_row_h(row, tables.route, tables.table, pc,
                        corners is not None, bool(inverse), tables.sorted_slice,
                        INV_TABLES[11]))
    return row, h


class SubtreeSearch:
    """A resumable IDA* search of the subtree below ``prefix`` (applied to ``cube``) with
    cost bound ``bound``. Call :meth:`step` until it returns DONE; after each FOUND,
    :attr:`solution` holds the full move list (prefix included) and the search can go on.

    ``tables`` is a :class:`~.korf.KorfTables`, :class:`~.reid.ReidTables` or
    :class:`~.huge.HugeTables` object;
    ``corners`` (a KorfTables) adds Korf's corner table to the phase-1 heuristic;
    ``inverse`` looks the phase-1 tables up on the inverse position as well (ignored for
    Korf's tables); ``tight`` (with ``inverse``) skips the moves that tight inverse values
    rule out (see ``_search_reid``). The subtree root counts as expanded (not generated)
    when its f is within the bound.

    A ``first_move`` resumes a piece that another search handed on (see
    :meth:`remainder`): only the root's children by moves ``first_move`` and up are
    searched, and the root's expansion is not counted again (the search it came from
    counted it). Phase-1 tables only.
    """

    def __init__(self, tables, cube, prefix, bound, corners=None, inverse=True,
                 first_move=None, tight=True):
        if first_move is not None and tables.name == "korf":
            raise ValueError("resuming at a first move needs the phase-1 kernel, not korf's")
        if first_move is not None and not 0 <= first_move < 18:
            raise ValueError(f"first_move must be a move 0..17, got {first_move!r}")
        self.tables = tables
        self.prefix = parse_moves(prefix)
        self.bound = int(bound)
        if self.bound > MAX_DEPTH:
            raise ValueError(f"bound {bound} exceeds the maximum depth {MAX_DEPTH}")
        arrs = [a.astype(np.int64) for a in (cube.cp, cube.co, cube.ep, cube.eo)]
        _apply_cubies(*arrs, np.array(self.prefix, np.int64), *_MOVE_ARRAYS)
        self._root_arrays = arrs
        self.g0 = len(self.prefix)
        self.last0 = self.prefix[-1] // 3 if self.prefix else NO_FACE
        self.corners = corners if tables.name != "korf" else None
        self.inverse = bool(inverse) and tables.name != "korf"
        self.tight = bool(tight)
        self._in_h = (np.array(target_moves(tables), np.int64) if tables.name != "korf"
                      else None)
        depth = max(self.bound - self.g0, 0) + 2
        if tables.name == "korf":
            row = root_state(tables, self.root)
        else:
            row, self.root_h = phase1_row(tables, self.corners, cube, self.prefix,
                                          self.inverse)
        self.node = np.zeros((depth, row.size), row.dtype)
        self.node[0] = row
        self.path = np.zeros(depth + 1, np.int8)
        self.kids = np.zeros((depth, 18, row.size), row.dtype)
        self.kidm = np.zeros((depth, 18), np.int8)
        self.nk = np.zeros(depth, np.int8)
        self.ki = np.zeros(depth, np.int8)
        # box: stack level, root expanded?, 1 + the resumed root's first move (0: fresh)
        self.box = np.array([0, 0, 0 if first_move is None else 1 + first_move], np.int64)
        self.stats = np.zeros(3, np.int64)
        self.solution = None
        self.finished = False
        self._pending = None
        if tables.name == "korf":
            self.root_h = self.heuristic(self.root)
        if self.g0 + self.root_h > self.bound:
            self.finished = True          # pruned: f exceeds the bound
        elif self.g0 == self.bound:
            self.finished = True
            if self.root.is_solved:
                self._pending = list(self.prefix)

    @property
    def root(self):
        """The subtree root (the cube after the prefix)."""
        return Cube(*self._root_arrays, check=False)

    def heuristic(self, cube):
        """The heuristic value the kernel would use for ``cube``."""
        if self.tables.name == "korf":
            h = self.tables.h(cube)
        else:
            h = self.tables.h(cube, self.inverse)
        if self.corners is not None:
            h = max(h, self.corners.parts(cube)[0])
        return h

    @property
    def generated(self):
        """Nodes generated so far."""
        return int(self.stats[0])

    @property
    def expanded(self):
        """Nodes expanded so far."""
        return int(self.stats[1])

    def step(self, budget=1 << 22):
        """Search about ``budget`` more generated nodes; returns DONE, FOUND or PAUSED."""
        if self._pending is not None:
            self.solution, self._pending = self._pending, None
            return FOUND
        if self.finished:
            return DONE
        t = self.tables
        mt = t.moves
        args = (self.node, self.path, self.kids, self.kidm, self.nk, self.ki, self.box,
                self.g0, self.last0, self.bound, int(budget), self.stats)
        if t.name == "korf":
            status = _search_korf(mt["cp"], mt["twist"], mt["e6"], mt["e6x"], t.corners,
                                  t.edges_a, t.edges_b, *args)
        else:
            pc = self.corners.corners if self.corners is not None else _NO_TABLE
            status = _search_reid(mt["flip"], mt[t.slice_move], t.slice_solved, mt["twist"],
                                  mt["cp"], AXIS_MOVE_CONJ,
                                  t.route, t.table, pc, self.corners is not None, *args,
                                  *self._root_arrays, *_MOVE_ARRAYS,
                                  self.inverse, t.sorted_slice, *INV_TABLES, self.tight,
                                  self._in_h)
        if status == FOUND:
            depth = int(self.box[0]) + 1
            self.solution = self.prefix + [int(x) for x in self.path[1:depth + 1]]
        elif status == DONE:
            self.finished = True
        return status

    def remainder(self):
        """What a PAUSED search has left, as pieces ``(prefix, first_move)`` in the order it
        would search them (deepest level first): each is the rest of one node's children
        on the stack, from the next one it would visit. Searching every piece with
        ``SubtreeSearch(..., prefix, bound, first_move=first_move)`` generates exactly the
        nodes this search would still have generated, and finds its solutions."""
        if self.tables.name == "korf":
            raise ValueError("a remainder needs the phase-1 kernel, not korf's")
        if self.finished or self._pending is not None or self.box[1] == 0:
            raise ValueError("only a paused search that has started has a remainder")
        out = []
        path = [int(m) for m in self.path]
        for level in range(int(self.box[0]), -1, -1):
            k = int(self.ki[level])
            if k < int(self.nk[level]):
                out.append((self.prefix + path[1:level + 1], int(self.kidm[level, k])))
        return out

    def run(self, budget=1 << 22, cancelled=None):
        """Step until DONE or FOUND (or ``cancelled()`` turns true between slices);
        returns the last status."""
        while True:
            status = self.step(budget)
            if status != PAUSED:
                return status
            if cancelled is not None and cancelled():
                return PAUSED
