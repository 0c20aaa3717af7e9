"""The knee run gives bitwise-identical fields on 1, 2, 3 and 4 ranks, with uneven slabs and
a forced mid-run rebalance (sub-communicators of the launch give every rank count up to its
size; the reference is a serial run on COMM_SELF)."""

import numpy as np
import pytest
from mpi4py import MPI

from apps.knee.model import KneeRun, Params
from pyfw.domain import partition as P
from mpi_util import everywhere
from pyfw.errors import ConfigurationError

W = MPI.COMM_WORLD
PARAMS = dict(shape=(36, 36, 34), length_mm=16.0, thickness_mm=4.0, steady_tol=1e-9)


def simulate(comm, cuts=None, rebalance_to=None, steps=24, **params):
    run = KneeRun(comm, Params(**dict(PARAMS, **params)), balance=False, log=lambda *a: None,
                  cuts=cuts)
    run.steady_state()
    run.irrigate()
    run.start_cooling()
    run.run(steps=steps // 2, history_every=0)
    if rebalance_to is not None:
        run.dom.repartition(rebalance_to)
    run.run(steps=steps, history_every=0)
    return run.dom.gather("T"), run.stats(), run.probe()


@pytest.mark.mpi(min_size=2)
def test_bitwise_identical_on_every_rank_count():
    ref = simulate(MPI.COMM_SELF) if W.rank == 0 else None
    nz = PARAMS["shape"][0]
    for n in range(2, W.size + 1):
        sub = W.Split(0 if W.rank < n else MPI.UNDEFINED, W.rank)

        def body():
            if sub == MPI.COMM_NULL:
                return
            rng = np.random.default_rng(n)
            uneven = P.partition(np.ones(nz), rng.uniform(0.3, 3.0, n))
            other = P.partition(np.ones(nz), rng.uniform(0.3, 3.0, n))
            for cuts, move in ((None, None), (uneven, other)):
                T, stats, probe = simulate(sub, cuts, move)
                if W.rank == 0:
                    assert np.array_equal(T, ref[0]), f"{n} ranks, cuts {cuts}"
                    assert repr(stats) == repr(ref[1]) and probe == ref[2]
        everywhere(body)
        if sub != MPI.COMM_NULL:
            sub.Free()


@pytest.mark.mpi(min_size=2)
def test_arthroscopy_and_device_removal_are_bitwise_identical_on_uneven_slabs():
    """The irrigation phase before the cooling (its own solver, the cavity held fixed) and
    the device put on and taken off during the cooling (steps 3 and 6 of 24) give the
    serial fields on uneven slabs of every rank count."""
    post_op = dict(arthroscopy_min=0.5, bandage_mm=1.0, device_on_min=0.025,
                   device_off_min=0.05)
    ref = simulate(MPI.COMM_SELF, **post_op) if W.rank == 0 else None
    for n in range(2, W.size + 1):
        sub = W.Split(0 if W.rank < n else MPI.UNDEFINED, W.rank)

        def body():
            if sub == MPI.COMM_NULL:
                return
            uneven = P.partition(np.ones(PARAMS["shape"][0]),
                                 np.random.default_rng(n).uniform(0.3, 3.0, n))
            T, stats, probe = simulate(sub, uneven, **post_op)
            if W.rank == 0:
                assert np.array_equal(T, ref[0]), f"{n} ranks, cuts {uneven}"
                assert probe == ref[2] and probe["suprapatellar_pouch"] < 30.0
        everywhere(body)
        if sub != MPI.COMM_NULL:
            sub.Free()


@pytest.mark.mpi(min_size=2)
def test_balanced_run_with_slow_rank_stays_bitwise_identical():
    """Real timings with one rank emulated 3x slower: the balancer moves boundaries (in the
    right direction) and the field is still identical to the serial one."""
    def body():
        p = Params(**PARAMS)
        ref = None
        if W.rank == 0:
            r0 = KneeRun(MPI.COMM_SELF, p, balance=False, log=lambda *a: None)
            r0.steady_state()
            r0.start_cooling()
            r0.run(steps=150, history_every=0)
            ref = r0.dom.gather("T")
        # the balancer skips its first window and wants three agreeing ones before a move
        # (pyfw.domain.balance): 30 windows leave room on a loaded machine
        run = KneeRun(W, Params(**PARAMS), balance=True, balance_every=5,
                      slowdown=3.0 if W.rank == W.size - 1 else 1.0, log=lambda *a: None)
        run.steady_state()
        run.start_cooling()
        run.run(steps=150, history_every=0)
        T = run.dom.gather("T")
        if W.rank == 0:
            assert np.array_equal(T, ref)
        assert run.dom.moves >= 1
        sizes = np.diff(run.dom.cuts)
        assert sizes[-1] < sizes[:-1].min(), run.dom.cuts  # the slow rank got the least
    everywhere(body)


@pytest.mark.mpi(min_size=2)
def test_bad_input_fails_on_every_rank():
    with pytest.raises(ConfigurationError, match="unknown tissue 'bone'"):
        KneeRun(W, Params(**PARAMS, overrides={"bone.k": 1.0}))
    with pytest.raises(ConfigurationError, match="does not fit"):
        KneeRun(W, Params(**dict(PARAMS, thickness_mm=40.0)))
    with pytest.raises(ConfigurationError, match="unknown side"):
        KneeRun(W, Params(**PARAMS, sides=("front",)))
    run = KneeRun(W, Params(**PARAMS, dt=5.0), log=lambda *a: None)
    with pytest.raises(ConfigurationError, match="above the stability limit"):
        run.steady_state()   # refused before the steady-state solve, not after it
