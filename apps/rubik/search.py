"""A resumable subtree search around the IDA* kernel (:mod:`.phase1_kernel`; numba).

One call of a kernel searches one subtree (the position after a prefix of moves, at
depth ``g0``) to a cost bound, depth first, with an explicit stack, and returns after at
most ``budget`` generated nodes: PAUSED (call again to continue where it stopped), FOUND
(the stack holds a solution; calling again continues the search after it) or DONE.
So a caller can cancel between slices, and "all optimal solutions" is just "keep calling".

Counting follows Korf: a node is *generated* when it is created as a child after move
pruning, *expanded* when its children are generated -- the same for every heuristic. (The
kernel skips lookups that cannot change a child's fate, ~1.4 per generated node instead of
3, but counts every generated child; ``stats[2]`` counts its table probes.)
"""
import numpy as np

from .coords import move_arrays
from .cube import Cube, parse_moves
from .inverse import TABLES as INV_TABLES
from .phase1_kernel import _apply_cubies, _search_reid
from .phase1_rows import nx_args, phase1_row, target_moves
from .pruning import NO_FACE
from .status import DONE, FOUND, MAX_DEPTH, PAUSED
from .symmetry import AXIS_MOVE_CONJ

__all__ = ["SlicedSearch", "SubtreeSearch", "DONE", "FOUND", "PAUSED", "MAX_DEPTH",
           "kernel_options", "kernel_tables", "phase1_row", "stack_remainder"]

_MOVE_ARRAYS = move_arrays()


def kernel_tables(tables):
    """The kernel's (:func:`.phase1_kernel._search_reid`) arguments before its stack:
    the move tables, the axis conjugation, the class tables and the table."""
    mt = tables.moves
    return (mt["flip"], mt[tables.slice_move], tables.slice_solved, mt["twist"],
            AXIS_MOVE_CONJ, tables.route, tables.table)


def kernel_options(tables, inverse, tight, in_h):
    """The kernel's arguments after the cubie and move arrays: the inverse lookups, the
    tight rule and the nx switches."""
    return (inverse, tables.sorted_slice, *INV_TABLES, tight, in_h, *nx_args(tables))


def stack_remainder(prefix, box, path, kidm, nk, ki):
    """The rest of a paused kernel search below ``prefix`` (its stack: ``box``, ``path``,
    ``kidm``, ``nk``, ``ki``), as pieces ``(prefix, first_move)``, deepest level first: see
    :meth:`SubtreeSearch.remainder`."""
    out = []
    moves = [int(m) for m in path]
    for level in range(int(box[0]), -1, -1):
        k = int(ki[level])
        if k < int(nk[level]):
            out.append((list(prefix) + moves[1:level + 1], int(kidm[level, k])))
    return out


class SlicedSearch:
    """What the resumable searches share: their counts in ``stats`` (generated, expanded,
    table probes) and :meth:`run` over their ``step(budget)``."""

    @property
    def generated(self):
        """Nodes generated so far."""
        return int(self.stats[0])

    @property
    def expanded(self):
        """Nodes expanded so far."""
        return int(self.stats[1])

    def run(self, budget=1 << 22, cancelled=None):
        """Step until DONE or FOUND (or ``cancelled()`` turns true between slices);
        returns the last status."""
        while True:
            status = self.step(budget)
            if status != PAUSED:
                return status
            if cancelled is not None and cancelled():
                return PAUSED


class SubtreeSearch(SlicedSearch):
    """A resumable IDA* search of the subtree below ``prefix`` (applied to ``cube``) with
    cost bound ``bound``. Call :meth:`step` until it returns DONE; after each FOUND,
    :attr:`solution` holds the full move list (prefix included) and the search can go on.

    ``tables`` is a :class:`~.reid.ReidTables`, :class:`~.huge.HugeTables` or
    :class:`~.nx.NxTables` object; ``inverse`` looks the tables up on the inverse position
    as well; ``tight`` (with ``inverse``) skips the moves that tight inverse values
    rule out (see ``_search_reid``); ``targets``, the tables' :func:`~.phase1_rows.target_moves`
    if the caller has them already (computed otherwise). The subtree root counts as expanded
    (not generated) when its f is within the bound.

    A ``first_move`` resumes a piece that another search handed on (see
    :meth:`remainder`): only the root's children by moves ``first_move`` and up are
    searched, and the root's expansion is not counted again (the search it came from
    counted it).
    """

    def __init__(self, tables, cube, prefix, bound, inverse=True, first_move=None,
                 tight=True, targets=None):
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
        self.inverse = bool(inverse)
        self.tight = bool(tight)
        # ``targets``: target_moves(tables), if the caller has them
        self._in_h = np.array(target_moves(tables) if targets is None else targets, np.int64)
        depth = max(self.bound - self.g0, 0) + 2
        row, self.root_h = phase1_row(tables, cube, self.prefix, self.inverse)
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
        return self.tables.h(cube, self.inverse)

    def step(self, budget=1 << 22):
        """Search about ``budget`` more generated nodes; returns DONE, FOUND or PAUSED."""
        if self._pending is not None:
            self.solution, self._pending = self._pending, None
            return FOUND
        if self.finished:
            return DONE
        t = self.tables
        args = (self.node, self.path, self.kids, self.kidm, self.nk, self.ki, self.box,
                self.g0, self.last0, self.bound, int(budget), self.stats)
        status = _search_reid(*kernel_tables(t), *args, *self._root_arrays, *_MOVE_ARRAYS,
                              *kernel_options(t, self.inverse, self.tight, self._in_h))
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
        if self.finished or self._pending is not None or self.box[1] == 0:
            raise ValueError("only a paused search that has started has a remainder")
        return stack_remainder(self.prefix, self.box, self.path, self.kidm, self.nk, self.ki)
