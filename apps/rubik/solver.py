"""Serial optimal solver: IDA* iterations over :class:`~.search.SubtreeSearch` (the
iterations above 4 moves over :class:`~.ordered.LeafSearch`).

>>> from apps.rubik import Solver, Cube
>>> r = Solver().solve(Cube.from_moves("R U2 F'"))     # doctest: +SKIP
>>> r.moves, r.length                                    # doctest: +SKIP
("F U2 R'", 3)
"""
import os
import time
from dataclasses import asdict, dataclass, field

from .cache import huge_page_bytes, private_copy
from .cube import Cube, InvalidCubeError, format_moves
from .frontier import Frontier
from .huge import HugeTables
from .nx import NxTables
from .ordered import LEAF_DEPTH, LeafOrder
from .position_symmetry import SymmetryFilter
from .reid import ReidTables
from .search import DONE, FOUND, MAX_DEPTH, SubtreeSearch

HEURISTICS = {
    "phase1": "Kociemba phase-1 distance (flip x slice x twist, 16 symmetries) on 3 axes, "
              "de Bondt +1 (70 MB)",
    "huge": "phase-1 distance with the sorted UD slice (flip x sorted slice x twist, 16 "
            "symmetries) on 3 axes, de Bondt +1 (1.67 GB; built once: ~2 min, 5.2 GB of "
            "memory: for machines where the nx build does not fit)",
    "nx": "phase-1 distance with the corners' U/D layers (flip x slice x twist x corner "
          "separation, 16 symmetries) on 3 axes, 2 bits an entry, de Bondt +1 (2.47 GB; "
          "built once: 7-25 min, 7.6 GB of memory)",
}
DEFAULT_HEURISTIC = "nx"
#: the table class of each heuristic
_TABLE_CLASSES = {"phase1": ReidTables, "huge": HugeTables, "nx": NxTables}

#: building a big table: peak memory, seconds on 2 cores, bytes on disk (measured)
BUILD_COST = {"nx": (7.6e9, 440, 2.47e9), "huge": (5.2e9, 100, 1.67e9)}
#: the heuristics tried in this order where none is requested: the first one cached, else
#: the first one whose build fits the memory available, else SMALL_HEURISTIC
PREFERRED = ("nx", "huge")
#: the table used where no big one fits (70 MB, ~8 s)
SMALL_HEURISTIC = "phase1"
_TABLE_FILES = {"nx": "nx_phase1.bin", "huge": "huge_phase1.bin"}

#: where a process keeps its tables (see :func:`table_memory`)
TABLE_MEMORY = ("auto", "private", "shared")
#: tables smaller than this stay in the shared mapping (they mostly sit in the caches)
PRIVATE_MIN_BYTES = 16 << 20
#: ... and with a private table, the search's class tables from this size on move too
ROUTE_PRIVATE_BYTES = 1 << 20
#: seconds a private copy costs per byte in a new process: 7.46 s for the 2.47 GB nx table
#: on the test VM (fresh memory is backed by the host at first touch; 0.5-0.6 s when the
#: process reuses pages it freed); docs/decisions.md reports the copy's time
COPY_SECONDS_PER_BYTE = 3.0e-9
#: how much faster a new process searches from a private copy: 1.58 for nx on a farm worker
#: (Cube.random(0), 106 M nodes: 45.2 s shared, 28.6 s private, two runs an hour apart of
#: ``benchmarks/rubik_speedup.py``; a process that has already touched the shared mapping
#: gains only 1.2), 1.5-2 for huge's probes (docs/decisions.md)
PRIVATE_GAIN = 1.5


#: the attributes of the table objects that hold big lookup arrays
_TABLE_ARRAYS = ("table", "fallback")


def available_memory() -> float | None:
    """Bytes of memory available now: the node's ``MemAvailable``, or less where this
    process's control group (a batch job's memory limit) leaves less;
    ``$PYFW_RUBIK_MEM_AVAILABLE`` overrides, for tests. None where neither can be read."""
    forced = os.environ.get("PYFW_RUBIK_MEM_AVAILABLE")
    if forced:
        return float(forced)
    node = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    node = float(line.split()[1]) * 1024
    except OSError:
        pass
    group = cgroup_headroom()
    if node is None or group is None:
        return group if node is None else node
    return min(node, group)


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def cgroup_headroom(proc_cgroup="/proc/self/cgroup", root="/sys/fs/cgroup") -> float | None:
    """Bytes this process may still use under its memory control group's limit (the
    tightest of the group and its ancestors; cgroup v2 ``memory.max``/``memory.current``
    or v1 ``memory.limit_in_bytes``/``memory.usage_in_bytes``), or None if unlimited or
    unknown. Slurm and PBS confine a job's memory this way, and ``MemAvailable`` does not
    see it: a job that sized its tables by the node alone would be killed."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and controllers == "":
            base, files = root, ("memory.max", "memory.current")
            if os.path.isdir(os.path.join(root, "unified")) and \
                    not os.path.exists(os.path.join(root, "cgroup.controllers")):
                base = os.path.join(root, "unified")
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes",
                                                        "memory.usage_in_bytes")
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for k in range(len(parts), -1, -1):     # the group, then its ancestors
            d = os.path.join(base, *parts[:k])
            try:
                limit, used = _read_int(os.path.join(d, files[0])), \
                    _read_int(os.path.join(d, files[1]))
            except ValueError:
                continue
            if limit is None or used is None or limit >= 1 << 60:   # v1 "unlimited"
                continue
            room = float(max(limit - used, 0))
            best = room if best is None else min(best, room)
    return best


def choose_heuristic(requested=None, cache_dir=None, log=None) -> str:
    """The heuristic to use: ``requested`` if given; else the default where its table is
    cached or can be built here (saying what the first build costs), else a smaller one
    that fits the machine's memory (saying so)."""
    if requested is not None:
        return requested
    from .cache import cache_dir as resolve_dir
    directory = resolve_dir(cache_dir)
    for name in PREFERRED:
        if os.path.exists(os.path.join(directory, _TABLE_FILES[name])):
            return name
    say = log or (lambda msg: None)
    mem = available_memory()
    skipped = []
    for name in PREFERRED:
        memory, seconds, disk = BUILD_COST[name]
        if mem is not None and mem < 1.1 * memory:
            skipped.append(f"'{name}' needs ~{memory / 1e9:.1f} GB to build its table once")
            continue
        note = f" ({'; '.join(skipped)}, and {mem / 1e9:.1f} GB are available)" if skipped else ""
        say(f"rubik: first run: building the '{name}' table once into {directory}: "
            f"{disk / 1e9:.2f} GB on disk, ~{seconds // 60 + 1} min on 2 idle cores, "
            f"~{memory / 1e9:.1f} GB of memory at the peak{note} (--heuristic "
            f"{SMALL_HEURISTIC}: 70 MB, ~8 s)")
        return name
    say(f"rubik: {'; '.join(skipped)}, and {mem / 1e9:.1f} GB are available: using "
        f"'{SMALL_HEURISTIC}' instead (70 MB table, ~8 s to build; solves ~5x slower than "
        f"'huge'). --heuristic {DEFAULT_HEURISTIC} forces it.")
    return SMALL_HEURISTIC


def local_processes() -> int:
    """Processes of this job on this node (Open MPI's ``OMPI_COMM_WORLD_LOCAL_SIZE``;
    1 outside mpiexec)."""
    try:
        return max(1, int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")))
    except ValueError:
        return 1


def _check_memory(memory):
    if memory not in TABLE_MEMORY:
        raise ValueError(f"table memory must be one of {', '.join(TABLE_MEMORY)}, "
                         f"got {memory!r}")


def table_memory(memory, nbytes, processes=None) -> bool:
    """Whether a process should search from a private copy of ``nbytes`` of tables
    (:func:`~.cache.private_copy`, 2 MB pages: about twice as fast per probe) rather than
    the node's shared page-cache mapping. ``memory``: "private", "shared", or "auto":
    private if ``processes`` such copies (default: this job's processes on the node) take
    at most half the memory available now."""
    _check_memory(memory)
    if memory != "auto":
        return memory == "private"
    mem = available_memory()
    procs = local_processes() if processes is None else processes
    return mem is not None and procs * nbytes <= 0.5 * mem


class Heuristic:
    """The tables of one heuristic, loaded once; makes subtree searches."""

    def __init__(self, name=DEFAULT_HEURISTIC, cache_dir=None, progress=True, max_depth=None,
                 log=None, cached_only=False, inverse=True, memory="shared", tight=True):
        """``max_depth``: truncated tables built in memory (tests); ``cached_only``: raise
        LookupError instead of building a table that is not cached; ``inverse``: look the
        tables up on the inverse position too (see :mod:`.inverse`); ``memory``: where the tables live (:func:`table_memory`;
        "shared" keeps one copy per node; "auto" starts there and copies once the search has paid
        for it, :meth:`searched`); ``tight``:
        with ``inverse``, skip the moves that tight inverse values rule out (see
        :class:`~.search.SubtreeSearch`; off only to measure what it saves)."""
        if name not in HEURISTICS:
            raise ValueError(f"unknown heuristic {name!r}; choose from {', '.join(HEURISTICS)}")
        _check_memory(memory)
        self.name = name
        self._deferred, self._searched, self._copy_after = None, 0.0, 0.0
        self.inverse = bool(inverse)
        self.tight = bool(tight)
        self._target_moves = None
        kw = dict(directory=cache_dir, progress=progress, max_depth=max_depth, log=log,
                  cached_only=cached_only)
        self.tables = _TABLE_CLASSES[name].load(**kw)
        self.status = dict(self.tables.status)
        self.memory = "shared"
        big = [(self.tables, a) for a in _TABLE_ARRAYS
               if getattr(self.tables, a, None) is not None
               and getattr(self.tables, a).nbytes >= PRIVATE_MIN_BYTES]
        nbytes = sum(getattr(t, a).nbytes for t, a in big)
        if big and memory == "auto" and table_memory(memory, nbytes):
            # ski rental: search from the shared mapping until the time lost to it would
            # have paid for the copy, then copy (never more than twice the better choice)
            self._deferred = (big, nbytes)
            self._copy_after = nbytes * COPY_SECONDS_PER_BYTE / (1 - 1 / PRIVATE_GAIN)
        elif big and table_memory(memory, nbytes):
            self._go_private(big)

    def searched(self, seconds):
        """Count ``seconds`` of search on these tables. Under ``memory="auto"`` the
        private copy is made once the search has run long enough on the shared mapping to
        have paid for the copy (``COPY_SECONDS_PER_BYTE`` and ``PRIVATE_GAIN``: 22 s for
        nx, 15 s for huge), if it still fits the memory then: a short solve never pays
        for a copy, a long one pays at most what the shared mapping has cost it."""
        if self._deferred is None:
            return
        self._searched += seconds
        if self._searched >= self._copy_after:
            (big, nbytes), self._deferred = self._deferred, None
            if table_memory("auto", nbytes):
                self._go_private(big)

    def _go_private(self, big):
        before = huge_page_bytes()
        advised = True
        for owner, attr in big:
            copy, ok = private_copy(getattr(owner, attr))
            setattr(owner, attr, copy)
            advised = advised and ok
        for owner in {id(t): t for t, _ in big}.values():
            route = getattr(owner, "route", None)   # its larger class tables too
            if route is not None:
                owner.route = tuple(private_copy(x)[0] if x.nbytes >= ROUTE_PRIVATE_BYTES
                                    else x for x in route)
        after = huge_page_bytes()
        self.memory = "private"
        total = sum(getattr(t, a).nbytes for t, a in big)
        note = (f"in 2 MB pages: {(after - before) / 1e9:.2f} of {total / 1e9:.2f} GB"
                if advised and before is not None and after is not None
                else "huge pages unavailable, 4 KB pages")
        self.status["memory"] = f"private copy ({note})"

    def h(self, cube):
        """Lower bound on the distance of ``cube`` from solved."""
        return self.tables.h(cube, self.inverse)

    def after(self, cube, prefix):
        """(``h(cube.apply(prefix))``, fast (coordinate rows); the exact values of that
        position's inverse on the three axes, or None where the search does not use them:
        see :meth:`skip_moves`)."""
        from .phase1_rows import INV_H_COL, phase1_row
        row, h = phase1_row(self.tables, cube, list(prefix), self.inverse)
        if not (self.inverse and self.tight):
            return h, None
        return h, tuple(int(v) for v in row[INV_H_COL:INV_H_COL + 3])

    def skip_moves(self, inverse_values, left):
        """The moves (bitmask) the search does not expand a node by when its cost bound
        leaves it ``left`` moves: those its tight inverse values (from :meth:`after`) rule
        out (see :class:`~.search.SubtreeSearch`); 0 for None."""
        if inverse_values is None:
            return 0
        from .phase1_rows import tight_skip
        return tight_skip(inverse_values, left, self._targets())

    def _targets(self):
        """The tables' target moves per axis, computed once (a third of a subtree
        search's set-up when recomputed for each of a farm round's pieces)."""
        from .phase1_rows import target_moves
        if self._target_moves is None:
            self._target_moves = target_moves(self.tables)
        return self._target_moves

    def leaf_order(self, cube):
        """The search of ``cube``'s iterations as its subtrees 4 moves deep, densest first
        (:class:`~.ordered.LeafOrder`; a test oracle's heuristic may not have it)."""
        return LeafOrder(self, cube)

    def subtree(self, cube, prefix, bound, first_move=None):
        """A resumable search of the subtree under ``prefix`` with cost bound ``bound``
        (from the root's move ``first_move`` on: see :class:`~.search.SubtreeSearch`)."""
        return SubtreeSearch(self.tables, cube, prefix, bound, inverse=self.inverse,
                             first_move=first_move, tight=self.tight, targets=self._targets())


@dataclass
class Iteration:
    """One IDA* iteration: its cost bound, nodes, seconds and solutions found."""
    bound: int
    generated: int
    expanded: int
    seconds: float
    solutions: int = 0


@dataclass
class SolveResult:
    """What a solve found. ``solution`` is None when no solution of length <= the limit
    exists (then ``lower_bound`` = limit + 1 is proven). ``symmetries``: the order of the
    position's symmetry group the search pruned with (1: none). ``table_memory``: where
    the serial search's tables lived (a farm's workers report theirs in ``workers``)."""
    solution: list
    solutions: list
    lower_bound: int
    iterations: list = field(default_factory=list)
    seconds: float = 0.0
    heuristic: str = DEFAULT_HEURISTIC
    workers: dict = field(default_factory=dict)
    symmetries: int = 1
    table_memory: str = ""

    @property
    def length(self):
        """Moves in the solution (None if none was found)."""
        return None if self.solution is None else len(self.solution)

    @property
    def moves(self):
        """The solution in Singmaster notation (None if none was found)."""
        return None if self.solution is None else format_moves(self.solution)

    @property
    def generated(self):
        """Nodes generated over all iterations."""
        return sum(i.generated for i in self.iterations)

    @property
    def expanded(self):
        """Nodes expanded over all iterations."""
        return sum(i.expanded for i in self.iterations)

    @property
    def nodes_per_second(self):
        """Generated nodes per second of search."""
        busy = sum(i.seconds for i in self.iterations)
        return self.generated / busy if busy > 0 else 0.0

    def to_dict(self):
        """A JSON-ready dict of the result, with the derived fields."""
        d = asdict(self)
        d.update(length=self.length, moves=self.moves, generated=self.generated,
                 expanded=self.expanded, nodes_per_second=self.nodes_per_second,
                 all_moves=[format_moves(s) for s in self.solutions])
        return d


def is_facelet_string(text):
    """Whether ``text`` is read as 54 stickers rather than moves: 54 letters (spaces aside)
    whose first centre reads U, or which cannot be moves (colour letters such as
    ``wrgyob``)."""
    s = "".join(text.split())
    return len(s) == 54 and s.isalpha() and (s[4] == "U" or not set(s) <= set("URFDLB"))


def check_cube(cube):
    """Accept a Cube, move string or facelet string; return a validated Cube."""
    if isinstance(cube, Cube):
        return Cube(cube.cp, cube.co, cube.ep, cube.eo)  # validates
    if isinstance(cube, str):
        if is_facelet_string(cube):
            return Cube.from_facelets(cube)
        return Cube.from_moves(cube)
    raise InvalidCubeError(f"expected a Cube, a move string or a facelet string, got {type(cube).__name__}")


def check_limit(max_length):
    """The move limit to search to: ``max_length``, or the search's maximum depth if None;
    ValueError if out of range."""
    if max_length is None:
        return MAX_DEPTH
    if not isinstance(max_length, int) or not 0 <= max_length <= MAX_DEPTH:
        raise ValueError(f"the move limit must be an integer 0..{MAX_DEPTH}, got {max_length!r}")
    return max_length


class Solver:
    """Optimal (HTM) solver in one process.

    ``heuristic``: one of :data:`HEURISTICS`; ``cache_dir``: table cache directory;
    ``tables``: an already loaded :class:`Heuristic` (shares tables between solvers);
    ``inverse``, ``memory``: see :class:`Heuristic` (ignored with ``tables``; by default
    the tables go into a private copy in 2 MB pages where the memory allows,
    :func:`table_memory`). ``ordered``: search each iteration above
    :data:`~.ordered.LEAF_DEPTH` as the subtrees that deep, densest first by the iteration
    before (:mod:`.ordered`; off: one search from the cube, the subtrees in move order).
    """

    def __init__(self, heuristic=DEFAULT_HEURISTIC, cache_dir=None, progress=True, tables=None,
                 inverse=True, memory="auto", ordered=True):
        self.heuristic = tables if tables is not None else Heuristic(
            heuristic, cache_dir, progress, inverse=inverse, memory=memory)
        self.ordered = bool(ordered)

    def solve(self, cube, max_length=None, all_solutions=False, budget=1 << 22, cancelled=None,
              on_iteration=None, symmetry=True):
        """Find an optimal solution of ``cube`` (all of them with ``all_solutions``), or
        prove that none has at most ``max_length`` moves. ``cancelled()`` is polled between
        node slices of ``budget`` nodes; on cancellation the partial result is returned
        with ``solution=None`` and ``lower_bound`` = the last exhausted bound + 1.
        ``symmetry``: if the position is symmetric, search only subtrees no symmetry maps
        onto an earlier one (:mod:`.position_symmetry`; not with ``all_solutions``)."""
        cube = check_cube(cube)
        limit = check_limit(max_length)
        t0 = time.perf_counter()
        res = SolveResult(None, [], 0, heuristic=self.heuristic.name,
                          table_memory=self.heuristic.status.get("memory") or "shared mapping")
        bound = self.heuristic.h(cube)
        res.lower_bound = bound
        # a symmetric position: only subtrees no symmetry makes equivalent to an earlier one
        symmetry = SymmetryFilter(cube) if symmetry and not all_solutions else None
        front = Frontier(self.heuristic, cube, 2, symmetry) if symmetry else None
        res.symmetries = symmetry.order if symmetry else 1
        clock = [time.perf_counter()]

        def searched():         # the search time since the last call: Heuristic.searched
            now = time.perf_counter()
            self.heuristic.searched(now - clock[0])
            clock[0] = now

        def between_slices():
            searched()
            return cancelled is not None and cancelled()

        leaves = None           # the cube's LeafOrder, from the first bound above its depth
        while bound <= limit:
            t1 = time.perf_counter()
            if (front is None and bound > LEAF_DEPTH and self.ordered
                    and hasattr(self.heuristic, "leaf_order")):
                if leaves is None:
                    leaves = self.heuristic.leaf_order(cube)
                searches, gen, exp = [leaves.iteration(bound)], 0, 0
            else:
                prefixes, gen, exp = front.leaves(bound) if front else ([[]], 0, 0)
                searches = (self.heuristic.subtree(cube, p, bound) for p in sorted(prefixes))
            found = []
            for s in searches:
                while True:
                    st = s.run(budget, between_slices)
                    searched()
                    if st == FOUND:
                        found.append(s.solution)
                        if not all_solutions:
                            break
                    elif st == DONE:
                        break
                    else:  # cancelled
                        res.iterations.append(Iteration(bound, gen + s.generated,
                                                        exp + s.expanded,
                                                        time.perf_counter() - t1, 0))
                        res.seconds = time.perf_counter() - t0
                        return res
                gen, exp = gen + s.generated, exp + s.expanded
                if found and not all_solutions:
                    break
            it = Iteration(bound, gen, exp, time.perf_counter() - t1, len(found))
            res.iterations.append(it)
            if on_iteration:
                on_iteration(it)
            if found:
                res.solution, res.solutions, res.lower_bound = found[0], found, bound
                break
            bound += 1
            res.lower_bound = bound
        res.seconds = time.perf_counter() - t0
        res.table_memory = self.heuristic.status.get("memory", res.table_memory)  # a copy?
        return res


def verify(cube, moves):
    """True if ``moves`` solves ``cube``."""
    return check_cube(cube).apply(moves).is_solved
