"""IDA* kernel (numba) that picks a direction at every node: the position's own moves, or
moves of its inverse (premoves of the position), whichever leaves fewer children.

vcube's choice (Skalski; the tight rule is Rokicki's nxopt). The tight rule prunes the
moves of axis ``a``'s subgroup H when the *other* side's value on that axis equals the
moves left (:func:`.phase1_kernel._search_reid`): the inverse's tight values prune the
position's moves, the position's tight values prune the inverse's. Expanding each node in
the direction with fewer children builds the solution from both ends: a position ``X``
reached from the subtree root ``R`` by forward moves ``M`` and moves ``c1 .. cj`` of the
inverse is ``cj^-1 .. c1^-1 R M``, and a solution ``T`` of it gives ``R`` the solution
``M T cj^-1 .. c1^-1`` (:func:`solution_moves`). Canonical move pruning holds on each end
by itself (each side's last face); with the bound at the optimal length that stays
complete: an optimal solution never has three moves of one axis in a row, so the pairs at
either end of what is left can always be ordered as that end's rule wants.

**Rows.** A node carries two blocks of the phase-1 row layout (:mod:`.phase1_kernel`), one
for the position (columns 0..23) and one for its inverse (24..47), then the last face
turned on each (48, 49). In a block: the coordinates on three axes, their upper bounds,
the six words of that side's cubies (from which the *other* side's coordinates follow,
:mod:`.inverse`), that side's own lower bounds (-1: not looked up), its separation
columns. A move of one side is a premove of the other, whose words are then relabelled
(:func:`_premove`: every cubie code through the inverse move, 20 table reads a frame) and
whose values are looked up afresh, as the forward kernel does for the inverse; the moved
side keeps the skipping rule (a distance moves by at most one). The lower bounds the
tight rule needs and the skipping rule left unknown are looked up when the node is
expanded (only where the upper bound says the value could be tight).

A subtree root comes in the forward layout (``phase1_row``) in the first 24 columns and
is completed here (:func:`_complete_root`). A search with directions hands nothing on
(no ``first_move`` pieces): it runs whole in one process.
"""
import numpy as np
from numba import njit

from .cube import MOVE_CUBES, Cube, invert_moves
from .inverse import _coords, _step
from .phase1_kernel import (INV_COL, INV_H_COL, SEP_COL, UNKNOWN_H, UP_COL, _apply_cubies,
                            _index, _inverse_sep, _pick, _value)
from .pruning import NO_FACE, _allowed
from .status import DONE, FOUND, MAX_DEPTH, PAUSED, _descend

SIDE = 24                  # columns of one side's block
Y0 = SIDE                  # the inverse's block
LOW = INV_H_COL            # a block's own lower bounds (the forward layout's inverse values)
LAST_X = 2 * SIDE          # the last face turned on the position (forward moves)
LAST_Y = LAST_X + 1        # ... on its inverse
BIDIR_COLS = LAST_Y + 1
BACK = 18                  # a move of the inverse is stored as BACK + move
import os
LAZY = os.environ.get("BD_LAZY", "1") == "1"
KEEP = os.environ.get("BD_KEEP", "1") == "1"
TIE_FWD = os.environ.get("BD_TIE", "1") == "1"
FORCE_FWD = os.environ.get("BD_FWD", "0") == "1"


def _premove_tables():
    """``rel_e[m, code]``, ``rel_c[m, code]``: a slot's edge (corner) code after the
    position ``Q`` becomes ``m^-1 Q`` (slot ``i`` holding cubie ``p`` with orientation
    ``o`` then holds ``A(p)`` with ``o + A.o[p]``, A = m^-1)."""
    rel_e = np.zeros((18, 24), np.int64)
    rel_c = np.zeros((18, 24), np.int64)
    for m in range(18):
        a = MOVE_CUBES[m].inverse()
        for p in range(12):
            for o in range(2):
                rel_e[m, 2 * p + o] = int(a.ep[p]) * 2 + (int(a.eo[p]) + o) % 2
        for p in range(8):
            for o in range(3):
                rel_c[m, 3 * p + o] = int(a.cp[p]) * 3 + (int(a.co[p]) + o) % 3
    return rel_e, rel_c


#: the relabelling tables the kernel takes last (:func:`_premove_tables`)
PREMOVE_TABLES = _premove_tables()


def prefix_root(cube, prefix):
    """(the position, the last face turned on it, the last face turned on its inverse)
    that the encoded ``prefix`` (moves, and BACK + moves of the inverse) leads ``cube``
    to: ``cj^-1 .. c1^-1 cube M``."""
    fwd = [int(m) for m in prefix if m < BACK]
    back = [int(m) - BACK for m in prefix if m >= BACK]
    if back:
        root = (Cube.from_moves(invert_moves(fwd)) * cube.inverse()).apply(back).inverse()
    else:
        root = cube.apply(fwd)
    return (root, fwd[-1] // 3 if fwd else NO_FACE, back[-1] // 3 if back else NO_FACE)


def inverse_move(m):
    """The move undoing ``m`` (0..17)."""
    return 3 * (m // 3) + 2 - m % 3


def solution_moves(path):
    """The subtree root's moves from a direction kernel's path (``path[1..]``, moves of
    the inverse as BACK + move): the forward moves in order, then the inverse moves
    undone, last first."""
    path = [int(m) for m in path]
    return ([m for m in path if m < BACK]
            + [inverse_move(m - BACK) for m in reversed(path) if m >= BACK])


@njit(cache=True, inline="always")
def _inv_move(m):
    return 3 * (m // 3) + 2 - m % 3


@njit(cache=True, inline="always")
def _premove(ew, cw, mm, rel_e, rel_c):
    """A frame's two words after the premove ``mm^-1`` (without the other side's flip and
    twist, bits 40..62, which the caller sets)."""
    ne = np.int64(0)
    for i in range(12):
        ne |= rel_e[mm, (ew >> (5 * i)) & 31] << (5 * i)
    nc = np.int64(0)
    for i in range(8):
        nc |= rel_c[mm, (cw >> (5 * i)) & 31] << (5 * i)
    return ne, nc


@njit(cache=True)
def _complete_root(row, last0, last0y, nx, sorted_slice, slice_of_mask, sep_of_mask):
    """Turn a forward row (``phase1_row``, in ``row[:24]``) into a two-block row: the
    inverse's block from the position's words, the inverse's values moved into it."""
    for a in range(3):
        ew = row[INV_COL + 2 * a]
        cw = row[INV_COL + 2 * a + 1]
        fl, sl, tw = _coords(ew, cw, sorted_slice, slice_of_mask)
        row[Y0 + 3 * a] = fl
        row[Y0 + 3 * a + 1] = sl
        row[Y0 + 3 * a + 2] = tw
        row[Y0 + SEP_COL + a] = _inverse_sep(cw, sep_of_mask) if nx else 0
        ne = np.int64(0)          # the inverse holds cubie i in slot p, orientation -o
        for i in range(12):
            code = (ew >> (5 * i)) & 31
            ne |= np.int64(2 * i + (code & 1)) << (5 * (code >> 1))
        nc = np.int64(0)
        for i in range(8):
            code = (cw >> (5 * i)) & 31
            nc |= np.int64(3 * i + (3 - code % 3) % 3) << (5 * (code // 3))
        row[Y0 + INV_COL + 2 * a] = ne
        row[Y0 + INV_COL + 2 * a + 1] = nc | (row[3 * a] << 40) | (row[3 * a + 2] << 51)
        row[Y0 + UP_COL + a] = UNKNOWN_H
        row[Y0 + LOW + a] = row[INV_H_COL + a]     # the inverse's values (-1: none)
        row[LOW + a] = -1                          # the position's: upper bounds only
    row[LAST_X] = last0
    row[LAST_Y] = last0y


@njit(cache=True)
def _replay_bidir(rcp, rco, rep, reo, path, L, last, seq, mcp, mco, mep, meo):
    """Is the subtree root solved by the path ``path[1..L]`` and then ``last`` (both in
    the kernel's encoding, :func:`solution_moves`)?"""
    n = 0
    for k in range(1, L + 1):
        if path[k] < BACK:
            seq[n] = path[k]
            n += 1
    if last < BACK:
        seq[n] = last
    else:
        seq[n] = _inv_move(last - BACK)
    n += 1
    for k in range(L, 0, -1):
        if path[k] >= BACK:
            seq[n] = _inv_move(path[k] - BACK)
            n += 1
    cp = rcp.copy()
    co = rco.copy()
    ep = rep.copy()
    eo = reo.copy()
    _apply_cubies(cp, co, ep, eo, seq[:n], mcp, mco, mep, meo)
    for i in range(8):
        if cp[i] != i or co[i] != 0:
            return False
    for i in range(12):
        if ep[i] != i or eo[i] != 0:
            return False
    return True


@njit(cache=True)
def _search_bidir(flipm, slicem, slice_solved, twm, amc, ct, tab, node, path,
                  kids, kidm, nk, ki, box, g0, last0, bound, budget, stats,
                  rcp, rco, rep, reo, mcp, mco, mep, meo,
                  use_inv, sorted_slice, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                  flip_bit, twist_term, add_twist, slice_of_mask, tight, in_h,
                  nx_base, fallback, sepm, sepconj, sep_of_mask, rel_e, rel_c, last0y):
    """IDA* below node[0] to ``bound``, each node expanded in one direction (module
    docstring); the arguments are :func:`.phase1_kernel._search_reid`'s (``use_inv`` is
    implied; ``last0`` the last face turned on the root, ``box[2]`` 1 + the encoded first
    move of a resumed root), the relabelling tables and ``last0y``, the last face turned on
    the root's inverse. Within a direction the expansion is the forward
    kernel's: the moved side's first axis for all children in one batch, then its other
    two axes, then the other side's three axes, looked up in batches."""
    nx = nx_base >= 0
    ncols = node.shape[1]
    tmp = np.empty((18, BIDIR_COLS), np.int64)
    tmpm = np.empty(18, np.int64)
    wb = np.empty((18, 3), np.int64)
    lo = np.empty((18, 3), np.int64)
    alive = np.empty(18, np.bool_)
    seq = np.empty(MAX_DEPTH + 2, np.int64)
    gen = 0
    exp = 0
    probes = 0
    L = box[0]
    status = DONE
    expand = box[1] == 0
    if expand:
        _complete_root(node[L], last0, last0y, nx, sorted_slice, slice_of_mask, sep_of_mask)
    box[1] = 1
    while True:
        if expand:
            left = bound - (g0 + L)
            skx = np.int64(0)      # the position's moves its inverse's tight values rule out
            sky = np.int64(0)      # the inverse's moves the position's rule out
            if tight and LAZY:
                for s in range(2):
                    b = s * SIDE
                    for a in range(3):
                        if node[L, b + LOW + a] < 0 and node[L, b + UP_COL + a] >= left:
                            sp = node[L, b + SEP_COL + a] if nx else 0
                            h, up = _value(tab, _index(node[L, b + 3 * a], node[L, b + 3 * a + 1],
                                                       node[L, b + 3 * a + 2], sp, ct, nx,
                                                       sepconj), nx_base, fallback)
                            probes += 1
                            node[L, b + LOW + a] = h
                            node[L, b + UP_COL + a] = min(up, node[L, b + UP_COL + a])
            if tight:
                for a in range(3):
                    if node[L, Y0 + LOW + a] >= left:
                        skx |= in_h[a]
                    if node[L, LOW + a] >= left:
                        sky |= in_h[a]
            lfx = node[L, LAST_X]
            lfy = node[L, LAST_Y]
            nfx = 0
            nfy = 0
            for m in range(18):
                f = m // 3
                if _allowed(lfx, f) and not (skx >> m) & 1:
                    nfx += 1
                if _allowed(lfy, f) and not (sky >> m) & 1:
                    nfy += 1
            if nfx != nfy:
                back = nfy < nfx
            elif TIE_FWD:
                back = False
            else:                  # vcube's tie-break: the side with the larger values
                sx = 0
                sy = 0
                for a in range(3):
                    sx += max(node[L, LOW + a], 0)
                    sy += max(node[L, Y0 + LOW + a], 0)
                back = sx <= sy
            if FORCE_FWD:
                back = False
            resumed = L == 0 and box[2] > 0   # a piece: the root's moves from box[2] - 1 on
            mlo = 0
            if resumed:
                back = box[2] - 1 >= BACK
                mlo = box[2] - 1 - (BACK if back else 0)
            if back:
                po, qo, lf, skip, tag, lcol = Y0, 0, lfy, sky, BACK, LAST_Y
            else:
                po, qo, lf, skip, tag, lcol = 0, Y0, lfx, skx, 0, LAST_X
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
                        if (flipm[node[L, po + 3 * a], ma] != 0
                                or slicem[node[L, po + 3 * a + 1], ma] != slice_solved
                                or twm[node[L, po + 3 * a + 2], ma] != 0):
                            ok = False
                    if ok and _replay_bidir(rcp, rco, rep, reo, path, L, tag + m, seq,
                                            mcp, mco, mep, meo):
                        hit = tag + m
                        break
                if hit >= 0:
                    path[L + 1] = hit
                    status = FOUND
                    break
            else:
                u0 = min(node[L, po + UP_COL] + 1, UNKNOWN_H)
                u1 = min(node[L, po + UP_COL + 1] + 1, UNKNOWN_H)
                u2 = min(node[L, po + UP_COL + 2] + 1, UNKNOWN_H)
                db = u0 >= rem and u1 >= rem and u2 >= rem
                o0, o1, o2 = 0, 1, 2                # axes by decreasing bound
                if _pick(o1, u0, u1, u2) > _pick(o0, u0, u1, u2):
                    o0, o1 = o1, o0
                if _pick(o2, u0, u1, u2) > _pick(o1, u0, u1, u2):
                    o1, o2 = o2, o1
                if _pick(o1, u0, u1, u2) > _pick(o0, u0, u1, u2):
                    o0, o1 = o1, o0
                # round 1: the moved side's first axis of every child
                c = po + 3 * o0
                need = _pick(o0, u0, u1, u2) > rem or db
                x0 = node[L, c]
                x1 = node[L, c + 1]
                x2 = node[L, c + 2]
                x3 = node[L, po + SEP_COL + o0] if nx else 0
                for j in range(n):
                    ma = amc[o0, tmpm[j]]
                    fl = flipm[x0, ma]
                    sl = slicem[x1, ma]
                    tw = twm[x2, ma]
                    sp = sepm[x3, ma] if nx else 0
                    tmp[j, c] = fl
                    tmp[j, c + 1] = sl
                    tmp[j, c + 2] = tw
                    tmp[j, po + SEP_COL + o0] = sp
                    tmp[j, po + UP_COL] = u0
                    tmp[j, po + UP_COL + 1] = u1
                    tmp[j, po + UP_COL + 2] = u2
                    lo[j, 0] = -1
                    lo[j, 1] = -1
                    lo[j, 2] = -1
                    alive[j] = True
                    if need:
                        wb[j, 0] = _index(fl, sl, tw, sp, ct, nx, sepconj)
                if need:
                    probes += n
                    for j in range(n):
                        h, up = _value(tab, wb[j, 0], nx_base, fallback)
                        tmp[j, po + UP_COL + o0] = up
                        lo[j, o0] = h
                        if h > rem:
                            alive[j] = False
                # round 2: the moved side's other two axes of the survivors
                need1 = _pick(o1, u0, u1, u2) > rem or db
                need2 = _pick(o2, u0, u1, u2) > rem or db
                for j in range(n):
                    if alive[j]:
                        m = tmpm[j]
                        for q in range(2):
                            o = o1 if q == 0 else o2
                            c = po + 3 * o
                            ma = amc[o, m]
                            fl = flipm[node[L, c], ma]
                            sl = slicem[node[L, c + 1], ma]
                            tw = twm[node[L, c + 2], ma]
                            sp = sepm[node[L, po + SEP_COL + o], ma] if nx else 0
                            tmp[j, c] = fl
                            tmp[j, c + 1] = sl
                            tmp[j, c + 2] = tw
                            tmp[j, po + SEP_COL + o] = sp
                            if need1 if q == 0 else need2:
                                wb[j, 1 + q] = _index(fl, sl, tw, sp, ct, nx, sepconj)
                for j in range(n):
                    if not alive[j]:
                        continue
                    alive[j] = False             # until it passes every check below
                    if need1:
                        h, up = _value(tab, wb[j, 1], nx_base, fallback)
                        tmp[j, po + UP_COL + o1] = up
                        lo[j, o1] = h
                        probes += 1
                        if h > rem:
                            continue
                    if need2:
                        h, up = _value(tab, wb[j, 2], nx_base, fallback)
                        tmp[j, po + UP_COL + o2] = up
                        lo[j, o2] = h
                        probes += 1
                        if h > rem:
                            continue
                    if db and lo[j, 0] == rem and lo[j, 1] == rem and lo[j, 2] == rem:
                        continue             # de Bondt: all three axes at exactly rem
                    alive[j] = True
                # round 3: the other side of every survivor on three axes, all indices
                # first and then all loads
                for j in range(n):
                    if alive[j]:
                        m = tmpm[j]
                        for a in range(3):
                            c = po + INV_COL + 2 * a
                            ew, cw = _step(node[L, c], node[L, c + 1], amc[a, m], edst,
                                           esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                                           flip_bit, twist_term, add_twist)
                            tmp[j, c] = ew
                            tmp[j, c + 1] = cw
                            fl, sl, tw = _coords(ew, cw, sorted_slice, slice_of_mask)
                            sp = _inverse_sep(cw, sep_of_mask) if nx else 0
                            tmp[j, qo + 3 * a] = fl
                            tmp[j, qo + 3 * a + 1] = sl
                            tmp[j, qo + 3 * a + 2] = tw
                            tmp[j, qo + SEP_COL + a] = sp
                            if KEEP and (in_h[a] >> m) & 1 and node[L, qo + LOW + a] >= 0:
                                wb[j, a] = -1    # a premove inside H keeps the value
                            else:
                                wb[j, a] = _index(fl, sl, tw, sp, ct, nx, sepconj)
                cnt = 0
                for j in range(n):
                    if not alive[j]:
                        continue
                    if wb[j, 0] >= 0:
                        h0, p0 = _value(tab, wb[j, 0], nx_base, fallback)
                        probes += 1
                    else:
                        h0, p0 = node[L, qo + LOW], node[L, qo + UP_COL]
                    if wb[j, 1] >= 0:
                        h1, p1 = _value(tab, wb[j, 1], nx_base, fallback)
                        probes += 1
                    else:
                        h1, p1 = node[L, qo + LOW + 1], node[L, qo + UP_COL + 1]
                    if wb[j, 2] >= 0:
                        h2, p2 = _value(tab, wb[j, 2], nx_base, fallback)
                        probes += 1
                    else:
                        h2, p2 = node[L, qo + LOW + 2], node[L, qo + UP_COL + 2]
                    if h0 > rem or h1 > rem or h2 > rem or (
                            h0 == rem and h1 == rem and h2 == rem):
                        continue
                    m = tmpm[j]
                    row = kids[L, cnt]
                    for a in range(3):
                        row[po + 3 * a] = tmp[j, po + 3 * a]
                        row[po + 3 * a + 1] = tmp[j, po + 3 * a + 1]
                        row[po + 3 * a + 2] = tmp[j, po + 3 * a + 2]
                        row[po + UP_COL + a] = tmp[j, po + UP_COL + a]
                        row[po + INV_COL + 2 * a] = tmp[j, po + INV_COL + 2 * a]
                        row[po + INV_COL + 2 * a + 1] = tmp[j, po + INV_COL + 2 * a + 1]
                        row[po + LOW + a] = lo[j, a]
                        row[po + SEP_COL + a] = tmp[j, po + SEP_COL + a]
                        row[qo + 3 * a] = tmp[j, qo + 3 * a]
                        row[qo + 3 * a + 1] = tmp[j, qo + 3 * a + 1]
                        row[qo + 3 * a + 2] = tmp[j, qo + 3 * a + 2]
                        row[qo + SEP_COL + a] = tmp[j, qo + SEP_COL + a]
                        # the other side's words: relabelled, with the moved side's
                        # flip and twist in this frame
                        c = qo + INV_COL + 2 * a
                        ew, cw = _premove(node[L, c], node[L, c + 1], amc[a, m], rel_e,
                                          rel_c)
                        row[c] = ew
                        row[c + 1] = (cw | (tmp[j, po + 3 * a] << 40)
                                      | (tmp[j, po + 3 * a + 2] << 51))
                    row[qo + LOW] = h0
                    row[qo + LOW + 1] = h1
                    row[qo + LOW + 2] = h2
                    row[qo + UP_COL] = p0
                    row[qo + UP_COL + 1] = p1
                    row[qo + UP_COL + 2] = p2
                    row[LAST_X] = node[L, LAST_X]
                    row[LAST_Y] = node[L, LAST_Y]
                    row[lcol] = m // 3
                    kidm[L, cnt] = tag + m
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
