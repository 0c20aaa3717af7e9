"""Prefix-sum partition: optimal to one plane (checked against brute force), validation."""
import itertools

import numpy as np
import pytest

from pyfw.domain import partition as P
from pyfw.errors import ConfigurationError


def brute_force_best(cost, speeds, min_planes=1):
    n, p = len(cost), len(speeds)
    best = np.inf
    for inner in itertools.combinations(range(1, n), p - 1):
        cuts = (0,) + inner + (n,)
        if min(np.diff(cuts)) < min_planes:
            continue
        best = min(best, P.bottleneck(cost, speeds, cuts))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_prefix_cut_is_optimal_to_one_plane(seed):
    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(4, 13)), int(rng.integers(1, 5))
    p = min(p, n)
    cost = rng.uniform(0.1, 3.0, n) * (rng.random(n) > 0.2)
    speeds = rng.uniform(0.2, 5.0, p)
    cuts = P.partition(cost, speeds)
    assert cuts[0] == 0 and cuts[-1] == n and np.all(np.diff(cuts) >= 1)
    best = brute_force_best(cost, speeds)
    got = P.bottleneck(cost, speeds, cuts)
    assert got <= best + (cost.max() / speeds).max() + 1e-12
    assert got >= best - 1e-12


def test_uniform_and_proportional():
    assert P.even_cuts(10, 3).tolist() == [0, 3, 7, 10] or \
        P.even_cuts(10, 3).tolist() == [0, 4, 7, 10]
    assert np.ptp(np.diff(P.even_cuts(10, 3))) <= 1
    # one rank 3x slower gets a quarter of the planes
    assert P.partition(np.ones(200), [1.0, 1 / 3]).tolist() == [0, 150, 200]
    assert P.partition(np.ones(200), [1, 1, 1, 1 / 3]).tolist() == [0, 60, 120, 180, 200]


def test_min_planes_is_kept_under_extreme_speeds():
    cuts = P.partition(np.ones(12), [1e6, 1.0, 1.0], min_planes=2)
    assert np.all(np.diff(cuts) >= 2)


def test_errors():
    with pytest.raises(ConfigurationError, match="grid too small for 4 ranks"):
        P.partition(np.ones(3), np.ones(4))
    with pytest.raises(ConfigurationError, match="speeds must be finite and > 0"):
        P.partition(np.ones(8), [1.0, 0.0])
    with pytest.raises(ConfigurationError, match="invalid cuts"):
        P.validate_cuts([0, 5, 5, 8], 8, 3)
