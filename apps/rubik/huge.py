"""The "huge" heuristic: phase-1 distance with the *sorted* UD slice, on three axes.

Kociemba's phase-1 table (:mod:`.reid`) only asks that the four UD-slice edges be
somewhere in the slice. Here they must be in their own places: the goal is the subgroup
with every edge oriented, every corner untwisted and FR, FL, BL, BR home, and a position
is described by (flip, sorted slice, twist) = 2048 x 11,880 x 2187 values. The 16
UD-preserving symmetries shrink flip x sorted slice to 1,523,864 classes, so the table
has 1,523,864 * 2187 = 3,332,690,568 entries: 1.67 GB at 4 bits, about 24 times the
phase-1 table, as in Cube Explorer's "huge optimal" solver and Kociemba's RubikOptimal.
It is looked up along the three axes exactly like the phase-1 table (same search
kernel, de Bondt's +1 included).

Symmetry classes are found in two steps, with nothing larger than 6 MB: the sorted
slice alone has 788 orbits under the 16 symmetries (``srep[s]`` = orbit << 4 | the
symmetry taking ``s`` to the orbit's representative), and conjugation acts on the flip
coordinate affinely, ``flip(S C S^-1) = fperm[S, flip] ^ sxor``; then ``cls2[orbit,
flip]`` = class << 4 | symmetry finishes the reduction. The build checks the result on all
24,330,240 (sorted slice, flip) pairs against explicit conjugation.

The breadth-first search runs over the quotient graph, one class at a time: the 18
neighbour classes and symmetries of a class depend only on its representative, not on
the twist, so they are computed once per class, and the 2187 twists of a class then touch
only 18 blocks of 2187 bytes (cache-resident). Levels run in parallel (numba prange over
classes); in a forward level every writer stores the same value into unset bytes, so the
races are benign, and a backward level writes only the thread's own entries. Built once
(about 100 s on two cores; 5 GB at the peak: the 3.3 GB byte table and its 1.67 GB packed
copy), then memory-mapped.
"""
import numpy as np
from numba import njit, prange

from .cache import Progress, load_or_build
from .coords import (N_FLIP, N_SSLICE, N_TWIST, SSLICE_SOLVED, _flip_rank, _flip_unrank,
                     _sslice_rank, _sslice_unrank, flip_coord, move_tables, sslice_coord,
                     twist_coord)
from .packing import UNSET, _nib
from .reid import (ThreeAxisTables, _conj_edges, _edge_scratch, _sym_arrays, _sym_mul,
                   _twist_conj)
from .symmetry import UD_SYM_INV, axis_cube

VERSION = 1
N_ORBITS = 788                      # sorted-slice orbits under the 16 symmetries
N_CLASSES = 1523864                 # flip x sorted-slice classes
N_ENTRIES = N_CLASSES * N_TWIST     # 3,332,690,568
MAX_STORED = 15                     # 4-bit entries; larger depths are stored as 15


@njit(cache=True)
def _orbits(sep, seo, sinv):
    """srep[s] = orbit << 4 | S (conjugation by S takes s to its orbit's representative,
    the orbit's smallest rank), sxor[s] = flip of that conjugate of (s, flip 0),
    oreps[orbit] = representative, ostab[orbit] = mask of the symmetries fixing it,
    oxor[orbit, S] = flip of S-conjugate of (representative, flip 0)."""
    ep, eo, oep, oeo = _edge_scratch()
    eo[:] = 0                       # the flip-0 cube of each sorted slice
    orbit_of = np.full(N_SSLICE, -1, np.int64)
    oreps = np.empty(N_SSLICE, np.int64)
    ostab = np.zeros(N_SSLICE, np.int64)
    oxor = np.zeros((N_SSLICE, 16), np.int64)
    no = 0
    for s in range(N_SSLICE):       # increasing s: the first of an orbit is its minimum
        if orbit_of[s] >= 0:
            continue
        _sslice_unrank(s, ep)
        for S in range(16):
            _conj_edges(ep, eo, S, sinv[S], sep, seo, oep, oeo)
            r = _sslice_rank(oep)
            if orbit_of[r] < 0:
                orbit_of[r] = no
            if r == s:
                ostab[no] |= 1 << S
            oxor[no, S] = _flip_rank(oeo)
        oreps[no] = s
        no += 1
    srep = np.empty(N_SSLICE, np.int32)
    sxor = np.empty(N_SSLICE, np.int32)
    for s in range(N_SSLICE):
        _sslice_unrank(s, ep)
        k = orbit_of[s]
        for S in range(16):
            _conj_edges(ep, eo, S, sinv[S], sep, seo, oep, oeo)
            if _sslice_rank(oep) == oreps[k]:
                srep[s] = (k << 4) | S
                sxor[s] = _flip_rank(oeo)
                break
    return srep, sxor, oreps[:no].copy(), ostab[:no].copy(), oxor[:no].copy()


@njit(cache=True)
def _flip_perm(sep, seo, sinv):
    """fperm[S, f]: the linear part of conjugating the flip coordinate by S."""
    ep, eo, oep, oeo = _edge_scratch()
    ep[:] = np.arange(12)           # the solved edge permutation
    fperm = np.empty((16, N_FLIP), np.int32)
    for S in range(16):
        eo[:] = 0
        _conj_edges(ep, eo, S, sinv[S], sep, seo, oep, oeo)
        base = _flip_rank(oeo)
        for f in range(N_FLIP):
            _flip_unrank(f, eo)
            _conj_edges(ep, eo, S, sinv[S], sep, seo, oep, oeo)
            fperm[S, f] = _flip_rank(oeo) ^ base
    return fperm


@njit(cache=True)
def _classes(oreps, ostab, oxor, fperm, sinv):
    """cls2[orbit, f] = class << 4 | S (S-conjugation takes (orbit rep, f) to the class
    representative), rep_sl / rep_fl = the class representatives, stab = the mask of
    symmetries that fix a representative."""
    no = oreps.size
    cls2 = np.full((no, N_FLIP), 0xFFFFFFFF, np.uint32)
    rep_sl = np.empty(N_CLASSES + 1, np.int32)
    rep_fl = np.empty(N_CLASSES + 1, np.int32)
    stab = np.zeros(N_CLASSES + 1, np.uint16)
    nc = 0
    for k in range(no):
        for f in range(N_FLIP):
            if cls2[k, f] != 0xFFFFFFFF:
                continue
            if nc > N_CLASSES:
                return cls2, rep_sl, rep_fl, stab, -1
            mask = 0
            for S in range(16):
                if ostab[k] & (1 << S):
                    f2 = fperm[S, f] ^ oxor[k, S]
                    if cls2[k, f2] == 0xFFFFFFFF:
                        cls2[k, f2] = (nc << 4) | sinv[S]
                    if f2 == f:
                        mask |= 1 << S
            rep_sl[nc] = oreps[k]
            rep_fl[nc] = f
            stab[nc] = mask
            nc += 1
    return cls2, rep_sl[:nc].copy(), rep_fl[:nc].copy(), stab[:nc].copy(), nc


@njit(cache=True, inline="always")
def _class_of(fl, sl, srep, sxor, fperm, cls2, symmul):
    """(class, S): conjugating (sl, fl) by symmetry S gives the class representative."""
    w1 = srep[sl]
    s1 = w1 & 15
    w = cls2[w1 >> 4, fperm[s1, fl] ^ sxor[sl]]
    return np.int64(w >> 4), symmul[w & 15, s1]


@njit(cache=True, parallel=True)
def _check_classes(sep, seo, sinv, srep, sxor, fperm, cls2, symmul, rep_sl, rep_fl, step):
    """Count the (sorted slice, flip) pairs (every ``step``-th) whose explicit
    conjugation by the symmetry the tables give is not the class representative."""
    bad = np.zeros(N_SSLICE, np.int64)
    for s in prange(N_SSLICE):
        ep, eo, oep, oeo = _edge_scratch()
        _sslice_unrank(s, ep)
        for f in range((s * 7) % step, N_FLIP, step):
            _flip_unrank(f, eo)
            c, S = _class_of(f, s, srep, sxor, fperm, cls2, symmul)
            _conj_edges(ep, eo, S, sinv[S], sep, seo, oep, oeo)
            if _sslice_rank(oep) != rep_sl[c] or _flip_rank(oeo) != rep_fl[c]:
                bad[s] += 1
    return bad.sum()


@njit(cache=True, inline="always")
def _holds(tab, base, value):
    """Whether any of the class's 2187 twist entries (from ``base``) equals ``value``."""
    for t in range(2187):
        if tab[base + t] == value:
            return True
    return False


@njit(cache=True, inline="always")
def _set_next(tab, c2, t2, d, stab, tconj):
    """Give entry (c2, t2) depth d + 1 if unset, with the entries the representative's own
    symmetries map it to; returns how many were set."""
    j = c2 * 2187 + t2
    if tab[j] != UNSET:
        return 0
    tab[j] = d + 1
    n = 1
    mask = stab[c2]
    if mask != 1:
        for S in range(1, 16):
            if mask & (1 << S):
                j2 = c2 * 2187 + tconj[t2, S]
                if tab[j2] == UNSET:
                    tab[j2] = d + 1
                    n += 1
    return n


@njit(cache=True, parallel=True)
def _level(tab, d, c0, c1, rep_sl, rep_fl, stab, flipm, slicem, twm, srep, sxor, fperm,
           cls2, symmul, tconj, forward):
    """Classes c0..c1-1 of one BFS level over the quotient graph; returns how many entries
    got depth d + 1 (a level may run as several such calls: entries set to d + 1 by one
    call are neither expanded nor taken for depth-d neighbours by the next). Forward, a
    depth-d entry sets its unset neighbours; backward, an unset entry with a depth-d
    neighbour sets itself."""
    ncls = c1 - c0
    nchunk = 256
    counts = np.zeros(nchunk, np.int64)
    for ch in prange(nchunk):
        kc = np.empty(18, np.int64)
        ks = np.empty(18, np.int64)
        n = 0
        for c in range(c0 + ch * ncls // nchunk, c0 + (ch + 1) * ncls // nchunk):
            base = c * 2187
            if not _holds(tab, base, d if forward else UNSET):
                continue
            for m in range(18):   # the neighbour classes depend on the representative only
                kc[m], ks[m] = _class_of(flipm[rep_fl[c], m], slicem[rep_sl[c], m], srep,
                                         sxor, fperm, cls2, symmul)
            for t in range(2187):
                v = tab[base + t]
                if forward and v == d:
                    for m in range(18):
                        n += _set_next(tab, kc[m], np.int64(tconj[twm[t, m], ks[m]]), d,
                                       stab, tconj)
                elif not forward and v == UNSET:
                    for m in range(18):
                        if tab[kc[m] * 2187 + tconj[twm[t, m], ks[m]]] == d:
                            tab[base + t] = d + 1
                            n += 1
                            break
        counts[ch] = n
    return counts.sum()


@njit(cache=True, parallel=True)
def _histogram(tab):
    nchunk = 1024
    h = np.zeros((nchunk, 256), np.int64)
    for ch in prange(nchunk):
        for i in range(ch * tab.size // nchunk, (ch + 1) * tab.size // nchunk):
            h[ch, tab[i]] += 1
    return h.sum(axis=0)


@njit(cache=True, parallel=True)
def _saturate_pack4(tab, cap):
    out = np.empty((tab.size + 1) // 2, np.uint8)
    for i in prange(tab.size // 2):
        out[i] = min(tab[2 * i], cap) | (min(tab[2 * i + 1], cap) << 4)
    if tab.size % 2:
        out[-1] = min(tab[-1], cap)
    return out


_SYM = {}


def class_tables():
    """dict of the symmetry tables: srep, sxor, fperm, cls2, symmul (the route to a class;
    the search takes cls2 as cbase + cls2_local, :func:`local_classes`), rep_sl, rep_fl,
    stab (class representatives), tconj (twist conjugation).
    Built in about a second and kept per process."""
    if not _SYM:
        cp, co, ep, eo = _sym_arrays()
        sinv = UD_SYM_INV.astype(np.int64)
        srep, sxor, oreps, ostab, oxor = _orbits(ep, eo, sinv)
        if len(oreps) != N_ORBITS:
            raise AssertionError(f"{len(oreps)} sorted-slice orbits, expected {N_ORBITS}")
        fperm = _flip_perm(ep, eo, sinv)
        cls2, rep_sl, rep_fl, stab, nc = _classes(oreps, ostab, oxor, fperm, sinv)
        if nc != N_CLASSES:
            raise AssertionError(f"{nc} flip x sorted-slice classes, expected {N_CLASSES}")
        cbase, cls2_local = local_classes(cls2)
        _SYM.update(srep=srep, sxor=sxor, fperm=fperm, cls2=cls2, symmul=_sym_mul(),
                    rep_sl=rep_sl, rep_fl=rep_fl, stab=stab, tconj=_twist_conj(cp, co, sinv),
                    cbase=cbase, cls2_local=cls2_local)
    return _SYM


def local_classes(cls2):
    """``(cbase, local)``: the classes of one sorted-slice orbit are numbered consecutively
    (:func:`_classes`), so ``cls2[k, f] = (cbase[k] + local[k, f] >> 4) << 4 | S`` with
    ``local`` under 2048 << 4: 16 bits instead of 32. The search's route then takes 3.2 MB
    instead of 6.5 MB, and more of it stays in the cache beside the table's probes."""
    cls = (cls2 >> 4).astype(np.int64)
    cbase = cls.min(axis=1)
    local = cls - cbase[:, None]
    if local.max() >= 1 << 12:
        raise AssertionError("a sorted-slice orbit spans more than 4096 classes")
    return cbase, ((local << 4) | (cls2 & 15)).astype(np.uint16)


def check_class_tables(step=1):
    """Number of (sorted slice, flip) pairs (every ``step``-th flip) that the class tables
    map wrongly, by explicit conjugation (must be 0)."""
    t = class_tables()
    _, _, ep, eo = _sym_arrays()
    return int(_check_classes(ep, eo, UD_SYM_INV.astype(np.int64), t["srep"], t["sxor"],
                              t["fperm"], t["cls2"], t["symmul"], t["rep_sl"], t["rep_fl"],
                              step))


def solved_index():
    """The huge table's index of the solved cube."""
    t = class_tables()
    c, S = _class_of(0, SSLICE_SOLVED, t["srep"], t["sxor"], t["fperm"], t["cls2"], t["symmul"])
    return int(c) * N_TWIST + int(t["tconj"][0, S])


def build(progress=None, log=None):
    """Depths of all 3,332,690,568 entries (uint8, 3.3 GB) and the depth histogram."""
    t = class_tables()
    bad = check_class_tables()
    if bad:
        raise AssertionError(f"class tables map {bad} (sorted slice, flip) pairs wrongly")
    mt = move_tables()
    args = (t["rep_sl"], t["rep_fl"], t["stab"], mt["flip"], mt["sslice"], mt["twist"],
            t["srep"], t["sxor"], t["fperm"], t["cls2"], t["symmul"], t["tconj"])
    tab = np.full(N_ENTRIES, UNSET, np.uint8)
    tab[solved_index()] = 0
    filled, frontier, d = 1, 1, 0
    parts = 32                      # calls per level, so the progress bar moves within one
    while True:
        unset = N_ENTRIES - filled
        # forward touches 18 neighbours per frontier entry, backward up to 18 per unset one
        forward = frontier < unset // 2
        new = 0
        for k in range(parts):
            new += int(_level(tab, d, k * N_CLASSES // parts, (k + 1) * N_CLASSES // parts,
                              *args, forward))
            if progress:
                progress.update(filled + new, f"depth {d + 1} ({k + 1}/{parts})")
        if new == 0:
            break
        filled += new
        frontier = new
        d += 1
        if log:
            log(f"depth {d}: {new} entries")
    hist = _histogram(tab)
    if hist[UNSET]:
        raise AssertionError(f"{hist[UNSET]} entries unreachable")
    return tab, [int(x) for x in hist[:d + 1]]


class HugeTables(ThreeAxisTables):
    """The packed sorted-slice phase-1 table plus the symmetry and move tables the search
    needs (the same interface as :class:`~.reid.ReidTables`)."""

    name = "huge"
    slice_move = "sslice"
    slice_solved = SSLICE_SOLVED
    slice_coord = staticmethod(sslice_coord)
    sorted_slice = True

    def __init__(self, table, status=None):
        self.table = table
        self.status = status or {}
        t = class_tables()
        self.tconj = t["tconj"]
        self.small = (t["srep"], t["sxor"], t["fperm"], t["cls2"], t["symmul"])
        self.route = (t["srep"], t["sxor"], t["fperm"], t["cls2_local"], t["symmul"],
                      t["cbase"], self.tconj)
        self.moves = move_tables()

    @classmethod
    def load(cls, directory=None, progress=True, max_depth=None, log=None, cached_only=False):
        """Load from the cache, building it if needed (about 100 s on two cores, 5 GB of
        memory at the peak; with ``cached_only`` a missing table raises LookupError).
        There is no truncated form: ``max_depth`` is refused."""
        if max_depth is not None:
            raise ValueError("the huge table has no truncated form; use heuristic 'phase1' "
                             "for truncated test tables")

        def make(show):
            bar = Progress("huge table (flip x sorted slice x twist / 16 syms)", N_ENTRIES,
                           enabled=bool(show))
            tab, _ = build(progress=bar, log=log)
            bar.update(N_ENTRIES, "packing")
            out = _saturate_pack4(tab, MAX_STORED)
            del tab
            bar.close()
            return out
        arr, st = load_or_build("huge_phase1", VERSION, {"entries": N_ENTRIES},
                                None if cached_only else make, directory, progress, log=log)
        return cls(arr, {"huge": st})

    def axis_h(self, cube, axis=0):
        """Sorted-slice phase-1 distance of ``cube`` along axis 0 (UD), 1 or 2."""
        c = axis_cube(cube, axis)
        t = class_tables()
        k, S = _class_of(flip_coord(c), sslice_coord(c), t["srep"], t["sxor"], t["fperm"],
                         t["cls2"], t["symmul"])
        return int(_nib(self.table, int(k) * N_TWIST + int(self.tconj[twist_coord(c), S])))
