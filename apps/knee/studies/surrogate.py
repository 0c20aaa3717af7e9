"""A cheap stand-in for the knee model over the Sobol study's inputs: least squares on a
fixed basis of the draws u in [0, 1]^d, fitted to knee runs and checked on runs it was not
fitted to.

The basis is generic, not shaped to the knee: each input's own effect is piecewise linear
between ``knots`` evenly spaced knots (hat functions; the geometric inputs act through whole
voxels and give the output small steps that polynomials smear), and every pair of inputs
interacts through products of Legendre polynomials of total degree up to ``order + 1``
(``order`` 1: the bilinear terms ``z_i z_j`` alone). :func:`select` picks ``knots`` and
``order`` by k-fold cross-validation, so more runs buy a finer basis.

Only the fit is ours; the Sobol indices of the fitted function are SALib's estimators on
its draws (:mod:`.sobol`), as for the knee runs themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

#: rows per block when a basis matrix is built for many draws (memory, not speed)
_BLOCK = 20000
#: the grid ``select`` searches: knots per input, interaction order
KNOTS = (5, 9, 17, 25, 33)
ORDERS = (1, 2)


def _legendre(z, degree):
    """Legendre polynomials 1..``degree`` of ``z`` in [-1, 1] (columns)."""
    p = [np.ones_like(z), z]
    for n in range(1, degree):
        p.append(((2 * n + 1) * z * p[n] - n * p[n - 1]) / (n + 1))
    return p[1:degree + 1]


def basis(u, knots, order):
    """The design matrix of draws ``u`` (rows in [0, 1]^d): a constant, ``knots - 1`` hat
    functions per input (the first knot's is the constant minus the others), and the pair
    products ``P_a(z_i) P_b(z_j)`` with ``a, b >= 1`` and ``a + b <= order + 1``."""
    u = np.asarray(u, dtype=float)
    n, d = u.shape
    knot = np.linspace(0.0, 1.0, knots)
    step = knot[1] - knot[0]
    cols = [np.ones((n, 1))]
    for i in range(d):
        cols.append(np.maximum(0.0, 1.0 - np.abs(u[:, i, None] - knot[None, 1:]) / step))
    poly = [_legendre(2.0 * u[:, i] - 1.0, order) for i in range(d)]
    for i, j in combinations(range(d), 2):
        for a in range(1, order + 1):
            for b in range(1, order + 2 - a):
                cols.append((poly[i][a - 1] * poly[j][b - 1])[:, None])
    return np.hstack(cols)


@dataclass
class Surrogate:
    """A fitted basis expansion: ``predict(u)`` approximates the runs' output at draws ``u``."""
    knots: int
    order: int
    coef: np.ndarray

    @classmethod
    def fit(cls, u, y, knots=17, order=1, ridge=1e-7):
        """Least squares with a small ridge (relative to the number of runs) that keeps
        hat functions no run falls under determined."""
        a = basis(u, knots, order)
        y = np.asarray(y, dtype=float)
        lhs = a.T @ a + ridge * len(y) * np.eye(a.shape[1])
        return cls(knots, order, np.linalg.solve(lhs, a.T @ y))

    def predict(self, u):
        return evaluate(u, self.knots, self.order, self.coef)

    def terms(self) -> int:
        return len(self.coef)


def evaluate(u, knots, order, coef):
    """The expansions with coefficients ``coef`` (one column per surrogate of the same
    basis) at draws ``u``: the basis is built once, block by block, for all of them."""
    u = np.asarray(u, dtype=float)
    return np.concatenate([basis(u[k:k + _BLOCK], knots, order) @ coef
                           for k in range(0, len(u), _BLOCK)])


def fit_quality(y, predicted):
    """Root-mean-square error and the share of the variance explained (R^2) of
    ``predicted`` against the runs' ``y``."""
    y = np.asarray(y, dtype=float)
    res = y - np.asarray(predicted, dtype=float)
    return {"rmse": float(np.sqrt(np.mean(res ** 2))),
            "r2": float(1.0 - np.mean(res ** 2) / np.var(y))}


def cross_validated(u, y, knots, order, folds=8, seed=0):
    """Every run predicted by a fit to the other folds: the error on unseen inputs."""
    u, y = np.asarray(u, dtype=float), np.asarray(y, dtype=float)
    order_ = np.random.default_rng(seed).permutation(len(y))
    pred = np.empty(len(y))
    for f in range(folds):
        test = order_[f::folds]
        train = np.setdiff1d(order_, test)
        pred[test] = Surrogate.fit(u[train], y[train], knots, order).predict(u[test])
    return fit_quality(y, pred)


def select(u, y, knots=KNOTS, orders=ORDERS, folds=8, seed=0):
    """The basis with the smallest cross-validated error among those with fewer terms than
    half the runs, fitted to all runs; returns it and every candidate's error."""
    u = np.asarray(u, dtype=float)
    tried = []
    for k in knots:
        for o in orders:
            terms = basis(u[:1], k, o).shape[1]
            if terms > len(y) // 2:
                continue
            q = cross_validated(u, y, k, o, folds, seed)
            tried.append({"knots": k, "order": o, "terms": terms, **q})
    if not tried:
        raise ValueError(f"{len(y)} runs are too few for any basis of {u.shape[1]} inputs")
    best = min(tried, key=lambda t: t["rmse"])
    return Surrogate.fit(u, y, best["knots"], best["order"]), tried
