"""Cube symmetries: the 16 that keep the UD axis (D4h) and the URF-DBL 3-fold rotation.

A symmetry S acts on a position C by conjugation, ``S * C * S^-1``. Conjugation maps face
turns to face turns (checked where a table of conjugated moves is made), so it maps
distances to distances; the phase-1 heuristic (:mod:`.reid`) uses the 16 UD-preserving
symmetries to shrink its table and the 3-fold rotation to look the same table up along the
RL and FB axes.
"""
import numpy as np

from .cube import CORNER_NAMES, EDGE_NAMES, MOVE_CUBES, Cube

_C = {n: i for i, n in enumerate(CORNER_NAMES)}
_E = {n: i for i, n in enumerate(EDGE_NAMES)}


def _cube(cps, co, eps, eo):
    return Cube([_C[x] for x in cps.split()], co, [_E[x] for x in eps.split()], eo, check=False)


#: 120-degree turn of the whole cube about the URF-DBL diagonal
ROT_URF3 = _cube("URF DFR DLF UFL UBR DRB DBL ULB", (1, 2, 1, 2, 2, 1, 2, 1),
                 "UF FR DF FL UB BR DB BL UR DR DL UL", (1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1))
#: 180-degree turn about the F-B axis
ROT_F2 = _cube("DLF DFR DRB DBL UFL URF UBR ULB", (0,) * 8,
               "DL DF DR DB UL UF UR UB FL FR BR BL", (0,) * 12)
#: 90-degree turn about the U-D axis
ROT_U4 = _cube("UBR URF UFL ULB DRB DFR DLF DBL", (0,) * 8,
               "UB UR UF UL DB DR DF DL BR FR FL BL", (0,) * 8 + (1,) * 4)
#: reflection through the plane of the U, D, F, B centres
MIRR_LR2 = _cube("UFL URF UBR ULB DLF DFR DRB DBL", (3,) * 8,
                 "UL UF UR UB DL DF DR DB FL FR BR BL", (0,) * 12)


def _ud_symmetries():
    out = []
    c = Cube.solved()
    for _f2 in range(2):
        for _u4 in range(4):
            for _lr2 in range(2):
                out.append(c)
                c = c * MIRR_LR2
            c = c * ROT_U4
        c = c * ROT_F2
    return tuple(out)


#: the 16 symmetries that map the UD axis to itself (index 0 = identity)
UD_SYMS = _ud_symmetries()
N_UD_SYMS = 16


_MOVE_INDEX = {m.key(): j for j, m in enumerate(MOVE_CUBES)}


def index_of_move(c):
    """The index in ``MOVE_CUBES`` of the face turn ``c`` (a conjugated move: an error if it
    is none, which would mean wrong symmetry tables)."""
    j = _MOVE_INDEX.get(c.key())
    if j is None:
        raise AssertionError("a conjugated move is no face turn: symmetry tables are wrong")
    return j


def conjugate(c, s, s_inv=None):
    """``s * c * s^-1``."""
    return s * c * (s.inverse() if s_inv is None else s_inv)


def inverse_table(syms):
    """``out[i]``: the index of the inverse of ``syms[i]`` (checked: their product is the
    identity)."""
    index = {s.key(): j for j, s in enumerate(syms)}
    out = np.array([index[s.inverse().key()] for s in syms], np.int64)
    assert all((s * syms[j]).key() == Cube.solved().key() for s, j in zip(syms, out))
    return out


UD_SYM_INV = inverse_table(UD_SYMS)


def _ud_move_conj():
    t = np.empty((16, 18), np.int64)
    for i, s in enumerate(UD_SYMS):
        si = UD_SYMS[UD_SYM_INV[i]]
        for m in range(18):
            t[i, m] = index_of_move(s * MOVE_CUBES[m] * si)
    return t


def __getattr__(name):
    """``UD_MOVE_CONJ[s, m]``, the move ``s * m * s^-1``: made at first use (the solver
    does not use it; 576 products, 7 ms of every start-up otherwise)."""
    if name == "UD_MOVE_CONJ":
        globals()[name] = value = _ud_move_conj()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: the three axis frames: AXIS_SYMS[a] = ROT_URF3^a, AXIS_SYMS_INV[a] its inverse
AXIS_SYMS = (Cube.solved(), ROT_URF3, ROT_URF3 * ROT_URF3)
AXIS_SYMS_INV = (Cube.solved(), ROT_URF3 * ROT_URF3, ROT_URF3)
assert (ROT_URF3 * ROT_URF3 * ROT_URF3) == Cube.solved()


def _axis_move_conj():
    t = np.empty((3, 18), np.int64)
    for a in range(3):
        for m in range(18):
            t[a, m] = index_of_move(AXIS_SYMS[a] * MOVE_CUBES[m] * AXIS_SYMS_INV[a])
    return t


#: AXIS_MOVE_CONJ[a, m]: the move that m becomes in the frame of axis a
AXIS_MOVE_CONJ = _axis_move_conj()


def axis_cube(c, a):
    """The position ``c`` seen from axis ``a`` (0 = UD, 1, 2 = the two others)."""
    return AXIS_SYMS[a] * c * AXIS_SYMS_INV[a]
