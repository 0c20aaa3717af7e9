"""apps.rubik coordinates, move tables, pattern databases (vs brute force) and the cache."""
import json
import os
import random

import numpy as np
import pytest

import rubik_korf as korf
import test_rubik_naive as naive
from apps.rubik import coords as C
from apps.rubik import huge, reid
from apps.rubik.packing import _pack4, unpack4
from apps.rubik.cache import load_or_build
from apps.rubik.cube import MOVE_CUBES, Cube
from apps.rubik.symmetry import UD_SYMS, axis_cube, conjugate

# Depth histograms of the full tables (independently computed; docs/research rubik.md 1.2)
CORNER_HIST = [1, 18, 243, 2874, 28000, 205416, 1168516, 5402628, 20776176, 45391616,
               15139616, 64736]
EDGE_A_HIST = [1, 18, 230, 2747, 30847, 308783, 2508618, 13189082, 23497569, 3039786, 239]
EDGE_B_HIST = [1, 15, 190, 2360, 27139, 281416, 2380459, 13065209, 23961831, 2859244, 56]


def test_coordinate_round_trips():
    a = np.empty(8, np.int64)
    for r in range(0, C.N_CP, 7):
        C._cp_unrank(r, a)
        assert sorted(a) == list(range(8)) and C._cp_rank(a) == r
    for r in range(C.N_TWIST):
        C._twist_unrank(r, a)
        assert a.sum() % 3 == 0 and C._twist_rank(a) == r
    e = np.empty(12, np.int64)
    for r in range(C.N_FLIP):
        C._flip_unrank(r, e)
        assert e.sum() % 2 == 0 and C._flip_rank(e) == r
    for r in range(C.N_SLICE):
        C._slice_unrank(r, e)
        assert sorted(e) == list(range(12)) and C._slice_rank(e) == r
    for r in range(C.N_SSLICE):
        C._sslice_unrank(r, e)
        assert sorted(e) == list(range(12)) and C._sslice_rank(e) == r
    p = np.empty(6, np.int64)
    for r in range(0, korf.N_E6, 97):                       # the Korf oracle's edges
        korf._e6_unrank(r, p)
        assert len(set(p.tolist())) == 6 and korf._e6_rank(p) == r
    assert C.cp_coord(Cube.solved()) == 0 and C.slice_coord(Cube.solved()) == C.SLICE_SOLVED
    assert C.sslice_coord(Cube.solved()) == C.SSLICE_SOLVED


def test_move_tables_agree_with_cubie_moves():
    t = C.move_tables()
    k = korf.move_tables()                                  # the Korf oracle's
    for seed in range(5):
        c = Cube.random(seed)
        for m in range(18):
            d = c * MOVE_CUBES[m]
            assert k["cp"][C.cp_coord(c), m] == C.cp_coord(d)
            assert t["twist"][C.twist_coord(c), m] == C.twist_coord(d)
            assert t["flip"][C.flip_coord(c), m] == C.flip_coord(d)
            assert t["slice"][C.slice_coord(c), m] == C.slice_coord(d)
            assert t["sslice"][C.sslice_coord(c), m] == C.sslice_coord(d)
            for edges in (korf.EDGES_A, korf.EDGES_B):
                r, f = korf.e6_coord(c, edges)
                r2, f2 = korf.e6_coord(d, edges)
                assert k["e6"][r, m] == r2 and f ^ k["e6x"][r, m] == f2


@pytest.fixture(scope="module")
def naive_ball():
    """Positions within 3 moves of solved, by exact distance, from the geometric simulator."""
    return [(Cube.from_facelets(naive.to_string(np.frombuffer(k, np.uint8))), d)
            for k, d in naive.ball(naive.SOLVED, 3).items()]


def _first_depths(ball, index):
    best = {}
    for c, d in ball:
        k = index(c)
        best[k] = min(best.get(k, 99), d)
    return best


def test_korf_tables_truncated_bfs_matches_brute_force_and_known_histograms(naive_ball):
    for build, hist, index in (
            (korf.build_corners, CORNER_HIST, lambda c: C.cp_coord(c) * 2187 + C.twist_coord(c)),
            (lambda **k: korf.build_edges("A", **k), EDGE_A_HIST,
             lambda c: (lambda rf: rf[0] * 64 + rf[1])(korf.e6_coord(c, korf.EDGES_A))),
            (lambda **k: korf.build_edges("B", **k), EDGE_B_HIST,
             lambda c: (lambda rf: rf[0] * 64 + rf[1])(korf.e6_coord(c, korf.EDGES_B)))):
        tab, h = build(max_depth=6)
        assert h == hist[:7]
        assert np.bincount(tab, minlength=8).tolist()[:7] == hist[:7]
        assert (tab == 7).sum() == tab.size - sum(hist[:7])   # the truncated rest
        first = _first_depths(naive_ball, index)
        for k, d in first.items():
            assert tab[k] == d
        assert np.bincount(list(first.values())).tolist() == hist[:4]
        packed = _pack4(tab)
        assert np.array_equal(unpack4(packed, tab.size), tab)


def test_flipslice_symmetry_classes():
    cls, reps, stab, tconj = reid.sym_tables()
    assert len(reps) == 64430                                # Reid, Kociemba
    assert (cls != reid.NO_CLASS).all()
    assert np.array_equal(cls[reps] >> 4, np.arange(len(reps)))
    assert (stab & 1).all()                                  # identity stabilises everything
    assert tconj[:, 0].tolist() == list(range(2187))


@pytest.fixture(scope="module")
def phase1_truncated():
    tab, hist = reid.build(max_depth=6)
    return tab, hist


def _raw_bfs(depth, slice_table="slice", n_slice=495, solved=C.SLICE_SOLVED):
    """Raw (flip, slice, twist) BFS with the move tables, no symmetry: {code: distance},
    code = (twist * n_slice + slice) * 2048 + flip."""
    t = C.move_tables()
    code = lambda f, s, w: (w * n_slice + s) * 2048 + f     # noqa: E731
    start = code(0, solved, 0)
    seen = {start: 0}
    front = np.array([start], np.int64)
    for d in range(1, depth + 1):
        f, rest = front % 2048, front // 2048
        s, w = rest % n_slice, rest // n_slice
        nxt = np.unique(np.concatenate([
            code(t["flip"][f, m].astype(np.int64), t[slice_table][s, m].astype(np.int64),
                 t["twist"][w, m].astype(np.int64)) for m in range(18)]))
        new = nxt[~np.isin(nxt, np.fromiter(seen.keys(), np.int64))]
        for k in new.tolist():
            seen[k] = d
        front = new
    return seen


def _reduced_lookup(tab, codes):
    cls, _, _, tconj = reid.sym_tables()
    f, rest = codes % 2048, codes // 2048
    s, w = rest % 495, rest // 495
    v = cls[(s << 11) | f]
    idx = (v >> 4).astype(np.int64) * 2187 + tconj[w, v & 15]
    return tab[idx]


def test_phase1_table_matches_a_raw_unreduced_bfs(phase1_truncated):
    tab, hist = phase1_truncated
    assert hist[:4] == [1, 1, 5, 44] and tab.max() == 7
    raw = _raw_bfs(5)
    codes = np.fromiter(raw.keys(), np.int64)
    dists = np.fromiter(raw.values(), np.int64)
    assert np.array_equal(_reduced_lookup(tab, codes), dists)
    # random raw states not within 5 moves have table value >= 6
    rng = np.random.default_rng(0)
    sample = rng.integers(0, 2048 * 495 * 2187, 20000)
    sample = sample[~np.isin(sample, codes)]
    assert (_reduced_lookup(tab, sample) >= 6).all()


def _two_level_lookup(tab, codes):
    """The search kernel's route to the class (slice orbit, conjugated flip, product of
    two symmetries), in numpy."""
    srep, sxor, fperm, cls2, symmul = reid.small_class_tables()
    _, _, _, tconj = reid.sym_tables()
    f, rest = codes % 2048, codes // 2048
    s, w = rest % 495, rest // 495
    w1 = srep[s].astype(np.int64)
    s1 = w1 & 15
    v = cls2[w1 >> 4, fperm[s1, f] ^ sxor[s]].astype(np.int64)
    return tab[(v >> 4) * 2187 + tconj[w, symmul[v & 15, s1]]]


def test_kernel_class_route_matches_the_raw_bfs(phase1_truncated):
    tab, _ = phase1_truncated
    raw = _raw_bfs(5)
    codes = np.fromiter(raw.keys(), np.int64)
    assert np.array_equal(_two_level_lookup(tab, codes), np.fromiter(raw.values(), np.int64))
    rng = np.random.default_rng(1)
    sample = rng.integers(0, 2048 * 495 * 2187, 200000)
    assert np.array_equal(_two_level_lookup(tab, sample), _reduced_lookup(tab, sample))
    srep, _, _, cls2, _ = reid.small_class_tables()
    assert cls2.nbytes < 1 << 20 and len(np.unique(srep >> 4)) == cls2.shape[0]


def _assert_symmetric_lookups(tables, c):
    """The axis-0 value is the same for the 16 UD-symmetric images of ``c``, and axis a of
    ``c`` is axis 0 of the cube rotated to axis a."""
    want = tables.axis_h(c, 0)
    for s in UD_SYMS:
        assert tables.axis_h(conjugate(c, s), 0) == want
    for a in (1, 2):
        assert tables.axis_h(c, a) == tables.axis_h(axis_cube(c, a), 0)


def test_phase1_lookup_is_invariant_under_the_16_symmetries(phase1_truncated):
    tab, _ = phase1_truncated
    tables = reid.ReidTables(_pack4(tab))
    rng = random.Random(5)
    for seed in range(6):
        _assert_symmetric_lookups(
            tables, Cube.from_moves([rng.randrange(18) for _ in range(rng.randrange(3, 8))]))


def test_cache_detects_missing_stale_and_corrupt_tables(tmp_path):
    calls = []

    def build(progress):
        calls.append(1)
        return np.arange(1000, dtype=np.int64).astype(np.uint8)

    d = str(tmp_path)
    with pytest.raises(LookupError):
        load_or_build("t", 1, {"n": 1000}, None, d)
    a, st = load_or_build("t", 1, {"n": 1000}, build, d, progress=False)
    assert st == "built (missing)" and isinstance(a, np.memmap) and len(calls) == 1
    b, st = load_or_build("t", 1, {"n": 1000}, build, d)
    assert st == "cached" and len(calls) == 1 and np.array_equal(a, b)
    _, st = load_or_build("t", 2, {"n": 1000}, build, d)
    assert st == "built (stale)" and len(calls) == 2
    with open(os.path.join(d, "t.bin"), "r+b") as f:
        f.seek(500)
        f.write(b"\xff")
    _, st = load_or_build("t", 2, {"n": 1000}, build, d)
    assert st == "built (corrupt (checksum))" and len(calls) == 3
    with open(os.path.join(d, "t.bin"), "ab") as f:
        f.write(b"x")
    _, st = load_or_build("t", 2, {"n": 1000}, build, d)
    assert st == "built (corrupt (size))"
    meta = json.load(open(os.path.join(d, "t.json")))
    assert meta["version"] == 2 and meta["nbytes"] == 1000 and len(meta["blake2b"]) == 40
    c, st = load_or_build("t", 2, {"n": 1000}, build, d)
    assert st == "cached" and np.array_equal(c, np.arange(1000).astype(np.uint8))


def test_cache_checks_a_file_in_full_once_per_version(tmp_path, monkeypatch):
    import time
    from apps.rubik import cache
    d = str(tmp_path)
    n = 1 << 20                                   # > the 64 sampled blocks of 4 KiB
    data = (np.arange(n) * 7 % 251).astype(np.uint8)
    load_or_build("v", 1, {}, lambda p: data, d)
    assert os.path.exists(os.path.join(d, "v.verified"))
    full = []
    real = cache.digest
    monkeypatch.setattr(cache, "digest", lambda buf: full.append(1) or real(buf))
    a, st = load_or_build("v", 1, {}, lambda p: data, d)
    assert st == "cached" and full == [] and np.array_equal(a, data)
    # a byte changed inside a sampled block: caught even if the file's times did not move
    with open(os.path.join(d, "v.bin"), "r+b") as f:
        f.write(b"\x00\x01")
    _, st = load_or_build("v", 1, {}, lambda p: data, d)
    assert st == "built (corrupt (checksum))"
    # a byte changed between sampled blocks: the file's identity changed, so checked in full
    time.sleep(0.05)
    full.clear()
    with open(os.path.join(d, "v.bin"), "r+b") as f:
        f.seek(n // 2 + 12345)
        f.write(b"\xfe")
    _, st = load_or_build("v", 1, {}, lambda p: data, d)
    assert st == "built (corrupt (checksum))" and full


def test_cache_says_when_it_waits_for_another_builder(tmp_path):
    """A process that finds the table being built by another waits for it, says so, and
    then maps the other's file instead of building again."""
    import fcntl
    import shutil
    import threading
    d, other = str(tmp_path / "cache"), str(tmp_path / "elsewhere")
    os.makedirs(d)
    said, out = [], {}
    load_or_build("w", 1, {}, lambda p: np.arange(100, dtype=np.uint8), other)
    with open(os.path.join(d, "w.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)                  # "another process" is building
        t = threading.Thread(target=lambda: out.update(r=load_or_build(
            "w", 1, {}, lambda p: np.zeros(100, np.uint8), d, log=said.append)))
        t.start()
        for _ in range(500):
            if said:
                break
            t.join(0.01)
        assert said == ["table w: missing; another process is building it, waiting"]
        for ext in (".bin", ".json"):                  # the other builder's files appear
            shutil.copy(os.path.join(other, "w" + ext), os.path.join(d, "w" + ext))
        fcntl.flock(lock, fcntl.LOCK_UN)
    t.join(10)
    arr, st = out["r"]
    assert st == "cached" and np.array_equal(arr, np.arange(100))


# ---------------------------------------------------------------- the huge (sorted-slice) table
def test_sorted_slice_symmetry_classes():
    t = huge.class_tables()      # asserts 788 orbits and 1,523,864 classes (Kociemba)
    assert t["cls2"].shape == (huge.N_ORBITS, 2048) and t["cls2"].nbytes < 8 << 20
    assert len(t["rep_sl"]) == huge.N_CLASSES and (t["stab"] & 1).all()
    # every 16th (sorted slice, flip) pair, by explicit conjugation
    assert huge.check_class_tables(step=16) == 0
    # the representatives are distinct and each is its own class with the identity
    codes = t["rep_sl"].astype(np.int64) * 2048 + t["rep_fl"]
    assert len(np.unique(codes)) == huge.N_CLASSES


def test_the_search_s_compact_class_route_gives_the_class_tables_index():
    from apps.rubik.phase1_kernel import _p1_index
    t = huge.class_tables()
    cbase, local = huge.local_classes(t["cls2"])
    assert local.dtype == np.uint16 and local.nbytes * 2 == t["cls2"].nbytes
    route = (t["srep"], t["sxor"], t["fperm"], local, t["symmul"], cbase, t["tconj"])
    rng = np.random.default_rng(4)
    for fl, sl, tw in zip(rng.integers(0, 2048, 3000), rng.integers(0, 11880, 3000),
                          rng.integers(0, 2187, 3000)):
        c, S = huge._class_of(fl, sl, t["srep"], t["sxor"], t["fperm"], t["cls2"],
                              t["symmul"])
        assert _p1_index(fl, sl, tw, route) == c * 2187 + int(t["tconj"][tw, S])


def _huge_lookup(table, codes):
    t = huge.class_tables()
    f, rest = codes % 2048, codes // 2048
    s, w = rest % 11880, rest // 11880
    w1 = t["srep"][s].astype(np.int64)
    s1 = w1 & 15
    v = t["cls2"][w1 >> 4, t["fperm"][s1, f] ^ t["sxor"][s]].astype(np.int64)
    idx = (v >> 4) * 2187 + t["tconj"][w, t["symmul"][v & 15, s1]]
    return unpack4(table[idx >> 1], idx.size * 2).reshape(-1, 2)[np.arange(idx.size), idx & 1]


def test_huge_table_matches_a_raw_unreduced_bfs():
    h = naive.heuristic("huge").tables          # skipped unless cached
    raw = _raw_bfs(5, "sslice", C.N_SSLICE, C.SSLICE_SOLVED)
    codes = np.fromiter(raw.keys(), np.int64)
    assert np.array_equal(_huge_lookup(h.table, codes), np.fromiter(raw.values(), np.int64))
    rng = np.random.default_rng(0)
    sample = rng.integers(0, 2048 * 11880 * 2187, 50000)
    sample = sample[~np.isin(sample, codes)]
    assert (_huge_lookup(h.table, sample) >= 6).all()
    # one move changes the distance by at most one (what the search's lazy lookups assume)
    t = C.move_tables()
    f, rest = sample % 2048, sample // 2048
    s, w = rest % 11880, rest // 11880
    v = _huge_lookup(h.table, sample).astype(np.int64)
    for m in range(18):
        nb = (t["twist"][w, m].astype(np.int64) * 11880 + t["sslice"][s, m]) * 2048 + t["flip"][f, m]
        assert (np.abs(_huge_lookup(h.table, nb).astype(np.int64) - v) <= 1).all()


def test_huge_lookup_is_invariant_under_the_16_symmetries_and_bounds_phase1():
    h = naive.heuristic("huge").tables          # skipped unless cached
    p1 = naive.heuristic("phase1").tables
    rng = random.Random(6)
    for seed in range(6):
        c = Cube.from_moves([rng.randrange(18) for _ in range(rng.randrange(3, 14))])
        _assert_symmetric_lookups(h, c)
        # the sorted-slice goal is a subgroup of the phase-1 goal: never closer
        for a in range(3):
            assert h.axis_h(c, a) >= p1.axis_h(c, a) or p1.axis_h(c, a) > naive.TRUNCATED_DEPTH


def test_first_run_picks_a_heuristic_that_fits_the_memory(tmp_path, monkeypatch):
    from apps.rubik.solver import choose_heuristic
    said = []
    monkeypatch.setenv("PYFW_RUBIK_MEM_AVAILABLE", str(2e9))        # a small laptop
    assert choose_heuristic(None, str(tmp_path), said.append) == "phase1"
    assert "2.0 GB are available" in said[-1] and "--heuristic nx" in said[-1]
    assert "'huge' needs ~5.2 GB" in said[-1] and "'nx' needs ~7.6 GB" in said[-1]
    assert choose_heuristic("huge", str(tmp_path), said.append) == "huge"   # overrides
    monkeypatch.setenv("PYFW_RUBIK_MEM_AVAILABLE", str(7e9))        # huge fits, nx does not
    assert choose_heuristic(None, str(tmp_path), said.append) == "huge"
    assert "first run" in said[-1] and "1.67 GB" in said[-1] and "5.2 GB" in said[-1]
    assert "'nx' needs ~7.6 GB" in said[-1] and "7.0 GB are available" in said[-1]
    monkeypatch.setenv("PYFW_RUBIK_MEM_AVAILABLE", str(16e9))
    assert choose_heuristic(None, str(tmp_path), said.append) == "nx"
    assert "first run" in said[-1] and "2.47 GB" in said[-1] and "7.6 GB" in said[-1]
    (tmp_path / "huge_phase1.bin").write_bytes(b"")                  # already built
    monkeypatch.setenv("PYFW_RUBIK_MEM_AVAILABLE", str(1e9))
    n = len(said)
    assert choose_heuristic(None, str(tmp_path), said.append) == "huge" and len(said) == n
    (tmp_path / "nx_phase1.bin").write_bytes(b"")                    # the strongest first
    assert choose_heuristic(None, str(tmp_path), said.append) == "nx" and len(said) == n


def test_a_private_table_copy_holds_the_same_bytes_in_its_own_memory():
    from apps.rubik.cache import private_copy
    src = np.arange(5 << 20, dtype=np.uint32).view(np.uint8)       # 20 MB, no two pages alike
    copy, advised = private_copy(src)
    assert np.array_equal(copy, src) and not np.shares_memory(copy, src)
    assert not copy.flags.writeable and isinstance(advised, bool)
    assert private_copy(src[:0])[0].size == 0


def test_table_memory_auto_takes_a_private_copy_only_where_one_per_process_fits(monkeypatch):
    from apps.rubik.solver import table_memory
    monkeypatch.setenv("PYFW_RUBIK_MEM_AVAILABLE", str(8e9))
    assert table_memory("auto", 1.67e9, processes=2)           # 3.3 of 8 GB
    assert not table_memory("auto", 1.67e9, processes=3)       # 5.0 of 8 GB: over half
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")      # mpiexec's count on this node
    assert table_memory("auto", 1.67e9)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
    assert not table_memory("auto", 1.67e9)
    assert table_memory("private", 1e12) and not table_memory("shared", 1)
    with pytest.raises(ValueError, match="table memory"):
        table_memory("hugetlbfs", 1)


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_memory_headroom_follows_a_batch_job_s_control_group(tmp_path):
    from apps.rubik.solver import cgroup_headroom
    # cgroup v2: the job's limit sits on an ancestor, the leaf is unlimited
    root = tmp_path / "v2"
    _write(root / "cgroup.controllers", "memory")
    _write(root / "job_7" / "memory.max", str(4 << 30))
    _write(root / "job_7" / "memory.current", str(1 << 30))
    _write(root / "job_7" / "step_0" / "memory.max", "max")
    _write(root / "job_7" / "step_0" / "memory.current", str(1 << 29))
    _write(tmp_path / "self2", "0::/job_7/step_0\n")
    assert cgroup_headroom(str(tmp_path / "self2"), str(root)) == 3 << 30
    # cgroup v1: memory controller, a limit on the leaf; "unlimited" is a huge number
    root = tmp_path / "v1"
    _write(root / "memory" / "slurm" / "memory.limit_in_bytes", str(9223372036854771712))
    _write(root / "memory" / "slurm" / "memory.usage_in_bytes", str(5 << 30))
    _write(root / "memory" / "slurm" / "job_9" / "memory.limit_in_bytes", str(8 << 30))
    _write(root / "memory" / "slurm" / "job_9" / "memory.usage_in_bytes", str(6 << 30))
    _write(tmp_path / "self1", "4:memory:/slurm/job_9\n1:cpu:/\n0::/\n")
    assert cgroup_headroom(str(tmp_path / "self1"), str(root)) == 2 << 30
    # no limit anywhere, or no cgroup file at all
    _write(tmp_path / "self0", "4:memory:/\n")
    assert cgroup_headroom(str(tmp_path / "self0"), str(root)) is None
    assert cgroup_headroom(str(tmp_path / "missing"), str(root)) is None


def test_table_progress_prints_lines_when_stderr_is_not_a_terminal():
    import io

    from apps.rubik.cache import Progress
    out = io.StringIO()
    bar = Progress("table", 100, stream=out)
    bar.next_line = 0.0                  # due now
    bar.update(40, "depth 3")
    bar.update(41)                       # not due again for EVERY seconds
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "40.0%" in lines[0] and "\r" not in out.getvalue()
    assert "100.0%" in lines[1] and "done" in lines[1]
