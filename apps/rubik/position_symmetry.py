"""Symmetric positions: search one subtree of each set that conjugation makes equivalent.

If a symmetry S of the cube (one of the 48 rotations and reflections) leaves the position
P unchanged, ``S P S^-1 = P``, then conjugating a solution of P move by move gives another
solution of P of the same length. The positions people try an optimal solver on are often
symmetric (superflip and positions built from it, checkerboards and other patterns), and
for them the top of the tree repeats: superflip's 48 symmetries leave 6 of the 45 first
blocks (below) to search, and 90 of the 3,240 three-move prefixes.

The search only generates canonical sequences (opposite faces in a fixed order), and
conjugation does not keep that order (it may turn U D into D U), so "keep one of each
orbit of prefixes" would lose solutions. Orbits of *blocks* do not: a canonical sequence is
a sequence of blocks, each the one or two turns of one axis in a row, consecutive blocks on
different axes, and conjugation maps such a block sequence to another one move by move.
Among the conjugates of a solution take the one whose blocks are lexicographically
smallest: every prefix of its blocks is the smallest of its own orbit (a smaller conjugate
of a prefix would make a smaller conjugate of the whole). So a search may drop every
subtree whose complete blocks are not the smallest of their orbit and still find a
solution of every length that has one: the length is optimal, the solution is one of the
conjugates. Not every solution is found, so ``all_solutions`` searches do not prune.
"""
import numpy as np

from .cube import MOVE_CUBES, Cube
from .symmetry import (MIRR_LR2, ROT_F2, ROT_U4, ROT_URF3, conjugate, index_of_move,
                       inverse_table)


def _closure(generators):
    identity = Cube.solved()
    seen, out, todo = {identity.key()}, [identity], [identity]
    while todo:
        new = []
        for a in todo:
            for g in generators:
                c = a * g
                if c.key() not in seen:
                    seen.add(c.key())
                    out.append(c)
                    new.append(c)
        todo = new
    return tuple(out)


#: the 48 symmetries of the cube (index 0 = identity)
SYMS = _closure((ROT_URF3, ROT_F2, ROT_U4, MIRR_LR2))
assert len(SYMS) == 48
SYM_INV = tuple(int(j) for j in inverse_table(SYMS))


def move_conj():
    """:data:`MOVE_CONJ`: ``MOVE_CONJ[s, m]`` is the move ``S m S^-1``. Made at first use,
    by a symmetric position's search (1,728 products: 15 ms of every start-up otherwise)."""
    table = globals().get("MOVE_CONJ")
    if table is None:
        table = globals()["MOVE_CONJ"] = np.array(
            [[index_of_move(s * m * SYMS[SYM_INV[i]]) for m in MOVE_CUBES]
             for i, s in enumerate(SYMS)], np.int64)
    return table


def __getattr__(name):
    if name == "MOVE_CONJ":         # made at first use: see move_conj
        return move_conj()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the symmetries' corner and edge permutations, and their inverses', one row each
_SYM_CP = np.array([s.cp for s in SYMS], np.int64)
_SYM_EP = np.array([s.ep for s in SYMS], np.int64)
_SYM_INV_CP = _SYM_CP[list(SYM_INV)]
_SYM_INV_EP = _SYM_EP[list(SYM_INV)]


def stabilizer(cube):
    """Indices into :data:`SYMS` of the symmetries other than the identity that leave
    ``cube`` unchanged (empty for almost every random position).

    The permutations of ``S P S^-1`` (``S.cp[P.cp[S^-1.cp]]``, orientation aside) are
    compared for all 48 symmetries at once first: only those that keep both permutations
    are conjugated whole (a random position has none; 47 conjugations as cube products
    took 3.3 ms, most of a short scramble's solve in a batch)."""
    cp, ep = np.asarray(cube.cp, np.int64), np.asarray(cube.ep, np.int64)
    keeps = ((np.take_along_axis(_SYM_CP, cp[_SYM_INV_CP], 1) == cp).all(1)
             & (np.take_along_axis(_SYM_EP, ep[_SYM_INV_EP], 1) == ep).all(1))
    candidates = np.flatnonzero(keeps[1:]) + 1
    return tuple(int(i) for i in candidates
                 if conjugate(cube, SYMS[i], SYMS[SYM_INV[i]]) == cube)


def complete_blocks(prefix):
    """The blocks of a canonical move sequence that no further move can change: each a
    sorted tuple of the turns of one axis in a row. A last block of one turn of U, R or F is
    left out (a turn of the opposite face may still join it: U D is canonical, D U not)."""
    blocks = []
    for m in prefix:
        if blocks and blocks[-1][-1] // 3 % 3 == m // 3 % 3:
            blocks[-1].append(m)
        else:
            blocks.append([m])
    if blocks and len(blocks[-1]) == 1 and blocks[-1][0] // 3 < 3:
        blocks.pop()
    return [tuple(sorted(b)) for b in blocks]


class SymmetryFilter:
    """Which prefixes a search of ``cube`` needs: :meth:`keeps` is False for a prefix
    whose complete blocks a symmetry of the position maps to a lexicographically smaller
    block sequence (see the module docstring). False as a truth value when the position
    has no symmetry (nothing to prune)."""

    def __init__(self, cube):
        self.symmetries = stabilizer(cube)
        self._conj = (move_conj()[list(self.symmetries)].tolist()
                      if self.symmetries else [])
        self._kept = {}        # prefix -> verdict: every IDA* iteration walks the same top

    def __bool__(self):
        return bool(self.symmetries)

    @property
    def order(self):
        """The order of the position's symmetry group (1: no symmetry)."""
        return len(self.symmetries) + 1

    def keeps(self, prefix):
        """Whether the subtree below ``prefix`` is searched (memoised per prefix)."""
        key = tuple(prefix)
        if key not in self._kept:
            self._kept[key] = self._smallest(complete_blocks(prefix))
        return self._kept[key]

    def _smallest(self, blocks):
        for conj in self._conj:
            image = [tuple(sorted(conj[m] for m in b)) for b in blocks]
            if image < blocks:
                return False
        return True


def random_symmetric(seed, blocks=10, generators=1):
    """``(moves, cube)``: a random position left unchanged by ``generators`` randomly chosen
    symmetries, the product of ``blocks`` random blocks that they all map onto themselves
    (for tests and benchmarks: almost no uniformly random position has a symmetry)."""
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for a in range(9) for b in range(9, 18) if a // 3 + 3 == b // 3]
    candidates = [(m,) for m in range(18)] + pairs
    while True:
        conj = move_conj()[rng.integers(1, len(SYMS), generators)]
        fixed = [b for b in candidates if all(sorted(c[list(b)]) == sorted(b) for c in conj)]
        if len({b[0] // 3 % 3 for b in fixed}) > 1:   # blocks of two axes at least
            break
    moves = []
    for _ in range(blocks):
        choice = [b for b in fixed if not moves or b[0] // 3 % 3 != moves[-1] // 3 % 3]
        moves.extend(choice[rng.integers(len(choice))])
    return moves, Cube.from_moves(moves)


__all__ = ["SYMS", "MOVE_CONJ", "move_conj", "stabilizer", "complete_blocks", "SymmetryFilter",
           "random_symmetric"]
