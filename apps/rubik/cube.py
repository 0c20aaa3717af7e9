"""Cubie model of the 3x3x3 cube: moves, parsing, facelet strings, validation.

Conventions follow Kociemba's: corners URF UFL ULB UBR DFR DLF DBL DRB (0..7), edges
UR UF UL UB DR DF DL DB FR FL BL BR (0..11); a cube is ``cp, co, ep, eo`` where ``cp[i]`` is
the corner sitting at position ``i`` and ``co[i]`` its twist (0..2; 3..5 only for mirrored
symmetry cubes). Products are "apply b after a": ``(a*b).cp[i] = a.cp[b.cp[i]]``.
Moves are numbered ``3*face + (turns-1)`` with faces U R F D L B, so ``U=0, U2=1, U'=2,
R=3, ... B'=17``. Facelet strings list 54 stickers in the order U1..U9 R1..R9 F1..F9
D1..D9 L1..L9 B1..B9.
"""
import re

import numpy as np

FACES = "URFDLB"
CORNER_NAMES = ("URF", "UFL", "ULB", "UBR", "DFR", "DLF", "DBL", "DRB")
EDGE_NAMES = ("UR", "UF", "UL", "UB", "DR", "DF", "DL", "DB", "FR", "FL", "BL", "BR")
MOVE_NAMES = tuple(f + s for f in FACES for s in ("", "2", "'"))
N_MOVES = 18


def _f(name):
    """Facelet index of e.g. 'U9'."""
    return FACES.index(name[0]) * 9 + int(name[1]) - 1


CORNER_FACELETS = tuple(tuple(_f(x) for x in t) for t in (
    ("U9", "R1", "F3"), ("U7", "F1", "L3"), ("U1", "L1", "B3"), ("U3", "B1", "R3"),
    ("D3", "F9", "R7"), ("D1", "L9", "F7"), ("D7", "B9", "L7"), ("D9", "R9", "B7")))
EDGE_FACELETS = tuple(tuple(_f(x) for x in t) for t in (
    ("U6", "R2"), ("U8", "F2"), ("U4", "L2"), ("U2", "B2"), ("D6", "R8"), ("D2", "F8"),
    ("D4", "L8"), ("D8", "B8"), ("F6", "R4"), ("F4", "L6"), ("B6", "L4"), ("B4", "R6")))
CORNER_COLORS = tuple(tuple(FACES.index(c) for c in n) for n in (
    "URF", "UFL", "ULB", "UBR", "DFR", "DLF", "DBL", "DRB"))
EDGE_COLORS = tuple(tuple(FACES.index(c) for c in n) for n in EDGE_NAMES)

# The six clockwise quarter turns as cubie "replaced-by" tables.
_C = {n: i for i, n in enumerate(CORNER_NAMES)}
_E = {n: i for i, n in enumerate(EDGE_NAMES)}
_BASIC = {
    "U": ("UBR URF UFL ULB DFR DLF DBL DRB", (0,) * 8,
          "UB UR UF UL DR DF DL DB FR FL BL BR", (0,) * 12),
    "R": ("DFR UFL ULB URF DRB DLF DBL UBR", (2, 0, 0, 1, 1, 0, 0, 2),
          "FR UF UL UB BR DF DL DB DR FL BL UR", (0,) * 12),
    "F": ("UFL DLF ULB UBR URF DFR DBL DRB", (1, 2, 0, 0, 2, 1, 0, 0),
          "UR FL UL UB DR FR DL DB UF DF BL BR", (0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0)),
    "D": ("URF UFL ULB UBR DLF DBL DRB DFR", (0,) * 8,
          "UR UF UL UB DF DL DB DR FR FL BL BR", (0,) * 12),
    "L": ("URF ULB DBL UBR DFR UFL DLF DRB", (0, 1, 2, 0, 0, 2, 1, 0),
          "UR UF BL UB DR DF FL DB FR UL DL BR", (0,) * 12),
    "B": ("URF UFL UBR DRB DFR DLF ULB DBL", (0, 0, 1, 2, 0, 0, 2, 1),
          "UR UF UL BR DR DF DL BL FR FL UB DB", (0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1)),
}


class InvalidCubeError(ValueError):
    """A facelet string, move string or cubie array that is not a legal cube position."""


class Cube:
    """A cube position (or a symmetry, when ``co`` holds mirrored values 3..5).

    Build one with :meth:`solved`, :meth:`from_moves`, :meth:`from_facelets`,
    :meth:`random` or ``Cube(cp, co, ep, eo)`` (validated unless ``check=False``).
    """

    __slots__ = ("cp", "co", "ep", "eo")

    def __init__(self, cp, co, ep, eo, check=True):
        self.cp = np.array(cp, dtype=np.int8)
        self.co = np.array(co, dtype=np.int8)
        self.ep = np.array(ep, dtype=np.int8)
        self.eo = np.array(eo, dtype=np.int8)
        if check:
            self.validate()

    # -- construction ------------------------------------------------------------------
    @classmethod
    def solved(cls):
        """The solved cube."""
        return cls(range(8), [0] * 8, range(12), [0] * 12, check=False)

    @classmethod
    def from_moves(cls, moves):
        """The position reached from solved by a move string or a sequence of move indices."""
        return cls.solved().apply(moves)

    @classmethod
    def from_facelets(cls, facelets):
        """Parse a 54-sticker string (URFDLB face order, any six distinct colour letters:
        colours are named by the centre they match). Raises InvalidCubeError saying what
        is wrong."""
        return _from_facelets(facelets)

    @classmethod
    def random(cls, rng=None):
        """A uniformly random legal position (``rng``: seed or numpy Generator)."""
        rng = np.random.default_rng(rng)
        cp = rng.permutation(8)
        ep = rng.permutation(12)
        if _parity(cp) != _parity(ep):
            ep[[10, 11]] = ep[[11, 10]]
        co = rng.integers(0, 3, 8)
        co[7] = (-co[:7].sum()) % 3
        eo = rng.integers(0, 2, 12)
        eo[11] = eo[:11].sum() % 2
        return cls(cp, co, ep, eo, check=False)

    # -- algebra -----------------------------------------------------------------------
    def __mul__(self, b):
        """Product ``self * b``: apply ``b`` after ``self``."""
        a = self
        cp = a.cp[b.cp]
        x = a.co[b.cp].astype(np.int16)
        y = b.co.astype(np.int16)
        # Kociemba's rule, mirrored twists are 3..5: a mirrored x subtracts y; the product
        # is mirrored if exactly one factor is
        mx = x >= 3
        co = np.where(mx, x - y, x + y) % 3 + 3 * (mx != (y >= 3))
        ep = a.ep[b.ep]
        eo = (a.eo[b.ep] + b.eo) % 2
        return Cube(cp, co, ep, eo, check=False)

    def inverse(self):
        """The inverse position (``c * c.inverse()`` is solved)."""
        cp = np.argsort(self.cp)
        ep = np.argsort(self.ep)
        eo = self.eo[ep]
        co = np.empty(8, np.int8)
        for i in range(8):
            o = int(self.co[cp[i]])
            co[i] = (-o) % 3 if o < 3 else o  # a mirrored twist is its own inverse
        return Cube(cp, co, ep, eo, check=False)

    def apply(self, moves):
        """A new cube: ``moves`` (string or indices) applied to this one."""
        c = self
        for m in parse_moves(moves):
            c = c * MOVE_CUBES[m]
        return c

    def copy(self):
        """An independent copy of this cube."""
        return Cube(self.cp, self.co, self.ep, self.eo, check=False)

    def __eq__(self, other):
        return (isinstance(other, Cube) and np.array_equal(self.cp, other.cp)
                and np.array_equal(self.co, other.co) and np.array_equal(self.ep, other.ep)
                and np.array_equal(self.eo, other.eo))

    def __hash__(self):
        return hash(self.key())

    def key(self):
        """A hashable tuple of the 40 cubie values."""
        return tuple(self.cp.tolist() + self.co.tolist() + self.ep.tolist() + self.eo.tolist())

    @property
    def is_solved(self):
        """Whether every piece is in place and oriented."""
        return self == SOLVED

    def __repr__(self):
        return f"Cube.from_facelets({self.facelets()!r})"

    # -- output / checks ---------------------------------------------------------------
    def facelets(self):
        """The 54-sticker string of this position (URFDLB order)."""
        f = [0] * 54
        for i in range(6):
            f[9 * i + 4] = i
        for i in range(8):
            for n in range(3):
                f[CORNER_FACELETS[i][(n + int(self.co[i])) % 3]] = CORNER_COLORS[self.cp[i]][n]
        for i in range(12):
            for n in range(2):
                f[EDGE_FACELETS[i][(n + int(self.eo[i])) % 2]] = EDGE_COLORS[self.ep[i]][n]
        return "".join(FACES[x] for x in f)

    def validate(self):
        """Raise InvalidCubeError unless this is a reachable position."""
        if sorted(self.cp.tolist()) != list(range(8)):
            raise InvalidCubeError(f"corner permutation {self.cp.tolist()} is not a permutation of 0..7")
        if sorted(self.ep.tolist()) != list(range(12)):
            raise InvalidCubeError(f"edge permutation {self.ep.tolist()} is not a permutation of 0..11")
        if not all(0 <= x < 3 for x in self.co.tolist()):
            raise InvalidCubeError(f"corner twists {self.co.tolist()} must be 0, 1 or 2")
        if not all(0 <= x < 2 for x in self.eo.tolist()):
            raise InvalidCubeError(f"edge flips {self.eo.tolist()} must be 0 or 1")
        if int(self.co.sum()) % 3:
            raise InvalidCubeError(
                f"corner twist sum is {int(self.co.sum()) % 3} mod 3, not 0: a corner is twisted in place")
        if int(self.eo.sum()) % 2:
            raise InvalidCubeError("edge flip sum is odd: a single edge is flipped in place")
        if _parity(self.cp) != _parity(self.ep):
            raise InvalidCubeError(
                "corner and edge permutation parities differ: two pieces are swapped")
        return self


def _parity(p):
    p = list(p)
    s = 0
    for i in range(len(p)):
        for j in range(i + 1, len(p)):
            s += p[i] > p[j]
    return s % 2


def _basic(face):
    cps, co, eps, eo = _BASIC[face]
    return Cube([_C[x] for x in cps.split()], co, [_E[x] for x in eps.split()], eo, check=False)


def _make_moves():
    out = []
    for face in FACES:
        q = _basic(face)
        c = q
        for _ in range(3):
            out.append(c)
            c = c * q
    return tuple(out)


MOVE_CUBES = _make_moves()
SOLVED = Cube.solved()

_TOKEN = re.compile(r"\s*([URFDLB])\s*(2'|1|2|3|'|’|′|)")


def parse_moves(moves):
    """Move indices (0..17) from a Singmaster string like ``"R U2 F'"`` (spacing optional;
    ``R2'`` = R2, ``R1``/``R3`` = R/R' as in quarter-turn counts, typographic primes
    accepted) or from a sequence of indices.
    Raises InvalidCubeError at the first token it cannot read."""
    if isinstance(moves, str):
        out, pos, s = [], 0, moves.rstrip()
        while pos < len(s):
            m = _TOKEN.match(s, pos)
            if m is None:
                raise InvalidCubeError(
                    f"cannot read a move at position {pos} of {moves!r}: {s[pos:pos + 5]!r} "
                    f"(moves are U R F D L B, optionally followed by 2, ' or a turn count 1-3)")
            turns = {"": 1, "1": 1, "2": 2, "2'": 2, "3": 3, "'": 3, "’": 3, "′": 3}[m.group(2)]
            out.append(3 * FACES.index(m.group(1)) + turns - 1)
            pos = m.end()
        return out
    out = [int(x) for x in moves]
    bad = [x for x in out if not 0 <= x < N_MOVES]
    if bad:
        raise InvalidCubeError(f"move indices must be 0..17, got {bad}")
    return out


def format_moves(moves):
    """``"R U2 F'"`` from move indices."""
    return " ".join(MOVE_NAMES[m] for m in moves)


def invert_moves(moves):
    """The inverse sequence (as indices)."""
    return [3 * (m // 3) + 2 - m % 3 for m in reversed(parse_moves(moves))]


def _from_facelets(facelets):
    if not isinstance(facelets, str):
        raise InvalidCubeError("facelets must be a string of 54 letters")
    s = "".join(facelets.split())
    if len(s) != 54:
        raise InvalidCubeError(f"a facelet string has 54 stickers, got {len(s)}")
    centers = [s[9 * i + 4] for i in range(6)]
    if len(set(centers)) != 6:
        raise InvalidCubeError(f"the six centres must have six different colours, got {''.join(centers)}")
    colour = {c: i for i, c in enumerate(centers)}
    unknown = sorted(set(s) - set(colour))
    if unknown:
        raise InvalidCubeError(f"colour(s) {''.join(unknown)} match no centre (centres are {''.join(centers)})")
    f = [colour[c] for c in s]
    for i in range(6):
        n = f.count(i)
        if n != 9:
            raise InvalidCubeError(f"colour {centers[i]} (face {FACES[i]}) appears {n} times, not 9")
    cp, co, ep, eo = [0] * 8, [0] * 8, [0] * 12, [0] * 12
    for i, fl in enumerate(CORNER_FACELETS):
        cols = [f[x] for x in fl]
        ori = next((o for o in range(3) if cols[o] in (0, 3)), None)
        key = None if ori is None else (cols[(ori + 1) % 3], cols[(ori + 2) % 3])
        j = next((j for j in range(8) if key == CORNER_COLORS[j][1:] and cols[ori] == CORNER_COLORS[j][0]), None)
        if j is None:
            raise InvalidCubeError(
                f"the corner at {CORNER_NAMES[i]} shows {''.join(FACES[c] for c in cols)}, which is no corner piece")
        cp[i], co[i] = j, ori
    for i, fl in enumerate(EDGE_FACELETS):
        a, b = f[fl[0]], f[fl[1]]
        for j, (x, y) in enumerate(EDGE_COLORS):
            if (a, b) == (x, y):
                ep[i], eo[i] = j, 0
                break
            if (a, b) == (y, x):
                ep[i], eo[i] = j, 1
                break
        else:
            raise InvalidCubeError(f"the edge at {EDGE_NAMES[i]} shows {FACES[a]}{FACES[b]}, which is no edge piece")
    for kind, perm, names in (("corner", cp, CORNER_NAMES), ("edge", ep, EDGE_NAMES)):
        seen = set()
        for x in perm:
            if x in seen:
                raise InvalidCubeError(f"the {kind} {names[x]} appears twice")
            seen.add(x)
    return Cube(cp, co, ep, eo)
