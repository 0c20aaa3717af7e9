"""Parallel IDA* on pyfw.farm.

By default (``order="dense"``) a solve is a batch of one cube (:func:`.batch.solve_one`):
its iterations are searched as the subtrees 4 moves deep, densest first by the iteration
before (:mod:`.ordered`), by tasks that hand their rest on to idle workers. The rest of
this module is the other way, kept for ``order="serial"``/``"largest"``, every solution
(``all_solutions``) and per-subtree counts: the master expands the top of the tree,
workers search the subtrees, one farm round per IDA* iteration.

Per iteration (cost bound b) the master walks the canonical tree down to the split depth,
pruning with the same heuristic as the kernels (so node totals equal the serial ones for
complete iterations), and sends one :class:`SubtreeTask` per frontier node with f <= b.
Tasks go out in the serial search's own order (depth-first, moves ascending: ``order=
"serial"``, the default), so the iteration that finds a solution reaches it about as early
as one process would, only with every worker on the way there; ``order="largest"`` sends
the largest subtrees of the previous iteration first (best for complete iterations, a
lottery for the last one: its solution may sit in a subtree the farm starts late). With
``split="adaptive"`` a frontier node whose subtree took more than ``1/max(SPLIT_PIECES,
8 * workers)`` of the previous iteration is replaced by its children for the next one, so no
piece is large enough to leave the other workers idle at the end of a round. With
``steal`` (the default in serial order) the pieces wait in a queue kept in that order, at
most two per worker are out at a time, and a piece still running after ``yield_after``
seconds stops and hands back the rest of its search (one piece per level of its stack,
:meth:`~.search.SubtreeSearch.remainder`; the deepest, at most ``SMALL_PLIES`` above the
bound, it searches itself), which goes ahead of every later piece: idle
workers take up parts of a running subtree instead of waiting for it at the end of a round
or searching beyond the solution while another worker holds it. Leaves that the previous
iteration predicts to be small go out several to a piece (``group_nodes``), consecutive in
the serial order: a piece costs the master about as much as a few thousand nodes of search.
The first solution at
bound b cancels the rest of the round; it is optimal because bound b - 1 was exhausted.
"""
import heapq
import os
import time
from collections import defaultdict

from pyfw.farm import Task

from .cube import Cube
from .farm_search import (SLICE_NODES, STEAL_SLICE_NODES, YIELD_SECONDS, _tables,
                          preload, run_search)
from .frontier import Frontier, prefixes_at
from .position_symmetry import SymmetryFilter
from .pruning import BRANCHING
from .solver import (DEFAULT_HEURISTIC, Heuristic, Iteration, SolveResult, check_cube,
                     check_limit)

LOCAL_NODES = 1_000_000     # rounds predicted smaller than this stay on the master
GROUP_NODES = 1 << 17       # steal rounds: consecutive leaves predicted to generate fewer
                            # nodes than this together go out as one piece (~25 ms)
SPLIT_PIECES = 64           # adaptive split: no piece above 1/max(64, 8 * workers) of the
                            # previous iteration (the same pieces for 1 and 2 workers)
ORDERS = ("dense", "serial", "largest")


class SubtreeTask(Task):
    """Search the subtree under ``prefix`` to ``bound`` (from the root's move ``first_move``
    on, for a piece handed on by another task); returns a dict with the node counts, the
    solutions found, the busy seconds and, if it stopped after ``yield_after`` seconds, what
    it left (``rest``); None if the round was cancelled. With ``more`` (further prefixes,
    whole subtrees after ``prefix`` in the serial order) it returns a list of such dicts,
    one per subtree searched: see :func:`search_leaves`."""

    def __init__(self, cube, prefix, bound, heuristic=DEFAULT_HEURISTIC, cache_dir=None,
                 max_depth=None, all_solutions=False, budget=SLICE_NODES, inverse=True,
                 first_move=None, yield_after=None, more=()):
        self.state = (cube.cp.tobytes(), cube.co.tobytes(), cube.ep.tobytes(), cube.eo.tobytes())
        self.prefix = list(prefix)
        self.more = [list(p) for p in more]     # further whole leaves, searched in turn
        self.bound = bound
        self.spec = (heuristic, cache_dir, max_depth, inverse)
        self.all_solutions = all_solutions
        self.budget = budget
        self.first_move = first_move
        self.yield_after = yield_after

    def cube(self):
        """The root position of this subtree, rebuilt from its wire bytes."""
        import numpy as np
        cp, co, ep, eo = (np.frombuffer(b, np.int8) for b in self.state)
        return Cube(cp, co, ep, eo, check=False)

    def run(self, ctx):
        """Search the subtree on a worker (tables loaded once per worker)."""
        h = _tables(ctx, *self.spec)
        if self.more:
            return search_leaves(h, self.cube(), [self.prefix] + self.more, self.bound,
                                 self.budget, ctx.cancelled, ctx.rank, self.yield_after)
        return search_subtree(h, self.cube(), self.prefix, self.bound, self.all_solutions,
                              self.budget, ctx.cancelled, ctx.rank, self.first_move,
                              self.yield_after)


def search_leaves(h, cube, prefixes, bound, budget=SLICE_NODES, cancelled=None, rank=0,
                  yield_after=None):
    """Search whole subtrees one after another (a piece of several small leaves): a list
    of :func:`search_subtree` results, one per subtree searched, in order. It stops after
    the subtree that found a solution or handed back a remainder (its ``yield_after`` is
    what is left of the piece's), and before a subtree once ``yield_after`` has passed;
    the subtrees it did not reach are not in the list. None if cancelled."""
    t0 = time.perf_counter()
    parts = []
    for p in prefixes:
        left = None
        if yield_after is not None:
            left = yield_after - (time.perf_counter() - t0)
            if parts and left <= 0:
                break
        r = search_subtree(h, cube, p, bound, False, budget, cancelled, rank, None,
                           None if left is None else max(left, 0.0))
        if r is None:
            return None
        parts.append(r)
        if r["solutions"] or r["rest"]:
            break
    return parts


def search_subtree(h, cube, prefix, bound, all_solutions=False, budget=SLICE_NODES,
                   cancelled=None, rank=0, first_move=None, yield_after=None):
    """Search one subtree (what a :class:`SubtreeTask` does on a worker); None if
    cancelled. With ``yield_after`` (seconds; not with ``all_solutions``) a search still
    running after that long stops between slices and reports its remainder as ``rest``
    (pieces ``(prefix, first_move)``, see :meth:`~.search.SubtreeSearch.remainder`)."""
    r = run_search(h, cube, h.subtree(cube, prefix, bound, first_move), all_solutions,
                   budget, cancelled, yield_after)
    if r is not None:
        r.update(prefix=list(prefix), rank=rank)
    return r


def _check_split_order(split, order):
    if split != "adaptive" and int(split) < 1:
        raise ValueError(f"split depth must be >= 1 or 'adaptive', got {split!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


def solve_parallel(cube, farm, heuristic=DEFAULT_HEURISTIC, max_length=None,
                   all_solutions=False, split="adaptive", cache_dir=None, max_depth=None,
                   budget=SLICE_NODES, tables=None, on_iteration=None, record_subtrees=False,
                   policy=None, chunksize=None, tail_duplication=None,
                   local_nodes=LOCAL_NODES, order="dense", steal=True,
                   yield_after=YIELD_SECONDS, symmetry=True, group_nodes=GROUP_NODES):
    """Optimal solve on a :class:`pyfw.farm.Farm` (call on the master rank).

    ``order``: ``"dense"`` (the default) searches every iteration above 4 moves as the
    subtrees 4 moves deep, densest first by the iteration before, as the serial solver
    does (:mod:`.ordered`), scheduled as a batch of one cube (:func:`.batch.solve_one`:
    the first task searches the cube whole and, after ``yield_after`` seconds, hands its
    leaves on to every worker; the settings below that shape rounds do not apply to it).
    With ``all_solutions`` (the whole last iteration is searched: its order does not
    matter) or ``record_subtrees`` (counts per subtree of the master's frontier)
    ``"dense"`` means ``"serial"``.
    ``"serial"`` and ``"largest"`` are the rounds of this module (see its docstring).
    ``split``: depth of the frontier (2 as in the study: 243 subtrees), or ``"adaptive"``
    (depth 2, then split subtrees that dominated the previous iteration; the default).
    ``max_length``: prove that no solution of at most this many moves exists (or find one).
    ``all_solutions``: every optimal canonical solution. ``tables``: the master's
    :class:`Heuristic` if already loaded. With ``record_subtrees`` each iteration keeps the
    per-subtree node counts (``result.subtrees[bound]``). ``policy``, ``chunksize``
    (default 1 in serial order without a ``policy``, else the policy's), ``tail_duplication``: passed to each
    round (:meth:`pyfw.farm.Farm.open`); by default tail copies are off when the farm has
    more ranks than this node has cores.
    ``local_nodes``: an iteration predicted (previous one x 13.35) to generate fewer nodes
    is searched by the master itself, as the serial solver does (so is the first one,
    unless ``local_nodes=0``); it shows as rank 0 in the worker loads. The last local
    round goes subtree by subtree so that the first farm round has sizes to split by.
    ``order``: ``"serial"`` (depth-first, as one process searches) or ``"largest"`` (the
    previous iteration's largest subtrees first); see the module docstring.
    ``steal`` (serial order, not with ``all_solutions``): a piece still
    running after ``yield_after`` seconds hands its remainder back, which goes ahead of
    every later piece, so idle workers take part of the running subtrees instead of waiting
    or running ahead; its rounds send one piece per message and make no tail copies.
    ``symmetry``: as in :meth:`.solver.Solver.solve` (the master's frontier drops the
    subtrees a symmetry of the position makes equivalent to kept ones).
    ``group_nodes`` (steal rounds): consecutive leaves whose subtrees the previous
    iteration predicts (x 13.35) to generate fewer nodes than this together go out as one
    piece; each piece costs the master a message and a turn (~1 ms), as much as a leaf of
    a few thousand nodes takes to search. 0: one leaf per piece.
    """
    cube, limit = check_cube(cube), check_limit(max_length)
    _check_split_order(split, order)
    h = tables if tables is not None else Heuristic(heuristic, cache_dir, max_depth=max_depth,
                                                    memory="auto")
    if order == "dense" and not (all_solutions or record_subtrees):
        from .batch import solve_one
        spec = (h.name, cache_dir, max_depth, h.inverse, "auto")
        return solve_one(cube, farm, h, spec, limit, symmetry, on_iteration,
                         piece_yield=yield_after)
    if order == "dense":
        order = "serial"
    t0 = time.perf_counter()
    res = SolveResult(None, [], 0, heuristic=h.name,
                      table_memory=h.status.get("memory") or "shared mapping")
    res.subtrees = {}
    bound = h.h(cube)
    res.lower_bound = bound
    if bound == 0 or cube.is_solved:
        res.solution, res.solutions, res.lower_bound = [], [[]], 0
        return res
    steal = steal and order == "serial" and not all_solutions
    rounds = _round_settings(farm, policy, chunksize, tail_duplication, order)
    symmetry = SymmetryFilter(cube) if symmetry and not all_solutions else None
    res.symmetries = symmetry.order if symmetry else 1
    search = _Search(h, cube, farm, split, order, all_solutions, budget, cache_dir,
                     max_depth, yield_after if steal else None, rounds, symmetry, group_nodes)
    _deepen(search, res, bound, limit, local_nodes, record_subtrees, on_iteration)
    res.seconds = time.perf_counter() - t0
    res.workers = {int(k): v for k, v in sorted(search.workers.items())}
    return res


def _deepen(search, res, bound, limit, local_nodes, record_subtrees, on_iteration) -> None:
    """IDA*'s iterations from ``bound`` to ``limit``, recorded in ``res``; stops at the first
    bound with a solution."""
    while bound <= limit:
        it, found, counts = search.iteration(bound, local_nodes)
        res.iterations.append(it)
        if record_subtrees:
            res.subtrees[bound] = dict(counts)
        if on_iteration:
            on_iteration(it)
        if found:
            found.sort()
            res.solution, res.solutions, res.lower_bound = found[0], found, bound
            return
        search.split_dominant(counts, bound)
        bound += 1
        res.lower_bound = bound


def _round_settings(farm, policy, chunksize, tail_duplication, order) -> dict:
    """The keyword arguments of every farm round of a solve (see :func:`solve_parallel`)."""
    if tail_duplication is None and getattr(farm, "size", 1) > (os.cpu_count() or 1):
        tail_duplication = False   # ranks outnumber cores: copies would compete for them
    if chunksize is None and order == "serial" and policy is None:
        chunksize = 1
    return dict(policy=policy, tail_duplication=tail_duplication, chunksize=chunksize)


class _Search:
    """The master's state across the iterations of one parallel solve."""

    def __init__(self, h, cube, farm, split, order, all_solutions, budget, cache_dir,
                 max_depth, yield_after, round_options, symmetry=None,
                 group_nodes=GROUP_NODES):
        self.h, self.cube, self.farm, self.order = h, cube, farm, order
        self.adaptive = split == "adaptive"
        self.front = Frontier(h, cube, 2 if self.adaptive else int(split), symmetry)
        self.all_solutions, self.budget = all_solutions, budget
        self.task_spec = (h.name, cache_dir, max_depth, h.inverse)
        self.round_options = round_options
        self.yield_after = yield_after      # None: no stealing
        self.nworkers = max(getattr(farm, "num_workers", 1) or 1, 1)
        self.workers = defaultdict(lambda: {"tasks": 0, "generated": 0, "seconds": 0.0})
        self.prev, self.prev_total = {}, 0
        self.group_nodes = group_nodes

    def iteration(self, bound, local_nodes):
        """One IDA* iteration: (Iteration, solutions found, nodes per subtree)."""
        t1 = time.perf_counter()
        # a round whose predicted size is small is searched by the master itself, in one
        # piece from the root: sending hundreds of tiny subtrees costs more than that; the
        # last local round goes subtree by subtree, so the first farm round has sizes (so do
        # all local rounds of a symmetric position: only its frontier drops equivalent parts)
        local = self.prev_total * BRANCHING < local_nodes
        last_local = local and self.prev_total * BRANCHING ** 2 >= local_nodes
        rnd, ntasks = None, 0
        if local and not last_local and self.front.symmetry is None:
            leaves, gen, exp = [[]], 0, 0
            results = [self._search_here([], bound)]
        else:
            leaves, gen, exp = self._ordered_leaves(bound)
            if local:
                results = (self._search_here(p, bound) for p in leaves)
            elif self.yield_after is not None:
                found, counts, g, e, ntasks = self._steal_round(bound, leaves)
                return self._finish(t1, bound, gen + g, exp + e, found, counts, ntasks, local)
            else:
                name, cache_dir, max_depth, inverse = self.task_spec
                tasks = [SubtreeTask(self.cube, p, bound, name, cache_dir, max_depth,
                                     self.all_solutions, self.budget, inverse) for p in leaves]
                ntasks = len(tasks)
                rnd = self.farm.open(tasks, name=f"rubik-bound-{bound}",
                                     **self.round_options) if tasks else ()
                results = (done.result for done in rnd)
        found, counts, g, e = self._collect(results, local, rnd)
        return self._finish(t1, bound, gen + g, exp + e, found, counts, ntasks, local)

    def _finish(self, t1, bound, gen, exp, found, counts, ntasks, local):
        it = Iteration(bound, gen, exp, time.perf_counter() - t1, len(found))
        it.tasks, it.local = ntasks, local
        self.prev, self.prev_total = counts, it.generated
        return it, found, counts

    def _task(self, bound, piece):
        """The task of one piece: [(prefix, first move, leaf)], several only for whole leaves."""
        name, cache_dir, max_depth, inverse = self.task_spec
        (prefix, first_move, _), more = piece[0], [p for p, _, _ in piece[1:]]
        return SubtreeTask(self.cube, prefix, bound, name, cache_dir, max_depth,
                           self.all_solutions, min(self.budget, STEAL_SLICE_NODES), inverse,
                           first_move, self.yield_after, more)

    def _predicted(self, leaf):
        """Nodes the previous iteration predicts for a leaf's subtree now (None: unknown,
        e.g. a child of a split leaf)."""
        n = self.prev.get(leaf)
        return None if n is None else n * BRANCHING

    def _take_piece(self, queue):
        """Pop the next piece off the queue: its first entry, and while they are whole
        leaves predicted to stay under ``group_nodes`` together, the ones after it (next
        in the serial order)."""
        _, p, f, leaf = heapq.heappop(queue)
        piece = [(p, f, leaf)]
        size = self._predicted(leaf) if f is None else None
        while size is not None and queue and queue[0][2] is None:
            more = self._predicted(queue[0][3])
            if more is None or size + more >= self.group_nodes:
                break
            _, p, f, leaf = heapq.heappop(queue)
            piece.append((p, f, leaf))
            size += more
        return piece

    def _steal_round(self, bound, leaves):
        """One iteration as a queue of pieces in depth-first order: at most two pieces per
        worker are out at a time; a piece that yields puts its remainder back into the
        queue, where it comes before every piece after it in the serial order. So the
        workers always search the earliest open part of the tree, the solution is reached
        with every worker near it, and no subtree holds up the end of the round for more
        than ``yield_after`` seconds. Returns (solutions, nodes per frontier leaf,
        generated, expanded, tasks sent)."""
        queue = [(tuple(p), p, None, tuple(p)) for p in leaves]   # (order, prefix, first, leaf)
        heapq.heapify(queue)
        rounds = {}                  # open Round -> the leaves of each of its pieces
        found, counts, gen, exp, ntasks = [], defaultdict(int), 0, 0, 0
        out, cap = 0, 2 * self.nworkers
        try:
            while queue or out:
                if queue and out < cap:
                    take = [self._take_piece(queue) for _ in range(min(cap - out, len(queue)))
                            if queue]
                    rnd = self.farm.open([self._task(bound, piece) for piece in take],
                                         name=f"rubik-bound-{bound}", chunksize=1,
                                         tail_duplication=False, eager=True,
                                         policy=self.round_options.get("policy"))
                    rounds[rnd] = [[leaf for *_, leaf in piece] for piece in take]
                    out += len(take)
                    ntasks += len(take)
                self.farm.step()
                for rnd, origin in list(rounds.items()):
                    for batch in rnd.drain():
                        if batch.errors:
                            raise next(iter(batch.errors.values()))
                        for tid, r in zip(batch.ids, batch.values):
                            out -= 1
                            if r is None:
                                continue
                            parts = r if isinstance(r, list) else [r]
                            for leaf, part in zip(origin[tid], parts):
                                gen += part["generated"]
                                exp += part["expanded"]
                                counts[leaf] += part["generated"]
                                self._account(part)
                                found.extend(part["solutions"])
                                for p, f in part["rest"]:
                                    heapq.heappush(queue, (tuple(p) + (f,), p, f, leaf))
                            for leaf in origin[tid][len(parts):]:   # not reached: back
                                heapq.heappush(queue, (leaf, list(leaf), None, leaf))
                    if rnd.finished:
                        rnd.close()
                        del rounds[rnd]
                if found:
                    break
        finally:
            for rnd in rounds:
                rnd.close()
        return found, dict(counts), gen, exp, ntasks

    def _account(self, r):
        w = self.workers[r["rank"]]
        w["tasks"] += 1
        w["generated"] += r["generated"]
        w["seconds"] += r["seconds"]
        w["tables"] = r.get("memory", "")

    def _search_here(self, prefix, bound):
        return search_subtree(self.h, self.cube, prefix, bound, self.all_solutions,
                              self.budget)

    def _ordered_leaves(self, bound):
        leaves, gen, exp = self.front.leaves(bound)
        if self.order == "serial":
            leaves.sort()      # lists compare move by move: depth-first order
        else:
            prev, front = self.prev, self.front
            leaves.sort(key=lambda p: (-prev.get(tuple(p), 0),
                                       front.hval(p) if len(p) < bound else 0))
        return leaves, gen, exp

    def _collect(self, results, local, rnd):
        """Take results until the first solution (unless all are wanted); cancel the rest."""
        found, counts, gen, exp = [], {}, 0, 0
        for r in results:
            if r is None:
                continue
            gen += r["generated"]
            exp += r["expanded"]
            if r["prefix"] or not local:
                counts[tuple(r["prefix"])] = r["generated"]
            self._account(r)
            found.extend(r["solutions"])
            if found and not self.all_solutions:
                if rnd is not None:
                    rnd.cancel()
                break
        return found, counts, gen, exp

    def split_dominant(self, counts, bound):
        """Adaptive split: subtrees above 1/max(SPLIT_PIECES, 8 workers) of this iteration
        go out as their children next time."""
        if not self.adaptive or not counts:
            return
        total = sum(counts.values())
        pieces = max(SPLIT_PIECES, 8 * self.nworkers)
        for p, n in counts.items():
            if n > total / pieces and len(p) < bound - 1:
                self.front.deep.add(p)


__all__ = ["SubtreeTask", "solve_parallel", "prefixes_at", "preload"]
