"""The domain balancer's rank speeds come from the job's online monitor (NWS forecaster
banks): an emulated slow rank with a known factor is recovered and the partition follows.

Two emulations:
* deterministic: synthetic compute times ``planes * factor * 1 ms`` with seeded +-15 %
  multiplicative noise (no clock involved) -- tight tolerance;
* real: ``SlabDomain(slowdown=3)`` on the last rank (it sleeps 2x its measured update time
  after every update) with a real numpy stencil under ``SlabDomain.step``. On 2 shared cores
  other processes slow ranks unevenly and a loaded box wakes a sleeper late, so the truth
  the forecast is held to is the speed ratio the ranks measured (their per-step planes per
  second), not the nominal 3.
"""
import numpy as np
import pytest
from mpi4py import MPI

from pyfw.domain import Balancer, SlabDomain
from pyfw.monitor import OnlineMonitor
from mpi_util import everywhere

W = MPI.COMM_WORLD


@pytest.mark.mpi(min_size=2)
def test_forecast_speeds_recover_synthetic_slowdown_and_cuts_follow():
    """Truth: every rank 1000 planes/s, the last rank 3x slower. With +-15 % noise on every
    step the forecast speed ratio is within 8 % of 3 and each slab within 3 planes of
    the ideal share."""
    def body():
        nz, factor = 120, 3.0
        slow = np.ones(W.size)
        slow[-1] = factor
        dom = SlabDomain(W, (nz, 2, 2))
        dom.add("x")
        bal = Balancer(dom, every=5, guess_latency=0.0)
        rng = np.random.default_rng(100 + W.rank)
        for _ in range(100):
            noise = rng.uniform(0.85, 1.15)
            bal.record(dom.n * slow[dom.rank] * 1e-3 * noise)
            bal.check()
        sp = dom.monitor.speeds()
        ratio = sp[0] / sp[-1]
        assert abs(ratio / factor - 1) < 0.08, (ratio, sp)
        assert np.all(np.abs(sp[:-1] / 1000.0 - 1) < 0.08), sp
        ideal = nz * (1 / slow) / (1 / slow).sum()
        assert np.all(np.abs(np.diff(dom.cuts) - ideal) <= 3.0), (dom.cuts, ideal)
        assert 1 <= sum(h["moved"] for h in bal.history) <= 3  # hysteresis: no churn
        # every rank holds the same forecasts (fed the same gathered numbers)
        allsp = W.allgather(sp.tobytes())
        assert all(x == allsp[0] for x in allsp)
    everywhere(body)


@pytest.mark.mpi(min_size=2)
def test_shared_monitor_serves_balancer_and_link_probes():
    """One OnlineMonitor per job: the balancer's syncs carry its speed samples and the
    link probes ride along; speeds stay exact on synthetic times."""
    def body():
        mon = OnlineMonitor(W, budget=0.5, first=3, sizes=(80, 65536), reps=2)
        dom = SlabDomain(W, (40, 2, 2), monitor=mon)
        dom.add("x")
        bal = Balancer(dom, every=4, guess_latency=0.0)
        assert bal.mon is mon
        for _ in range(40):
            bal.record(dom.n * (2.0 if dom.rank == 0 else 1.0) * 1e-3)  # also mon.step()
            bal.check()
        assert mon.probes >= 1 and mon.syncs > mon.probes and mon.steps == 40
        lat, bw = mon.matrices()
        probed = np.isfinite(lat)
        assert probed.sum() >= 2 and np.all(lat[probed] > 0)  # (a 2-size fit's bw is noisy)
        sp = mon.speeds()
        assert sp[0] == pytest.approx(500.0, rel=1e-9)
        assert sp[1] == pytest.approx(1000.0, rel=1e-9)
    everywhere(body)


@pytest.mark.mpi(min_size=2)
def test_real_slow_rank_is_recovered_from_compute_time():
    """A real stencil step with the last rank emulated 3x slower: the forecast speed ratio
    is within a factor 2 of the ratio of the speeds the ranks measured (the truth on a
    loaded machine, where late wake-ups from the emulation's sleep and other processes
    sharing a core really make a rank slower), the slow rank is found as far as the truth
    shows it (ratio >= 1.5 where the measured ratio is 2 or more, as on an idle box), and
    the slow rank ends with clearly fewer planes than an even share when the forecast says
    it is 1.5x slower. The truth is measured over the whole run, whose windows the
    forecast was fed, and over its last 50 steps, where the forecast's most reactive
    predictors look: a load that changes during the run moves the two apart (one loaded
    run: 2.10-2.66 over the last 50 steps, forecast 1.38, when the truth was taken from
    those steps alone).

    A loaded box makes a fast rank's steps uneven (a few preempted steps among many quick
    ones), and then two honest summaries of its speed differ by 2x: the median step's and
    its throughput (planes over seconds, which the monitor's windowed samples follow). The
    forecast must be within a factor 2 of the band between them. On a box loaded past its
    cores the fast ranks are preempted too, and the measured ratio itself drops (1.09-1.45
    in one loaded run, forecast 1.37): a fixed ratio of 1.5 then raced the load."""
    def body():
        nz, m, factor = 64, 128, 3.0
        dom = SlabDomain(W, (nz, m, m), slowdown=factor if W.rank == W.size - 1 else 1.0)
        dom.set_from_global("u", lambda z0, z1: np.ones((z1 - z0, m, m)))
        dom.add("v")
        bal = Balancer(dom, every=5)

        def update(k0, k1):
            u, v = dom["u"], dom["v"]
            for _ in range(2):  # ~50 us of numpy work per plane
                v[k0:k1] = (u[k0 - 1:k1 - 1] + u[k0 + 1:k1 + 1] + 2.0 * u[k0:k1]) * 0.25
        planes, seconds = [], []
        for _ in range(100):
            planes.append(dom.n)
            seconds.append(dom.step(update, ["u"], overlap=True))
            bal.record(seconds[-1])
            bal.check()
        sp = dom.monitor.speeds()
        ratio = float(np.median(sp[:-1]) / sp[-1])
        truths, measured = [], []
        for start in (0, 50):      # the whole run, whose windows the forecast was fed, and
            p, t = np.array(planes[start:]), np.array(seconds[start:])    # its last half
            for speed in (np.median(p / t), p.sum() / t.sum()):
                mine = W.allgather(float(speed))
                measured.append(mine)
                truths.append(float(np.median(mine[:-1]) / mine[-1]))
        why = (ratio, truths, sp, measured)
        assert min(truths) / 2 <= ratio <= max(truths) * 2, why
        # found: half of the slowness the truth shows (1.5 where the truth is 2)
        assert ratio >= min(1.5, 1 + (min(truths) - 1) / 2), why
        # a forecast ratio of 1.5 gives the slow rank 0.8 of an even share on 2 ranks, less
        # on more: 0.85 leaves room for rounding
        if ratio >= 1.5:
            assert dom.cuts[-1] - dom.cuts[-2] < 0.85 * nz / W.size, (dom.cuts, ratio)
    everywhere(body)


@pytest.mark.mpi(min_size=2)
def test_halo_honours_emulated_link_latency():
    """A DeliveryShaper on the domain's Comm (what PYFW_EMULATE_LINKS installs) holds each
    halo plane until its link's latency after the send: a blocking exchange takes at least
    that long (a lower bound, robust to load), and the ghost planes are still right."""
    from pyfw.comm import Comm
    from pyfw.monitor.emulate import DeliveryShaper

    def body():
        comm = Comm(W.Dup())
        lat = 0.03
        comm.shaper = DeliveryShaper(comm.rank, comm.size,
                                     latency={(i, i + 1): lat for i in range(comm.size - 1)})
        shape = (4 * W.size, 3, 5)
        g = np.random.default_rng(7).standard_normal(shape)
        dom = SlabDomain(comm, shape)
        dom.set_from_global("a", g)
        W.Barrier()
        t0 = MPI.Wtime()
        dom.exchange(["a"])
        el = MPI.Wtime() - t0
        assert el >= 0.9 * lat, el
        if dom.lo > 0:
            assert np.array_equal(dom["a"][0], g[dom.lo - 1])
        if dom.hi < shape[0]:
            assert np.array_equal(dom["a"][-1], g[dom.hi])
        comm.shaper = None
        comm.free()
    everywhere(body)


@pytest.mark.mpi(min_size=2)
def test_cuts_follow_a_speed_change_promptly():
    """Synthetic times (0.1 ms per plane; the checks thin out while the cuts hold): the 3x
    slower rank moves from the last rank to the first after the cuts settled. The forecasts
    lag such a step change; a check whose measured times are > 25 % off the forecast ones
    takes the forecasts as stale, proposes from the window's own speeds and checks again
    ``every`` steps later. Before this rule the thinned-out checks kept finding no gain in
    the stale forecasts and the cuts had not moved 340 steps after the change; now they
    reach the new ideal within 150 steps, in at most two moves: the checks thin out to at
    most 16 x ``every`` = 80 steps apart (without that cap the interval reached 160 steps,
    and a change just after a check was seen 237 steps late), the first check after the
    change either finds the forecasts stale or proposes, and the next one moves. (How many
    checks that takes depends on the measured cost of checks, wall time, so the test
    asserts the outcome.)"""
    def body():
        nz, every, change = 120, 5, 300
        dom = SlabDomain(W, (nz, 2, 2))
        dom.add("x")
        bal = Balancer(dom, every=every, guess_latency=0.0)
        for step in range(change + 300):
            slow = np.ones(W.size)
            slow[-1 if step < change else 0] = 3.0
            bal.record(dom.n * slow[dom.rank] * 1e-4)
            bal.check()
        before = [h for h in bal.history if h["step"] <= change]
        after = [h for h in bal.history if h["step"] > change]
        assert sum(h["moved"] for h in before) == 1
        assert not any(h["stale"] for h in before[2:])
        trace = [(h["step"], h["stale"], h["moved"]) for h in after]
        first = next((h["step"] for h in after if h["moved"]), None)
        assert first is not None and first - change <= 150, trace
        ideal = nz * (1 / slow) / (1 / slow).sum()
        assert np.all(np.abs(np.diff(dom.cuts) - ideal) <= 1.0), (dom.cuts, ideal)
        assert sum(h["moved"] for h in after) <= 2
    everywhere(body)
