"""Balancer decision logic, serially: a fake 8-rank domain and a fake monitor whose window
times the test sets (no MPI, no clock). The hysteresis and damping tests take each window's
speeds as they come (``samples=1``, ``confidence=0``), to test those rules alone; the
noise-robust estimate has its own tests (test_domain_noise.py)."""
import types

import numpy as np

from pyfw.domain import Balancer
from pyfw.domain import partition as P


class FakeDomain:
    def __init__(self, nz, p):
        self.size, self.rank = p, 0
        self.cost = np.ones(nz)
        self.cuts = P.even_cuts(nz, p)
        self.min_planes = 1
        self.plane_shape = (1, 1)
        self.fields = {}
        self.comm = types.SimpleNamespace(mpi=types.SimpleNamespace(allreduce=lambda x, op: x))
        self.moves = 0

    def slab_cost(self):
        return float(self.cost[self.cuts[0]:self.cuts[1]].sum())

    def repartition(self, new):
        self.cuts = np.asarray(new)
        self.moves += 1
        return {"seconds": 1e-3, "bytes": 0}


class FakeMonitor:
    def __init__(self, dom):
        self.dom, self.sp, self.times = dom, None, None

    def step(self, work, seconds):
        pass

    def sync_start(self, extra):
        return 1

    def sync_finish(self, ticket=None):
        t = self.times if self.times is not None else \
            P.slab_costs(self.dom.cost, self.dom.cuts) / self.sp * 1e-3
        return np.column_stack([t, np.full(t.size, 10.0), np.zeros(t.size)])

    def speeds(self):
        return self.sp * 1e3

    def speed(self, r):
        return types.SimpleNamespace(predict=lambda: types.SimpleNamespace(method="fake"))


def setup(nz=200, p=8, **kw):
    dom = FakeDomain(nz, p)
    mon = FakeMonitor(dom)
    kw = {"samples": 1, "confidence": 0.0, "warmup": 0, **kw}
    bal = Balancer(dom, every=1, lag=0, monitor=mon, min_gain=0.05, **kw)
    return dom, mon, bal


def check(bal, mon, speeds, times=None):
    mon.sp, mon.times = np.asarray(speeds, float), times
    bal.record(1.0)
    return bal.check()


def find_wobble():
    """Two speed estimates around 'rank 7 three times slower' whose proposals (from the even
    cuts) never go opposite ways but differ in some cut (one keeps it, one moves it)."""
    rng = np.random.default_rng(5)
    cuts = P.even_cuts(200, 8)
    base = np.ones(8)
    base[7] = 1 / 3
    for _ in range(5000):
        s1 = base * rng.uniform(0.9, 1.1, 8)
        s2 = base * rng.uniform(0.9, 1.1, 8)
        d1 = np.sign(P.partition(np.ones(200), s1) - cuts)
        d2 = np.sign(P.partition(np.ones(200), s2) - cuts)
        if not np.array_equal(d1, d2) and not np.any(d1 * d2 < 0):
            return s1, s2
    raise AssertionError("no wobble found")


def test_two_estimates_that_round_a_cut_differently_still_confirm_a_move():
    s1, s2 = find_wobble()
    dom, mon, bal = setup()
    assert check(bal, mon, s1) is None          # first proposal: hysteresis waits
    new = check(bal, mon, s2)                   # second: confirmed despite the wobble
    assert new is not None and dom.moves == 1
    assert new.tolist() == P.partition(np.ones(200), s2).tolist()


def test_opposite_proposals_do_not_move():
    dom, mon, bal = setup()
    a = np.ones(8)
    a[7] = 1 / 3
    b = np.ones(8)
    b[0] = 1 / 3
    assert check(bal, mon, a) is None
    assert check(bal, mon, b) is None           # cut 1..7 directions disagree
    assert dom.moves == 0
    assert check(bal, mon, b) is not None       # the same proposal twice moves


def test_a_clean_change_is_a_change_point_and_moves_at_once():
    """32 windows say all ranks equal; then rank 7 is 3x slower in every window. The mean
    over the kept windows would take many windows to follow; four stale windows in a row
    that agree replace the kept ones, so the cuts move at the next check, all the way (the
    change point also lifts any damping cap)."""
    dom, mon, bal = setup(samples=32, confidence=2.0)
    eq = np.ones(8)
    for _ in range(32):
        assert check(bal, mon, eq) is None
    slow = eq.copy()
    slow[7] = 1 / 3
    got = [check(bal, mon, slow) is not None for _ in range(4)]
    assert [h["stale"] for h in bal.history[-4:]] == [True] * 4
    assert len(bal.window_speeds) == 4          # the change point kept only the new windows
    got.append(check(bal, mon, slow) is not None)
    assert got == [False] * 4 + [True], bal.history[-5:]
    assert dom.cuts.tolist() == P.partition(np.ones(200), slow).tolist()


def test_bad_balancer_options_are_configuration_errors():
    import pytest
    from pyfw.errors import ConfigurationError
    for bad in ({"every": 0}, {"max_thin": 0}, {"lag": -1}, {"budget": 1.5}):
        with pytest.raises(ConfigurationError):   # as SlabDomain's; still a ValueError
            Balancer(None, **bad)
    assert issubclass(ConfigurationError, ValueError)


def until_moved(bal, mon, dom, speeds, n=4):
    """Checks with the same window speeds until the cuts move (at most n)."""
    before = dom.cuts.copy()
    for _ in range(n):
        check(bal, mon, speeds)
        if not np.array_equal(before, dom.cuts):
            break
    return int(dom.cuts[1])


def test_a_move_back_goes_half_as_far_and_a_swing_dies_out():
    """Estimates that swing between 'rank 1 slow' and 'rank 0 slow' (a CPU quota that
    throttles in bursts): the first move goes all the way, each move back at most half as
    far as the move before it, and the cap never grows again while the cut keeps moving,
    so the swing dies out instead of jumping between extremes."""
    dom, mon, bal = setup(nz=120, p=2)
    slow1, slow0 = np.array([1.0, 0.5]), np.array([0.5, 1.0])
    full1 = P.partition(np.ones(120), slow1)
    assert until_moved(bal, mon, dom, slow1) == full1[1] == 80   # the whole way
    seen = [80]
    for speeds in (slow0, slow1, slow0, slow1):
        seen.append(until_moved(bal, mon, dom, speeds))
    # 60 -> 80 (+20), then 40 proposed -> 70 (-10), 80 proposed -> 75 (+5), 40 -> 73 (-2),
    # 80 -> 74 (+1)
    assert seen == [80, 70, 75, 73, 74]
    # a second move the same way does not regain the stride (it did: 74 -> 80, and the
    # cuts went 33 -> 5 -> 19 -> 52 on the knee)
    assert until_moved(bal, mon, dom, slow1) == 75
    # once the cuts held (four quiet checks and max_interval steps), the cap is forgotten
    balanced = np.array([1.0, 45 / 75])
    for _ in range(bal.max_interval + 4):
        check(bal, mon, balanced)
    assert dom.cuts[1] == 75
    assert until_moved(bal, mon, dom, slow0) == 40
    # a move the same way as the previous one is not damped
    dom2, mon2, bal2 = setup(nz=120, p=2)
    for speeds in (np.array([1.0, 0.8]), np.array([1.0, 0.5])):
        until_moved(bal2, mon2, dom2, speeds)
    assert dom2.cuts.tolist() == P.partition(np.ones(120), np.array([1.0, 0.5])).tolist()
