"""What a farm worker of a Rubik solve holds and runs, for both schedulers (the rounds of
:mod:`.parallel` and the batch of :mod:`.batch`): its tables, loaded once per worker, and
the driver of a resumable search that stops after a time and hands on its rest."""
import time

from .ordered import is_leaf_piece
from .search import DONE, FOUND
from .solver import DEFAULT_HEURISTIC, Heuristic

SLICE_NODES = 1 << 20
STEAL_SLICE_NODES = 1 << 17  # slices of a task that may yield: a time check per ~50 ms
YIELD_SECONDS = 0.5         # a piece still running after this long hands on its remainder
SMALL_PLIES = 3             # ... except its pieces this close to the bound (searched on the spot)


def _load(name, cache_dir, max_depth, inverse=True, memory="auto"):
    return Heuristic(name, cache_dir, progress=False, max_depth=max_depth, inverse=inverse,
                     memory=memory)


def _tables(ctx, name, cache_dir, max_depth, inverse=True, memory="auto"):
    """This worker's tables, loaded once and cached in its context (where they live,
    ``memory``, is decided by the first load: see :func:`~.solver.table_memory`)."""
    return ctx.resource(f"rubik:{name}:{cache_dir}:{max_depth}:{inverse}", _load, name,
                        cache_dir, max_depth, inverse, memory)


def preload(ctx, heuristic=DEFAULT_HEURISTIC, cache_dir=None, max_depth=None, inverse=True,
            memory="auto"):
    """Farm ``setup`` function: load the tables when the worker starts, while the master
    loads its own, instead of inside the first round. ``memory``: "auto" (a private copy
    in 2 MB pages once the worker has searched long enough to pay for it, where the node's
    memory allows one per process: :meth:`~.solver.Heuristic.searched`), "private" or
    "shared" (see :func:`~.solver.table_memory`)."""
    _tables(ctx, heuristic, cache_dir, max_depth, inverse, memory)


def run_search(h, cube, s, all_solutions=False, budget=SLICE_NODES, cancelled=None,
               yield_after=None):
    """Run the search ``s`` (a :class:`~.search.SubtreeSearch` or a
    :class:`~.ordered.LeafSearch` of ``cube``) as :func:`.parallel.search_subtree`
    describes; returns its dict without ``prefix`` and ``rank``, or None if cancelled."""
    t0 = time.perf_counter()
    bound = s.bound
    sols, rest = [], []
    last = t0
    while True:
        st = s.step(budget)
        now = time.perf_counter()
        h.searched(now - last)    # a long search moves the tables into a private copy
        last = now
        if st == FOUND:
            sols.append(s.solution)
            if not all_solutions:
                break
        elif st == DONE:
            break
        elif cancelled is not None and cancelled():
            return None
        elif (yield_after is not None and not all_solutions
              and now - t0 >= yield_after):
            rest = s.remainder()
            break
    gen, exp = s.generated, s.expanded
    # the deepest pieces come first and are tiny (at most SMALL_PLIES below their root,
    # ~1 ms): searched here, they cost less than the messages that would carry them
    while (rest and not is_leaf_piece(*rest[0]) and bound - len(rest[0][0]) <= SMALL_PLIES
           and not sols):
        p, first = rest.pop(0)
        t = h.subtree(cube, p, bound, first)
        if t.run(budget) == FOUND:
            sols.append(t.solution)
        gen, exp = gen + t.generated, exp + t.expanded
    return {"generated": gen, "expanded": exp, "solutions": sols,
            "seconds": time.perf_counter() - t0, "rest": rest, "memory": h.memory}


__all__ = ["SLICE_NODES", "STEAL_SLICE_NODES", "YIELD_SECONDS", "SMALL_PLIES", "preload",
           "run_search"]
