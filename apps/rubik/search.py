"""IDA* kernels (numba) and a resumable subtree search around them.

One call of a kernel searches one subtree (the position after a prefix of moves, at
depth ``g0``) to a cost bound, depth first, with an explicit stack, and returns after at
most ``budget`` generated nodes: PAUSED (call again to continue where it stopped), FOUND
(the stack holds a solution; calling again continues the search after it) or DONE.
So a caller can cancel between slices, and "all optimal solutions" is just "keep calling".

Counting follows Korf: a node is *generated* when it is created as a child after move
pruning (and its heuristic is looked up), *expanded* when its children are generated.
"""
import numpy as np
from numba import njit

from .coords import (E6A_SOLVED, E6B_SOLVED, EDGES_A, EDGES_B, SLICE_SOLVED, cp_coord,
                     e6_coord, flip_coord, move_arrays, slice_coord, twist_coord)
from .cube import parse_moves
from .korf import _nib
from .pruning import NO_FACE, _allowed
from .reid import _phase1_h
from .symmetry import AXIS_MOVE_CONJ, axis_cube

DONE, FOUND, PAUSED = 0, 1, 2
MAX_DEPTH = 40


@njit(cache=True)
def _search_korf(cpm, twm, e6, e6x, pc, pa, pb, st, mv, nx, box, g0, last0, bound,
                 budget, stats):
    sp = box[0]
    gen = 0
    exp = 0
    status = DONE
    while True:
        m = nx[sp]
        if m >= 18:
            if sp == 0:
                status = DONE
                break
            sp -= 1
            continue
        if gen >= budget:
            status = PAUSED
            break
        f = m // 3
        lf = last0 if sp == 0 else mv[sp] // 3
        if not _allowed(lf, f):
            nx[sp] = 3 * f + 3
            continue
        nx[sp] = m + 1
        gen += 1
        r = st[sp]
        cp = cpm[r[0], m]
        tw = twm[r[1], m]
        ra = e6[r[2], m]
        fa = r[3] ^ e6x[r[2], m]
        rb = e6[r[4], m]
        fb = r[5] ^ e6x[r[4], m]
        rem = bound - (g0 + sp + 1)
        if rem == 0:
            if cp == 0 and tw == 0 and fa == 0 and fb == 0 and ra == E6A_SOLVED and rb == E6B_SOLVED:
                sp += 1
                mv[sp] = m
                nx[sp] = 18
                status = FOUND
                break
            continue
        if _nib(pc, np.int64(cp) * 2187 + tw) > rem:
            continue
        if _nib(pa, (np.int64(ra) << 6) | fa) > rem:
            continue
        if _nib(pb, (np.int64(rb) << 6) | fb) > rem:
            continue
        exp += 1
        sp += 1
        q = st[sp]
        q[0] = cp
        q[1] = tw
        q[2] = ra
        q[3] = fa
        q[4] = rb
        q[5] = fb
        mv[sp] = m
        nx[sp] = 0
    box[0] = sp
    stats[0] += gen
    stats[1] += exp
    return status


@njit(cache=True)
def _replay_solved(rcp, rco, rep, reo, mv, sp, m, mcp, mco, mep, meo):
    """Is the subtree root followed by mv[1..sp], m the solved cube?"""
    cp = rcp.copy()
    co = rco.copy()
    ep = rep.copy()
    eo = reo.copy()
    ncp = np.empty(8, np.int64)
    nco = np.empty(8, np.int64)
    nep = np.empty(12, np.int64)
    neo = np.empty(12, np.int64)
    for k in range(1, sp + 2):
        mm = mv[k] if k <= sp else m
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
    for i in range(8):
        if cp[i] != i or co[i] != 0:
            return False
    for i in range(12):
        if ep[i] != i or eo[i] != 0:
            return False
    return True


@njit(cache=True)
def _search_reid(flipm, slicem, twm, cpm, amc, cls, tconj, tab, pc, use_pc, st, mv, nx,
                 box, g0, last0, bound, budget, stats, rcp, rco, rep, reo, mcp, mco, mep, meo):
    sp = box[0]
    gen = 0
    exp = 0
    status = DONE
    c = np.empty(10, np.int64)
    while True:
        m = nx[sp]
        if m >= 18:
            if sp == 0:
                status = DONE
                break
            sp -= 1
            continue
        if gen >= budget:
            status = PAUSED
            break
        f = m // 3
        lf = last0 if sp == 0 else mv[sp] // 3
        if not _allowed(lf, f):
            nx[sp] = 3 * f + 3
            continue
        nx[sp] = m + 1
        gen += 1
        r = st[sp]
        for a in range(3):
            ma = amc[a, m]
            c[3 * a] = flipm[r[3 * a], ma]
            c[3 * a + 1] = slicem[r[3 * a + 1], ma]
            c[3 * a + 2] = twm[r[3 * a + 2], ma]
        c[9] = cpm[r[9], m]
        rem = bound - (g0 + sp + 1)
        if rem == 0:
            ok = c[9] == 0
            for a in range(3):
                if c[3 * a] != 0 or c[3 * a + 1] != SLICE_SOLVED or c[3 * a + 2] != 0:
                    ok = False
            if ok and _replay_solved(rcp, rco, rep, reo, mv, sp, m, mcp, mco, mep, meo):
                sp += 1
                mv[sp] = m
                nx[sp] = 18
                status = FOUND
                break
            continue
        h0 = _phase1_h(c[0], c[1], c[2], cls, tconj, tab)
        if h0 > rem:
            continue
        h1 = _phase1_h(c[3], c[4], c[5], cls, tconj, tab)
        if h1 > rem:
            continue
        h2 = _phase1_h(c[6], c[7], c[8], cls, tconj, tab)
        if h2 > rem:
            continue
        if h0 == h1 and h1 == h2 and h0 == rem and h0 > 0:
            continue
        if use_pc and _nib(pc, c[9] * 2187 + c[2]) > rem:
            continue
        exp += 1
        sp += 1
        q = st[sp]
        for i in range(10):
            q[i] = c[i]
        mv[sp] = m
        nx[sp] = 0
    box[0] = sp
    stats[0] += gen
    stats[1] += exp
    return status


_MOVE_ARRAYS = move_arrays()


def root_state(tables, cube):
    """The coordinate row a kernel's stack starts from for ``cube``."""
    if tables.name == "korf":
        ra, fa = e6_coord(cube, EDGES_A)
        rb, fb = e6_coord(cube, EDGES_B)
        return np.array([cp_coord(cube), twist_coord(cube), ra, fa, rb, fb], np.int32)
    row = []
    for a in range(3):
        x = axis_cube(cube, a)
        row += [flip_coord(x), slice_coord(x), twist_coord(x)]
    row.append(cp_coord(cube))
    return np.array(row, np.int32)


class SubtreeSearch:
    """A resumable IDA* search of the subtree below ``prefix`` (applied to ``cube``) with
    cost bound ``bound``. Call :meth:`step` until it returns DONE; after FOUND,
    :attr:`solution` holds the full move list (prefix included).

    ``tables`` is a :class:`~.korf.KorfTables` or :class:`~.reid.ReidTables` object;
    ``use_corners`` adds Korf's corner table to the phase-1 heuristic (needs ``corners``).
    """

    def __init__(self, tables, cube, prefix, bound, corners=None):
        self.tables = tables
        self.prefix = parse_moves(prefix)
        self.bound = int(bound)
        if self.bound > MAX_DEPTH:
            raise ValueError(f"bound {bound} exceeds the maximum depth {MAX_DEPTH}")
        self.root = cube.apply(self.prefix)
        self.g0 = len(self.prefix)
        self.last0 = self.prefix[-1] // 3 if self.prefix else NO_FACE
        depth = max(self.bound - self.g0, 0) + 2
        row = root_state(tables, self.root)
        self.st = np.zeros((depth, row.size), np.int32)
        self.st[0] = row
        self.mv = np.zeros(depth, np.int8)
        self.nx = np.zeros(depth, np.int8)
        self.box = np.zeros(1, np.int64)
        self.stats = np.zeros(2, np.int64)
        self.corners = corners
        self.solution = None
        self.finished = False
        h = self.root_h()
        if self.g0 + h > self.bound:
            self.finished = True          # pruned: f exceeds the bound
        elif self.g0 == self.bound:
            self.finished = True
            if self.root.is_solved:
                self._pending = list(self.prefix)
        else:
            self.stats[1] = 1             # the root gets expanded
        self._pending = list(self.prefix) if (self.g0 == self.bound and self.root.is_solved) else None

    def root_h(self):
        h = self.tables.h(self.root)
        if self.corners is not None:
            h = max(h, self.corners.parts(self.root)[0])
        return h

    @property
    def generated(self):
        return int(self.stats[0])

    @property
    def expanded(self):
        return int(self.stats[1])

    def step(self, budget=1 << 22):
        """Search at most ``budget`` more generated nodes; returns DONE, FOUND or PAUSED."""
        if self._pending is not None:
            self.solution, self._pending = self._pending, None
            return FOUND
        if self.finished:
            return DONE
        t = self.tables
        mt = t.moves
        if t.name == "korf":
            status = _search_korf(mt["cp"], mt["twist"], mt["e6"], mt["e6x"], t.corners,
                                  t.edges_a, t.edges_b, self.st, self.mv, self.nx, self.box,
                                  self.g0, self.last0, self.bound, budget, self.stats)
        else:
            pc = self.corners.corners if self.corners is not None else np.zeros(1, np.uint8)
            r = self.root
            mcp, mco, mep, meo = _MOVE_ARRAYS
            status = _search_reid(mt["flip"], mt["slice"], mt["twist"], mt["cp"], AXIS_MOVE_CONJ,
                                  t.cls, t.tconj, t.table, pc, self.corners is not None,
                                  self.st, self.mv, self.nx, self.box, self.g0, self.last0,
                                  self.bound, budget, self.stats,
                                  r.cp.astype(np.int64), r.co.astype(np.int64),
                                  r.ep.astype(np.int64), r.eo.astype(np.int64), mcp, mco, mep, meo)
        if status == FOUND:
            sp = int(self.box[0])
            self.solution = self.prefix + [int(x) for x in self.mv[1:sp + 1]]
        elif status == DONE:
            self.finished = True
        return status
