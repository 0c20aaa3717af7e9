"""Parallel IDA* on pyfw.farm: the master expands the top of the tree, workers search the
subtrees, one farm round per IDA* iteration.

Per iteration (cost bound b) the master walks the canonical tree down to the split depth,
pruning with the same heuristic as the kernels (so node totals equal the serial ones for
complete iterations), and sends one :class:`SubtreeTask` per frontier node with f <= b.
Tasks go out largest-first by the previous iteration's node counts. With
``split="adaptive"`` a frontier node whose subtree took more than ``1/(4 * workers)`` of
the previous iteration is replaced by its children for the next one. The first solution
at bound b cancels the rest of the round; it is optimal because bound b - 1 was exhausted.
"""
import os
import time
from collections import defaultdict

from pyfw.farm import Task

from .cube import Cube
from .pruning import allowed
from .search import DONE, FOUND
from .solver import (DEFAULT_HEURISTIC, Heuristic, Iteration, SolveResult, check_cube,
                     check_limit)

SLICE_NODES = 1 << 20
LOCAL_NODES = 1_000_000     # rounds predicted smaller than this stay on the master
BRANCHING = 13.34847


def _load(name, cache_dir, max_depth):
    return Heuristic(name, cache_dir, progress=False, max_depth=max_depth)


def _tables(ctx, name, cache_dir, max_depth):
    """This worker's tables, loaded (memory-mapped) once and cached in its context."""
    return ctx.resource(f"rubik:{name}:{cache_dir}:{max_depth}", _load, name, cache_dir,
                        max_depth)


def preload(ctx, heuristic=DEFAULT_HEURISTIC, cache_dir=None, max_depth=None):
    """Farm ``setup`` function: load the tables when the worker starts, while the master
    loads its own, instead of inside the first round."""
    _tables(ctx, heuristic, cache_dir, max_depth)


class SubtreeTask(Task):
    """Search the subtree under ``prefix`` to ``bound``; returns a dict with the node counts,
    the solutions found and the busy seconds (None if the round was cancelled)."""

    def __init__(self, cube, prefix, bound, heuristic=DEFAULT_HEURISTIC, cache_dir=None,
                 max_depth=None, all_solutions=False, budget=SLICE_NODES):
        self.state = (cube.cp.tobytes(), cube.co.tobytes(), cube.ep.tobytes(), cube.eo.tobytes())
        self.prefix = list(prefix)
        self.bound = bound
        self.spec = (heuristic, cache_dir, max_depth)
        self.all_solutions = all_solutions
        self.budget = budget

    def cube(self):
        import numpy as np
        cp, co, ep, eo = (np.frombuffer(b, np.int8) for b in self.state)
        return Cube(cp, co, ep, eo, check=False)

    def run(self, ctx):
        h = _tables(ctx, *self.spec)
        return search_subtree(h, self.cube(), self.prefix, self.bound, self.all_solutions,
                              self.budget, ctx.cancelled, ctx.rank)


def search_subtree(h, cube, prefix, bound, all_solutions=False, budget=SLICE_NODES,
                   cancelled=None, rank=0):
    """Search one subtree (what a :class:`SubtreeTask` does on a worker); None if
    cancelled."""
    t0 = time.perf_counter()
    s = h.subtree(cube, prefix, bound)
    sols = []
    while True:
        st = s.run(budget, cancelled)
        if st == FOUND:
            sols.append(s.solution)
            if not all_solutions:
                break
        elif st == DONE:
            break
        else:
            return None
    return {"prefix": list(prefix), "generated": s.generated, "expanded": s.expanded,
            "solutions": sols, "seconds": time.perf_counter() - t0, "rank": rank}


class _Frontier:
    """The master's view of the top of the tree, with cached heuristic values."""

    def __init__(self, heuristic, cube, split):
        self.h = heuristic
        self.cube = cube
        self.split = split
        self._hcache = {}
        self.deep = set()          # prefixes to split one level further (adaptive)

    def hval(self, prefix):
        k = tuple(prefix)
        if k not in self._hcache:
            self._hcache[k] = self.h.h_after(self.cube, prefix)
        return self._hcache[k]

    def leaves(self, bound):
        """(frontier prefixes with f <= bound, master generated, master expanded)."""
        out, gen, exp = [], 0, 1
        stack = [[]]
        while stack:
            p = stack.pop()
            last = p[-1] // 3 if p else None
            for m in range(18):
                if not allowed(last, m // 3):
                    continue
                q = p + [m]
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


def solve_parallel(cube, farm, heuristic=DEFAULT_HEURISTIC, max_length=None,
                   all_solutions=False, split=2, cache_dir=None, max_depth=None,
                   budget=SLICE_NODES, tables=None, on_iteration=None, record_subtrees=False,
                   policy=None, chunksize=None, tail_duplication=None,
                   local_nodes=LOCAL_NODES):
    """Optimal solve on a :class:`pyfw.farm.Farm` (call on the master rank).

    ``split``: depth of the frontier (2 as in the study: 243 subtrees), or ``"adaptive"``
    (depth 2, then split subtrees that dominated the previous iteration).
    ``max_length``: prove that no solution of at most this many moves exists (or find one).
    ``all_solutions``: every optimal canonical solution. ``tables``: the master's
    :class:`Heuristic` if already loaded. With ``record_subtrees`` each iteration keeps the
    per-subtree node counts (``result.subtrees[bound]``). ``policy``, ``chunksize``,
    ``tail_duplication``: passed to each round (:meth:`pyfw.farm.Farm.round`); by default
    tail copies are off when the farm has more ranks than this node has cores.
    ``local_nodes``: an iteration predicted (previous one x 13.35) to generate fewer nodes
    is searched by the master itself, as the serial solver does (so is the first one,
    unless ``local_nodes=0``); it shows as rank 0 in the worker loads. The last local
    round goes subtree by subtree so that the first farm round has sizes to order by.
    """
    cube = check_cube(cube)
    limit = check_limit(max_length)
    adaptive = split == "adaptive"
    depth = 2 if adaptive else int(split)
    if depth < 1:
        raise ValueError(f"split depth must be >= 1 or 'adaptive', got {split!r}")
    h = tables if tables is not None else Heuristic(heuristic, cache_dir, max_depth=max_depth)
    t0 = time.perf_counter()
    res = SolveResult(None, [], 0, heuristic=h.name)
    res.subtrees = {}
    front = _Frontier(h, cube, depth)
    workers = defaultdict(lambda: {"tasks": 0, "generated": 0, "seconds": 0.0})
    prev = {}
    bound = h.h(cube)
    res.lower_bound = bound
    if bound == 0 or cube.is_solved:
        res.solution, res.solutions, res.lower_bound = [], [[]], 0
        return res
    nworkers = max(getattr(farm, "num_workers", 1) or 1, 1)
    prev_total = 0
    if tail_duplication is None and getattr(farm, "size", 1) > (os.cpu_count() or 1):
        tail_duplication = False   # ranks outnumber cores: copies would compete for them
    while bound <= limit:
        t1 = time.perf_counter()
        found, counts = [], {}
        # a round whose predicted size is small is searched by the master itself, in one
        # piece from the root: sending hundreds of tiny subtrees costs more than that
        local = prev_total * BRANCHING < local_nodes
        # the last local round before the farm rounds goes subtree by subtree, so the first
        # farm round can hand out its subtrees largest first
        last_local = local and prev_total * BRANCHING ** 2 >= local_nodes
        if local and not last_local:
            leaves, gen, exp = [[]], 0, 0
            results = [search_subtree(h, cube, [], bound, all_solutions, budget)]
            ntasks = 0
        else:
            leaves, gen, exp = front.leaves(bound)
            leaves.sort(key=lambda p: (-prev.get(tuple(p), 0),
                                       front.hval(p) if len(p) < bound else 0))
        if last_local:
            results = (search_subtree(h, cube, p, bound, all_solutions, budget) for p in leaves)
            ntasks = 0
        elif not local:
            tasks = [SubtreeTask(cube, p, bound, h.name, cache_dir, max_depth, all_solutions,
                                 budget) for p in leaves]
            ntasks = len(tasks)
            rnd = farm.round(tasks, name=f"rubik-bound-{bound}", policy=policy,
                             chunksize=chunksize, tail_duplication=tail_duplication) if tasks else ()
            results = (done.result for done in rnd)
        if leaves:
            for r in results:
                if r is None:
                    continue
                gen += r["generated"]
                exp += r["expanded"]
                if r["prefix"] or not local:
                    counts[tuple(r["prefix"])] = r["generated"]
                w = workers[r["rank"]]
                w["tasks"] += 1
                w["generated"] += r["generated"]
                w["seconds"] += r["seconds"]
                found.extend(r["solutions"])
                if found and not all_solutions:
                    if not local:
                        rnd.cancel()
                    break
        it = Iteration(bound, gen, exp, time.perf_counter() - t1, len(found))
        it.tasks = ntasks
        it.local = local
        res.iterations.append(it)
        if record_subtrees:
            res.subtrees[bound] = dict(counts)
        if on_iteration:
            on_iteration(it)
        if found:
            found.sort()
            res.solution, res.solutions, res.lower_bound = found[0], found, bound
            break
        if adaptive and counts:
            total = sum(counts.values())
            for p, n in counts.items():
                if n > total / (4 * nworkers) and len(p) < bound - 1:
                    front.deep.add(p)
        prev = counts
        prev_total = it.generated
        bound += 1
        res.lower_bound = bound
    res.seconds = time.perf_counter() - t0
    res.workers = {int(k): v for k, v in sorted(workers.items())}
    return res


def prefixes_at(depth):
    """Canonical prefixes of exactly ``depth`` moves (243 at depth 2)."""
    out = [[]]
    for _ in range(depth):
        out = [p + [m] for p in out for m in range(18)
               if allowed(p[-1] // 3 if p else None, m // 3)]
    return out


__all__ = ["SubtreeTask", "solve_parallel", "prefixes_at", "preload"]
