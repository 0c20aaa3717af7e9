"""Solving a file of cubes as one farm workload.

Every cube goes to the workers as tasks: no cube has a phase on the master, and each worker
loads its tables once for the whole batch (:func:`~.farm_search.preload`,
``ctx.resource``). A task (:class:`PieceTask`) searches part of one cube's IDA*: either the
*whole* cube from where it stands (its current bound and the pieces of that iteration not
yet searched), going on to the next bound itself, or one *piece* of an iteration (a
subtree, as the parallel solver's steal rounds send them). Every task stops after
``yield_after`` seconds and hands back what it has not searched
(:meth:`~.search.SubtreeSearch.remainder`), so the master can always redistribute a cube:

* while cubes wait that no worker has started, a cube that yields goes back whole, ahead of
  the cubes not started (no cube is ever searched twice: a resumed task takes up the
  remainder exactly);
* once none waits and fewer cubes go whole than there are workers (the tail), a cube that
  yields is split: its remainder pieces go to the workers that would otherwise be idle, each piece yielding again after
  :data:`~.farm_search.YIELD_SECONDS` (the steal rounds of :mod:`.parallel`). The first
  solution at a bound ends the cube (the bound below it was exhausted: optimal) and cancels
  its other pieces. A cube split in one iteration starts the next one whole, but hands it on
  after its first slice of nodes (the iteration is about 13 times larger: it will be split
  again), so the other workers do not wait a yield time for their share.

One cube on the farm is a batch of one (:func:`solve_one`, the default of
``parallel.solve_parallel``): it is its own tail from its first yield on.

Cubes start in the order of their predicted cost, longest first: IDA*'s nodes grow about
:data:`~.pruning.BRANCHING`-fold per move between the lower bound and the solution, and
the solution's length is at most the scramble's (18 for a facelet string: the length of
most random positions). A cube whose task yields is known to be long and goes first.

Within a cube, every iteration above 4 moves is searched as the subtrees 4 moves deep,
densest first by the iteration before (:mod:`.ordered`, as the serial solver). Each task
returns the counts of the leaves it searched and the master keeps their merge, which the
next whole task of the cube carries: whichever worker starts an iteration orders it by
every count so far. The leaves an iteration has left travel as one piece (an array of leaf
indices); split at the tail, they join the cube's pool, kept in that order on the master
(it has the same counts), and go out from its front in chunks of about 0.1 s of predicted
search, so that the workers together keep to the order one process would follow.

Resuming (``Farm(journal=...)``): each finished cube is written to the journal as the one
result of a round named after the cube (its facelets, heuristic and limit), and reported
only once the journal has it on disk, so a restarted batch takes every reported cube from
there instead of solving it again, whatever line it is on. (The pieces' own rounds are
journaled too, by the farm, under names unique to the run: never taken up again.)
"""
import heapq
import re
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from pyfw.farm import Task

from .cube import Cube, InvalidCubeError, format_moves, parse_moves
from .farm_search import STEAL_SLICE_NODES, YIELD_SECONDS, _tables, run_search
from .frontier import Frontier
from .ordered import (LEAF_DEPTH, N_LEAVES, LeafSearch, densest_first, is_leaf_piece,
                      leaves_piece)
from .position_symmetry import SymmetryFilter
from .pruning import BRANCHING
from .solver import Iteration, SolveResult, check_cube, check_limit, is_facelet_string

#: a whole cube's task hands back its remainder after this long, so that a cube running
#: when the queue of unstarted cubes empties can be split within this time
WHOLE_YIELD_SECONDS = 2.0
#: the optimal length assumed for a position given by its facelets (most random positions)
TYPICAL_LENGTH = 18
#: a split iteration's leaves go out densest first, in tasks of consecutive leaves that the
#: iteration before predicts (x 13.35) to generate about this many nodes together (about
#: 0.1 s of search: small enough that the order holds across the workers, large enough
#: that a task's message and set-up, about a millisecond, stay a small share) ...
CHUNK_NODES = 1 << 18
#: ... and at most this many leaves (those the iteration before pruned predict nothing)
CHUNK_LEAVES = 1024


@dataclass
class Entry:
    """One line of a batch file: its number, its text, and the cube or the error."""
    line: int
    text: str
    cube: Cube = None
    error: str = None
    scramble_length: int = None


#: a trailing length annotation, as Cube Explorer writes solutions: ``(18f*)``, ``(20f)``
_LENGTH_NOTE = re.compile(r"\s*\(\s*\d+\s*[fhqs]?\s*\*?\s*\)\s*$")


def read_entries(lines):
    """The cubes of a batch file: one scramble or one 54-facelet string per line; blank
    lines and ``#`` comments (whole lines, or the rest of a line) are skipped, and so is a
    length annotation at the end of a scramble (``(18f*)``). A line that is not a valid
    cube becomes an :class:`Entry` with its ``error``."""
    out = []
    for number, raw in enumerate(lines, 1):
        text = _LENGTH_NOTE.sub("", raw.split("#", 1)[0]).strip()
        if not text:
            continue
        entry = Entry(number, text)
        try:
            entry.cube = check_cube(text)
        except (InvalidCubeError, ValueError) as exc:
            entry.error = str(exc) or type(exc).__name__
        else:
            if not is_facelet_string(text):
                entry.scramble_length = len(parse_moves(text))
        out.append(entry)
    return out


def _state(cube):
    return tuple(np.asarray(a, np.int8).tobytes() for a in (cube.cp, cube.co, cube.ep, cube.eo))


def _cube(state):
    cp, co, ep, eo = (np.frombuffer(b, np.int8) for b in state)
    return Cube(cp, co, ep, eo, check=False)


def iteration_pieces(h, cube, bound, sym):
    """The pieces ``(prefix, first_move)`` of one IDA* iteration, in the serial search's
    order: the whole tree, or for a symmetric position (``sym``, its
    :class:`~.position_symmetry.SymmetryFilter`; None: not used) the frontier leaves no
    symmetry maps onto an earlier one (as :meth:`.solver.Solver.solve`). Also the
    frontier's own node counts (generated, expanded)."""
    if not sym:
        return [([], None)], 0, 0
    leaves, gen, exp = Frontier(h, cube, 2, sym).leaves(bound)
    return [(p, None) for p in sorted(leaves)], gen, exp


#: the cubes' leaf orders kept by a process (each about 9 MB): a cube's tasks come back to
#: a worker that has its frontier and its leaves' counts of the iterations it searched
LEAF_ORDERS_KEPT = 8
_LEAF_ORDERS = {}


def leaf_order(h, cube):
    """The :class:`~.ordered.LeafOrder` of ``cube`` on ``h``'s tables, kept by this
    process for the cube's next tasks (the :data:`LEAF_ORDERS_KEPT` latest cubes)."""
    key = (id(h.tables), _state(cube))
    lo = _LEAF_ORDERS.pop(key, None)
    if lo is None:
        lo = h.leaf_order(cube)
    _LEAF_ORDERS[key] = lo                  # the latest last
    while len(_LEAF_ORDERS) > LEAF_ORDERS_KEPT:
        del _LEAF_ORDERS[next(iter(_LEAF_ORDERS))]
    return lo


def _searches(h, cube, bound, pieces):
    """The searches of ``pieces`` in their order, each with the number of pieces it
    finishes: a piece of whole leaves is a :class:`~.ordered.LeafSearch`."""
    for i, (prefix, first) in enumerate(pieces):
        if is_leaf_piece(prefix, first):
            yield leaf_order(h, cube).search(bound, prefix), i + 1
        else:
            yield h.subtree(cube, prefix, bound, first), i + 1


def _piece(prefix, first):
    """A piece as tasks carry it (a list of moves, or the array of a leaves piece)."""
    return (prefix, first) if is_leaf_piece(prefix, first) else (list(prefix), first)


class PieceTask(Task):
    """Search part of one cube's IDA* on a worker (see the module docstring).

    ``pieces``: ``(prefix, first_move)`` of iteration ``bound`` still to search, in order
    (None: the whole iteration, from the start). ``whole``: go on to the next bounds after
    the pieces (up to ``limit``). Stops after ``yield_after`` seconds. Returns a dict:
    ``status`` "solved" (``solution``), "proven" (no solution up to ``limit``), "done" (the
    pieces exhausted, not ``whole``) or "yield" (``rest``: the pieces left of iteration
    ``bound``), with ``generated``, ``expanded``, ``seconds``, ``rank``, ``memory``,
    ``iterations`` ({bound: generated} searched by this task), ``expanded_by_bound``
    ({bound: expanded}) and, where it searched
    leaves of the frontier (:mod:`.ordered`), ``leaf_counts`` (leaf indices, their counts);
    None if cancelled. ``counts``: every leaf's latest count (the master's merge of
    ``leaf_counts``), which the leaves of a new iteration are ordered by."""

    def __init__(self, key, cube_state, bound, pieces, limit, spec, whole, yield_after,
                 symmetry=True, counts=None):
        self.key, self.state, self.bound = key, cube_state, bound
        self.pieces = None if pieces is None else [_piece(p, f) for p, f in pieces]
        self.limit, self.spec, self.whole = limit, spec, whole
        self.yield_after, self.symmetry = yield_after, symmetry
        self.counts = counts

    def run(self, ctx):
        """Search on a worker with its tables (loaded once per worker)."""
        h = _tables(ctx, *self.spec)
        return search_cube(h, _cube(self.state), self.bound, self.pieces, self.limit,
                           self.whole, self.yield_after, self.symmetry, ctx.cancelled,
                           ctx.rank, key=self.key, counts=self.counts)


def search_cube(h, cube, bound, pieces, limit, whole, yield_after, symmetry=True,
                cancelled=None, rank=0, key=None, counts=None):
    """What a :class:`PieceTask` does (callable without a farm, for tests)."""
    t0 = time.perf_counter()
    gen = exp = 0
    iterations, expanded = {}, {}      # per bound: nodes generated, expanded
    out = {"key": key, "rank": rank, "bound": bound}
    if bound > limit:                   # the lower bound alone proves the limit
        out.update(status="proven", bound=bound - 1)
        return _finish(out, t0, gen, exp, iterations, expanded, h)
    sym = SymmetryFilter(cube) if symmetry else None
    if whole and not sym:               # the master's counts (None: a new solve)
        leaf_order(h, cube).take_counts(counts)
    leaf_counts = out["leaf_counts"] = {}       # leaf -> generated, of the leaves searched
    while True:
        if pieces is None and not sym and bound > LEAF_DEPTH:
            # a fresh iteration: the frontier's leaves, densest first (counts inside)
            work, pieces = [(leaf_order(h, cube).iteration(bound), 0)], []
        else:
            if pieces is None:
                pieces, g, e = iteration_pieces(h, cube, bound, sym)
                gen, exp = gen + g, exp + e
                iterations[bound] = iterations.get(bound, 0) + g
                expanded[bound] = expanded.get(bound, 0) + e
            pieces = list(pieces)
            work = _searches(h, cube, bound, pieces)
        for s, used in work:
            left = yield_after - (time.perf_counter() - t0)
            r = run_search(h, cube, s, False, STEAL_SLICE_NODES, cancelled, max(left, 0.0))
            if r is None:
                return None
            if isinstance(s, LeafSearch):
                leaf_counts.update(zip(*(x.tolist() for x in s.searched())))
            gen, exp = gen + r["generated"], exp + r["expanded"]
            iterations[bound] = iterations.get(bound, 0) + r["generated"]
            expanded[bound] = expanded.get(bound, 0) + r["expanded"]
            if r["solutions"]:
                out.update(status="solved", solution=r["solutions"][0])
                return _finish(out, t0, gen, exp, iterations, expanded, h)
            more = pieces[used:]
            if r["rest"] or (more and time.perf_counter() - t0 >= yield_after):
                out.update(status="yield", rest=[_piece(p, f) for p, f in r["rest"] + more])
                return _finish(out, t0, gen, exp, iterations, expanded, h)
        if not whole:
            out.update(status="done")
            return _finish(out, t0, gen, exp, iterations, expanded, h)
        if bound >= limit:
            out.update(status="proven", bound=bound)
            return _finish(out, t0, gen, exp, iterations, expanded, h)
        bound, pieces = bound + 1, None
        out["bound"] = bound
        if time.perf_counter() - t0 >= yield_after:   # the next iteration from its start
            out.update(status="yield", rest=None)
            return _finish(out, t0, gen, exp, iterations, expanded, h)


def _finish(out, t0, gen, exp, iterations, expanded, h):
    out.update(generated=gen, expanded=exp, seconds=time.perf_counter() - t0,
               iterations=iterations, expanded_by_bound=expanded, memory=h.memory)
    counts = out.pop("leaf_counts", None)
    if counts:                          # as two arrays: 43,254 leaves pickle in 0.2 MB
        out["leaf_counts"] = (np.array(list(counts), np.int32),
                              np.array(list(counts.values()), np.float32))
    return out


class EchoTask(Task):
    """Returns its value: how a finished cube's result is written to the journal (the
    journal records task results, so the master has one task carry it)."""

    def __init__(self, value):
        self.value = value

    def run(self, ctx):
        """The value, unchanged."""
        return self.value


@dataclass(order=True)
class CubeJob:
    """The master's record of one cube of the batch."""
    order: tuple
    index: int = field(compare=False)
    entry: Entry = field(compare=False)
    bound: int = field(compare=False, default=0)
    pieces: list = field(compare=False, default=None)   # heap of (order key, pieces)
    pool: np.ndarray = field(compare=False, default=None)  # split leaves not sent, in order
    leaf_counts: np.ndarray = field(compare=False, default=None)   # per leaf: its last count
    whole: list = field(compare=False, default=None)    # waits whole with these pieces
    waiting_whole: bool = field(compare=False, default=False)
    split: bool = field(compare=False, default=False)       # iteration out in pieces
    was_split: bool = field(compare=False, default=False)   # an iteration was: split early
    out: int = field(compare=False, default=0)
    rounds: list = field(compare=False, default_factory=list)
    generated: int = field(compare=False, default=0)
    expanded: int = field(compare=False, default=0)
    busy: float = field(compare=False, default=0.0)
    tasks: int = field(compare=False, default=0)
    pieces_sent: int = field(compare=False, default=0)      # tasks that were split pieces
    ranks: set = field(compare=False, default_factory=set)
    iterations: dict = field(compare=False, default_factory=dict)
    expanded_by: dict = field(compare=False, default_factory=dict)   # per bound
    completed: list = field(compare=False, default_factory=list)     # Iteration records
    started: float = field(compare=False, default=None)
    marked: float = field(compare=False, default=None)      # when the last one completed
    result: dict = field(compare=False, default=None)


def predicted_cost(h_value, scramble_length=None):
    """Korf's estimate of a cube's IDA* size relative to another's: BRANCHING^(L - h),
    with L the scramble's length (an upper bound on the optimal one) or 18."""
    length = TYPICAL_LENGTH if scramble_length is None else min(scramble_length,
                                                                 TYPICAL_LENGTH)
    return BRANCHING ** max(length - h_value, 0)


def journal_name(cube, heuristic, limit):
    """The journal round that holds a finished cube's result (named after its content, so a
    resumed batch finds it on any line; no "/": the journal makes a round an HDF5 group)."""
    return f"rubik-cube:{heuristic}:{limit}:{cube.facelets()}"


class BatchSolver:
    """The master's scheduler of a batch (see the module docstring). ``h``: the master's
    :class:`~.solver.Heuristic` (lower bounds for the order only); ``spec``: what workers
    load, ``(heuristic, cache_dir, max_depth, inverse, memory)``. ``on_iteration(entry,
    iteration)``: called as the master learns that an iteration of a cube is complete (an
    :class:`~.solver.Iteration` whose seconds are the master's wall time since the cube's
    previous one, shared out by nodes among iterations it learns of at once).
    :attr:`workers`: per rank, the tasks, nodes and busy seconds it contributed;
    :attr:`finished`: per line solved here, its solution (a move list, None if proven
    longer than the limit) and its iterations."""

    def __init__(self, farm, h, spec, limit=None, symmetry=True,
                 whole_yield=WHOLE_YIELD_SECONDS, piece_yield=YIELD_SECONDS,
                 on_iteration=None):
        self.farm, self.h, self.spec = farm, h, spec
        self.on_iteration = on_iteration
        self.workers = {}
        self.finished = {}          # line -> (solution moves or None, its Iterations)
        self.limit = check_limit(limit)
        self.symmetry = symmetry
        self.whole_yield, self.piece_yield = whole_yield, piece_yield
        self.nworkers = max(getattr(farm, "num_workers", 1) or 1, 1)
        self.run_id = uuid.uuid4().hex[:12]
        self.rounds = {}            # open Round -> the CubeJob it searches for (None: echo)
        self.nrounds = 0

    def solve(self, entries):
        """Solve the valid entries; yields ``(entry, result dict)`` as cubes finish (a
        cube's result is resumed from the journal where it is there)."""
        jobs = []
        journal = getattr(self.farm, "journal", None)
        for i, e in enumerate(entries):
            if e.cube is None:
                continue
            if journal is not None:
                done = journal.completed(journal_name(e.cube, self.h.name, self.limit))
                if 0 in done:
                    yield e, dict(done[0], resumed=True)
                    continue
            hv = self.h.h(e.cube)
            if e.cube.is_solved:
                yield e, self._result_of_solved(e)
                continue
            job = CubeJob((-predicted_cost(hv, e.scramble_length), i), i, e, bound=hv)
            job.whole, job.waiting_whole = None, True
            jobs.append(job)
        heapq.heapify(jobs)
        waiting = []            # started cubes waiting to go out whole: (order, index, job)
        splitting = []          # cubes whose current iteration goes out in pieces
        active = 0              # cubes started and not finished
        cap = 2 * self.nworkers
        self.out = 0            # tasks sent and not answered (echoes aside)
        self.whole_out = 0      # ... of which whole cubes
        try:
            while jobs or waiting or active or self.rounds:
                while self.out < cap:
                    job, task = self._next(jobs, waiting, splitting)
                    if job is None:
                        break
                    if job.started is None:
                        job.started = job.marked = time.perf_counter()
                        active += 1
                    self._send(job, task)
                self.farm.step()
                for rnd, slot in list(self.rounds.items()):
                    job = slot[0]
                    for batch in rnd.drain():
                        if batch.errors:
                            raise next(iter(batch.errors.values()))
                        for r in batch.values:
                            slot[1] -= 1
                            if job is None:     # the echo of a finished cube: journaled
                                self.farm.journal.flush()
                                yield slot[3].entry, slot[3].result
                                continue
                            self.out -= 1
                            self.whole_out -= slot[2]
                            job.out -= 1
                            if self._take(job, r, jobs, waiting, splitting):
                                active -= 1
                                if journal is None:
                                    yield job.entry, job.result
                    if rnd.finished:
                        self._close(rnd)
        finally:
            for rnd in list(self.rounds):
                self._close(rnd)

    def _close(self, rnd):
        """Close a round; tasks it never answered (cancelled) no longer count as out."""
        job, pending, whole = self.rounds.pop(rnd)[:3]
        rnd.close()
        if job is not None:
            if rnd in job.rounds:
                job.rounds.remove(rnd)
            if pending:
                self.out -= pending
                self.whole_out -= pending * whole
                job.out -= pending

    # ---------------------------------------------------------------- dispatch
    def _next(self, jobs, waiting, splitting):
        """The next task: a piece of a cube being split, else a started cube waiting whole,
        else the next cube by predicted cost."""
        while splitting:
            job = splitting[0]
            if job.result is not None or not self._open_pieces(job):
                splitting.pop(0)
                continue
            if job.pieces:              # the rest of a leaf a task stopped in: first
                _, pieces = heapq.heappop(job.pieces)
            else:
                pieces = [leaves_piece(self._chunk(job))]
            return job, self._task(job, pieces, whole=False, yield_after=self.piece_yield)
        if waiting:
            _, _, job = heapq.heappop(waiting)
            job.waiting_whole = False
            # a cube split in its last iteration is split again after one slice of the
            # next (13 times larger), not after idling the other workers for a yield time
            return job, self._task(job, job.whole, whole=True,
                                   yield_after=0.0 if job.was_split else self._whole_yield(jobs))
        if jobs:
            job = heapq.heappop(jobs)
            job.waiting_whole = False
            return job, self._task(job, None, whole=True, yield_after=self._whole_yield(jobs))
        return None, None

    def _whole_yield(self, jobs):
        """A whole cube yields early once few cubes wait: it may be split soon."""
        return self.whole_yield if len(jobs) >= self.nworkers else self.piece_yield

    def _task(self, job, pieces, whole, yield_after):
        # a whole cube may start an iteration: it orders the leaves by every count so far
        return PieceTask(job.index, _state(job.entry.cube), job.bound, pieces, self.limit,
                         self.spec, whole, yield_after, self.symmetry,
                         job.leaf_counts if whole else None)

    def _send(self, job, task):
        """One task in a round of its own, so that a cube's other pieces can be cancelled
        when one finds the solution (names unique to this run: never resumed from the
        journal)."""
        self.nrounds += 1
        rnd = self.farm.open([task], name=f"rubik-batch:{self.run_id}:{self.nrounds}",
                             chunksize=1, tail_duplication=False, eager=True)
        self.rounds[rnd] = [job, 1, int(task.whole)]
        job.rounds.append(rnd)
        self.whole_out += int(task.whole)
        job.pieces_sent += int(not task.whole)
        job.out += 1
        job.tasks += 1
        self.out += 1

    # ---------------------------------------------------------------- results
    def _take(self, job, r, jobs, waiting, splitting):
        """Take one task's result for ``job``; True when the cube is finished."""
        if r is None or job.result is not None:
            return False            # cancelled, or the cube was finished by another piece
        job.generated += r["generated"]
        job.expanded += r["expanded"]
        job.busy += r["seconds"]
        job.ranks.add(r["rank"])
        job.memory = r.get("memory", "")
        self._account(r)
        for b, n in r["iterations"].items():
            job.iterations[b] = job.iterations.get(b, 0) + n
        for b, n in r["expanded_by_bound"].items():
            job.expanded_by[b] = job.expanded_by.get(b, 0) + n
        if "leaf_counts" in r:          # the leaves' latest counts, for the next iteration
            self._counts(job)[r["leaf_counts"][0]] = r["leaf_counts"][1]
        status = r["status"]
        if status == "solved":
            self._completed(job, r["bound"], solved=True)
            self._done(job, r["bound"], r["solution"])
            return True
        if status == "proven":
            self._completed(job, r["bound"])
            self._done(job, r["bound"] + 1, None)
            return True
        if status == "yield":
            self._completed(job, r["bound"] - 1)
            job.bound = r["bound"]
            # the tail: too few whole cubes left to keep every worker busy
            tail = (not jobs and self.whole_out + len(waiting) < self.nworkers
                    and self.nworkers > 1 and r["rest"] is not None)
            if job.split or tail:
                job.split = True    # the tail (or already split): pieces for idle workers
                self._push(job, r["rest"])
                if job not in splitting:
                    splitting.append(job)
            else:                   # back whole, ahead of the cubes not started
                job.whole, job.waiting_whole = r["rest"], True
                heapq.heappush(waiting, (job.order, job.index, job))
            return False
        # "done": a piece of a split iteration is exhausted
        if job.out == 0 and not self._open_pieces(job):
            self._completed(job, job.bound)
            if job.bound >= self.limit:
                self._done(job, job.bound + 1, None)
                return True
            job.bound += 1          # the iteration is exhausted: the next one, whole
            job.split, job.pieces, job.whole, job.waiting_whole = False, None, None, True
            job.pool, job.was_split = None, True
            heapq.heappush(waiting, (job.order, job.index, job))
        return False

    def _account(self, r):
        w = self.workers.setdefault(r["rank"], {"tasks": 0, "generated": 0, "seconds": 0.0})
        w["tasks"] += 1
        w["generated"] += r["generated"]
        w["seconds"] += r["seconds"]
        w["tables"] = r.get("memory", "")

    def _completed(self, job, through, solved=False):
        """Record the iterations of ``job`` up to bound ``through`` as complete (the last
        with its solution if ``solved``): each an :class:`~.solver.Iteration` in
        ``job.completed``, passed to ``on_iteration``."""
        first = job.completed[-1].bound + 1 if job.completed else None
        bounds = [b for b in sorted(job.iterations) if b <= through
                  and (first is None or b >= first)]
        if not bounds:
            return
        now = time.perf_counter()
        total = sum(job.iterations[b] for b in bounds) or 1
        for b in bounds:
            share = job.iterations[b] / total
            it = Iteration(b, job.iterations[b], job.expanded_by.get(b, 0),
                           (now - job.marked) * share, int(solved and b == through))
            job.completed.append(it)
            if self.on_iteration is not None:
                self.on_iteration(job.entry, it)
        job.marked = now

    def _push(self, job, pieces):
        """Queue a split iteration's ``pieces``: the subtrees left of a leaf a task stopped
        in (searched first, in the serial order), and the frontier's whole leaves, which
        join the cube's pool of leaves not sent, kept densest first (:mod:`.ordered`: the
        order the whole iteration would have had) and sent from its front in chunks
        (:meth:`_chunk`)."""
        if job.pieces is None:
            job.pieces = []
        leaves = [] if job.pool is None else [job.pool]
        for prefix, first in pieces:
            if is_leaf_piece(prefix, first):
                leaves.append(np.asarray(prefix, np.int64))
                continue
            key = tuple(prefix) + ((first,) if first is not None else ())
            heapq.heappush(job.pieces, (key, [(list(prefix), first)]))
        if leaves:
            job.pool = densest_first(self._counts(job), np.concatenate(leaves))

    def _counts(self, job):
        if job.leaf_counts is None:
            job.leaf_counts = np.zeros(N_LEAVES, np.float32)
        return job.leaf_counts

    def _chunk(self, job):
        """The next leaves of the cube's pool: as many as the iteration before predicts to
        generate :data:`CHUNK_NODES` together (at least one, at most
        :data:`CHUNK_LEAVES`)."""
        pool = job.pool
        predicted = np.cumsum(self._counts(job)[pool[:CHUNK_LEAVES]] * BRANCHING)
        n = max(1, int(np.searchsorted(predicted, CHUNK_NODES)) + 1)
        job.pool = pool[n:]
        return pool[:n]

    @staticmethod
    def _open_pieces(job):
        """Are pieces of the cube's split iteration waiting to be sent?"""
        return bool(job.pieces) or (job.pool is not None and job.pool.size > 0)

    def _done(self, job, bound, solution):
        for rnd in job.rounds:
            if rnd in self.rounds and not rnd.finished:
                rnd.cancel(wait=False)
        job.rounds, job.pieces, job.pool, job.split = [], None, None, False
        cube = job.entry.cube
        res = {"line": job.entry.line, "input": job.entry.text, "facelets": cube.facelets(),
               "length": None if solution is None else len(solution),
               "moves": None if solution is None else format_moves(solution),
               "lower_bound": bound, "generated": job.generated, "expanded": job.expanded,
               "seconds": time.perf_counter() - job.started, "busy_seconds": job.busy,
               "tasks": job.tasks, "pieces": job.pieces_sent, "workers": sorted(job.ranks),
               "iterations": {int(b): n for b, n in sorted(job.iterations.items())},
               "tables": getattr(job, "memory", "")}
        if solution is not None:
            res["verified"] = bool(cube.apply(solution).is_solved)
        job.result = res
        self.finished[job.entry.line] = (solution, job.completed)
        if getattr(self.farm, "journal", None) is not None:
            self.nrounds += 1
            rnd = self.farm.open([EchoTask(res)], chunksize=1,
                                 name=journal_name(cube, self.h.name, self.limit))
            self.rounds[rnd] = [None, 1, 0, job]   # reported once it is in the journal

    def _result_of_solved(self, e):
        return {"line": e.line, "input": e.text, "facelets": e.cube.facelets(), "length": 0,
                "moves": "", "lower_bound": 0, "generated": 0, "expanded": 0, "seconds": 0.0,
                "busy_seconds": 0.0, "tasks": 0, "pieces": 0, "workers": [], "iterations": {},
                "verified": True}


def solve_one(cube, farm, h, spec, max_length=None, symmetry=True, on_iteration=None,
              piece_yield=YIELD_SECONDS):
    """Optimal solve of one cube on ``farm`` by the batch's scheduler (call on the master):
    a batch of one is its own tail, so its iterations go to every worker as soon as the
    first task yields (see the module docstring; ``parallel.solve_parallel`` with
    ``order="dense"``). ``h``: the master's :class:`~.solver.Heuristic` (the lower bound
    only); ``spec``: what workers load (as :class:`BatchSolver`'s); ``on_iteration(it)``:
    each complete :class:`~.solver.Iteration`; ``piece_yield``: seconds after which a task
    hands its rest back (the first, whole, task too). Returns a :class:`~.solver.SolveResult`
    whose iterations' seconds are the master's wall time."""
    cube, limit = check_cube(cube), check_limit(max_length)
    t0 = time.perf_counter()
    entry = Entry(1, cube.facelets(), cube)
    hook = None if on_iteration is None else (lambda _, it: on_iteration(it))
    solver = BatchSolver(farm, h, spec, limit, symmetry, piece_yield=piece_yield,
                         on_iteration=hook)
    (_, r), = list(solver.solve([entry]))
    solution, iterations = solver.finished.get(entry.line, ([], []))   # ([], []): solved
    res = SolveResult(solution, [] if solution is None else [solution], r["lower_bound"],
                      iterations, heuristic=h.name,
                      table_memory=h.status.get("memory") or "shared mapping")
    res.seconds = time.perf_counter() - t0
    res.workers = {int(k): v for k, v in sorted(solver.workers.items())}
    res.symmetries = SymmetryFilter(cube).order if symmetry else 1
    return res


def summary(results, errors, seconds, workers):
    """The batch's summary: cubes (``solved`` by this run, the others ``resumed`` from the
    journal), cubes/s and per worker (this run's), lengths, the slowest cube, nodes."""
    lengths = {}
    for r in results:
        key = "unsolved" if r["length"] is None else r["length"]
        lengths[key] = lengths.get(key, 0) + 1
    ran = [r for r in results if not r.get("resumed")]
    slowest = max(ran, key=lambda r: r["seconds"], default=None)
    gen = sum(r["generated"] for r in ran)
    busy = sum(r["busy_seconds"] for r in ran)
    rate = len(ran) / seconds if seconds > 0 else None
    return {"cubes": len(results), "solved": len(ran), "resumed": len(results) - len(ran),
            "errors": len(errors), "seconds": seconds, "cubes_per_second": rate,
            "workers": workers,
            "cubes_per_second_per_worker": None if rate is None else rate / workers,
            "lengths": {str(k): v for k, v in sorted(lengths.items(),
                                                      key=lambda kv: (kv[0] == "unsolved",
                                                                      str(kv[0]).zfill(3)))},
            "slowest": None if slowest is None else {
                "line": slowest["line"], "seconds": slowest["seconds"],
                "length": slowest["length"]},
            "generated": gen, "nodes_per_second": gen / busy if busy > 0 else None}
