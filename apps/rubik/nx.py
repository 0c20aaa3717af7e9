"""The "nx" heuristic: phase-1 distance with the corners' U/D separation, at 2 bits.

The phase-1 table (:mod:`.reid`) asks for every edge oriented, every corner untwisted and
the four UD-slice edges in the slice. This one also asks that the four U-layer corners sit
in the U layer (in any order), as Rokicki's nxopt tables add corner information to the
phase-1 coordinates. A position is described by (flip x slice class, twist, separation):
64,430 classes under the 16 UD-preserving symmetries x 2187 x C(8, 4) = 70, i.e.
9,863,588,700 entries. Its target subgroup is <U, D> plus what the coordinates cannot
see, so the tight-inverse rule (:func:`.phase1_kernel._search_reid`) skips the six U and
D turns.

**2 bits an entry (2.47 GB).** Exact depths (up to 13 here) need 4 bits: 4.93 GB, over
what the solver may ask of a machine. So an entry stores its depth d relative to a base
``b`` chosen at build time: 1 or 2 for d = b + 1, b + 2; 3 for d >= b + 3; 0 for d <= b,
where the search falls back on the phase-1 table (whose entry is ``index // 70``: the
same class and twist). Each code gives a lower bound (what prunes) and an upper bound (what
lets the kernel skip a child's lookup: a child is within one move of its parent), see
:func:`.phase1_kernel._value`. The base minimises Korf's estimate of IDA*'s node count
for the largest of three such values (:func:`node_estimate`), from the joint histogram of
depth and phase-1 value, and is kept in the table's last byte: 9 here, so codes 1, 2, 3
stand for 10, 11 and 12-13, and 3.8 % of the entries fall back on the phase-1 table.

**Build.** A breadth-first search over the quotient graph, one class block (2187 x 70
entries, 76.5 KB at 4 bits) at a time, on a 4-bit table (4.93 GB) that is then packed to 2
bits: 7.6-7.8 GB at the peak; 7.2 minutes on the idle two-core test machine, 16-23 beside
other work.
Depths 0..13: 1, 6, 29, 164, 1433, 16772, 205033, 2513871, 30329976, 342440769,
2815191126, 6147967200, 524918774, 3546. Backward levels run in parallel (a thread writes
only entries of its own classes, and blocks are whole bytes); forward levels write into
other classes' blocks, where two threads could update the two halves of one byte at once,
so they run on one thread (they are the small early levels).
"""
import numpy as np
from numba import njit, prange

from .cache import Progress, load_or_build
from .coords import N_TWIST, SLICE_SOLVED, flip_coord, move_tables, slice_coord, twist_coord
from .cube import MOVE_CUBES
from .packing import _nib
from .pruning import BRANCHING
from .reid import N_CLASSES, ReidTables, ThreeAxisTables, _sym_arrays, sym_tables
from .symmetry import UD_SYM_INV, axis_cube

VERSION = 1
N_SEP = 70                                  # which 4 of the 8 corner slots hold U corners
N_BLOCK = N_TWIST * N_SEP                   # entries of one flip-slice class: 153,090
N_ENTRIES = N_CLASSES * N_BLOCK             # 9,863,588,700
UNSET = 15                                  # a 4-bit entry not reached yet (build only)
UNKNOWN_UPPER = 60                          # an upper bound where none is known

#: sep rank <-> bitmask of the slots holding the U-layer corners (URF UFL ULB UBR = 0..3)
SEP_MASKS = np.array([m for m in range(256) if bin(m).count("1") == 4], np.int64)
SEP_OF_MASK = np.full(256, -1, np.int64)
SEP_OF_MASK[SEP_MASKS] = np.arange(N_SEP)
SEP_SOLVED = int(SEP_OF_MASK[0b1111])


def sep_coord(cube):
    """Separation coordinate of ``cube``: the rank of the set of corner slots holding
    U-layer corners (0 when they are all in the U layer)."""
    return _sep_of_cp(cube.cp)


def _sep_cp(k):
    """A corner permutation with separation ``k`` (U corners 0..3 in its U slots)."""
    mask = int(SEP_MASKS[k])
    up = iter(range(4))
    down = iter(range(4, 8))
    return np.array([next(up) if mask >> i & 1 else next(down) for i in range(8)], np.int64)


def _sep_of_cp(cp):
    return int(SEP_OF_MASK[sum(1 << i for i in range(8) if cp[i] < 4)])


def _seps_of_cps(cps):
    """:func:`_sep_of_cp` of each permutation in the last axis of ``cps``."""
    return SEP_OF_MASK[((cps < 4) << np.arange(8)).sum(axis=-1)]


def sep_move_table():
    """sepm[k, m]: separation after move m (as ``Cube.apply``: new cp[i] = cp[move.cp[i]])."""
    cps = np.array([_sep_cp(k) for k in range(N_SEP)])
    moves = np.array([m.cp for m in MOVE_CUBES], np.int64)
    return _seps_of_cps(cps[:, moves])            # [k, m, i] = cps[k, moves[m, i]]


def sep_conj_table():
    """sepconj[k, S]: separation of sym[S] * C * sym[S]^-1 for a C of separation k (as the
    twist's ``tconj``). UD symmetries keep the U and D layers or swap them, so the result
    depends on k alone (checked here for two permutations of each k)."""
    scp = _sym_arrays()[0]
    sinv = UD_SYM_INV
    base = np.array([_sep_cp(k) for k in range(N_SEP)])
    other = base.copy()                                 # another C of the same separation
    for row, b in zip(other, base):
        row[b < 4] = b[b < 4][::-1]
        row[b >= 4] = b[b >= 4][::-1]
    out = np.empty((N_SEP, 16), np.int64)
    for s in range(16):
        got = [_seps_of_cps(scp[s][cps][:, scp[sinv[s]]]) for cps in (base, other)]
        if not np.array_equal(*got):                    # sym[s] * C * sym[s]^-1
            raise AssertionError("a UD symmetry mixes the U and D corner layers")
        out[:, s] = got[0]
    return out


# ---------------------------------------------------------------------------------- build
@njit(cache=True, inline="always")
def _get(tab, i):
    return (tab[i >> 1] >> ((i & 1) << 2)) & 15


@njit(cache=True, inline="always")
def _put(tab, i, v):
    sh = (i & 1) << 2
    tab[i >> 1] = (tab[i >> 1] & (240 >> sh)) | (v << sh)


@njit(cache=True, inline="always")
def _holds(tab, base, block, value):
    """Whether any 4-bit entry of the block from ``base`` equals ``value`` (where a block
    starts or ends mid-byte, the neighbour's half byte is read too: a false yes only costs
    the block's scan)."""
    lo = value
    hi = value << 4
    for b in range(base >> 1, (base + block + 1) >> 1):
        x = tab[b]
        if (x & 15) == lo or (x & 240) == hi:
            return True
    return False


@njit(cache=True, inline="always")
def _set_next(tab, c2, t2, k2, d, nsep, stab, tconj, sepconj):
    """Give entry (c2, t2, k2) depth d + 1 if unset, with the entries the representative's
    own symmetries map it to; returns how many were set."""
    j = (c2 * 2187 + t2) * nsep + k2
    if _get(tab, j) != UNSET:
        return 0
    _put(tab, j, d + 1)
    n = 1
    mask = stab[c2]
    if mask != 1:
        for S in range(1, 16):
            if mask & (1 << S):
                j2 = (c2 * 2187 + tconj[t2, S]) * nsep + sepconj[k2, S]
                if _get(tab, j2) == UNSET:
                    _put(tab, j2, d + 1)
                    n += 1
    return n


@njit(cache=True, parallel=True)
def _level(tab, d, c0, c1, reps, stab, cls, flipm, slicem, twm, tconj, sepm, sepconj,
           forward):
    """Classes c0..c1-1 of one BFS level; returns how many entries got depth d + 1 (as
    :func:`.huge._level`; ``sepm.shape[0]`` separations a class: 70, or 1 to rebuild the
    phase-1 table with this code, which the tests compare)."""
    nsep = sepm.shape[0]
    block = 2187 * nsep
    ncls = c1 - c0
    # forward writes reach other classes' bytes; odd blocks share bytes with neighbours
    nchunk = 1 if forward or block % 2 else 256
    counts = np.zeros(nchunk, np.int64)
    for ch in prange(nchunk):
        kc = np.empty(18, np.int64)
        ks = np.empty(18, np.int64)
        kmap = np.empty((18, nsep), np.int64)
        n = 0
        for c in range(c0 + ch * ncls // nchunk, c0 + (ch + 1) * ncls // nchunk):
            base = c * block
            if not _holds(tab, base, block, d if forward else UNSET):
                continue
            fs = reps[c]
            fl = fs & 2047
            sl = fs >> 11
            for m in range(18):   # the neighbour classes depend on the representative only
                w = cls[(np.int64(slicem[sl, m]) << 11) | flipm[fl, m]]
                kc[m] = w >> 4
                ks[m] = w & 15
                for k in range(nsep):
                    kmap[m, k] = sepconj[sepm[k, m], ks[m]]
            for t in range(2187):
                for k in range(nsep):
                    i = base + t * nsep + k
                    v = _get(tab, i)
                    if forward and v == d:
                        for m in range(18):
                            n += _set_next(tab, kc[m], np.int64(tconj[twm[t, m], ks[m]]),
                                           kmap[m, k], d, nsep, stab, tconj, sepconj)
                    elif not forward and v == UNSET:
                        for m in range(18):
                            j = (kc[m] * 2187 + tconj[twm[t, m], ks[m]]) * nsep + kmap[m, k]
                            if _get(tab, j) == d:
                                _put(tab, i, d + 1)
                                n += 1
                                break
        counts[ch] = n
    return counts.sum()


@njit(cache=True, parallel=True)
def _joint_histogram(tab, n, p1tab, nsep):
    """hist[d, p]: entries of depth d whose phase-1 entry (index // nsep) holds p."""
    nchunk = 1024
    h = np.zeros((nchunk, 16, 16), np.int64)
    for ch in prange(nchunk):
        for i in range(ch * n // nchunk, (ch + 1) * n // nchunk):
            h[ch, _get(tab, i), _nib(p1tab, i // nsep)] += 1
    return h.sum(axis=0)


def node_estimate(hist, base):
    """Korf's estimate of IDA*'s node count, up to a constant, for the stored lower bound
    h with ``base``: sum over k of 13.35^-k P(h <= k)^3 (the search takes the largest of
    three axes' values, taken here as independent). ``hist[d, p]``: entries of depth d
    whose phase-1 value is p (:func:`_joint_histogram`)."""
    hist = np.asarray(hist, np.float64)
    mass = np.zeros(20)
    for d in range(hist.shape[0]):
        if d <= base:
            mass[:hist.shape[1]] += hist[d]                 # the phase-1 fallback
        else:
            mass[min(d, base + 3)] += hist[d].sum()
    cdf = np.cumsum(mass) / hist.sum()
    return float(sum(BRANCHING ** -k * cdf[k] ** 3 for k in range(len(cdf))))


def choose_base(hist):
    """The base minimising :func:`node_estimate`. (One lookup's E[13.35^-h] is no guide:
    the rare shallow entries dominate it, and it hardly changes from base 6 to 11.)"""
    return min(range(13), key=lambda b: node_estimate(hist, b))


@njit(cache=True, parallel=True)
def _pack2(tab, n, base):
    """2-bit codes (0: d <= base, 1..2: d = base + code, 3: d >= base + 3) and the base in
    the last byte."""
    nb = (n + 3) // 4
    out = np.empty(nb + 1, np.uint8)
    for i in prange(nb):
        byte = 0
        for q in range(4):
            e = 4 * i + q
            if e < n:
                v = _get(tab, e)
                code = 0 if v <= base else min(v - base, 3)
                byte |= code << (2 * q)
        out[i] = byte
    out[nb] = base
    return out


def solved_index(nsep=N_SEP):
    """The table's index of the solved cube."""
    cls, _, _, tconj = sym_tables()
    w = int(cls[SLICE_SOLVED << 11])
    S = w & 15
    k = int(sep_conj_table()[SEP_SOLVED, S]) if nsep > 1 else 0
    return ((w >> 4) * N_TWIST + int(tconj[0, S])) * nsep + k


def build_depths(nsep=N_SEP, progress=None, log=None, max_depth=None, backward=()):
    """The 4-bit table of exact depths (``nsep`` = 70; 1 gives the phase-1 table) and the
    number of entries per depth. For tests: ``max_depth`` stops there (deeper entries stay
    UNSET) and the levels reaching the depths in ``backward`` run backward."""
    cls, reps, stab, tconj = sym_tables()
    mt = move_tables()
    sepm = sep_move_table() if nsep > 1 else np.zeros((1, 18), np.int64)
    sepconj = sep_conj_table() if nsep > 1 else np.zeros((1, 16), np.int64)
    n = N_CLASSES * N_TWIST * nsep
    tab = np.full((n + 1) // 2, 0xFF, np.uint8)
    _put(tab, solved_index(nsep), 0)
    filled, frontier, d, counts = 1, 1, 0, [1]
    parts = 32
    while max_depth is None or d < max_depth:
        unset = n - filled
        # forward runs on one thread and touches 18 neighbours per frontier entry;
        # backward runs on all and checks up to 18 per unset entry
        forward = frontier < unset // 4 and d + 1 not in backward
        new = 0
        for k in range(parts):
            new += int(_level(tab, d, k * N_CLASSES // parts, (k + 1) * N_CLASSES // parts,
                              reps, stab, cls, mt["flip"], mt["slice"], mt["twist"], tconj,
                              sepm, sepconj, forward))
            if progress:
                progress.update(filled + new, f"depth {d + 1} ({k + 1}/{parts})")
        if new == 0:
            break
        if d + 1 >= UNSET:
            raise AssertionError(f"depth {d + 1} does not fit 4 bits")
        filled += new
        frontier = new
        d += 1
        counts.append(new)
        if log:
            log(f"nx depth {d}: {new} entries ({'forward' if forward else 'backward'})")
    if filled != n and max_depth is None:
        raise AssertionError(f"{n - filled} entries unreachable")
    return tab, counts


def build(progress=None, log=None, directory=None):
    """The packed 2-bit table (its base in the last byte)."""
    tab, counts = build_depths(N_SEP, progress, log)
    p1 = ReidTables.load(directory=directory, progress=False, log=log).table
    hist = _joint_histogram(tab, N_ENTRIES, p1, N_SEP)
    if not np.array_equal(hist.sum(axis=1)[:len(counts)], counts):
        raise AssertionError("histogram and BFS level counts disagree")
    base = choose_base(hist)
    if log:
        log(f"nx table: depths {counts}; base {base}")
    out = _pack2(tab, N_ENTRIES, base)
    del tab
    return out


def build_truncated(max_depth):
    """The packed 2-bit table of the same BFS stopped at ``max_depth`` (tests: the default
    heuristic's code path on a machine without the real table). Base ``max_depth - 2``:
    codes 1 and 2 stand for the last two levels reached and code 3 (at least base + 3 =
    ``max_depth + 1``) for every entry not reached, whose depth is at least that, so the
    table stays a lower bound and the decoding is the real table's. The same 4.93 GB
    4-bit table as the real build (all 70 separations, all classes), packed to 2.47 GB."""
    if max_depth < 3:
        raise ValueError("a truncated nx table needs max_depth >= 3 (base = max_depth - 2)")
    tab, _ = build_depths(N_SEP, max_depth=max_depth)
    out = _pack2(tab, N_ENTRIES, max_depth - 2)
    del tab
    return out


# ----------------------------------------------------------------------------- lookups
@njit(cache=True, inline="always")
def _nx_value(tab, idx, base, fallback):
    """(lower, upper) bound of the distance at ``idx`` from its 2-bit code (see the module
    docstring): code 0 takes the phase-1 table's entry ``idx // 70``."""
    v = np.int64((tab[idx >> 2] >> ((idx & 3) << 1)) & 3)
    if v == 0:
        return np.int64(_nib(fallback, idx // N_SEP)), np.int64(base)
    if v == 3:
        return np.int64(base + 3), np.int64(UNKNOWN_UPPER)
    return np.int64(base + v), np.int64(base + v)


class NxTables(ThreeAxisTables):
    """The 2-bit table with its phase-1 fallback, and the tables the search needs (the
    interface of :class:`~.reid.ReidTables`, plus ``sepm``/``sepconj``/``base``)."""

    name = "nx"
    separation = True
    slice_move = "slice"
    slice_solved = SLICE_SOLVED
    slice_coord = staticmethod(slice_coord)
    sorted_slice = False

    def __init__(self, table, phase1, status=None):
        self.table = table
        self.base = int(table[-1])
        self.phase1 = phase1                    # a ReidTables: its routes and table
        self.fallback = phase1.table            # looked up where the nx code is 0
        self.status = dict(phase1.status, **(status or {}))
        self.tconj = phase1.tconj
        self.route = phase1.route
        self.moves = phase1.moves
        self.sepm = sep_move_table()
        self.sepconj = sep_conj_table()

    @classmethod
    def load(cls, directory=None, progress=True, max_depth=None, log=None, cached_only=False):
        """Load from the cache, building it if needed (with ``cached_only`` a missing table
        raises LookupError). ``max_depth`` (tests; at least 3): a truncated table built in
        memory by :func:`build_truncated`, with a phase-1 fallback truncated alike."""
        if max_depth is not None:
            phase1 = ReidTables.load(progress=False, max_depth=max_depth, log=log)
            return cls(build_truncated(max_depth), phase1,
                       {"nx": f"built in memory (max_depth={max_depth})"})
        phase1 = ReidTables.load(directory=directory, progress=progress, log=log,
                                 cached_only=cached_only)

        def make(show):
            bar = Progress("nx table (flip x slice x twist x corner layers / 16 syms)",
                           N_ENTRIES, enabled=bool(show))
            out = build(progress=bar, log=log, directory=directory)
            bar.close()
            return out
        arr, st = load_or_build("nx_phase1", VERSION, {"entries": N_ENTRIES},
                                None if cached_only else make, directory, progress, log=log)
        return cls(arr, phase1, {"nx": st})

    def bounds(self, cube, axis=0):
        """(lower, upper) bound on the distance of ``cube`` (seen along ``axis``) from the
        table's target (upper UNKNOWN_UPPER: unknown)."""
        c = axis_cube(cube, axis)
        cl, _, _, tconj = sym_tables()
        w = int(cl[(slice_coord(c) << 11) | flip_coord(c)])
        S = w & 15
        idx = ((w >> 4) * N_TWIST + int(tconj[twist_coord(c), S])) * N_SEP \
            + int(self.sepconj[sep_coord(c), S])
        lower, upper = _nx_value(self.table, idx, self.base, self.fallback)
        return int(lower), int(upper)

    def axis_h(self, cube, axis=0):
        """Lower bound on the nx distance of ``cube`` along axis 0 (UD), 1 or 2."""
        return self.bounds(cube, axis)[0]
