"""Tests of pyfw.monitor: stats, schedule, classification, forecasts (serial); probes on
emulated links, deadlines, passive profile, on-line monitor (MPI); CLI (launch)."""
import math
import os
import sys
import time

import numpy as np
import pytest

from mpi_util import agree
from pyfw.monitor import (ForecasterBank, LinkForecast, LinkShaper, RankSpeedForecast,
                          Slowdown, classify, hockney_fit, netpipe_sizes, round_robin,
                          spin_work, summarize)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ============================================================================ serial
def test_summarize_study_method_drops_two_slowest():
    t = [8, 1, 7, 2, 6, 3, 5, 4]
    assert summarize(t) == pytest.approx(3.5)          # mean of 1..6
    assert summarize(t, "median") == pytest.approx(4.5)
    assert summarize(t, "min") == 1
    assert summarize([2.0, 9.0]) == 2.0                # keeps at least one value
    with pytest.raises(ValueError):
        summarize(t, "bogus")


def test_hockney_fit_recovers_known_model():
    sizes = [80, 320, 640, 16384, 65536]
    alpha, bw = 3e-3, 10e6
    t = [alpha + m / bw for m in sizes]
    fit = hockney_fit(sizes, t)
    assert fit.alpha == pytest.approx(alpha, rel=1e-6)
    assert fit.bandwidth == pytest.approx(bw, rel=1e-6)
    assert fit.time(1000) == pytest.approx(alpha + 1000 / bw)
    flat = hockney_fit(sizes, [1e-6] * 5)               # no slope: infinite bandwidth
    assert flat.beta == 0 and math.isinf(flat.bandwidth)


def test_hockney_fit_of_no_usable_time_is_unknown():
    # NaN (not inf): an unmeasured link stays unknown, and the forecasts skip non-finite values
    for sizes, t in (([], []), ([8, 64], [math.nan, -1.0])):
        fit = hockney_fit(sizes, t)
        assert math.isnan(fit.alpha) and math.isnan(fit.beta) and math.isnan(fit.time(100))


def test_hockney_fit_keeps_the_large_message_slope_of_a_shaped_link():
    # measured over a 100 Mbit tc tbf link (test bed): 1 KiB passes in the token bucket's
    # burst, 1 MiB is held to the rate; the bandwidth is the rate, not the small message's
    fit = hockney_fit([1024, 1 << 20], [1.6e-5, 8.45e-2])
    assert fit.alpha == 0.0
    assert abs(fit.bandwidth - 12.4e6) < 0.1e6


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_round_robin_covers_every_pair_once_in_disjoint_rounds(p):
    rounds = round_robin(p)
    assert len(rounds) == (p - 1 if p % 2 == 0 else p)
    seen = []
    for rnd in rounds:
        ranks = [r for pair in rnd for r in pair]
        assert len(ranks) == len(set(ranks))           # each rank at most once per round
        seen += rnd
    assert sorted(seen) == [(i, j) for i in range(p) for j in range(i + 1, p)]


def test_netpipe_sizes_perturbed_powers_of_two():
    s = netpipe_sizes(4096, perturb=3)
    assert s[0] == 1 and 4096 in s and 4093 in s and 4099 in s and 1024 in s
    assert s == sorted(set(s))


def _traffic(p, edges, w=10_000, noise=0):
    m = np.zeros((p, p))
    for i, j in edges:
        m[i, j] += w
        m[j, i] += w / 2
    if noise:  # small control messages everywhere, below the 5 % threshold
        m += noise * (1 - np.eye(p))
    return m


@pytest.mark.parametrize("p", [4, 6, 9])
def test_classify_synthetic_patterns(p):
    chain = [(i, i + 1) for i in range(p - 1)]
    ring = chain + [(p - 1, 0)]
    a2a = [(i, j) for i in range(p) for j in range(p) if i != j]
    star = [(0, j) for j in range(1, p)]
    for edges, want in ((chain, "chain"), (ring, "ring"), (a2a, "all-to-all"),
                        (star, "star")):
        for noise in (0, 100):
            got = classify(_traffic(p, edges, noise=noise))
            assert got["pattern"] == want, (p, want, noise, got)
    assert classify(np.zeros((p, p)))["pattern"] == "none"
    assert classify(_traffic(p, star))["hub"] == 0
    assert classify(_traffic(p, ring))["order"] == list(range(p))
    # a star whose hub is not rank 0, and an irregular graph
    assert classify(_traffic(p, [(2, j) for j in range(p) if j != 2]))["hub"] == 2
    assert classify(_traffic(p, chain + [(0, 2)]))["pattern"] == "other"


def test_classify_small_groups():
    assert classify(_traffic(2, [(0, 1)]))["pattern"] == "chain"
    assert classify(_traffic(3, [(0, 1), (0, 2)]))["pattern"] == "star"
    assert classify(_traffic(3, [(0, 1), (1, 2)]))["pattern"] == "chain"
    assert classify(_traffic(3, [(0, 1), (1, 2), (0, 2)]))["pattern"] == "ring"


def _feed(bank, xs):
    for x in xs:
        bank.update(x)
    return bank.predict()


def test_forecaster_picks_smoothing_on_stationary_noise():
    rng = np.random.default_rng(0)
    bank = ForecasterBank(window=30)
    f = _feed(bank, 5.0 + rng.normal(0, 1, 300))
    errs = bank.errors()
    assert f.method in ("mean", "mean20", "median31", "exp0.05")
    assert f.error < 0.8 * errs["last"]
    assert abs(f.value - 5.0) < 0.5


def test_forecaster_picks_last_value_on_random_walk():
    rng = np.random.default_rng(1)
    bank = ForecasterBank(window=30)
    f = _feed(bank, np.cumsum(rng.normal(0, 1, 300)))
    errs = bank.errors()
    assert f.method in ("last", "exp0.5")
    assert f.error < 0.5 * errs["mean"]
    assert f.value == pytest.approx(bank.last, abs=1.0)


def test_forecaster_follows_a_level_shift():
    rng = np.random.default_rng(2)
    series = np.r_[10 + rng.normal(0, 0.3, 100), 20 + rng.normal(0, 0.3, 40)]
    bank = ForecasterBank(window=10)
    f = _feed(bank, series)
    assert abs(f.value - 20) < 1.0                     # running mean would say ~12.9
    assert f.method != "mean"
    assert ForecasterBank().predict().method == "none"


def test_link_and_speed_forecasts():
    lf = LinkForecast()
    for k in range(20):
        lf.update(latency=2e-3 + 1e-5 * (k % 2), bandwidth=20e6)
    est = lf.predict()
    assert est.latency.value == pytest.approx(2e-3, rel=0.01)
    assert lf.time(20_000_000) == pytest.approx(1.002, rel=0.01)
    obs = LinkForecast()
    for _ in range(5):
        obs.observe(80, 1e-3)
        obs.observe(1_000_000, 1e-3 + 0.1)
    assert obs.predict().bandwidth.value == pytest.approx(1e7, rel=0.01)
    sp = RankSpeedForecast()
    for _ in range(5):
        sp.update(work=100, seconds=0.5)
    assert sp.predict().value == pytest.approx(200)
    with pytest.raises(TypeError):
        sp.update()


def test_link_shaper_ground_truth_and_delay():
    sh = LinkShaper(0, 3, latency={(0, 1): 2e-3}, bandwidth={(0, 1): 1e6, (1, 2): 5e5})
    assert sh.delay(1, 1000) == pytest.approx(2e-3 + 1e-3)
    assert sh.delay(2, 1000) == 0.0                    # link 0-2 is not shaped
    assert sh.truth(1, 0) == (2e-3, 1e6)               # symmetric by default
    assert sh.pingpong_truth(1, 2, 500) == pytest.approx(1e-3)
    with pytest.raises(ValueError):
        LinkShaper(0, 2, latency={(0, 5): 1.0})


def test_slowdown_and_spin_work_are_calibrated():
    t0 = time.perf_counter()
    spin_work(20_000, rate=1e6)                        # 20 ms of work
    base = time.perf_counter() - t0
    with Slowdown(3.0) as sd:
        spin_work(20_000, rate=1e6)
    assert base >= 0.02 and sd.padded >= 0.039
    with pytest.raises(ValueError):
        Slowdown(0.5)


def test_report_renders_probe_and_profile(tmp_path):
    from pyfw.monitor.probes import LinkMatrix
    from pyfw.monitor.report import render
    raw = np.full((2, 2, 3, 4), np.nan)
    for k, m in enumerate((80, 640, 65536)):
        raw[0, 1, k] = raw[1, 0, k] = 1e-3 + m / 1e7 * np.array([1, 1.01, 0.99, 1.2])
    lm = LinkMatrix([80, 640, 65536], raw, "study", 4)
    text = render({"kind": "probe", "size": 2, "pairs": lm.to_dict()}, str(tmp_path / "p"))
    assert "0-1" in text and "1000." in text
    assert os.path.exists(tmp_path / "p_latency.png")
    back = LinkMatrix.from_dict(lm.to_dict())
    assert back.alpha[0, 1] == pytest.approx(lm.alpha[0, 1])
    prof = {"kind": "profile", "size": 2, "bytes": [[0, 100], [100, 0]],
            "msgs": [[0, 1], [1, 0]], "pattern": classify([[0, 100], [100, 0]]),
            "ranks": [{"rank": r, "host": "h", "wall_s": 1.0, "cpu_s": 0.5, "cpu_util": 0.5,
                       "peak_rss_bytes": 2**20} for r in range(2)]}
    assert "pattern = chain" in render(prof)


# ============================================================================ MPI
def _world():
    from mpi4py import MPI
    from pyfw.comm import Comm
    return Comm(MPI.COMM_WORLD.Dup())


@pytest.mark.mpi(min_size=2)
def test_probes_recover_injected_latency_and_bandwidth():
    """Tolerance: latency within 25 % + 0.5 ms, bandwidth within 30 %. Noise on a shared,
    oversubscribed box only adds time, so the test uses NetPIPE's min (capability)."""
    from pyfw.monitor import probe_pairs
    comm = _world()
    p = comm.size
    lat, bw = {(0, 1): 3e-3}, {(0, 1): 10e6}
    if p >= 4:
        lat[(2, 3)], bw[(2, 3)] = 5e-3, 15e6   # 64 KiB: 4.4 ms, well above wake-up jitter
    sh = LinkShaper.for_comm(comm, latency=lat, bandwidth=bw)
    m = probe_pairs(comm, reps=6, method="min", timeout=20)
    msgs = []
    for (i, j), L in lat.items():
        a, b = m.alpha[i, j], m.bandwidth[i, j]
        if not abs(a - L) < 0.25 * L + 5e-4:
            msgs.append(f"link {i}-{j}: latency {a:.2e} vs injected {L:.2e}")
        if not abs(b - bw[(i, j)]) < 0.3 * bw[(i, j)]:
            msgs.append(f"link {i}-{j}: bandwidth {b:.3e} vs injected {bw[(i, j)]:.3e}")
        assert sh.truth(i, j) == (L, bw[(i, j)])
    for i in range(p):       # unshaped links stay far below the injected latency
        for j in range(i + 1, p):
            if (i, j) not in lat and not m.alpha[i, j] < 1e-3:
                msgs.append(f"unshaped link {i}-{j}: {m.alpha[i, j]:.2e} s")
    assert np.allclose(m.alpha, m.alpha.T, equal_nan=True)
    comm.shaper = None
    comm.free()
    agree(not msgs, "; ".join(msgs))


@pytest.mark.mpi(min_size=2)
def test_probe_deadline_slow_rank_gives_clear_error_not_hang():
    """Rank 1 stays silent until rank 0 has given up on it (an event, not a sleep: rank 0
    must time out on its own deadline while rank 1 is still silent, however loaded the box),
    then probes too and meets the others' absence. Every rank gets a ProbeTimeout."""
    from mpi4py import MPI
    from pyfw.monitor import ProbeTimeout, probe_pairs
    comm = _world()
    note = MPI.COMM_WORLD.Dup()          # rank 0 -> rank 1: "I have timed out"
    MPI.COMM_WORLD.Barrier()
    t0 = time.monotonic()
    woke = True
    if comm.rank == 1:                   # silent until rank 0 gave up (30 s: a hang)
        req = note.Irecv(np.zeros(1), 0, 9)
        while not req.Test() and time.monotonic() - t0 < 30:
            time.sleep(0.01)
        woke = req.Test()
        if not woke:
            req.Cancel()
            req.Wait()
    err = None
    try:
        probe_pairs(comm, sizes=[80], reps=2, timeout=0.4, round_timeout=1.0)
    except ProbeTimeout as exc:
        err = exc
    if comm.rank == 0:   # rank 0 meets rank 1's silence (directly or through a neighbour)
        note.Send(np.ones(1), 1, 9)
    elapsed = time.monotonic() - t0
    ok = err is not None and "no answer from" in str(err) and woke and elapsed < 60
    msg = f"rank {comm.rank}: {err!r} after {elapsed:.1f} s" + ("" if woke else
                                                                " (rank 0 never gave up)")
    MPI.COMM_WORLD.Barrier()
    note.Free()
    agree(ok, msg)


@pytest.mark.mpi(min_size=2)
def test_pingpong_ring_and_allgather_tests_run():
    from pyfw.monitor import allgather_test, pingpong, ring_test
    comm = _world()
    p = comm.size
    r = ring_test(comm, sizes=[80, 16384], reps=4)
    a = allgather_test(comm, sizes=[80, 16384], reps=4)
    ok = len(r["max"]) == 2 and all(0 < t < 0.5 for t in r["max"] + a["max"])
    if comm.rank in (0, 1):
        pp = pingpong(comm, 1 - comm.rank, sizes=[80, 65536], reps=4)
        ok = ok and 0 < pp["time"][0] < 0.05 and pp["bandwidth"] > 1e7
    comm.free()
    agree(ok and p == len(r["time"]), f"ring {r['max']} allgather {a['max']}")


def _threads() -> int:
    """Threads of this process now (Linux), else a generous 8."""
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))
    except (OSError, StopIteration, ValueError):
        return 8


@pytest.mark.mpi(min_size=2)
def test_profile_classifies_real_traffic():
    from pyfw.monitor import Profiler, profile
    comm = _world()
    p, me = comm.size, comm.rank
    buf, out = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
    results = {}
    # ring: send right, receive from left (and back)
    prof = Profiler(comm)
    for _ in range(3):
        comm.Sendrecv(buf, (me + 1) % p, out, (me - 1) % p)
        comm.Sendrecv(buf, (me - 1) % p, out, (me + 1) % p)
    results["ring"] = profile(comm, prof)
    # star: rank 0 exchanges with every worker
    prof = Profiler(comm)
    for _ in range(3):
        if me == 0:
            for w in range(1, p):
                comm.Send(buf, w)
                comm.Recv(out, w)
        else:
            comm.Recv(out, 0)
            comm.Send(buf, 0)
    results["star"] = profile(comm, prof)
    # all-to-all: pairwise exchange
    prof = Profiler(comm)
    for k in range(1, p):
        comm.Sendrecv(buf, (me + k) % p, out, (me - k) % p)
    results["a2a"] = profile(comm, prof)
    want = {"ring": "ring" if p >= 3 else "chain", "star": "star" if p >= 3 else "chain",
            "a2a": "all-to-all" if p >= 4 else ("ring" if p == 3 else "chain")}
    got = {k: v["pattern"]["pattern"] for k, v in results.items()}
    r0 = results["ring"]["ranks"][me]
    # CPU time over a wall span of ~100 us: every thread of the process (Open MPI's progress
    # and PMIx threads too) adds to it, so the bound is threads x wall, plus clock granularity
    threads = _threads()
    ok = (got == want and 0 <= r0["cpu_s"] <= threads * r0["wall_s"] + 0.002
          and r0["peak_rss_bytes"] > 10 * 2**20)
    ok = ok and results["star"]["bytes"][0][p - 1] == 3 * 4096
    comm.free()
    agree(ok, f"got {got} want {want}, rank info {r0}")


@pytest.mark.mpi(min_size=2)
def test_online_monitor_tracks_slow_link_and_rank_within_budget():
    from mpi4py import MPI
    from pyfw.monitor import OnlineMonitor
    comm = _world()
    p = comm.size
    LinkShaper.for_comm(comm, latency={(0, 1): 3e-3})
    mon = OnlineMonitor(comm, budget=0.1, sizes=(80, 4096), reps=3, method="min")
    slow = Slowdown(2.0 if comm.rank == 1 else 1.0)
    t0 = time.perf_counter()
    probed = 0
    more = True
    late = []                     # how late a 1 ms sleep wakes here (the shaper sleeps too)
    while more:
        s0 = time.thread_time()   # CPU seconds: the injected 2x is exact even when another
        with slow:                # process shares one rank's core on a loaded box
            spin_work(2000, rate=1e6)                  # 2 ms (4 ms on rank 1)
        probed += mon.step(work=2000, seconds=time.thread_time() - s0)
        w0 = time.perf_counter()
        time.sleep(1e-3)
        late.append(time.perf_counter() - w0 - 1e-3)
        el = time.perf_counter() - t0
        more = (el < 1.0 * p or mon.probes < len(mon.rounds) + 1) and el < 30
        more = comm.mpi.allreduce(more, op=MPI.LOR)    # every rank takes the same steps
    mon.sync_finish()             # complete a probe posted on the last step (collective)
    lat, _ = mon.matrices()
    speeds = mon.speeds()
    ratio = speeds[1] / speeds[0]
    msgs = []
    # the shaped link is never faster than 3 ms, and slower by at most what waking up costs
    # on this box now (twice the worst rank's median lateness: a hold at each end)
    wake = max(comm.mpi.allgather(float(np.median(late))))
    if not 0.75 * 3e-3 < lat[0, 1] < 1.25 * 3e-3 + 5e-4 + 2 * wake:
        msgs.append(f"latency 0-1 forecast {lat[0, 1]:.2e} (sleeps wake {wake:.1e} s late)")
    if p > 2 and not np.nanmax(np.delete(lat[0], [0, 1])) < 1e-3:
        msgs.append(f"unshaped links {lat[0]}")
    if not 0.2 < ratio < 0.8:   # true 0.5; wide: preemption on a shared box skews it
        msgs.append(f"speed ratio {ratio:.2f}, want ~0.5")
    if not mon.overhead() < 0.25:                      # budget 0.1, first probe included
        msgs.append(f"overhead {mon.overhead():.3f}")
    if not (mon.every > 1 and probed == mon.probes):
        msgs.append(f"every={mon.every} probes={mon.probes} probed={probed}")
    comm.shaper = None
    comm.free()
    agree(not msgs, "; ".join(msgs))


# ============================================================================ launch
@pytest.mark.launch
def test_cli_probe_writes_json_and_report_views_it(tmp_path):
    from pyfw.launch import run
    from pyfw.monitor.__main__ import main
    out = tmp_path / "probe.json"
    res = run(2, [sys.executable, "-m", "pyfw.monitor", "probe", "--ring", "--allgather",
                  "--reps", "6", "--method", "min", "--emulate", "0-1:1e-2", "-o", str(out)],
              timeout=120, capture=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "emulated links" in res.stdout and "allgather" in res.stdout
    import json
    d = json.load(open(out))
    assert d["kind"] == "probe" and d["pairs"]["sizes"] == [80, 320, 640, 16384, 65536]
    # 10 ms: well above sleep wake-up jitter on a loaded box (2 ms read 3.3 ms there)
    assert abs(d["pairs"]["alpha"][0][1] - 1e-2) < 0.2 * 1e-2
    assert main(["report", str(out), "--png", str(tmp_path / "r")]) == 0
    assert os.path.exists(tmp_path / "r_links.png")
