"""pyfw.coll decisions: noise-aware margins, Hockney regimes, the link cost model and the
re-ranking from the link monitor's forecasts (emulated links with known injected latency),
and the dispatch's cached hot path. No timing enters a verdict: the tables are synthetic and
the link model is priced from the probes' medians of injected delays (milliseconds)."""
import numpy as np
import pytest
from mpi4py import MPI

from mpi_util import agree
from pyfw import coll
from pyfw.coll import model, tuner
from pyfw.comm import Comm
from pyfw.monitor import LinkShaper, probe_pairs

US = 1e-6


def entry(sizes, med, rounds=None):
    e = {"sizes": sizes, "median": med,
         "fit": {a: list(tuner.hockney_fit(sizes, t)) for a, t in med.items()}}
    if rounds is not None:
        e["rounds"] = rounds
    return e


# ------------------------------------------------------------------ decisions
def test_noise_larger_than_margin_keeps_native():
    sizes = [1024, 4096]
    med = {"native": [10.0, 10.0], "ring": [8.0, 8.0]}
    steady = {"native": [[10, 10, 10], [10, 10, 10]], "ring": [[7.9, 8.0, 8.1], [8, 8, 8]]}
    noisy = {"native": [[10, 10, 10], [10, 10, 10]], "ring": [[5.0, 8.0, 9.9], [8, 8, 8]]}
    worse_once = {"native": [[10, 10, 10], [10, 10, 10]], "ring": [[7.0, 8.0, 10.5], [8, 8, 8]]}
    k = (1024).bit_length()
    assert tuner.decide_entry(entry(sizes, med, steady), 0.10)[k] == "ring"
    # 20 % faster by the median, but the paired ratios spread over 49 %: noise, native
    assert tuner.decide_entry(entry(sizes, med, noisy), 0.10)[k] == "native"
    # one round slower than native: native
    assert tuner.decide_entry(entry(sizes, med, worse_once), 0.10)[k] == "native"
    # a larger margin than the win: native
    assert tuner.decide_entry(entry(sizes, med, steady), 0.25)[k] == "native"


def test_one_to_one_confirmation_decides():
    sizes = [1024, 4096]
    med = {"native": [10.0, 10.0], "ring": [8.0, 8.0]}
    rounds = {"native": [[10, 10, 10], [10, 10, 10]], "ring": [[8, 8, 8], [8, 8, 8]]}
    e = entry(sizes, med, rounds)
    # the crowd's winner lost when measured alone against native at 1 KiB, won at 4 KiB
    e["confirm"] = [{"alg": "ring", "native": [7, 7, 7], "rounds": [8, 8, 8]},
                    {"alg": "ring", "native": [10, 10, 10], "rounds": [8, 8.1, 7.9]}]
    names = tuner.decide_entry(e, 0.10)
    assert names[(1024).bit_length()] == "native"
    assert names[(4096).bit_length()] == "ring"
    # no confirmation at a size: the screen found no win there, native
    e["confirm"] = [None, None]
    assert tuner.decide_entry(e, 0.10)[(4096).bit_length()] == "native"


def test_unmeasured_sizes_only_inside_a_measured_regime():
    sizes = [1, 4096, 1 << 20]
    # ring wins 2x at 4 KiB only; its Hockney fit alone would also claim 64 B and 256 KiB
    med = {"native": [1.0, 10.0, 100.0], "ring": [1.0, 5.0, 100.0]}
    names = tuner.decide_entry(entry(sizes, med), 0.10)
    assert names[(4096).bit_length()] == "ring"
    assert names[(64).bit_length()] == "native"
    assert names[(1 << 18).bit_length()] == "native"
    # a regime spanning measured 4 KiB and 1 MiB covers the buckets between them
    med = {"native": [1.0, 10.0, 100.0], "ring": [1.0, 5.0, 50.0]}
    names = tuner.decide_entry(entry(sizes, med), 0.10)
    assert all(names[k] == "ring" for k in range((4096).bit_length(), (1 << 20).bit_length()))


# ------------------------------------------------------------------ the link model
def test_schedules_use_the_links_the_algorithms_use():
    p = 4
    ring = model.schedule("allgather", "ring", p, 8)
    assert len(ring) == p - 1
    assert {(s, d) for st in ring for s, d, _ in st} == {(r, (r + 1) % p) for r in range(p)}
    rd = model.schedule("allgather", "recursive_doubling", p, 8)
    assert len(rd) == 2 and {(0, 2), (2, 0)} <= {(s, d) for st in rd for s, d, _ in st}
    # every algorithm moves at least the (p - 1) blocks each rank needs
    for alg in ("ring", "recursive_doubling", "bruck", "bruck_k2", "direct", "direct_k2"):
        for q in (2, 3, 5):
            steps = model.schedule("allgather", alg, q, 10)
            got = sum(n for st in steps for s, d, n in st)
            assert got >= q * (q - 1) * 10, (alg, q)
    assert model.schedule("allgather", "unknown", p, 8) is None


def test_cost_matches_the_textbook_formulas_on_uniform_links():
    p, b, a, bw = 8, 1000, 2e-6, 1e9
    lat, band = model.uniform_links(p, a, bw)
    inv = np.where(np.isfinite(band), 1 / band, 0)
    ring = model.cost(model.schedule("allgather", "ring", p, b), lat, inv)
    assert ring == pytest.approx((p - 1) * (a + b / bw))  # (p-1)α + (p-1)/p·nβ
    rd = model.cost(model.schedule("allgather", "recursive_doubling", p, b), lat, inv)
    assert rd == pytest.approx(3 * a + (p - 1) * b / bw)  # lg p·α + (p-1)/p·nβ
    lin = model.cost(model.schedule("gather", "linear", p, b), lat, inv)
    assert lin == pytest.approx(a + (p - 1) * b / bw)     # the root receives p-1 blocks


def fake_links_table(p, times, sizes=(1024, 65536)):
    """A table in which every algorithm of ``times`` takes the given median at each size,
    tuned on uniform 1 µs / 5 GB/s links."""
    med = {a: list(t) for a, t in times.items()}
    lat, bw = model.uniform_links(p, 1 * US, 5e9)
    return {"schema": tuner.SCHEMA, "library": tuner.library(), "margin": 0.1,
            "layout": {"size": p, "nodes": 1, "node_of": [0] * p},
            "links": {"latency": lat.tolist(), "bandwidth": np.where(np.isfinite(bw), bw,
                                                                      0).tolist()},
            "collectives": {"allgather": entry(list(sizes), med)}}


def test_injected_latency_moves_the_choice_serial():
    p = 4
    ag = ["native", "ring", "recursive_doubling", "bruck", "direct"]
    # ring measured 2x faster than the rest at 64 KiB (a bandwidth regime)
    t = fake_links_table(p, {a: [20 * US, (100 if a == "ring" else 200) * US] for a in ag})
    k = (65536).bit_length()
    assert tuner.decisions(t)["allgather"][k] == "ring"
    lat, bw = model.uniform_links(p, 1 * US, 5e9)
    assert tuner.decisions(t, links=(lat, bw))["allgather"][k] == "ring"  # unchanged links
    # +1 ms on every link: ring's p-1 = 3 steps now cost 3 ms, native's lg p = 2 steps 2 ms,
    # direct's single step (all transfers in flight) 1 ms
    slow = model.uniform_links(p, 1e-3, 5e9)
    assert tuner.decisions(t, links=slow)["allgather"][k] == "direct"
    assert tuner.decisions(t, links=model.uniform_links(p, 2e-4, 5e9))["allgather"][k] == \
        "direct"
    # all equal, then +1 ms on link 0-2 only: ring (neighbours only) avoids it, the others not
    t = fake_links_table(p, {a: [20 * US, 100 * US] for a in ag})
    assert tuner.decisions(t)["allgather"][k] == "native"
    lat, bw = model.uniform_links(p, 1 * US, 5e9)
    lat[0, 2] = lat[2, 0] = 1e-3
    assert tuner.decisions(t, links=(lat, bw))["allgather"][k] == "ring"


class FakeMonitor:
    """Stands for pyfw.monitor.OnlineMonitor: ``matrices()`` gives the forecasts."""

    def __init__(self, lat, bw):
        self.lat, self.bw = lat, bw

    def matrices(self):
        return self.lat, self.bw


def test_links_from_monitor_matrix_and_pair():
    lat, bw = model.uniform_links(3, 2e-6, 1e9)
    lat[0, 1] = np.nan  # not yet probed: the median of the others
    for src in (FakeMonitor(lat, bw), (lat, bw)):
        a, b = model.links_from(src, 3)
        assert a[0, 1] == pytest.approx(2e-6) and a[0, 0] == 0 and np.isinf(b[1, 1])
    with pytest.raises(ValueError):
        model.links_from((lat, bw), 4)


# ------------------------------------------------------------------ hot path (COMM_SELF)
def test_hot_path_follows_buffer_size_and_plan_changes():
    c = MPI.COMM_SELF.Dup()
    try:
        p = coll.plan(c, table={})
        calls = []
        for b in range(len(p.allgather)):
            p.allgather[b] = (lambda b: lambda s, r: calls.append(b))(b)
        s1, s2 = np.zeros(3, np.uint8), np.zeros(100, np.uint8)
        for s in (s1, s1, s2, s1, np.zeros(0, np.uint8)):
            coll.allgather(c, s, np.empty_like(s))
        assert calls == [2, 2, 7, 2, 0]
        # a new plan (re-tuned, use_links) drops the cached resolution
        coll.plan(c, table={})
        out = np.empty(3, np.uint8)
        coll.allgather(c, np.arange(3, dtype=np.uint8), out)
        assert calls == [2, 2, 7, 2, 0] and (out == np.arange(3)).all()
        assert coll.plan(c).choice["allgather"][0] == "empty"
        coll.plan(c).free()
    finally:
        c.Free()


# ------------------------------------------------------------------ emulated links (MPI)
def _one_slow_link_picks_ring(c, pc, ag, k, failures):
    """Only link 0-2 slowed: ring (neighbours only) is the algorithm that avoids it; 20 ms,
    so that probe noise on the other links (ms on a loaded, oversubscribed box, paid on
    each of ring's p-1 steps) cannot outweigh it. Returns the plan."""
    t = fake_links_table(c.Get_size(), {a: [20 * US, 100 * US] for a in ag})
    plan = coll.plan(c, table=t)
    pc.shaper = None
    LinkShaper.for_comm(pc, latency={(0, 2): 20e-3})
    m = probe_pairs(pc, sizes=(8,), reps=7, method="min", timeout=30)
    before = plan.choice["allgather"][k]
    got = plan.use_links(m)["allgather"][k]
    if before != "native" or got != "ring":
        failures.append(f"slow 0-2 link: {before} -> {got}")
    return plan


@pytest.mark.mpi(min_size=2)
def test_emulated_link_latency_changes_the_choice():
    """Links slowed by a known injected latency (pyfw.monitor.emulate.LinkShaper), probed by
    the link monitor; use_links() must move the choice away from the algorithm whose
    schedule pays that latency most."""
    w = MPI.COMM_WORLD
    p = w.Get_size()
    c = w.Dup()
    pc = Comm(c)
    try:
        ag = ["native", "ring", "recursive_doubling", "bruck", "direct"]
        k = (65536).bit_length()
        t = fake_links_table(p, {a: [20 * US, (100 if a == "ring" else 200) * US] for a in ag})
        plan = coll.plan(c, table=t)
        failures = []
        if plan.choice["allgather"][k] != "ring":
            failures.append(f"tuned choice {plan.choice['allgather'][k]}")
        # +5 ms on every link: ring's p-1 steps pay it p-1 times, native ceil(lg p) times.
        # Probed at one size: the shaper injects latency only, and a Hockney slope fitted
        # between two small sizes (8 B, 1 KiB) is scheduling noise on a loaded box (~0.1-1 ms
        # over 1 KiB, i.e. "1-10 MB/s"), which the model then charged for every 64 KiB block
        # and which decided the ranking by chance (the flaky failure at 5 ranks, load 4).
        LinkShaper.for_comm(pc, latency=5e-3)
        m = probe_pairs(pc, sizes=(8,), reps=7, method="min", timeout=30)
        off = ~np.eye(p, dtype=bool)
        if not (m.alpha[off] > 4e-3).all() or not np.isinf(m.bandwidth[off]).all():
            failures.append(f"probes missed the injected latency: {m.alpha}, {m.bandwidth}")
        got = plan.use_links(m)["allgather"][k]
        steps = len(model.schedule("allgather", got, p, 65536))
        # direct pays the largest probed latency once, every other algorithm at least two
        # steps of the smallest: while the probes agree within 1.5x (measured), direct is the
        # one right answer; beyond that, at least fewer latency-bound steps than ring
        spread_ok = np.nanmax(m.alpha[off]) < 1.5 * np.nanmin(m.alpha[off])
        if p > 2 and (got == "ring" or steps >= p - 1 or (spread_ok and got != "direct")):
            failures.append(f"+5 ms links: {got} ({steps} steps); probed latency (ms)\n"
                            f"{np.array2string(m.alpha * 1e3, precision=2)}")
        if p == 2 and got != "native":  # one step either way: no algorithm wins the margin
            failures.append(f"+5 ms links at p=2: {got}")
        if p >= 4:
            plan = _one_slow_link_picks_ring(c, pc, ag, k, failures)
        # the re-ranked plan still gives native's results
        send = np.full(4096, w.Get_rank(), np.uint8)
        out, ref = np.empty(4096 * p, np.uint8), np.empty(4096 * p, np.uint8)
        for b in (16, 4096):
            coll.allgather(c, send[:b], out[:b * p])
            c.Allgather(send[:b], ref[:b * p])
            if not (out[:b * p] == ref[:b * p]).all():
                failures.append(f"re-ranked allgather {b} B differs from native")
        plan.use_links(None)
        if plan.choice["allgather"][k] != tuner.decisions(plan.table)["allgather"][k]:
            failures.append("use_links(None) did not restore the tuned choice")
        agree(not failures, "; ".join(failures), w)
    finally:
        coll.plan(c).free()
        c.Free()


def test_native_choice_keeps_every_dtype_and_layout():
    """The native hot path passes pre-parsed [array, datatype] specs: results must equal the
    input for basic, complex, non-native byte order and structured dtypes (COMM_SELF)."""
    c = MPI.COMM_SELF.Dup()
    try:
        coll.plan(c, table={})
        dts = [np.float64, np.complex128, np.dtype(">i4"), np.bool_,
               np.dtype([("a", np.int16), ("b", np.float32)])]
        for dt in dts:
            x = np.frombuffer(np.random.default_rng(1).integers(0, 256, 48, np.uint8).tobytes(),
                              dtype=dt)
            for _ in range(2):  # resolve, then the cached hot path
                y = np.zeros_like(x)
                try:
                    coll.allgather(c, x, y)
                except (KeyError, ValueError, TypeError, BufferError):
                    continue  # mpi4py itself cannot map this dtype (native MPI chosen)
                assert y.tobytes() == x.tobytes(), dt
                b = x.copy()
                coll.bcast(c, b, 0)
                assert b.tobytes() == x.tobytes()
        x = np.arange(6.0)
        y = np.zeros(6)
        for _ in range(2):
            coll.allreduce(c, x, y, MPI.SUM)
            assert (y == x).all()
            coll.allreduce(c, MPI.IN_PLACE, y, MPI.MAX)
            assert (y == x).all()
        coll.plan(c).free()
    finally:
        c.Free()
