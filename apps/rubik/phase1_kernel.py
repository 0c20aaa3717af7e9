"""IDA* kernel (numba) over the phase-1 family of tables (phase-1, huge), on three axes
and on the inverse position, and the cubie replay that confirms a solution.

One call searches one subtree to a cost bound with an explicit stack and returns after at
most ``budget`` generated nodes (see :mod:`.search`, which drives it; rows are built by
:mod:`.phase1_rows`).
"""
import numpy as np
from numba import njit

from .inverse import _coords, _step
from .packing import _nib
from .nx import N_SEP, UNKNOWN_UPPER, _nx_value
from .pruning import _allowed
from .status import DONE, FOUND, PAUSED, _descend


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


# Row layout of a phase-1 node: flip, slice, twist of axis 0, 1, 2 (columns 0..8), then
# upper bounds of the node's axis values (9..11), then two words per axis frame from which
# the inverse position's coordinates follow (12..17, see :mod:`.inverse`), then the
# inverse position's values on the three axes (18..20; -1: not looked up), and with the nx
# table the corners' separation on the three axes (21..23). Every table here holds a
# distance in a quotient graph, and one move changes a distance by at most one: a child's
# distance is at most its parent's upper bound + 1, and a lookup that cannot change the
# outcome is skipped. The 4-bit tables hold exact distances (lower = upper bound); the nx
# table's 2-bit codes give a lower bound (what prunes) and an upper one (see
# :func:`_value`). Rows are int64 (the words need 63 bits).
UP_COL = 9
INV_COL = 12
INV_H_COL = 18
SEP_COL = 21
REID_COLS = 21
NX_COLS = 24
UNKNOWN_H = UNKNOWN_UPPER   # bound of a value never looked up (the subtree root)


@njit(cache=True, inline="always")
def _value(tab, idx, nx_base, fallback):
    """(lower, upper) bound of the distance at ``idx``: the 4-bit entry itself, or with
    ``nx_base >= 0`` the nx table's 2-bit code (:func:`.nx._nx_value`)."""
    if nx_base < 0:
        h = np.int64(_nib(tab, idx))
        return h, h
    return _nx_value(tab, idx, nx_base, fallback)


@njit(cache=True, inline="always")
def _pick(a, x0, x1, x2):
    return x0 if a == 0 else (x1 if a == 1 else x2)


@njit(cache=True, inline="always")
def _class_sym(fl, sl, ct):
    """(flip-slice class, symmetry taking the position to its representative) through the
    route ``ct``."""
    srep, sxor, fperm, cls2, symmul, cbase, tconj = ct
    w1 = srep[sl]
    s1 = w1 & 15
    k = w1 >> 4
    w = cls2[k, fperm[s1, fl] ^ sxor[sl]]
    return cbase[k] + np.int64(w >> 4), symmul[w & 15, s1]


@njit(cache=True, inline="always")
def _p1_index(fl, sl, tw, ct):
    """Phase-1 table index of (flip, slice, twist) through the class tables' route
    ``ct = (srep, sxor, fperm, cls2, symmul, cbase, tconj)`` (``tables.route``): the class
    is ``cbase[orbit] + cls2[orbit, flip'] >> 4``."""
    c, S = _class_sym(fl, sl, ct)
    return c * 2187 + ct[6][tw, S]


@njit(cache=True, inline="always")
def _index(fl, sl, tw, sp, ct, nx, sepconj):
    """:func:`_p1_index`, or with ``nx`` the nx table's index, which adds the corners'
    separation ``sp`` conjugated by the same symmetry."""
    c, S = _class_sym(fl, sl, ct)
    i = c * 2187 + ct[6][tw, S]
    return i * N_SEP + sepconj[sp, S] if nx else i


@njit(cache=True, inline="always")
def _inverse_sep(cw, sep_of_mask):
    """Separation of the inverse of a frame's position from its corner word: the inverse's
    U slots hold the cubies that sit in the position's U slots (0..3)."""
    m = 0
    for q in range(4):
        m |= 1 << (((cw >> (5 * q)) & 31) // 3)
    return sep_of_mask[m]


@njit(cache=True)
def _search_reid(flipm, slicem, slice_solved, twm, amc, ct, tab, node, path,
                 kids, kidm, nk, ki, box, g0, last0, bound, budget, stats,
                 rcp, rco, rep, reo, mcp, mco, mep, meo,
                 use_inv, sorted_slice, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                 flip_bit, twist_term, add_twist, slice_of_mask, tight, in_h,
                 nx_base, fallback, sepm, sepconj, sep_of_mask):
    """IDA* below node[0] to ``bound`` (see the module docstring).

    Expanding the node at stack level L generates its children and keeps those with
    f <= bound in kids[L]. Which lookups are needed depends only on the parent's bounds
    (all children share them): axis a is looked up if its value could exceed the remaining
    budget ``rem`` (prune), or if all three could equal ``rem`` (de Bondt's +1); a skipped
    value keeps the bound (parent's + 1). The children kept and the node counts are those
    of full lookups. Most children are pruned, so the axis most likely to prune (largest
    bound) is looked up first, for all siblings in one batch (independent loads whose
    cache misses overlap); only the survivors get their other coordinates and lookups.
    The expansion is written out here, not split into functions: an ordinary call passing
    ~25 arrays cost as much as the expansion itself (reference counting of every
    argument), and rounds split into functions numba inlines (``inline="always"``) still
    measured about 5 % slower (medians 2.28 against 2.39 M nodes/s per CPU second, three
    pairs of concurrent runs on seeds 16 and 13; calls of more than 30 arguments cannot be
    inlined at all).

    With ``use_inv`` a child that survives those lookups is also looked up on the three
    axes of its inverse position (followed as words, see :mod:`.inverse`; the slice
    coordinate is the sorted one if ``sorted_slice``), with de Bondt's +1 there too.

    With ``use_inv`` and ``tight``, a node whose inverse is exactly as far from an axis's
    target subgroup H as the moves left (value = remaining budget) is not expanded by the
    moves in H (Rokicki's nxopt; Tronto's H48 notes): the next move is the inverse's last,
    and a last move inside H would put the inverse in H one move earlier. For the huge
    table's UD axis that drops the six U and D turns; two tight axes drop twelve.
    ``in_h[a]``: the bitmask of the moves in axis a's H (:func:`target_moves`).

    With ``nx_base >= 0`` the table is the nx table (:mod:`.nx`): each axis also follows
    the corners' separation (``sepm``, columns SEP_COL..+2), a lookup gives a lower bound
    (pruning, de Bondt and the tight rule take it: a value that is only a lower bound and
    equals the moves left is either exact or prunes the node anyway) and an upper bound
    (kept in the row for the skipping rule). These switches cost the huge table's search
    about 4 % (nodes per CPU second, old kernel against this one side by side on seeds 2 and
    13: ratios 0.78, 1.01, 0.96, 1.00, 0.95; the first pair overlapped a JIT compile)."""
    nx = nx_base >= 0
    ncols = node.shape[1]
    tmp = np.empty((18, NX_COLS), np.int64)
    tmpm = np.empty(18, np.int64)
    wb = np.empty((18, 3), np.int64)
    lo = np.empty((18, 3), np.int64)
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
                u0 = min(node[L, UP_COL] + 1, UNKNOWN_H)
                u1 = min(node[L, UP_COL + 1] + 1, UNKNOWN_H)
                u2 = min(node[L, UP_COL + 2] + 1, UNKNOWN_H)
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
                x3 = node[L, SEP_COL + o0] if nx else 0
                for j in range(n):
                    ma = amc[o0, tmpm[j]]
                    fl = flipm[x0, ma]
                    sl = slicem[x1, ma]
                    tw = twm[x2, ma]
                    sp = sepm[x3, ma] if nx else 0
                    tmp[j, c] = fl
                    tmp[j, c + 1] = sl
                    tmp[j, c + 2] = tw
                    tmp[j, SEP_COL + o0] = sp
                    tmp[j, UP_COL] = u0
                    tmp[j, UP_COL + 1] = u1
                    tmp[j, UP_COL + 2] = u2
                    alive[j] = True
                    if need:
                        wb[j, 0] = _index(fl, sl, tw, sp, ct, nx, sepconj)
                if need:
                    probes += n
                    for j in range(n):
                        h, up = _value(tab, wb[j, 0], nx_base, fallback)
                        tmp[j, UP_COL + o0] = up
                        lo[j, o0] = h
                        if h > rem:
                            alive[j] = False
                # round 2: the other two axes of the survivors
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
                            sp = sepm[node[L, SEP_COL + o], ma] if nx else 0
                            tmp[j, c] = fl
                            tmp[j, c + 1] = sl
                            tmp[j, c + 2] = tw
                            tmp[j, SEP_COL + o] = sp
                            if need1 if q == 0 else need2:
                                wb[j, 1 + q] = _index(fl, sl, tw, sp, ct, nx, sepconj)
                cnt = 0
                for j in range(n):
                    if not alive[j]:
                        continue
                    alive[j] = False             # until it passes every check below
                    if need1:
                        h, up = _value(tab, wb[j, 1], nx_base, fallback)
                        tmp[j, UP_COL + o1] = up
                        lo[j, o1] = h
                        probes += 1
                        if h > rem:
                            continue
                    if need2:
                        h, up = _value(tab, wb[j, 2], nx_base, fallback)
                        tmp[j, UP_COL + o2] = up
                        lo[j, o2] = h
                        probes += 1
                        if h > rem:
                            continue
                    if db and lo[j, 0] == rem and lo[j, 1] == rem and lo[j, 2] == rem:
                        continue             # de Bondt: all three axes at exactly rem
                    if use_inv:
                        alive[j] = True          # round 3 decides
                        continue
                    for i in range(ncols):
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
                                sp = _inverse_sep(cw, sep_of_mask) if nx else 0
                                wb[j, a] = _index(fl, sl, tw, sp, ct, nx, sepconj)
                    for j in range(n):
                        if alive[j]:
                            h0 = _value(tab, wb[j, 0], nx_base, fallback)[0]
                            h1 = _value(tab, wb[j, 1], nx_base, fallback)[0]
                            h2 = _value(tab, wb[j, 2], nx_base, fallback)[0]
                            probes += 3
                            if h0 > rem or h1 > rem or h2 > rem or (
                                    h0 == rem and h1 == rem and h2 == rem):
                                continue
                            tmp[j, INV_H_COL] = h0
                            tmp[j, INV_H_COL + 1] = h1
                            tmp[j, INV_H_COL + 2] = h2
                            for i in range(ncols):
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
        _descend(L, node, path, kids, kidm, ki, ncols)
        L += 1
        expand = True
    box[0] = L
    stats[0] += gen
    stats[1] += exp
    stats[2] += probes
    return status
