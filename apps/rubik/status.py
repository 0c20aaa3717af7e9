"""What a search kernel call returns, the deepest search it supports, and the stack step
both kernels share."""
from numba import njit

DONE, FOUND, PAUSED = 0, 1, 2   # subtree exhausted / solution on the stack / budget used up
MAX_DEPTH = 40


@njit(cache=True, inline="always")
def _descend(L, node, path, kids, kidm, ki, ncols):
    """The depth-first step both kernels share: the next child kept at level L goes onto
    the stack at level L + 1 (its row and the move that made it)."""
    k = ki[L]
    ki[L] = k + 1
    for i in range(ncols):
        node[L + 1, i] = kids[L, k, i]
    path[L + 1] = kidm[L, k]
