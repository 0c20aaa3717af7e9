"""benchmarks/rubik_vcube.py hands the peer solver the same positions as ours, in Reid's
notation; checked against the notation's identity and vcube's own documented example."""
import importlib.util
import os

from apps.rubik import Cube

PATH = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "rubik_vcube.py")


def _bench():
    spec = importlib.util.spec_from_file_location("rubik_vcube", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_solved_cube_is_reids_identity():
    assert _bench().reid(Cube.solved().facelets()) == (
        "UF UR UB UL DF DR DB DL FR FL BR BL UFR URB UBL ULF DRF DFL DLB DBR")


def test_cube_within_a_cube_reads_as_vcubes_readme_writes_it():
    # vcube's README gives this pattern in Reid's notation; the moves are the pattern's
    # well-known 15-move generator
    cube = Cube.from_moves("F L F U' R U F2 L2 U' L' B D' B' L2 U")
    assert _bench().reid(cube.facelets()) == (
        "UF UR FL FD BR BU DB DL FR RD LU BL UFR FUL FLD FDR BUR BRD DLB BLU")


def test_seed_lists_take_ranges_and_single_seeds():
    assert _bench()._seeds("0-3,7,10-11") == [0, 1, 2, 3, 7, 10, 11]


def test_random_cubes_show_every_cubie_once():
    # each token is some cubie's stickers (in some order), and every cubie appears once
    reid = _bench().reid
    names = {frozenset(x) for x in (
        "UF UR UB UL DF DR DB DL FR FL BR BL UFR URB UBL ULF DRF DFL DLB DBR".split())}
    for seed in range(20):
        tokens = reid(Cube.random(seed).facelets()).split()
        assert len(tokens) == 20
        assert {frozenset(t) for t in tokens} == names, tokens
