"""Korf's (1997) optimal solver, kept as an independent test oracle for apps.rubik (the
solver does not offer it: it is 195x slower than the huge table on the T16 proof).

Its tables and its IDA* kernel share nothing with the solver's phase-1 family but the
cube model, the move order rule and the stack step: three pattern databases, each the
exact distance (HTM) of one part of the cube, found by a breadth-first search from solved
(:func:`apps.rubik.packing.bfs`), and their maximum as the heuristic.

===========  ===================================  ===========  =========
table        index                                entries      4-bit size
===========  ===================================  ===========  =========
corners      cp * 2187 + twist                    88,179,840   44.1 MB
edges A      rank(positions of UR UF UL UB DR DF)  42,577,920   21.3 MB
             * 64 + their 6 flip bits
edges B      same for DL DB FR FL BL BR           42,577,920   21.3 MB
===========  ===================================  ===========  =========

``max_depth`` truncates the searches (the entries not reached get ``max_depth + 1``, still
a lower bound): the tests use truncated tables, built in memory in seconds.
:class:`KorfHeuristic` has the interface of :class:`apps.rubik.solver.Heuristic` that
:class:`apps.rubik.solver.Solver` uses, so ``Solver(tables=KorfHeuristic(...))`` solves
with it (serially; the farm's workers load the solver's own heuristics by name).
"""
import numpy as np
from numba import njit

from apps.rubik import coords as C
from apps.rubik.cube import N_MOVES, parse_moves
from apps.rubik.packing import UNSET, _nib, _pack4, bfs
from apps.rubik.pruning import NO_FACE, _allowed
from apps.rubik.search import SlicedSearch
from apps.rubik.status import DONE, FOUND, MAX_DEPTH, PAUSED, _descend

N_E6 = 665280                      # 12P6: ordered positions of 6 tracked edges
EDGES_A = (0, 1, 2, 3, 4, 5)       # UR UF UL UB DR DF
EDGES_B = (6, 7, 8, 9, 10, 11)     # DL DB FR FL BL BR
N_CORNER = C.N_CP * C.N_TWIST
N_EDGE6 = N_E6 * 64


# ------------------------------------------------------------------- 6-edge coordinates
@njit(cache=True)
def _e6_rank(pos):
    """Rank of 6 distinct ordered positions in 0..11 (mixed radix 12*11*..*7)."""
    return C._positions_rank(pos)


@njit(cache=True)
def _e6_unrank(r, pos):
    C._partial_perm_unrank(r, 12, 6, pos)


@njit(cache=True)
def _e6_tables(mep, meo):
    """Position-rank table and flip-xor table of 6 tracked edges (shared by any 6 edges:
    a piece at position p goes to dest[p] and gains the flip meo[dest[p]])."""
    t = np.empty((N_E6, N_MOVES), np.int32)
    x = np.empty((N_E6, N_MOVES), np.uint8)
    dest = np.empty((N_MOVES, 12), np.int64)
    for m in range(N_MOVES):
        for i in range(12):
            dest[m, mep[m, i]] = i
    pos = np.empty(6, np.int64)
    npos = np.empty(6, np.int64)
    for r in range(N_E6):
        _e6_unrank(r, pos)
        for m in range(N_MOVES):
            f = 0
            for k in range(6):
                d = dest[m, pos[k]]
                npos[k] = d
                f |= meo[m, d] << k
            t[r, m] = _e6_rank(npos)
            x[r, m] = f
    return t, x


def e6_coord(c, edges):
    """(position rank, 6 flip bits) of the given 6 edges of cube ``c``."""
    ep = c.ep.tolist()
    pos = np.array([ep.index(e) for e in edges], np.int64)
    flips = sum(int(c.eo[p]) << k for k, p in enumerate(pos))
    return int(_e6_rank(pos)), flips


E6A_SOLVED = int(_e6_rank(np.array(EDGES_A, np.int64)))
E6B_SOLVED = int(_e6_rank(np.array(EDGES_B, np.int64)))
_MOVES = {}


def move_tables():
    """The move tables Korf's tables need: corner permutation, twist, 6-edge rank and
    flip xor (built once per process)."""
    if not _MOVES:
        mcp, mco, mep, meo = C.move_arrays()
        _MOVES["cp"] = C._move_table(C.CP, C.N_CP, mcp, mco, 1, np.zeros(1, np.int32))
        _MOVES["twist"] = C.move_tables()["twist"]
        _MOVES["e6"], _MOVES["e6x"] = _e6_tables(mep, meo)
    return _MOVES


# ------------------------------------------------------------------------------ tables
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

    def __init__(self, corners, edges_a, edges_b):
        self.corners, self.edges_a, self.edges_b = corners, edges_a, edges_b
        self.moves = move_tables()

    @classmethod
    def build(cls, max_depth=None):
        """The tables, built in memory (truncated at ``max_depth`` if given)."""
        return cls(_pack4(build_corners(max_depth)[0]),
                   _pack4(build_edges("A", max_depth)[0]),
                   _pack4(build_edges("B", max_depth)[0]))

    def h(self, cube):
        """max(corners, edges A, edges B) for a Cube."""
        return max(self.parts(cube))

    def parts(self, cube):
        """(corner, edges A, edges B) lower bounds for a Cube."""
        ci = C.cp_coord(cube) * 2187 + C.twist_coord(cube)
        ra, fa = e6_coord(cube, EDGES_A)
        rb, fb = e6_coord(cube, EDGES_B)
        return (int(_nib(self.corners, ci)), int(_nib(self.edges_a, ra * 64 + fa)),
                int(_nib(self.edges_b, rb * 64 + fb)))

    def root_state(self, cube):
        """The coordinate row the kernel's stack starts from for ``cube``."""
        ra, fa = e6_coord(cube, EDGES_A)
        rb, fb = e6_coord(cube, EDGES_B)
        return np.array([C.cp_coord(cube), C.twist_coord(cube), ra, fa, rb, fb], np.int32)


# ------------------------------------------------------------------------------ kernel
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
    """IDA* below node[0] to ``bound``, at most about ``budget`` generated nodes per call;
    returns DONE, FOUND or PAUSED (the stack is kept: call again to go on)."""
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


class KorfSearch(SlicedSearch):
    """A resumable IDA* search of the subtree below ``prefix`` (applied to ``cube``) with
    cost bound ``bound`` over :class:`KorfTables`: :meth:`step` / :meth:`run` return
    DONE, FOUND (then :attr:`solution` holds the whole move list) or PAUSED, and count
    generated and expanded nodes as :class:`apps.rubik.search.SubtreeSearch` does."""

    def __init__(self, tables, cube, prefix, bound):
        self.tables = tables
        self.prefix = parse_moves(prefix)
        self.bound = int(bound)
        if self.bound > MAX_DEPTH:
            raise ValueError(f"bound {bound} exceeds the maximum depth {MAX_DEPTH}")
        self.root = cube.apply(list(self.prefix))
        self.g0 = len(self.prefix)
        self.last0 = self.prefix[-1] // 3 if self.prefix else NO_FACE
        row = tables.root_state(self.root)
        depth = max(self.bound - self.g0, 0) + 2
        self.node = np.zeros((depth, row.size), row.dtype)
        self.node[0] = row
        self.path = np.zeros(depth + 1, np.int8)
        self.kids = np.zeros((depth, 18, row.size), row.dtype)
        self.kidm = np.zeros((depth, 18), np.int8)
        self.nk = np.zeros(depth, np.int8)
        self.ki = np.zeros(depth, np.int8)
        self.box = np.zeros(2, np.int64)          # stack level, root expanded?
        self.stats = np.zeros(2, np.int64)
        self.solution = None
        self.finished = False
        self._pending = None
        if self.g0 + tables.h(self.root) > self.bound:
            self.finished = True                  # pruned: f exceeds the bound
        elif self.g0 == self.bound:
            self.finished = True
            if self.root.is_solved:
                self._pending = list(self.prefix)

    def step(self, budget=1 << 22):
        """Search about ``budget`` more generated nodes; returns DONE, FOUND or PAUSED."""
        if self._pending is not None:
            self.solution, self._pending = self._pending, None
            return FOUND
        if self.finished:
            return DONE
        t, mt = self.tables, self.tables.moves
        status = _search_korf(mt["cp"], mt["twist"], mt["e6"], mt["e6x"], t.corners,
                              t.edges_a, t.edges_b, self.node, self.path, self.kids,
                              self.kidm, self.nk, self.ki, self.box, self.g0, self.last0,
                              self.bound, int(budget), self.stats)
        if status == FOUND:
            depth = int(self.box[0]) + 1
            self.solution = self.prefix + [int(x) for x in self.path[1:depth + 1]]
        elif status == DONE:
            self.finished = True
        return status


class KorfHeuristic:
    """Korf's tables behind the part of :class:`apps.rubik.solver.Heuristic`'s interface
    that :class:`apps.rubik.solver.Solver` and its symmetry frontier use. No inverse
    lookups and no tight-move rule: the plain heuristic of the 1997 paper."""

    name = "korf"
    inverse = False
    tight = False
    memory = "shared"

    def __init__(self, max_depth=None):
        self.tables = KorfTables.build(max_depth)
        self.status = {"korf": "built in memory" + (
            f" (max_depth={max_depth})" if max_depth is not None else "")}

    def h(self, cube):
        """Lower bound on the distance of ``cube`` from solved."""
        return self.tables.h(cube)

    def after(self, cube, prefix):
        """(h of ``cube`` after ``prefix``, None: no inverse values)."""
        return self.h(cube.apply(list(prefix))), None

    def skip_moves(self, inverse_values, left):
        """No move is skipped (no tight-move rule)."""
        return 0

    def searched(self, seconds):
        """The tables are built in memory: nothing to copy."""

    def subtree(self, cube, prefix, bound, first_move=None):
        """A resumable search of the subtree under ``prefix`` with cost bound ``bound``."""
        if first_move is not None:
            raise ValueError("Korf's search does not resume at a first move")
        return KorfSearch(self.tables, cube, prefix, bound)


def zero_tables():
    """Korf's tables with every entry 0 (a search then generates the whole canonical
    tree)."""
    return KorfTables(np.zeros(N_CORNER // 2, np.uint8), np.zeros(N_EDGE6 // 2, np.uint8),
                      np.zeros(N_EDGE6 // 2, np.uint8))
