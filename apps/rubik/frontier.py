"""The top of an IDA* tree, walked by the process that hands its subtrees out."""
from .pruning import allowed

SYMMETRIC_SPLIT = 3     # frontier depth for a position with many symmetries: 3,240 prefixes,
                        # of which superflip keeps 90 (36x fewer) where depth 2 keeps 16 of 243
DEEPER_PAYS = 0.75      # ... used where it keeps this share of depth 2's fraction or less
                        # (not for one symmetry: about half of both, and 13x more leaves)


def prefixes_at(depth):
    """Canonical prefixes of exactly ``depth`` moves (243 at depth 2)."""
    out = [[]]
    for _ in range(depth):
        out = [p + [m] for p in out for m in range(18)
               if allowed(p[-1] // 3 if p else None, m // 3)]
    return out


def symmetric_split(symmetry, split):
    """The frontier depth for a position whose :class:`~.position_symmetry.SymmetryFilter`
    is ``symmetry``: ``split``, or :data:`SYMMETRIC_SPLIT` if that keeps a clearly smaller
    share of the prefixes (each leaf costs the walk and a search set-up)."""
    if not symmetry or split >= SYMMETRIC_SPLIT:
        return split
    share = [sum(map(symmetry.keeps, ps)) / len(ps)
             for ps in (prefixes_at(split), prefixes_at(SYMMETRIC_SPLIT))]
    return SYMMETRIC_SPLIT if share[1] <= DEEPER_PAYS * share[0] else split


class Frontier:
    """The canonical tree down to ``split`` moves (deeper under the prefixes in
    :attr:`deep`), pruned with the heuristic as the search kernels prune, with cached
    heuristic values. ``symmetry``: a :class:`~.position_symmetry.SymmetryFilter` of
    the position; a prefix it does not keep is dropped with its subtree (not counted as
    generated), and the split may be deeper (:func:`symmetric_split`)."""

    def __init__(self, heuristic, cube, split, symmetry=None):
        self.h = heuristic
        self.cube = cube
        self.symmetry = symmetry if symmetry else None
        self.split = symmetric_split(self.symmetry, split)
        self._hcache = {}
        self.deep = set()          # prefixes to split one level further (adaptive)

    def _after(self, prefix):
        """``Heuristic.after`` of the position after ``prefix`` (memoised)."""
        k = tuple(prefix)
        if k not in self._hcache:
            self._hcache[k] = self.h.after(self.cube, prefix)
        return self._hcache[k]

    def hval(self, prefix):
        """The heuristic value of the position after ``prefix`` (memoised)."""
        return self._after(prefix)[0]

    def leaves(self, bound):
        """(frontier prefixes with f <= bound, generated, expanded): the prefixes come in
        no particular order; the counts are the frontier's own nodes."""
        if bound == 0:                       # only the root, which is a solution or not
            return ([[]] if self.cube.is_solved else []), 0, 0
        out, gen, exp = [], 0, 1
        stack = [[]]
        while stack:
            p = stack.pop()
            last = p[-1] // 3 if p else None
            # the moves the kernel would skip here (the node's row was looked up as a child)
            skip = self.h.skip_moves(self._after(p)[1], bound - len(p))
            for m in range(18):
                if not allowed(last, m // 3) or (skip >> m) & 1:
                    continue
                q = p + [m]
                if self.symmetry is not None and not self.symmetry.keeps(q):
                    continue
                gen += 1
                g = len(q)
                if g == bound:               # as the kernel: at the bound only "solved?" counts
                    if self.cube.apply(q).is_solved:
                        out.append(q)
                    continue
                if g + self.hval(q) > bound:
                    continue
                if g < self.split or tuple(q) in self.deep:
                    exp += 1
                    stack.append(q)
                else:
                    out.append(q)
        return out, gen, exp
