"""pyfw.coll: every algorithm against native MPI, the tuner's table, the dispatch's choice.

MPI tests run every algorithm on sub-communicators of 1..size ranks (so 1-2 ranks at
``-n 2`` and 1-4 at ``-n 4``; ``test_coll_launch.py`` covers 3 and 5), random bytes viewed as
several dtypes, block sizes from 0 B to 1 MiB and non-zero roots, and compare bytes with
native MPI on the same data. Verdicts are gathered over all ranks; an unexpected exception
inside a collective aborts the job (the other ranks would wait for it for ever).
"""
import json
import os
import sys
import traceback

import numpy as np
import pytest
from mpi4py import MPI

from pyfw import coll
from pyfw.coll import tuner
from pyfw.coll.algorithms import reduce as red
from pyfw.comm import Comm

DTYPES = [np.uint8, np.int32, np.float64, np.complex128,
          np.dtype([("a", np.int16), ("b", np.float32)])]
#: per-rank block sizes in bytes (rounded down to whole items of the dtype)
SIZES = [0, 1, 7, 64, 1000, 4099, 65536, 1 << 20]


def world():
    return MPI.COMM_WORLD


def abort_on_error(fn):
    """Run ``fn``; on an exception print it and abort the job (a rank left alone in a
    collective would hang)."""
    try:
        return fn()
    except Exception:
        text = traceback.format_exc()
        w = MPI.COMM_WORLD
        reports = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               ".test-reports")
        os.makedirs(reports, exist_ok=True)  # ./run-tests prints these logs on failure
        with open(os.path.join(reports, f"mpi{w.Get_size()}-rank{w.Get_rank()}.log"), "a") as f:
            f.write(f"\ntest_coll aborting the job:\n{text}")
        sys.stderr.write(text)
        sys.stderr.flush()
        w.Abort(1)


def verdict(failures):
    """Gather every rank's failures and assert none (same verdict on every rank)."""
    everything = [f for fs in world().allgather(failures) for f in fs]
    assert not everything, "\n".join(everything[:20])


def subcomms():
    """Communicators of 1..size ranks (made collectively; ranks outside get COMM_NULL)."""
    w = world()
    out = []
    for k in range(1, w.Get_size() + 1):
        out.append((k, w.Split(0 if w.Get_rank() < k else MPI.UNDEFINED, w.Get_rank())))
    return out


def rand(n_items, dtype, seed):
    dtype = np.dtype(dtype)
    raw = np.random.default_rng(seed).integers(0, 256, n_items * dtype.itemsize, np.uint8)
    return raw.view(dtype)


def u8(a):
    """Byte view for native MPI calls (mpi4py cannot map structured dtypes)."""
    return a.view(np.uint8) if a.dtype.fields else a


def same(a, b):
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


CASE_DTYPES = [np.uint8, np.uint8, np.uint8, DTYPES[3], DTYPES[4], np.uint8, np.int32,
               np.float64]


def cases():
    """(block bytes, dtype) pairs: every size of SIZES, with the dtypes spread over them."""
    return list(zip(SIZES, CASE_DTYPES))


def check_family(coll_name, body):
    """Run ``body(comm, k, name, nbytes, dtype, seed)`` -> list of failure strings for every
    sub-communicator, algorithm and case."""
    failures = []
    for k, c in subcomms():
        if c == MPI.COMM_NULL:
            continue
        for name in coll.ALGORITHMS[coll_name]:
            for i, (nb, dt) in enumerate(cases()):
                got = abort_on_error(lambda: body(c, k, name, nb, dt, 1000 * k + i))
                failures += got or []
        coll.plan(c).free()
        c.Free()
    verdict(failures)


# ------------------------------------------------------------------ algorithms vs native
@pytest.mark.mpi(min_size=2)
def test_allgather_algorithms_match_native():
    def body(c, k, name, nb, dt, seed):
        r = c.Get_rank()
        n = nb // np.dtype(dt).itemsize
        send = rand(n, dt, seed + r)
        want = np.empty(k * n, dt)
        c.Allgather(u8(send), u8(want))
        got = np.zeros(k * n, dt)
        cv = u8 if name == "native" else np.asarray
        coll.allgather(c, cv(send), cv(got), algorithm=name)
        ok = same(got, want)
        # in place: own block already in the receive buffer
        got2 = np.zeros(k * n, dt)
        got2[r * n:(r + 1) * n] = send
        coll.allgather(c, MPI.IN_PLACE, cv(got2), algorithm=name)
        ok = ok and same(got2, want)
        return [] if ok else [f"allgather {name} p={k} {nb}B {np.dtype(dt)} rank {r}"]
    check_family("allgather", body)


@pytest.mark.mpi(min_size=2)
def test_gather_algorithms_match_native():
    def body(c, k, name, nb, dt, seed):
        r = c.Get_rank()
        root = (seed % k)  # non-zero roots for k > 1
        n = nb // np.dtype(dt).itemsize
        send = rand(n, dt, seed + r)
        want = np.empty(k * n, dt) if r == root else None
        c.Gather(u8(send), want if want is None else u8(want), root)
        got = np.zeros(k * n, dt) if r == root else None
        cv = u8 if name == "native" else np.asarray
        coll.gather(c, cv(send), got if got is None else cv(got), root=root, algorithm=name)
        if r == root and not same(got, want):
            return [f"gather {name} p={k} root={root} {nb}B {np.dtype(dt)}"]
        return []
    check_family("gather", body)


@pytest.mark.mpi(min_size=2)
def test_alltoall_algorithms_match_native():
    def body(c, k, name, nb, dt, seed):
        r = c.Get_rank()
        n = min(nb, 1 << 18) // np.dtype(dt).itemsize
        send = rand(k * n, dt, seed + r)
        want = np.empty(k * n, dt)
        c.Alltoall(u8(send), u8(want))
        got = np.zeros(k * n, dt)
        cv = u8 if name == "native" else np.asarray
        coll.alltoall(c, cv(send), cv(got), algorithm=name)
        got2 = send.copy()
        coll.alltoall(c, MPI.IN_PLACE, cv(got2), algorithm=name)
        if not (same(got, want) and same(got2, want)):
            return [f"alltoall {name} p={k} {nb}B {np.dtype(dt)} rank {r}"]
        return []
    check_family("alltoall", body)


@pytest.mark.mpi(min_size=2)
def test_bcast_algorithms_match_native():
    def body(c, k, name, nb, dt, seed):
        r = c.Get_rank()
        root = (seed + 1) % k
        n = nb // np.dtype(dt).itemsize + (seed % 3)  # sizes not divisible by p too
        data = rand(n, dt, seed)
        got = data.copy() if r == root else np.zeros(n, dt)
        coll.bcast(c, u8(got) if name == "native" else got, root=root, algorithm=name)
        return [] if same(got, data) else [f"bcast {name} p={k} root={root} {n} items "
                                           f"{np.dtype(dt)} rank {r}"]
    check_family("bcast", body)


REDUCE_CASES = [(np.int64, MPI.SUM), (np.int32, MPI.MAX), (np.uint8, MPI.BXOR),
                (np.float64, MPI.SUM), (np.int16, MPI.LOR), (np.float32, MPI.MIN)]


def _red_data(n, dt, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dt).kind == "f":
        return rng.standard_normal(n).astype(dt)
    return rng.integers(0, 100, n).astype(dt)


@pytest.mark.mpi(min_size=2)
def test_allreduce_and_reduce_match_native():
    failures = []
    for k, c in subcomms():
        if c == MPI.COMM_NULL:
            continue
        r = c.Get_rank()
        for coll_name in ("allreduce", "reduce"):
            for name in coll.ALGORITHMS[coll_name]:
                for i, (dt, op) in enumerate(REDUCE_CASES):
                    n = [0, 1, 5, 1000, 40000, 3][i]
                    root = i % k
                    send = _red_data(n, dt, 77 * i + r)
                    want = np.empty(n, dt)
                    got = np.zeros(n, dt)

                    def run():
                        if coll_name == "allreduce":
                            c.Allreduce(send, want, op)
                            coll.allreduce(c, send, got, op, algorithm=name)
                        else:
                            c.Reduce(send, want, op, root)
                            coll.reduce(c, send, got, op, root, algorithm=name)
                        return (coll_name == "reduce" and r != root) or (
                            np.allclose(got, want) if np.dtype(dt).kind == "f"
                            else same(got, want))
                    if not abort_on_error(run):
                        failures.append(f"{coll_name} {name} p={k} {dt.__name__} {op} r{r}")
                # every rank holds the same bits after allreduce
                if coll_name == "allreduce":
                    x = _red_data(999, np.float64, r)
                    y = np.empty_like(x)
                    abort_on_error(lambda: coll.allreduce(c, x, y, MPI.SUM, algorithm=name))
                    first = c.bcast(y if r == 0 else None, root=0)
                    if not same(first, y):
                        failures.append(f"allreduce {name} p={k}: ranks disagree")
        coll.plan(c).free()
        c.Free()
    verdict(failures)


def test_reduce_rejects_user_ops():
    op = MPI.Op.Create(lambda a, b, t: None, commute=True)
    try:
        with pytest.raises(TypeError, match="predefined"):
            red.allreduce_recursive_doubling(MPI.COMM_SELF, np.ones(3), np.ones(3), op)
    finally:
        op.Free()


# ------------------------------------------------------------------ SMP all-gather
@pytest.mark.mpi(min_size=2)
def test_smp_allgather_emulated_nodes_and_view():
    """Leader exchange over emulated nodes (rank i on node i mod k: non-contiguous blocks),
    both leader algorithms, and the zero-copy read-only view."""
    w = world()
    p, r = w.Get_size(), w.Get_rank()
    failures = []
    for nodes in sorted({1, 2, p}):
        for leader in ("direct", "bruck"):
            s = abort_on_error(lambda: coll.SmpAllgather(w, nodes=nodes, leader=leader))
            for i, (nb, dt) in enumerate(cases()):
                n = nb // np.dtype(dt).itemsize
                send = rand(n, dt, 31 * i + r)
                want = np.empty(p * n, dt)
                w.Allgather(u8(send), u8(want))
                got = np.zeros(p * n, dt)
                abort_on_error(lambda: s(send, got))
                v = abort_on_error(lambda: s.view(send.reshape(1, n)))
                ok = same(got, want) and v.shape == (p, 1, n) and same(v.reshape(-1), want)
                ok = ok and (n == 0 or not v.flags.writeable)
                if not ok:
                    failures.append(f"smp nodes={nodes} leader={leader} {nb}B {np.dtype(dt)}")
            # a view survives the next call (two halves alternate), also one that grows
            # the window (the old window is freed a call later: reading a freed one crashed)
            a = abort_on_error(lambda: s.view(np.full(4, r, np.int64)))
            abort_on_error(lambda: s.view(np.full(4, r + 100, np.int64)))
            if not (a[:, 0] == np.arange(p)).all():
                failures.append(f"smp nodes={nodes}: view overwritten by the next call")
            a = abort_on_error(lambda: s.view(np.full(4, r + 200, np.int64)))
            big = abort_on_error(lambda: s.view(np.full(1 << 16, r + 300, np.int64)))
            if not ((a[:, 0] == np.arange(p) + 200).all() and (big[:, -1] == np.arange(p) + 300).all()):
                failures.append(f"smp nodes={nodes}: view lost when the window grew")
            s.free()
    verdict(failures)


@pytest.mark.mpi(min_size=2)
def test_allgather_view_through_pyfw_comm():
    c = Comm(world())
    p, r = c.size, c.rank
    v = abort_on_error(lambda: coll.allgather_view(c, np.array([r, -r], np.int32)))
    verdict([] if (v[:, 0] == np.arange(p)).all() and (v[:, 1] == -np.arange(p)).all()
            else [f"allgather_view rank {r}: {v.tolist()}"])


# ------------------------------------------------------------------ tuner and dispatch
def fake_table(desc, choices, sizes=(0, 16, 4096)):
    """A table whose medians make ``choices[coll][i]`` fastest at ``sizes[i]`` by 2x."""
    colls = {}
    for c, names in choices.items():
        algs = coll.ALGORITHMS[c]
        med = {a: [1.0 + j for j in range(len(sizes))] for a in algs}
        for i, a in enumerate(names):
            med[a][i] = 0.5 * med["native"][i] if a != "native" else med[a][i]
        colls[c] = {"sizes": list(sizes), "median": med,
                    "fit": {a: list(tuner.hockney_fit(sizes, med[a])) for a in algs}}
    return {"schema": tuner.SCHEMA, "library": tuner.library(), "layout": desc,
            "margin": 0.1, "collectives": colls}


def test_hockney_fit_recovers_line():
    n = np.array([0, 1e3, 1e4, 1e5, 1e6])
    a, b = tuner.hockney_fit(n, 2e-6 + n / 5e9)
    assert a == pytest.approx(2e-6, rel=1e-6) and b == pytest.approx(1 / 5e9, rel=1e-6)
    assert tuner.predict((a, b), 2e6) == pytest.approx(2e-6 + 2e6 / 5e9)


def test_unknown_fit_never_wins_a_predicted_bucket():
    # no usable time (NaN / non-positive): the fit is unknown (NaN), its prediction inf
    unknown = tuner.hockney_fit([1, 2, 3], [float("nan"), 0.0, -1.0])
    assert all(np.isnan(unknown)) and tuner.predict(unknown, 1e6) == float("inf")
    sizes = [0, 1 << 20]
    med = {"bruck": [5.0, 500.0], "native": [1.0, 100.0], "ring": [2.0, 50.0]}
    fits = {"bruck": list(unknown), "native": list(tuner.hockney_fit(sizes, med["native"])),
            "ring": list(tuner.hockney_fit(sizes, med["ring"]))}
    names = tuner.decide_entry({"sizes": sizes, "median": med, "fit": fits}, margin=0.1)
    assert names[(1 << 30).bit_length()] == "ring"  # a NaN would win min() by coming first


def test_decide_uses_measured_then_predicted_and_margin():
    sizes = [0, 1024, 1 << 20]
    med = {"native": [1.0, 2.0, 100.0], "ring": [2.0, 1.9, 50.0], "bruck": [0.5, 4.0, 200.0]}
    fits = {a: list(tuner.hockney_fit(sizes, t)) for a, t in med.items()}
    names = tuner.decide_entry({"sizes": sizes, "median": med, "fit": fits}, margin=0.1)
    assert names[0] == "bruck"              # measured: 2x faster
    assert names[(1024).bit_length()] == "native"   # ring only 5 % faster: under the margin
    assert names[(1 << 20).bit_length()] == "ring"  # measured 2x
    assert names[(1 << 30).bit_length()] == "ring"  # predicted by the Hockney fits
    assert len(names) == tuner.NBUCKETS
    # a median win whose slowest round does not beat native is noise: native
    worst = {"native": [1.0, 2.0, 100.0], "ring": [2.0, 1.9, 120.0], "bruck": [0.5, 4, 200]}
    names = tuner.decide_entry({"sizes": sizes, "median": med, "fit": fits, "max": worst},
                               margin=0.1)
    assert names[0] == "bruck" and names[(1 << 20).bit_length()] == "native"


def test_table_round_trip_and_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("PYFW_COLL_CACHE", str(tmp_path))
    desc = tuner.layout(MPI.COMM_SELF)
    t = fake_table(desc, {"allgather": ["bruck", "native", "ring"]})
    path = tuner.save_table(t)
    assert os.path.dirname(path) == str(tmp_path)
    back, why = tuner.load_table(MPI.COMM_SELF, desc)
    assert why == "" and back["collectives"] == json.loads(json.dumps(t["collectives"]))
    assert tuner.decisions(back) == tuner.decisions(t)
    t["library"] = "Some Other MPI 0.1"
    tuner.save_table(t)
    back, why = tuner.load_table(MPI.COMM_SELF, desc)
    assert back is None and "stale" in why
    os.remove(path)
    back, why = tuner.load_table(MPI.COMM_SELF, desc)
    assert back is None and "no tuned table" in why and "pyfw.coll.tune" in why


def test_missing_table_means_native_and_no_notice_on_one_process(tmp_path, monkeypatch,
                                                                 capsys):
    """One process has nothing to tune (native is the only candidate): no notice."""
    monkeypatch.setenv("PYFW_COLL_CACHE", str(tmp_path / "empty"))
    coll.dispatch._NOTIFIED.clear()
    c = MPI.COMM_SELF.Dup()
    try:
        p = coll.plan(c)
        # native everywhere, except that a 0-byte call is the "empty" no-op on every rank
        assert all(names[0] == "empty" and all(n == "native" for n in names[1:])
                   for names in p.choice.values())
        assert p.allgather[3] == c.Allgather or p.allgather[3].__self__ == c
        assert capsys.readouterr().err == ""
        p.free()
    finally:
        c.Free()


@pytest.mark.mpi(min_size=2)
def test_missing_table_means_native_with_one_notice_naming_pyfw_run(capsys):
    import shutil
    import tempfile
    w = world()
    old = os.environ.get("PYFW_COLL_CACHE")
    empty = tempfile.mkdtemp(prefix="pyfw-coll-empty-")  # per rank: no shared pytest dirs
    os.environ["PYFW_COLL_CACHE"] = empty
    coll.dispatch._NOTIFIED.clear()
    cs = [w.Dup(), w.Dup()]
    try:
        plans = [abort_on_error(lambda: coll.plan(c)) for c in cs]
        err = capsys.readouterr().err
        native = all(n == "native" for names in plans[0].choice.values() for n in names[1:])
        hint = f"pyfw-run -n {w.Get_size()} -- python -m pyfw.coll.tune"
        want = (err.count("\n") == 1 and hint in err and "using native MPI" in err
                if w.Get_rank() == 0 else err == "")
        for p in plans:
            p.free()
    finally:
        for c in cs:
            c.Free()
        if old is None:
            del os.environ["PYFW_COLL_CACHE"]
        else:
            os.environ["PYFW_COLL_CACHE"] = old
        shutil.rmtree(empty, ignore_errors=True)
    verdict([] if native and want else [f"rank {w.Get_rank()}: stderr {err!r}"])


@pytest.mark.mpi(min_size=2)
def test_dispatch_picks_what_the_table_says():
    w = world()
    c = w.Dup()
    try:
        desc = abort_on_error(lambda: tuner.layout(c))
        want = {"allgather": ["bruck", "native", "ring"], "gather": ["binomial", "linear",
                "native"], "alltoall": ["pairwise", "bruck", "native"],
                "bcast": ["scatter_allgather", "native", "binomial"]}
        sizes = (1, 16, 4096)
        p = abort_on_error(lambda: coll.plan(c, table=fake_table(desc, want, sizes)))
        failures = []
        for cname, names in want.items():
            if p.choice[cname][0] != "empty":
                failures.append(f"{cname} 0 B: {p.choice[cname][0]}")
            for s, name in zip(sizes, names):
                if p.choice[cname][s.bit_length()] != name:
                    failures.append(f"{cname} {s}B: {p.choice[cname][s.bit_length()]}")
        # the dispatch really calls the chosen function: replace them by recorders
        calls = []
        for bucket in range(len(p.allgather)):
            p.allgather[bucket] = (lambda b: lambda s, r: calls.append(b))(bucket)
        n = w.Get_size()
        s16, r16 = np.zeros(16, np.uint8), np.zeros(16 * n, np.uint8)
        coll.allgather(c, s16, r16)
        coll.allgather(c, s16, r16)                      # the cached hot path
        coll.allgather(Comm(c), np.zeros(3, np.uint8), np.zeros(3 * n, np.uint8))
        coll.allgather(c, np.zeros(4096, np.uint8), np.zeros(4096 * n, np.uint8))
        coll.allgather(c, s16, r16)
        if calls != [5, 5, 2, 13, 5]:
            failures.append(f"dispatch buckets {calls}")
        # bind(): the same decisions under mpi4py's names, with correct results
        p = abort_on_error(lambda: coll.plan(c, table=fake_table(desc, want, sizes)))
        b = coll.bind(c)
        for blk in (0, 16, 4096, 5000):
            send = np.full(blk, w.Get_rank() % 7, np.uint8)
            got = np.zeros(blk * n, np.uint8)
            abort_on_error(lambda: b.Allgather(send, got))
            if not (got.reshape(n, blk) == (np.arange(n) % 7)[:, None]).all():
                failures.append(f"bind: Allgather {blk} B wrong")
            abort_on_error(lambda: coll.allgather(c, send, got))   # function form, same
            if not (got.reshape(n, blk) == (np.arange(n) % 7)[:, None]).all():
                failures.append(f"allgather {blk} B wrong")
            buf = np.arange(blk, dtype=np.uint8) if w.Get_rank() == n - 1 else \
                np.zeros(blk, np.uint8)
            abort_on_error(lambda: b.Bcast(buf, n - 1))
            if not (buf == np.arange(blk, dtype=np.uint8)).all():
                failures.append(f"bind: Bcast {blk} B wrong")
            x = np.full(max(blk // 8, 1), w.Get_rank() + 1.0)
            y = np.empty_like(x)
            for op, want_v in ((MPI.SUM, n * (n + 1) / 2), (MPI.MAX, float(n))):
                abort_on_error(lambda: coll.allreduce(c, x, y, op))
                if not (y == want_v).all():
                    failures.append(f"allreduce {op} {blk} B wrong")
        p.free()
        verdict(failures)
    finally:
        c.Free()


@pytest.mark.mpi(min_size=2)
def test_tuner_measures_and_dispatch_follows(tmp_path_factory):
    """A tiny real tuning run: every candidate measured, table saved by rank 0, reloaded by
    a new plan whose choices equal the table's decisions; results stay correct."""
    w = world()
    d = w.bcast(str(tmp_path_factory.mktemp("coll")) if w.Get_rank() == 0 else None)
    os.environ["PYFW_COLL_CACHE"] = d
    c = w.Dup()
    try:
        t = abort_on_error(lambda: tuner.tune(c, ["allgather", "bcast"], sizes=[0, 64, 4096],
                                              rounds=1, budget=0.002))
        failures = []
        for cname in ("allgather", "bcast"):
            e = t["collectives"][cname]
            if set(e["median"]) != set(tuner.candidates(coll.plan(c), cname)):
                failures.append(f"{cname}: measured {sorted(e['median'])}")
            if not all(x > 0 for v in e["median"].values() for x in v):
                failures.append(f"{cname}: non-positive times")
        if w.Get_rank() == 0:
            tuner.save_table(t)
        w.Barrier()
        coll.plan(c).free()
        p = abort_on_error(lambda: coll.plan(c))
        dec = tuner.decisions(t)
        for cname in ("allgather", "bcast"):
            if p.choice[cname][1:] != dec[cname][1:] or p.choice[cname][0] != "empty":
                failures.append(f"{cname}: plan {p.choice[cname][:14]} != {dec[cname][:14]}")
        send = np.full(512, w.Get_rank(), np.uint8)
        out = np.empty(512 * w.Get_size(), np.uint8)
        abort_on_error(lambda: coll.allgather(c, send, out))
        if not (out.reshape(-1, 512) == np.arange(w.Get_size())[:, None]).all():
            failures.append("tuned allgather gave a wrong result")
        p.free()
        verdict(failures)
    finally:
        os.environ.pop("PYFW_COLL_CACHE", None)
        c.Free()


def _hot_path_round(c, b, dt, failures):
    """Four calls of every collective on the same buffers (resolve, build the specs, then
    the hot path twice), alternately through ``coll`` and the bound object, data changed
    in place between calls; each result against native MPI's."""
    n, r, m = c.Get_size(), c.Get_rank(), 6
    s, s2 = np.zeros(m, dt), np.zeros(m * n, dt)
    ag, ga, a2a = np.zeros(m * n, dt), np.zeros(m * n, dt), np.zeros(m * n, dt)
    bc, red_s, red_r, all_r = (np.zeros(m, dt) for _ in range(4))
    for it in range(4):
        base = rand(m * n, dt, 7 * it + 1)
        s[...] = base[r * m:(r + 1) * m]
        s2[...] = base
        face = coll if it % 2 == 0 else None
        if face is coll:
            coll.allgather(c, s, ag)
            coll.gather(c, s, ga if r == 1 else None, 1)
            coll.alltoall(c, s2, a2a)
            bc[...] = s if r == 0 else 0
            coll.bcast(c, bc, 0)
        else:
            b.Allgather(s, ag)
            b.Gather(s, ga if r == 1 else None, 1)
            b.Alltoall(s2, a2a)
            bc[...] = s if r == 0 else 0
            b.Bcast(bc, 0)
        want = np.empty(m * n, dt)
        c.Allgather(s, want)
        if not same(ag, want):
            failures.append(f"allgather {np.dtype(dt)} call {it}")
        if r == 1 and not same(ga, want):
            failures.append(f"gather {np.dtype(dt)} call {it}")
        c.Alltoall(s2, want)
        if not same(a2a, want):
            failures.append(f"alltoall {np.dtype(dt)} call {it}")
        ref = s.copy()
        c.Bcast(ref, 0)
        if not same(bc, ref):
            failures.append(f"bcast {np.dtype(dt)} call {it}")
        if np.dtype(dt) == np.bool_:
            continue  # MPI.SUM is not defined for C_BOOL
        red_s[...] = s
        coll.allreduce(c, red_s, all_r, MPI.SUM)
        coll.reduce(c, red_s, red_r if r == 0 else None, MPI.SUM, 0)
        want_r = np.empty(m, dt)
        c.Allreduce(red_s, want_r, MPI.SUM)
        if not same(all_r, want_r) or (r == 0 and not same(red_r, want_r)):
            failures.append(f"reduce/allreduce {np.dtype(dt)} call {it}")
    from pyfw.coll import dispatch
    if not (isinstance(dispatch._AG[4][0], MPI.buffer) and dispatch._AG[5][1] == m):
        failures.append(f"allgather hot path without its spec ({np.dtype(dt)})")


def _mixed_plan_binds_closures(c, failures):
    """A plan with a pyfw algorithm: that attribute is a closure, results still right."""
    r = c.Get_rank()
    desc = abort_on_error(lambda: tuner.layout(c))
    abort_on_error(lambda: coll.plan(c, table=fake_table(desc, {"bcast": [
        "native", "binomial", "native"]}, (0, 16, 4096))))
    b = coll.bind(c)
    if b.Bcast == c.Bcast or b.Allgather != c.Allgather:
        failures.append("bind: wrong attribute kinds on a mixed plan")
    for blk in (16, 16, 16, 4096, 4096):
        buf = np.arange(blk, dtype=np.uint8) if r == 0 else np.zeros(blk, np.uint8)
        abort_on_error(lambda: b.Bcast(buf, 0))
        if not (buf == np.arange(blk, dtype=np.uint8)).all():
            failures.append(f"bind (mixed plan): Bcast {blk} B wrong")


@pytest.mark.mpi(min_size=2)
def test_hot_path_specs_give_native_results_for_every_collective():
    """The same buffer objects called again and again take the cached hot path, which calls
    mpi4py with pre-built ``[MPI.buffer, count, datatype]`` specs (per-process counts for
    the multi-block buffers): every collective, several dtypes, data changed in place
    between calls, non-root ranks passing ``None``; results equal native MPI's. Also
    ``bind``: native bound methods where the plan is all native, closures otherwise, and
    odd item counts (not a multiple of p) raise as mpi4py does."""
    c = world().Dup()
    failures = []
    try:
        abort_on_error(lambda: coll.plan(c, table={}))  # native everywhere
        b = coll.bind(c)
        for name in ("Allgather", "Gather", "Alltoall", "Bcast", "Allreduce", "Reduce"):
            if getattr(b, name) != getattr(c, name):
                failures.append(f"bind: {name} is not the native method on an all-native plan")
        for dt in (np.uint8, np.int32, np.float64, np.complex128, np.bool_):
            _hot_path_round(c, b, dt, failures)
        # a receive buffer whose item count is not a multiple of p: mpi4py's own error
        odd = np.zeros(c.Get_size() * 2 + 1, np.int32)
        for _ in range(3):
            try:
                coll.allgather(c, np.zeros(2, np.int32), odd)
                failures.append("allgather into a non-multiple buffer did not raise")
            except ValueError:
                pass
        _mixed_plan_binds_closures(c, failures)
        coll.plan(c).free()
        verdict(failures)
    finally:
        c.Free()
