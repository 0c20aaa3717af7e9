"""Chunking policies and the pipelining rule, checked against their formulas."""
import math
import random

import pytest

from pyfw.errors import ConfigurationError
from pyfw.farm.rounds import DoneIds
from pyfw.farm.policies import POLICIES, Pipeline, WorkerStats, make_policy


def simulate(policy, n, speeds, known_total=True):
    """Hand out n tasks to workers of the given speeds (time per task) in the order they
    become free; returns [(worker, chunk)] and checks coverage."""
    p = len(speeds)
    stats = [WorkerStats(r) for r in range(p)]
    policy.start(n if known_total else None, p)
    free_at = [0.0] * p
    remaining = n
    handed = []
    while remaining:
        w = min(range(p), key=lambda i: free_at[i])
        k = policy.chunk(stats[w], remaining, stats)
        assert isinstance(k, int) and k >= 1
        k = min(k, remaining)
        remaining -= k
        handed.append((w, k))
        busy = k * speeds[w]
        stats[w].record(k, busy, k * speeds[w] ** 2, busy, 0.0)
        free_at[w] += busy
    return handed, max(free_at)


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("n", [1, 7, 100, 1001])
def test_every_policy_covers_every_task_once(name, n):
    handed, _ = simulate(make_policy(name), n, [1.0, 1.0, 3.0])
    assert sum(k for _, k in handed) == n


def test_static_gives_one_chunk_per_worker():
    handed, _ = simulate(make_policy("static"), 100, [1, 1, 1, 1])
    assert [k for _, k in handed] == [25, 25, 25, 25]


def test_gss_first_chunks_follow_remaining_over_p():
    handed, _ = simulate(make_policy("gss"), 1000, [1.0] * 4)
    ks = [k for _, k in handed]
    r = 1000
    for k in ks[:6]:
        assert k == math.ceil(r / 4)
        r -= k


def test_tss_decreases_linearly_from_n_over_2p():
    handed, _ = simulate(make_policy("tss"), 1000, [1.0] * 4)
    ks = [k for _, k in handed]
    assert ks[0] == math.ceil(1000 / 8)
    diffs = {ks[i] - ks[i + 1] for i in range(len(ks) - 2)}
    assert max(diffs) - min(diffs) <= 1  # linear up to rounding
    assert ks[-2] >= 1


def test_fac2_batches_halve_the_remaining_work():
    handed, _ = simulate(make_policy("fac2"), 1600, [1.0] * 4)
    ks = [k for _, k in handed]
    assert ks[:4] == [200] * 4 and ks[4:8] == [100] * 4 and ks[8:12] == [50] * 4


def test_awf_gives_the_fast_worker_more():
    policy = make_policy("awf")
    stats = [WorkerStats(0), WorkerStats(1)]
    policy.start(1000, 2)
    stats[0].record(10, 0.1, 0.001, 0.1, 0)   # 10 ms per task
    stats[1].record(10, 0.3, 0.009, 0.3, 0)   # 30 ms per task
    fast, slow = policy.chunk(stats[0], 1000, stats), policy.chunk(stats[1], 1000, stats)
    # weights 1.5 and 0.5 of ceil(R / 2P) = 250
    assert fast == 375 and slow == 125


def test_af_matches_its_formula():
    policy = make_policy("af")
    stats = [WorkerStats(0), WorkerStats(1)]
    policy.start(10000, 2)
    for s, mu, sd in ((stats[0], 0.01, 0.002), (stats[1], 0.02, 0.004)):
        n = 100
        s.record(n, n * mu, n * (mu * mu + sd * sd), n * mu, 0)
    r = 1000
    d = sum(s.std ** 2 / s.mean for s in stats)
    t = 1 / sum(1 / s.mean for s in stats)
    want = math.ceil((d + 2 * t * r - math.sqrt(d * d + 4 * d * t * r)) / (2 * stats[0].mean))
    assert want < 2500 and policy.chunk(stats[0], r, stats) == want
    assert policy.chunk(stats[0], 10000, stats) == 2500   # clamped to N / 2P


def test_adaptive_amortises_tiny_tasks_and_balances_big_ones():
    pol = make_policy("adaptive")
    s = [WorkerStats(0), WorkerStats(1)]
    pol.start(10 ** 6, 2)
    assert pol.chunk(s[0], 10 ** 6, s) == 1          # first chunk measures
    s[0].record(100, 1e-4, 1e-10, 1e-4, 0)          # 1 us tasks
    s[1].record(100, 1e-4, 1e-10, 1e-4, 0)
    assert pol.chunk(s[0], 100, s) >= 2000           # >= 2 ms of work per message
    s2 = [WorkerStats(0), WorkerStats(1)]
    s2[0].record(1, 1.0, 1.0, 1.0, 0)                # 1 s tasks: plain weighted factoring
    s2[1].record(1, 1.0, 1.0, 1.0, 0)
    assert pol.chunk(s2[0], 40, s2) == 10
    # a new round's own timings rule: 1 us tasks last round say nothing about this one's
    assert pol.chunk(s[0], 100, s, task_time=None) == 1
    assert pol.chunk(s[0], 40, s, task_time=1.0) == 10


@pytest.mark.parametrize("name", ["adaptive", "awf", "af", "fac2", "gss"])
def test_dynamic_policies_beat_static_on_uneven_workers(name):
    n, speeds = 3000, [1.0, 1.0, 3.0]
    ideal = n / sum(1 / s for s in speeds)
    _, static = simulate(make_policy("static"), n, speeds)
    _, dyn = simulate(make_policy(name), n, speeds)
    assert dyn < static and dyn <= 1.35 * ideal


def test_unknown_policy_is_refused_with_the_choices():
    with pytest.raises(ConfigurationError, match="unknown scheduling policy 'fastest'.*adaptive"):
        make_policy("fastest")
    with pytest.raises(ConfigurationError, match="chunksize"):
        make_policy("adaptive", chunksize=0)


def test_pipeline_depth_rule():
    p = Pipeline()
    assert p.depth(None) == 2
    p.observe_rtt(1e-3)
    # BDP = rate * (RTT + t_chunk): chunks of 0.1 ms need ceil(1.1/0.1) = 11 in flight
    assert p.depth(1e-4) == 11
    assert p.depth(1.0) == 2          # long chunks: one queued behind the running one
    assert Pipeline(max_depth=4).depth(1e-6) <= 4
    assert Pipeline(fixed=1).depth(1e-6) == 1


def test_pipeline_doubles_while_it_pays_and_reverts_the_first_that_does_not():
    p = Pipeline(window=0.0)
    utils = {1: 0.5, 2: 0.7, 4: 0.72}   # 4 gains < 5 % over 2: settle at 2
    t = 0.0
    p.observe(t, 0.0, 1)
    while not p.settled:
        for _ in range(4):
            t += 1.0
            p.observe(t, utils[p.factor] * 0.25, 1)
    assert p.factor == 2
    assert [f for f, _ in p.history] == [1, 2, 4]


def test_done_tracker():
    d = DoneIds()
    order = list(range(1000))
    random.Random(1).shuffle(order)
    for i in order[:500]:
        d.add(i)
    assert all((i in d) == (i in set(order[:500])) for i in range(1000))
    for i in order[500:]:
        d.add(i)
    assert d.low == 1000 and not d.high


def test_done_tracker_ranges_and_overlaps():
    d = DoneIds()
    d.add_range(10, 20)
    d.add_range(30, 40)
    assert 15 in d and 25 not in d and 5 not in d
    assert d.overlaps(19, 25) and not d.overlaps(20, 30) and d.overlaps(0, 11)
    d.add_range(0, 10)          # joins the low block, which swallows [10, 20)
    assert d.low == 20 and d.high == 10
    d.add_range(20, 30)
    assert d.low == 40 and d.high == 0


def test_pipeline_forecasts_the_round_trip_per_worker():
    p = Pipeline(sample_every=0.0)
    t = 0.0
    for _ in range(30):
        t += 1.0
        p.observe_rtt(1e-4, rank=1, now=t)          # a fast link
        p.observe_rtt(5e-3, rank=2, now=t)          # a slow link
    assert p.rtt_of(1) == pytest.approx(1e-4) and p.rtt_of(2) == pytest.approx(5e-3)
    # 1 ms chunks: the slow link needs ceil((5 + 1) / 1) = 6 in flight, the fast one 2
    assert p.depth(1e-3, 1) == 2 and p.depth(1e-3, 2) == 6
    assert p.lead(2) > p.lead(1)
    assert set(p.forecasts()) == {1, 2} and p.forecasts()[2]["forecaster"]
    assert p.rtt_of(99) == pytest.approx(1e-4)      # unknown worker: the global minimum


def test_pipeline_samples_the_minimum_of_each_interval():
    p = Pipeline(sample_every=1.0)
    p.observe_rtt(3e-3, rank=1, now=0.0)            # first sample seeds the forecast
    for i, x in enumerate([9e-3, 2e-3, 8e-3]):      # queueing noise within one interval
        p.observe_rtt(x, rank=1, now=0.1 + 0.1 * i)
    p.observe_rtt(7e-3, rank=1, now=1.5)            # the interval closes with its minimum
    assert p._banks[1].last == pytest.approx(2e-3)
