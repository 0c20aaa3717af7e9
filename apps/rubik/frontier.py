"""The top of an IDA* tree, walked by the process that hands its subtrees out."""
from .pruning import allowed

SYMMETRIC_SPLIT = 3     # frontier depth for a symmetric position: 3,240 prefixes, of which
                        # superflip keeps 90 (36x fewer) where depth 2 keeps 16 of 243


class Frontier:
    """The canonical tree down to ``split`` moves (deeper under the prefixes in
    :attr:`deep`), pruned with the heuristic as the search kernels prune, with cached
    heuristic values. ``symmetry``: a :class:`~.position_symmetry.SymmetryFilter` of
    the position; a prefix it does not keep is dropped with its subtree (not counted as
    generated), and the split is at least :data:`SYMMETRIC_SPLIT` when it prunes."""

    def __init__(self, heuristic, cube, split, symmetry=None):
        self.h = heuristic
        self.cube = cube
        self.symmetry = symmetry if symmetry else None
        self.split = max(split, SYMMETRIC_SPLIT) if self.symmetry else split
        self._hcache = {}
        self.deep = set()          # prefixes to split one level further (adaptive)

    def hval(self, prefix):
        k = tuple(prefix)
        if k not in self._hcache:
            self._hcache[k] = self.h.h_after(self.cube, prefix)
        return self._hcache[k]

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
            for m in range(18):
                if not allowed(last, m // 3):
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
