"""IDA* iterations searched as the subtrees 4 moves below the cube, densest first.

The last iteration of a solve is searched only until its first solution, so its cost
depends on where in the tree the solutions lie. vcube (Voltara; nxopt's design) searches
its iterations from bound 14 on as the 43,239 distinct positions 4 moves out, in the
order of their *density* in the previous iteration (the node count of each subtree,
scaled down by sqrt(2/3) where its last move turns U, R or F, which leaves 15 canonical
moves after it instead of 12): built without that order it took 1.30x as long on
``Cube.random(0..19)`` on this machine (docs/rubik.md, "Against vcube on this machine").

Here every iteration above :data:`LEAF_DEPTH` runs that way (one numba call walks the top
of the tree, one more searches the leaves, with no Python per leaf): the first iterations
cost no more than a plain search, and each iteration is ordered by the one before it.
:class:`LeafOrder` holds one cube's frontier (the leaves' coordinate rows, computed as the
iterations first reach them) and each leaf's count in the last iteration that searched it;
:class:`LeafSearch` is one iteration over a given order of leaves, resumable in slices of
nodes like :class:`~.search.SubtreeSearch` (and what it has left can be handed on as
pieces). The frontier's node counts are those of one plain search from the cube (tested).
"""
import functools
from typing import NamedTuple

import numpy as np
from numba import njit

from .inverse import TABLES as INV_TABLES
from .inverse import _coords, _step
from .phase1_kernel import (INV_COL, INV_H_COL, SEP_COL, UP_COL, _apply_cubies, _index,
                            _inverse_sep, _search_reid, _value)
from .phase1_rows import nx_args, phase1_row
from .pruning import NO_FACE, _allowed
from .search import (_MOVE_ARRAYS, SlicedSearch, kernel_options, kernel_tables,
                     stack_remainder)
from .status import DONE, FOUND, MAX_DEPTH, PAUSED
from .symmetry import AXIS_MOVE_CONJ

__all__ = ["LEAF_DEPTH", "LEAVES", "N_LEAVES", "LeafOrder", "LeafSearch", "densest_first",
           "is_leaf_piece", "leaf_prefixes", "leaves_piece"]

#: depth of the leaves (43,254 canonical sequences; vcube keeps the 43,239 distinct positions)
LEAF_DEPTH = 4
N_LEAVES = 43254
#: a leaf's density weight where its last move turns U, R or F (faces 0..2: 15 canonical
#: moves may follow, against 12 after D, L or B): vcube's 47525:58206, about sqrt(2/3)
URF_DENSITY = 47525 / 58206


def _tree(depth):
    """The canonical tree down to ``depth`` moves in breadth-first order (children in move
    order, so the leaves come in lexicographic order): parent, move and depth per node
    (node 0 is the root), the index of the first leaf, and the leaves' move sequences."""
    may = np.array([[_allowed(last, m // 3) for m in range(18)] for last in range(7)])
    parent, move, level = [np.array([-1])], [np.array([-1])], [np.array([0])]
    seqs, last, start = np.zeros((1, 0), np.int64), np.array([NO_FACE]), 0
    for d in range(1, depth + 1):
        rows, moves = np.nonzero(may[last])          # by parent, then by move
        parent.append(start + rows)
        move.append(moves)
        level.append(np.full(rows.size, d))
        start += seqs.shape[0]
        seqs = np.hstack([seqs[rows], moves[:, None]])
        last = moves // 3
    return (np.concatenate(parent).astype(np.int64), np.concatenate(move).astype(np.int64),
            np.concatenate(level).astype(np.int64), start, seqs.astype(np.int64))


@functools.lru_cache(maxsize=None)
def _leaf_tree():
    """The tree of :data:`LEAF_DEPTH` (made once, on first use)."""
    parent, move, depth, first_leaf, leaf_moves = _tree(LEAF_DEPTH)
    assert len(leaf_moves) == N_LEAVES
    last_face = leaf_moves[:, -1] // 3
    return _Tree(parent, move, depth, first_leaf, leaf_moves, last_face,
                 np.where(last_face < 3, URF_DENSITY, 1.0))


class _Tree(NamedTuple):
    parent: np.ndarray          # per node (breadth-first), its parent (-1: the root)
    move: np.ndarray            # ... the move from its parent
    depth: np.ndarray           # ... its depth
    first_leaf: int             # the first node of depth LEAF_DEPTH
    leaf_moves: np.ndarray      # per leaf, its moves (lexicographic order)
    last_face: np.ndarray       # ... the face of its last move
    weight: np.ndarray          # ... its density weight (URF_DENSITY or 1)


def leaf_prefixes():
    """The leaves' move sequences, (43,254, 4), in lexicographic order."""
    return _leaf_tree().leaf_moves


@njit(cache=True)
def _tight_skip(row, left, use, in_h):
    """The moves a tight inverse value rules out below a node with ``row`` and ``left``
    moves left to the bound (a bit per move; 0 unless ``use``)."""
    skip = np.int64(0)
    if use:
        for a in range(3):
            if row[INV_H_COL + a] >= left:
                skip |= in_h[a]
    return skip


@njit(cache=True, inline="always")
def _side_value(a, b, c):
    """A side's heuristic from its three axes' lower bounds: the largest, + 1 where all
    three agree (de Bondt)."""
    h = max(a, max(b, c))
    return h + 1 if h > 0 and a == b and b == c else h


@njit(cache=True)
def _make_children(p, j0, j1, skip, move, rows, hv, have, todo, idx, flipm, slicem, twm,
                   amc, sepm, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep, flip_bit,
                   twist_term, add_twist, slice_of_mask, ct, tab, use_inv, sorted_slice,
                   nx_base, fallback, sepconj, sep_of_mask):
    """The rows of nodes ``j0..j1-1``, children of ``p``, that the moves ``skip`` leaves
    and that have none yet (the parent's row moved, as :func:`.phase1_rows.phase1_row`
    makes one, with its heuristic in ``hv``). All their table indices are computed first
    and then all loaded, so that the probes (six per row, into a table of gigabytes) are
    in flight together instead of one after another, as the kernel batches its probes (a
    row one at a time cost 3-9 us, most of a frontier walk). ``todo``, ``idx``: scratch
    arrays of 18 and (18, 6)."""
    nx = nx_base >= 0
    n = 0
    for j in range(j0, j1):
        m = move[j]
        if have[j] or (skip >> m) & 1:
            continue
        todo[n] = j
        for c in range(rows.shape[1]):
            rows[j, c] = rows[p, c]
        for a in range(3):
            ma = amc[a, m]
            fl = flipm[rows[p, 3 * a], ma]
            sl = slicem[rows[p, 3 * a + 1], ma]
            tw = twm[rows[p, 3 * a + 2], ma]
            sp = sepm[rows[p, SEP_COL + a], ma] if nx else 0
            rows[j, 3 * a] = fl
            rows[j, 3 * a + 1] = sl
            rows[j, 3 * a + 2] = tw
            if nx:
                rows[j, SEP_COL + a] = sp
            idx[n, a] = _index(fl, sl, tw, sp, ct, nx, sepconj)
            ew, cw = _step(rows[p, INV_COL + 2 * a], rows[p, INV_COL + 2 * a + 1], ma, edst,
                           esrc, eflip, cdst, csrc, ctw, ekeep, ckeep, flip_bit, twist_term,
                           add_twist)
            rows[j, INV_COL + 2 * a] = ew
            rows[j, INV_COL + 2 * a + 1] = cw
            if use_inv:
                ifl, isl, itw = _coords(ew, cw, sorted_slice, slice_of_mask)
                isp = _inverse_sep(cw, sep_of_mask) if nx else 0
                idx[n, 3 + a] = _index(ifl, isl, itw, isp, ct, nx, sepconj)
        n += 1
    for i in range(n):
        j = todo[i]
        # as phase1_rows._reid_row_h: the larger side's value
        l0, u0 = _value(tab, idx[i, 0], nx_base, fallback)
        l1, u1 = _value(tab, idx[i, 1], nx_base, fallback)
        l2, u2 = _value(tab, idx[i, 2], nx_base, fallback)
        rows[j, UP_COL] = u0
        rows[j, UP_COL + 1] = u1
        rows[j, UP_COL + 2] = u2
        h = _side_value(l0, l1, l2)
        if use_inv:
            v0 = _value(tab, idx[i, 3], nx_base, fallback)[0]
            v1 = _value(tab, idx[i, 4], nx_base, fallback)[0]
            v2 = _value(tab, idx[i, 5], nx_base, fallback)[0]
            h = max(h, _side_value(v0, v1, v2))
        else:
            v0 = v1 = v2 = -1
        rows[j, INV_H_COL] = v0
        rows[j, INV_H_COL + 1] = v1
        rows[j, INV_H_COL + 2] = v2
        hv[j] = h
        have[j] = True


@njit(cache=True)
def _rows_to(bound, leaves, parent, move, depth, first_leaf, rows, hv, have,
             flipm, slicem, twm, amc, sepm,
             edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep, flip_bit, twist_term, add_twist,
             slice_of_mask, ct, tab, use_inv, sorted_slice, nx_base, fallback, sepconj,
             sep_of_mask, tight, in_h):
    """The rows of ``leaves`` (leaf indices) and of the nodes above them, computed where
    missing, each node checked alive at ``bound`` as :func:`_walk` judges it (the root is
    the caller's to check): the position in ``leaves`` of the first leaf that is not
    (``leaves.size``: all are). A worker handed a few leaves of a cube it never searched
    computes their paths only, not the whole frontier."""
    path = np.empty(depth.max() + 1, np.int64)
    todo = np.empty(18, np.int64)
    idx = np.empty((18, 6), np.int64)
    for k in range(leaves.size):
        j = first_leaf + leaves[k]
        n = 0
        while j > 0:
            path[n] = j
            n += 1
            j = parent[j]
        for i in range(n - 1, -1, -1):
            j = path[i]
            p = parent[j]
            skip = _tight_skip(rows[p], bound - depth[p], use_inv and tight, in_h)
            if (skip >> move[j]) & 1:
                return k
            _make_children(p, j, j + 1, skip, move, rows, hv, have, todo, idx, flipm, slicem,
                           twm, amc, sepm, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                           flip_bit, twist_term, add_twist, slice_of_mask, ct, tab, use_inv,
                           sorted_slice, nx_base, fallback, sepconj, sep_of_mask)
            if depth[j] + hv[j] > bound:
                return k
    return leaves.size


@njit(cache=True)
def _walk(bound, parent, move, depth, first_leaf, rows, hv, have, alive,
          flipm, slicem, twm, amc, sepm,
          edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep, flip_bit, twist_term, add_twist,
          slice_of_mask, ct, tab, use_inv, sorted_slice, nx_base, fallback, sepconj,
          sep_of_mask, tight, in_h):
    """One iteration's frontier: the leaves with f <= ``bound`` in ``alive`` (leaf
    indices, lexicographic), and the number of them, the generated and the expanded nodes
    of the tree above them, counted as the kernel counts them (a leaf is generated here and
    expanded by its own search). A node's row (and ``hv``, its heuristic) is computed the
    first time an iteration generates it (``have``), with its siblings'
    (:func:`_make_children`); row 0 is the cube's."""
    n = parent.size
    ok = np.zeros(n, np.bool_)
    ok[0] = True
    todo = np.empty(18, np.int64)
    idx = np.empty((18, 6), np.int64)
    gen = 0
    exp = 1
    nl = 0
    lastp = -1
    skip = np.int64(0)
    for j in range(1, n):
        p = parent[j]
        if not ok[p]:
            continue
        if p != lastp:            # the moves a tight inverse rules out at the parent
            lastp = p
            skip = _tight_skip(rows[p], bound - depth[p], use_inv and tight, in_h)
            j1 = j + 1            # its children are consecutive: their rows, together
            missing = not have[j]
            while j1 < n and parent[j1] == p:
                missing = missing or not have[j1]
                j1 += 1
            if missing:
                _make_children(p, j, j1, skip, move, rows, hv, have, todo, idx, flipm,
                               slicem, twm, amc, sepm, edst, esrc, eflip, cdst, csrc, ctw,
                               ekeep, ckeep, flip_bit, twist_term, add_twist, slice_of_mask,
                               ct, tab, use_inv, sorted_slice, nx_base, fallback, sepconj,
                               sep_of_mask)
        m = move[j]
        if (skip >> m) & 1:
            continue
        gen += 1                  # its row was made with its siblings' above
        if depth[j] + hv[j] <= bound:
            ok[j] = True
            if j < first_leaf:
                exp += 1
            else:
                alive[nl] = j - first_leaf
                nl += 1
    return nl, gen, exp


@njit(cache=True)
def _search_leaves(order, leaf_rows, leaf_moves, leaf_face, cube_cp, cube_co, cube_ep,
                   cube_eo, cp, co, ep, eo, lbox, counts, node, path, kids, kidm, nk, ki,
                   box, bound, budget, stats,
                   flipm, slicem, slice_solved, twm, amc, ct, tab, mcp, mco, mep, meo,
                   use_inv, sorted_slice, edst, esrc, eflip, cdst, csrc, ctw, ekeep, ckeep,
                   flip_bit, twist_term, add_twist, slice_of_mask, tight, in_h,
                   nx_base, fallback, sepm, sepconj, sep_of_mask):
    """Search the leaves ``order[lbox[0]:]`` one after another to ``bound`` with the
    kernel, for about ``budget`` generated nodes: DONE, FOUND (leaf ``order[lbox[0]]``'s
    search holds a solution; calling again goes on after it) or PAUSED. ``lbox``: the
    position in ``order``, whether that leaf's search has started, the generated count
    when it started; ``counts[leaf]``: the nodes its search has generated."""
    start = stats[0]
    while lbox[0] < order.size:
        i = order[lbox[0]]
        if lbox[1] == 0:          # a fresh leaf: its row on the stack, its cubies replayed
            node[0, :] = leaf_rows[i]
            box[0] = 0
            box[1] = 0
            box[2] = 0
            cp[:] = cube_cp
            co[:] = cube_co
            ep[:] = cube_ep
            eo[:] = cube_eo
            _apply_cubies(cp, co, ep, eo, leaf_moves[i], mcp, mco, mep, meo)
            lbox[1] = 1
            lbox[2] = stats[0]
        left = budget - (stats[0] - start)
        if left <= 0:
            return PAUSED
        status = _search_reid(flipm, slicem, slice_solved, twm, amc, ct, tab, node, path,
                              kids, kidm, nk, ki, box, leaf_moves.shape[1], leaf_face[i],
                              bound, left, stats, cp, co, ep, eo, mcp, mco, mep, meo,
                              use_inv, sorted_slice, edst, esrc, eflip, cdst, csrc, ctw, ekeep,
                              ckeep, flip_bit, twist_term, add_twist, slice_of_mask, tight,
                              in_h, nx_base, fallback, sepm, sepconj, sep_of_mask)
        counts[i] = stats[0] - lbox[2]
        if status != DONE:
            return status
        lbox[0] += 1
        lbox[1] = 0
    return DONE


class LeafOrder:
    """One cube's frontier :data:`LEAF_DEPTH` moves deep, for the iterations of a
    :class:`~.solver.Heuristic` ``heuristic`` (a phase-1 family table) above that depth.

    :meth:`iteration` makes the search of one bound, its leaves densest first by
    :attr:`counts` (each leaf's generated nodes in the last iteration that searched it;
    ties, and the first iteration, in lexicographic order)."""

    def __init__(self, heuristic, cube):
        self.heuristic = heuristic
        t = heuristic.tables
        self.tables = t
        row, self.root_h = phase1_row(t, cube, [], heuristic.inverse)
        self._tree = tree = _leaf_tree()
        n = tree.parent.size
        self.rows = np.empty((n, row.size), np.int64)   # a row is read once ``have`` says
        self.rows[0] = row
        self.hv = np.zeros(n, np.int64)
        self.hv[0] = self.root_h
        self.have = np.zeros(n, np.bool_)
        self.have[0] = True
        self.counts = np.zeros(len(tree.leaf_moves), np.int64)
        self._cubies = [np.asarray(a, np.int64).copy() for a in (cube.cp, cube.co, cube.ep,
                                                                  cube.eo)]
        depth = MAX_DEPTH - LEAF_DEPTH + 2
        self._stack = (np.zeros((depth, row.size), np.int64), np.zeros(depth + 1, np.int8),
                       np.zeros((depth, 18, row.size), np.int64),
                       np.zeros((depth, 18), np.int8), np.zeros(depth, np.int8),
                       np.zeros(depth, np.int8))
        self._in_h = np.array(heuristic._targets(), np.int64)

    def _walk_args(self):
        # read each time: the heuristic may have moved its tables into a private copy
        t, h = self.tables, self.heuristic
        nx_base, fallback, sepm, sepconj, sep_of_mask = nx_args(t)
        mt = t.moves
        return (mt["flip"], mt[t.slice_move], mt["twist"], AXIS_MOVE_CONJ, sepm, *INV_TABLES,
                t.route, t.table, h.inverse, t.sorted_slice, nx_base, fallback, sepconj,
                sep_of_mask, h.tight, self._in_h)

    def _kernel_args(self):
        t, h = self.tables, self.heuristic
        return (*kernel_tables(t), *_MOVE_ARRAYS,
                *kernel_options(t, h.inverse, h.tight, self._in_h))

    def take_counts(self, counts):
        """Order by ``counts`` (per leaf, as :attr:`counts`: gathered by the processes that
        searched the cube's leaves so far, :meth:`LeafSearch.searched`; None: none yet, a
        new solve) from now on."""
        self.counts[:] = 0 if counts is None else counts

    def frontier(self, bound):
        """(the leaves with f <= ``bound``, lexicographic; generated, expanded) of the tree
        above them (``bound`` > :data:`LEAF_DEPTH`)."""
        if bound <= LEAF_DEPTH:
            raise ValueError(f"a leaf search needs a bound above {LEAF_DEPTH}, got {bound}")
        t = self._tree
        if bound < self.root_h:             # the cube itself is pruned
            return np.zeros(0, np.int64), 0, 0
        alive = np.empty(len(t.leaf_moves), np.int64)
        nl, gen, exp = _walk(int(bound), t.parent, t.move, t.depth, t.first_leaf, self.rows,
                             self.hv, self.have, alive, *self._walk_args())
        return alive[:nl], int(gen), int(exp)

    def densest_first(self, leaves):
        """``leaves`` (indices) sorted by density, densest first (stable)."""
        return densest_first(self.counts, leaves)

    def iteration(self, bound):
        """The search of iteration ``bound``, its leaves densest first; the frontier's own
        counts are in its :attr:`~LeafSearch.generated` and :attr:`~LeafSearch.expanded`
        from the start."""
        leaves, gen, exp = self.frontier(bound)
        return LeafSearch(self, bound, self.densest_first(leaves), gen, exp)

    def search(self, bound, leaves):
        """The search of ``leaves`` (indices into :func:`leaf_prefixes`, searched in this
        order) to ``bound``: a :func:`leaves_piece` that an iteration handed on."""
        leaves = np.asarray(leaves, np.int64)
        if bound <= LEAF_DEPTH:
            raise ValueError(f"a leaf search needs a bound above {LEAF_DEPTH}, got {bound}")
        t = self._tree
        # their rows, where no iteration here made them, and a check that they are alive
        k = 0 if bound < self.root_h else _rows_to(
            int(bound), leaves, t.parent, t.move, t.depth, t.first_leaf, self.rows, self.hv,
            self.have, *self._walk_args())
        if k < leaves.size:
            raise ValueError(f"leaf {int(leaves[k])} given is pruned at bound {bound}")
        return LeafSearch(self, bound, leaves, 0, 0)


def densest_first(counts, leaves):
    """``leaves`` (indices) sorted by their density under ``counts`` (per leaf, as
    :attr:`LeafOrder.counts`), densest first (stable): the order of an iteration."""
    density = counts[leaves] * _leaf_tree().weight[leaves]
    return leaves[np.argsort(-density, kind="stable")]


#: the ``first_move`` of a piece that stands for whole leaves of the frontier: its prefix
#: is an array of leaf indices, to search in that order (43,254 leaves as one compact
#: piece, not as many small lists: those cost 0.5 s a hand-over)
LEAVES = -1


def leaves_piece(leaves):
    """The piece ``(leaf indices, LEAVES)`` of ``leaves``."""
    return np.asarray(leaves, np.int32), LEAVES


def is_leaf_piece(prefix, first_move):
    """Does the piece ``(prefix, first_move)`` stand for whole leaves (:func:`leaves_piece`)?"""
    return first_move == LEAVES


class LeafSearch(SlicedSearch):
    """The search of leaves ``order`` (indices into :func:`leaf_prefixes`) of a
    :class:`LeafOrder` to ``bound``, in that order. Like :class:`~.search.SubtreeSearch`:
    :meth:`step` returns DONE, FOUND (:attr:`solution` holds the moves; stepping again goes
    on after it) or PAUSED; :meth:`remainder` hands on what is left as pieces. ``gen0``,
    ``exp0``: node counts to start from (the frontier's own)."""

    def __init__(self, leaf_order, bound, order, gen0=0, exp0=0):
        if bound > MAX_DEPTH:
            raise ValueError(f"bound {bound} exceeds the maximum depth {MAX_DEPTH}")
        self.leaf_order = leaf_order
        self.bound = int(bound)
        self.order = np.ascontiguousarray(order, np.int64)
        self.stats = np.array([gen0, exp0, 0], np.int64)
        self._lbox = np.zeros(3, np.int64)
        self._box = np.zeros(3, np.int64)
        self._scratch = tuple(np.zeros(k, np.int64) for k in (8, 8, 12, 12))
        self.solution = None

    @property
    def leaves_done(self):
        """How many leaves of the order are searched to the end."""
        return int(self._lbox[0])

    def step(self, budget=1 << 22):
        """Search about ``budget`` more generated nodes; returns DONE, FOUND or PAUSED."""
        lo = self.leaf_order
        node, path, kids, kidm, nk, ki = lo._stack
        t = lo._tree
        status = _search_leaves(self.order, lo.rows[t.first_leaf:], t.leaf_moves,
                                t.last_face, *lo._cubies, *self._scratch, self._lbox,
                                lo.counts, node, path, kids, kidm, nk, ki, self._box,
                                self.bound, int(budget), self.stats,
                                *lo._kernel_args())
        if status == FOUND:
            depth = int(self._box[0]) + 1
            leaf = [int(m) for m in lo._tree.leaf_moves[self.order[self._lbox[0]]]]
            self.solution = leaf + [int(x) for x in path[1:depth + 1]]
        return status

    def searched(self):
        """(leaf indices, their counts) of the leaves this search has started, in order (the
        one it stopped in counted so far)."""
        n = int(self._lbox[0] + self._lbox[1])
        leaves = self.order[:min(n, self.order.size)]
        return leaves, self.leaf_order.counts[leaves]

    def remainder(self):
        """What is left, as pieces ``(prefix, first_move)`` in this search's order: the rest
        of the leaf being searched (see :meth:`.search.SubtreeSearch.remainder`), then the
        leaves not started as one :func:`leaves_piece`."""
        k = int(self._lbox[0])
        out = []
        if k < self.order.size and self._lbox[1] and self._box[1]:
            leaf = [int(m) for m in self.leaf_order._tree.leaf_moves[self.order[k]]]
            node, path, kids, kidm, nk, ki = self.leaf_order._stack
            out = stack_remainder(leaf, self._box, path, kidm, nk, ki)
            k += 1
        if k < self.order.size:
            out.append(leaves_piece(self.order[k:]))
        return out
