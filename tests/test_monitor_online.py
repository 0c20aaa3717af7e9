"""Serial tests of the on-line monitor's arithmetic: the incremental forecaster bank against
a slow obvious reference (every window recomputed from scratch), and the adaptive probe
interval (budget part and stability stretch) on synthetic records."""
import math

import numpy as np
import pytest
from mpi4py import MPI

from pyfw.monitor import ForecasterBank, OnlineMonitor


def naive_bank(series, window=10):
    """Reference: the NWS choice recomputed from the whole history at every step."""
    names = ["last", "mean", "mean5", "mean20", "median5", "median31", "exp0.05", "exp0.2",
             "exp0.5"]

    def predictions(hist):
        if not hist:
            return [math.nan] * len(names)
        h = np.array(hist)
        out = [h[-1], h.mean(), h[-5:].mean(), h[-20:].mean(), np.median(h[-5:]),
               np.median(h[-31:])]
        for g in (0.05, 0.2, 0.5):
            f = h[0]
            for x in h[1:]:
                f = f + g * (x - f)
            out.append(f)
        return out

    errs = [[] for _ in names]
    hist = []
    picks = []
    for x in series:
        for k, guess in enumerate(predictions(hist)):
            if math.isfinite(guess):
                errs[k].append((x - guess) ** 2)
        hist.append(x)
        scores = [np.mean(e[-window:]) if e else math.inf for e in errs]
        best = int(np.argmin(scores))   # first of equals, as the bank
        picks.append((predictions(hist)[best], math.sqrt(scores[best]), names[best])
                     if math.isfinite(scores[best]) else (x, math.nan, "last"))
    return picks


@pytest.mark.parametrize("seed", range(4))
def test_incremental_bank_matches_naive_reference(seed):
    rng = np.random.default_rng(seed)
    series = np.r_[rng.normal(5e8, 5e7, 40), rng.normal(3e3, 30, 40),
                   np.cumsum(rng.normal(0, 1, 40)), rng.exponential(1e-3, 40)]
    bank = ForecasterBank(window=10)
    for x, (value, err, _) in zip(series, naive_bank(series)):
        bank.update(x)
        f = bank.predict()
        # values agree; the winner may differ only where two predictors tie to rounding
        assert f.value == pytest.approx(value, rel=1e-9, abs=1e-12)
        if math.isnan(err):
            assert math.isnan(f.error)
        else:
            assert f.error == pytest.approx(err, rel=1e-6, abs=1e-12)


def test_probe_interval_follows_budget_and_stretches_while_stable():
    mon = OnlineMonitor(MPI.COMM_SELF, budget=0.01, margin=0.3, max_stretch=16)
    rec = np.full((1, 8), np.nan)
    rec[0, 3], rec[0, 4] = 3e-3, 10e-3     # a probe costs 3 ms, a step takes 10 ms
    mon._adapt(rec, stable=False)
    assert mon.base_every == 100 and mon.every == 100   # 3 ms / (0.3 * 1 % * 10 ms)
    for want in (200, 400, 800, 1600, 1600):
        mon._adapt(rec, stable=True)
        assert mon.every == want
    mon._adapt(rec, stable=False)            # a measurement outside the band: back at once
    assert mon.every == 100
    assert mon.probes == 7 and mon.next_probe == mon.steps + 100


def test_stability_band():
    mon = OnlineMonitor(MPI.COMM_SELF, band_sigma=3.0, band_rel=0.25)
    bank = ForecasterBank()
    assert not mon._inside(bank, 1.0)        # fewer than 3 samples: never stable
    for x in (1.0, 1.02, 0.98, 1.01, 0.99):
        bank.update(x)
    assert mon._inside(bank, 1.1)            # within 25 % of the forecast
    assert not mon._inside(bank, 1.6)
    assert not mon._inside(bank, math.nan)
