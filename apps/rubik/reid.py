"""The default heuristic: Kociemba's phase-1 distance, symmetry-reduced, on three axes.

For a position C, ``d_UD(C)`` is the number of moves needed to reach the subgroup
<U, D, R2, L2, F2, B2> (all edges oriented, corners untwisted, the four UD-slice edges in
the slice); it depends only on (flip, slice, twist) = 2048 x 495 x 2187 values. The 16
symmetries that keep the UD axis shrink flip x slice to 64,430 classes, so the table has
64,430 * 2,187 = 140,908,410 entries (70.5 MB at 4 bits), as in Reid's optimal solver.

The same table gives the distance to the RL and FB subgroups after conjugating C by the
URF-DBL rotation; the heuristic is the maximum of the three, plus one when all three are
equal and nonzero (de Bondt: the last move of a solution lies in one axis' subgroup, so
the position one move before solved is at distance 0, not 1, from that axis' subgroup).

The BFS runs on the quotient graph (entry = class representative with a twist). When a
representative has symmetries of its own, all the twist values those symmetries relate
are set together, or some would be reached late and overestimated.
"""
import numpy as np
from numba import njit

from .cache import Progress, load_or_build
from .derived import cached_arrays
from .coords import (N_FLIP, N_SLICE, N_TWIST, SLICE_SOLVED, _flip_rank, _flip_unrank,
                     _slice_rank, _slice_unrank, _twist_rank, _twist_unrank, flip_coord,
                     move_tables, slice_coord, twist_coord)
from .packing import UNSET, _nib, _pack4, bfs
from .symmetry import UD_SYM_INV, UD_SYMS, axis_cube

VERSION = 1
N_FLIPSLICE = N_FLIP * N_SLICE          # 1,013,760
N_CLASSES = 64430
N_ENTRIES = N_CLASSES * N_TWIST         # 140,908,410
NO_CLASS = 0xFFFFFFFF


def _sym_arrays():
    cp = np.array([s.cp for s in UD_SYMS], np.int64)
    co = np.array([s.co for s in UD_SYMS], np.int64)
    ep = np.array([s.ep for s in UD_SYMS], np.int64)
    eo = np.array([s.eo for s in UD_SYMS], np.int64)
    return cp, co, ep, eo


@njit(cache=True)
def _conj_edges(ep, eo, s, si, sep, seo, out_ep, out_eo):
    """Edges of sym[s] * C * sym[si]."""
    xep = np.empty(12, np.int64)
    xeo = np.empty(12, np.int64)
    for i in range(12):
        xep[i] = sep[s, ep[i]]
        xeo[i] = (seo[s, ep[i]] + eo[i]) & 1
    for i in range(12):
        j = sep[si, i]
        out_ep[i] = xep[j]
        out_eo[i] = (xeo[j] + seo[si, i]) & 1


@njit(cache=True, inline="always")
def _ori_mul(x, y):
    if x < 3 and y < 3:
        return (x + y) % 3
    if x < 3 <= y:
        o = x + y
        return o - 3 if o >= 6 else o
    if x >= 3 > y:
        o = x - y
        return o + 3 if o < 3 else o
    o = x - y
    return o + 3 if o < 0 else o


@njit(cache=True)
def _flipslice_classes(sep, seo, sinv):
    """cls[fs] = class << 4 | sym (conjugating by sym maps fs to its class representative),
    reps[class] = representative flipslice, stab[class] = bitmask of its own symmetries."""
    cls = np.full(N_FLIP * N_SLICE, NO_CLASS, np.uint32)
    reps = np.empty(N_FLIP * N_SLICE // 8, np.int32)
    stab = np.empty(N_FLIP * N_SLICE // 8, np.uint16)
    ep, eo, oep, oeo = _edge_scratch()
    nc = 0
    for fs in range(N_FLIP * N_SLICE):
        if cls[fs] != NO_CLASS:
            continue
        _slice_unrank(fs >> 11, ep)
        _flip_unrank(fs & 2047, eo)
        mask = 0
        for s in range(16):
            _conj_edges(ep, eo, s, sinv[s], sep, seo, oep, oeo)
            fs2 = (_slice_rank(oep) << 11) | _flip_rank(oeo)
            if cls[fs2] == NO_CLASS:
                cls[fs2] = (nc << 4) | sinv[s]
            if fs2 == fs:
                mask |= 1 << s
        reps[nc] = fs
        stab[nc] = mask
        nc += 1
    return cls, reps[:nc].copy(), stab[:nc].copy()


@njit(cache=True)
def _twist_conj(scp, sco, sinv):
    """tconj[t, s] = twist of sym[s] * C_t * sym[s]^-1."""
    out = np.empty((N_TWIST, 16), np.uint16)
    co = np.empty(8, np.int64)
    xcp = np.empty(8, np.int64)
    xco = np.empty(8, np.int64)
    yco = np.empty(8, np.int64)
    for t in range(N_TWIST):
        _twist_unrank(t, co)
        for s in range(16):
            si = sinv[s]
            for i in range(8):
                xcp[i] = scp[s, i]
                xco[i] = _ori_mul(sco[s, i], co[i])
            for i in range(8):
                j = scp[si, i]
                yco[i] = _ori_mul(xco[j], sco[si, i])
            out[t, s] = _twist_rank(yco)
    return out


@njit(cache=True)
def _mark_stab(tab, c, t, mask, tconj, d):
    n = 0
    if mask != 1:
        for s in range(1, 16):
            if mask & (1 << s):
                j = c * 2187 + tconj[t, s]
                if tab[j] == UNSET:
                    tab[j] = d
                    n += 1
    return n


@njit(cache=True)
def _reid_level(tab, d, reps, stab, cls, flipm, slicem, twm, tconj, forward):
    n = 0
    for idx in range(tab.size):
        v = tab[idx]
        if forward:
            if v != d:
                continue
        elif v != UNSET:
            continue
        c = idx // 2187
        t = idx - c * 2187
        fs = reps[c]
        fl = fs & 2047
        sl = fs >> 11
        for m in range(18):
            fs2 = (np.int64(slicem[sl, m]) << 11) | flipm[fl, m]
            w = cls[fs2]
            c2 = np.int64(w >> 4)
            t2 = np.int64(tconj[twm[t, m], w & 15])
            j = c2 * 2187 + t2
            if forward:
                if tab[j] == UNSET:
                    tab[j] = d + 1
                    n += 1 + _mark_stab(tab, c2, t2, stab[c2], tconj, d + 1)
            elif tab[j] == d:
                tab[idx] = d + 1
                n += 1 + _mark_stab(tab, c, t, stab[c], tconj, d + 1)
                break
    return n


@njit(cache=True)
def _edge_scratch():
    """Four int64 scratch arrays of 12 edges: permutation and orientation, in and out."""
    return (np.empty(12, np.int64), np.empty(12, np.int64), np.empty(12, np.int64),
            np.empty(12, np.int64))


@njit(cache=True)
def _slice_orbits(sep, seo, sinv):
    """Per slice position s: ``srep[s] = k << 4 | S1`` (conjugating by S1 takes s to the
    representative ``sreps[k]``) and ``sxor[s]``, the flip of that conjugate of the
    flip-0 cube. Returns (srep, sreps, sxor, number of orbits)."""
    ep, eo, oep, oeo = _edge_scratch()
    srep = np.full(N_SLICE, -1, np.int32)
    sreps = np.empty(N_SLICE, np.int64)
    sxor = np.zeros(N_SLICE, np.int32)
    nk = 0
    for sl in range(N_SLICE):
        _slice_unrank(sl, ep)
        best = N_SLICE
        bs = 0
        for s in range(16):
            _conj_edges(ep, eo * 0, s, sinv[s], sep, seo, oep, oeo)
            r = _slice_rank(oep)
            if r < best:
                best = r
                bs = s
        k = -1
        for q in range(nk):
            if sreps[q] == best:
                k = q
        if k < 0:
            k = nk
            sreps[nk] = best
            nk += 1
        srep[sl] = (k << 4) | bs
        for i in range(12):
            eo[i] = 0
        _conj_edges(ep, eo, bs, sinv[bs], sep, seo, oep, oeo)
        sxor[sl] = _flip_rank(oeo)
    return srep, sreps, sxor, nk


@njit(cache=True)
def _flip_conjugation(sep, seo, sinv):
    """``fperm[S, flip]``: the linear part of conjugation by S on the flip coordinate (a
    cube with the solved slice, minus its flip-0 image)."""
    ep, eo, oep, oeo = _edge_scratch()
    fperm = np.empty((16, N_FLIP), np.int32)
    _slice_unrank(SLICE_SOLVED, ep)
    for s in range(16):
        for i in range(12):
            eo[i] = 0
        _conj_edges(ep, eo, s, sinv[s], sep, seo, oep, oeo)
        base = _flip_rank(oeo)
        for f in range(N_FLIP):
            _flip_unrank(f, eo)
            _conj_edges(ep, eo, s, sinv[s], sep, seo, oep, oeo)
            fperm[s, f] = _flip_rank(oeo) ^ base
    return fperm


@njit(cache=True)
def _route_mismatches(sep, seo, sinv, cls, srep, sreps, sxor, fperm, cls2):
    """How many (slice, flip) pairs the two-level route sends elsewhere than ``cls``."""
    ep, eo, oep, oeo = _edge_scratch()
    bad = 0
    for sl in range(N_SLICE):
        _slice_unrank(sl, ep)
        w1 = srep[sl]
        s1 = w1 & 15
        for f in range(N_FLIP):
            _flip_unrank(f, eo)
            _conj_edges(ep, eo, s1, sinv[s1], sep, seo, oep, oeo)
            f1 = fperm[s1, f] ^ sxor[sl]
            if f1 != _flip_rank(oeo) or _slice_rank(oep) != sreps[w1 >> 4]:
                bad += 1
                continue
            w = cls2[w1 >> 4, f1]
            if (w >> 4) != (cls[(sl << 11) | f] >> 4):
                bad += 1
    return bad


@njit(cache=True)
def _small_class_tables(sep, seo, sinv, symmul, cls):
    """A cache-friendly route to ``cls`` (4 MB, a memory miss per lookup in the search).

    For a slice position s, ``srep[s] = k << 4 | S1``: conjugating by S1 takes s to the
    representative slice ``sreps[k]`` of its orbit. Conjugation acts on the flip
    coordinate affinely: flip(S1 C S1^-1) = fperm[S1, flip] ^ sxor[s]. Then
    ``cls2[k, flip'] = cls[sreps[k] << 11 | flip']`` = (class, S2), and the symmetry that
    takes C to its class representative is ``symmul[S2, S1]`` (S2 S1). Together ~0.4 MB.
    Returns (srep, sreps, sxor, fperm, cls2, mismatches) -- the last counts (s, flip)
    pairs where the affine decomposition or the class disagree with ``cls`` (must be 0)."""
    srep, sreps, sxor, nk = _slice_orbits(sep, seo, sinv)
    fperm = _flip_conjugation(sep, seo, sinv)
    cls2 = np.empty((nk, N_FLIP), np.uint32)
    for k in range(nk):
        for f in range(N_FLIP):
            cls2[k, f] = cls[(sreps[k] << 11) | f]
    bad = _route_mismatches(sep, seo, sinv, cls, srep, sreps, sxor, fperm, cls2)
    return srep, sreps[:nk].copy(), sxor, fperm, cls2, bad


def _sym_mul():
    out = np.empty((16, 16), np.int64)
    for a, x in enumerate(UD_SYMS):
        for b, y in enumerate(UD_SYMS):
            out[a, b] = next(i for i, z in enumerate(UD_SYMS) if z == x * y)
    return out


_SYM = {}


def _build_sym_tables():
    cp, co, ep, eo = _sym_arrays()
    sinv = UD_SYM_INV.astype(np.int64)
    cls, reps, stab = _flipslice_classes(ep, eo, sinv)
    if len(reps) != N_CLASSES:
        raise AssertionError(f"{len(reps)} flip-slice classes, expected {N_CLASSES}")
    return dict(cls=cls, reps=reps, stab=stab, tconj=_twist_conj(cp, co, sinv))


def _build_small_class_tables():
    cls = sym_tables()[0]
    _, _, ep, eo = _sym_arrays()
    symmul = _sym_mul()
    srep, sreps, sxor, fperm, cls2, bad = _small_class_tables(
        ep, eo, UD_SYM_INV.astype(np.int64), symmul, cls)
    if bad:
        raise AssertionError(f"two-level class lookup disagrees with cls on {bad} values")
    return dict(srep=srep, sxor=sxor, fperm=fperm, cls2=cls2, symmul=symmul)


def sym_tables():
    """(cls, reps, stab, tconj): the symmetry-reduction tables (~0.5 s to compute; kept per
    process, and on disk by :func:`.derived.cached_arrays`)."""
    if not _SYM:
        _SYM.update(cached_arrays("phase1-classes", _build_sym_tables))
    return _SYM["cls"], _SYM["reps"], _SYM["stab"], _SYM["tconj"]


def small_class_tables():
    """(srep, sxor, fperm, cls2, symmul): the two-level route to the flip-slice class
    that the search uses (see :func:`_small_class_tables`; checked against ``cls`` on all
    1,013,760 flip-slice values when built, ~1 s; kept on disk by
    :func:`.derived.cached_arrays`)."""
    if "cls2" not in _SYM:
        _SYM.update(cached_arrays("phase1-route", _build_small_class_tables))
    return _SYM["srep"], _SYM["sxor"], _SYM["fperm"], _SYM["cls2"], _SYM["symmul"]


def solved_index():
    """The phase-1 table's index of the solved cube."""
    cls, _, _, tconj = sym_tables()
    w = int(cls[(SLICE_SOLVED << 11) | 0])
    return (w >> 4) * N_TWIST + int(tconj[0, w & 15])


def build(max_depth=None, progress=None):
    """Unpacked phase-1 depths (uint8, 140,908,410 entries) and the depth histogram."""
    cls, reps, stab, tconj = sym_tables()
    t = move_tables()
    return bfs(N_ENTRIES, solved_index(), _reid_level,
               (reps, stab, cls, t["flip"], t["slice"], t["twist"], tconj), max_depth, progress)


@njit(cache=True, inline="always")
def _phase1_h(fl, sl, tw, cls, tconj, tab):
    w = cls[(np.int64(sl) << 11) | fl]
    idx = np.int64(w >> 4) * 2187 + tconj[tw, w & 15]
    return _nib(tab, idx)


class ThreeAxisTables:
    """A distance table looked up along the three axes (``axis_h``), combined as the
    search kernel combines them."""

    #: capabilities the search asks of a table (instead of its name): ``separation``, it
    #: also follows the corners' U/D separation and holds 2-bit codes (:mod:`.nx`);
    #: ``sorted_slice``, its slice coordinate is the sorted one (:mod:`.huge`)
    separation = False
    sorted_slice = False

    def axis_h(self, cube, axis=0):
        """The table's value of ``cube`` seen in axis frame ``axis`` (0: UD; 1, 2: the
        other two, by the URF-DBL rotation)."""
        raise NotImplementedError

    def parts(self, cube):
        """The table's values of ``cube`` along the three axes."""
        return tuple(self.axis_h(cube, a) for a in range(3))

    def h(self, cube, inverse=False):
        """The heuristic value the search uses for ``cube``: the largest axis value, plus
        one when all three are equal and nonzero (de Bondt); with ``inverse`` the larger of
        that and the same value of the inverse position (equally far from solved)."""
        p = self.parts(cube)
        h = max(p)
        h = h + 1 if p[0] == p[1] == p[2] and h > 0 else h
        if inverse:
            h = max(h, self.h(cube.inverse(), inverse=False))
        return h


class ReidTables(ThreeAxisTables):
    """The packed phase-1 table plus the symmetry and move tables the search needs."""

    name = "reid"
    slice_move = "slice"            # the slice coordinate's move table and solved value
    slice_solved = SLICE_SOLVED
    slice_coord = staticmethod(slice_coord)
    sorted_slice = False

    def __init__(self, table, status=None):
        self.table = table
        self.status = status or {}
        self.cls, self.reps, self.stab, self.tconj = sym_tables()
        self.small = small_class_tables()
        srep, sxor, fperm, cls2, symmul = self.small
        # the search's route to an index (cls2 holds whole class numbers: no base)
        self.route = (srep, sxor, fperm, cls2, symmul, np.zeros(cls2.shape[0], np.int64),
                      self.tconj)
        self.moves = move_tables()

    @classmethod
    def load(cls, directory=None, progress=True, max_depth=None, log=None, cached_only=False):
        """Load from the cache (building it if needed, ~15 s; with ``cached_only`` a
        missing table raises LookupError). ``max_depth`` gives a truncated table built in
        memory and never cached."""
        def make(show):
            bar = Progress("phase-1 table (flip x slice x twist / 16 syms)", N_ENTRIES,
                           enabled=bool(show))
            tab, _ = build(max_depth=max_depth, progress=bar)
            bar.close()
            return _pack4(tab)
        if max_depth is not None:
            return cls(make(progress), {"phase1": f"built in memory (max_depth={max_depth})"})
        arr, st = load_or_build("reid_phase1", VERSION, {"entries": N_ENTRIES},
                                None if cached_only else make,
                                directory, progress, log=log)
        return cls(arr, {"phase1": st})

    def axis_h(self, cube, axis=0):
        """Phase-1 distance of ``cube`` along axis 0 (UD), 1 or 2."""
        c = axis_cube(cube, axis)
        return int(_phase1_h(flip_coord(c), slice_coord(c), twist_coord(c), self.cls,
                             self.tconj, self.table))
