"""Slow, obvious reference code for the rubik tests (and tests of that reference).

A facelet-level simulator built from 3-D geometry (no cubie tables): each sticker is a
(position, normal) pair; a clockwise face turn rotates the stickers of that layer by -90
degrees about the outward normal. Meet-in-the-middle breadth-first search over it
certifies exact distances up to 2 * 4 = 8 moves.
"""
import numpy as np

FACES = "URFDLB"
NORMALS = {"U": (0, 1, 0), "R": (1, 0, 0), "F": (0, 0, 1),
           "D": (0, -1, 0), "L": (-1, 0, 0), "B": (0, 0, -1)}


def _sticker(face, r, c):
    """3-D position of sticker (row r, column c) of a face in the standard net."""
    a, b = c - 1, 1 - r
    if face == "U":
        return (c - 1, 1, r - 1)
    if face == "D":
        return (c - 1, -1, 1 - r)
    if face == "F":
        return (a, b, 1)
    if face == "B":
        return (1 - c, b, -1)
    if face == "R":
        return (1, b, 1 - c)
    return (-1, b, c - 1)  # L


STICKERS = [(_sticker(f, i // 3, i % 3), NORMALS[f]) for f in FACES for i in range(9)]
INDEX = {s: i for i, s in enumerate(STICKERS)}


def _rot(v, n):
    """Rotate v by -90 degrees about the unit axis n (clockwise seen from outside)."""
    cross = (n[1] * v[2] - n[2] * v[1], n[2] * v[0] - n[0] * v[2], n[0] * v[1] - n[1] * v[0])
    dot = sum(a * b for a, b in zip(n, v))
    return tuple(-cross[k] + n[k] * dot for k in range(3))


def _quarter_perm(face):
    n = NORMALS[face]
    perm = list(range(54))          # new[dest] = old[perm[dest]]
    for src, (p, q) in enumerate(STICKERS):
        if sum(a * b for a, b in zip(p, n)) == 1:
            dest = INDEX[(_rot(p, n), _rot(q, n))]
            perm[dest] = src
    return np.array(perm)


def _move_perms():
    out = []
    for f in FACES:
        q = _quarter_perm(f)
        p = np.arange(54)
        for _ in range(3):
            p = p[q]
            out.append(p.copy())
    return np.array(out)


PERMS = _move_perms()            # 18 x 54, move index 3*face + turns-1
SOLVED = np.repeat(np.arange(6, dtype=np.uint8), 9)


def apply(state, moves):
    s = np.array(state, np.uint8)
    for m in moves:
        s = s[PERMS[m]]
    return s


def to_string(state):
    return "".join(FACES[x] for x in state)


def _canonical(last, m):
    if last is None:
        return True
    f, lf = m // 3, last // 3
    return not (f == lf or (f % 3 == lf % 3 and f < lf))


def ball(state, depth):
    """{state bytes: distance} for all states within ``depth`` moves of ``state``."""
    seen = {bytes(state): 0}
    frontier = np.array([state], np.uint8)
    for d in range(1, depth + 1):
        nxt = np.concatenate([frontier[:, PERMS[m]] for m in range(18)])
        nxt = np.unique(nxt, axis=0)
        keep = []
        for row in nxt:
            k = bytes(row)
            if k not in seen:
                seen[k] = d
                keep.append(row)
        frontier = np.array(keep, np.uint8).reshape(-1, 54)
    return seen


_SOLVED_BALL = {}


def distance(state, max_half=4):
    """Exact distance of a facelet state if <= 2*max_half, else None (meet in the middle)."""
    if max_half not in _SOLVED_BALL:
        _SOLVED_BALL[max_half] = ball(SOLVED, max_half)
    a = _SOLVED_BALL[max_half]
    b = ball(np.asarray(state, np.uint8), max_half)
    best = None
    for k, d in b.items():
        if k in a:
            t = a[k] + d
            best = t if best is None or t < best else best
    return best


def canonical_sequences(depth):
    out = [[]]
    for _ in range(depth):
        out = [s + [m] for s in out for m in range(18) if _canonical(s[-1] if s else None, m)]
    return out


# ---------------------------------------------------------------- tests of the reference
def test_quarter_turns_have_order_four_and_faces_commute_with_opposites():
    for f in range(6):
        s = apply(SOLVED, [3 * f] * 4)
        assert np.array_equal(s, SOLVED)
        assert not np.array_equal(apply(SOLVED, [3 * f]), SOLVED)
    for f in range(3):
        a = apply(SOLVED, [3 * f, 3 * (f + 3)])
        b = apply(SOLVED, [3 * (f + 3), 3 * f])
        assert np.array_equal(a, b)


def test_solved_ball_sizes_match_the_known_distance_distribution():
    sizes = np.bincount(list(ball(SOLVED, 3).values()))
    assert sizes.tolist() == [1, 18, 243, 3240]  # cube20.org distances 0..3


# ---------------------------------------------------------------- shared fixtures helper
_HEUR = {}
TRUNCATED_DEPTH = 6
#: the default heuristic's table where it is not cached (CI): the real BFS over all 70
#: separations and 64,430 classes, stopped at this depth, packed with base depth - 2 (about
#: a minute of CPU and 7.5 GB at the peak, once per test process; see nx.build_truncated)
NX_TRUNCATED_DEPTH = 7


def heuristic(name, cached=False):
    """The full tables if they are cached, else tables truncated at TRUNCATED_DEPTH (built
    in memory: the full ones take ~10-15 s each and are not built by tests), or for the
    default heuristic nx at NX_TRUNCATED_DEPTH: the same code path (BFS, 2-bit packing,
    lookups, fallback, kernel) on a machine without the 2.47 GB table, so the default's
    tests never skip. ``cached``: the real table only (tests of its contents: skipped where
    it is not cached). The huge table has no truncated form: skipped where not cached.
    ``"korf"`` is the independent oracle of tests/rubik_korf.py, truncated alike."""
    key = (name, cached)
    if name == "korf" and key not in _HEUR:    # the test oracle (tests/rubik_korf.py)
        from rubik_korf import KorfHeuristic
        _HEUR[key] = KorfHeuristic(max_depth=TRUNCATED_DEPTH)
    if key not in _HEUR:
        from apps.rubik.solver import Heuristic
        try:
            _HEUR[key] = Heuristic(name, progress=False, cached_only=True)
        except LookupError:
            if name == "huge" or cached:    # minutes to build: only where cached
                import pytest
                pytest.skip(f"the {name} table is not cached "
                            f"(python -m apps.rubik --build-tables --heuristic {name})")
            depth = NX_TRUNCATED_DEPTH if name == "nx" else TRUNCATED_DEPTH
            _HEUR[key] = Heuristic(name, progress=False, max_depth=depth)
    return _HEUR[key]
