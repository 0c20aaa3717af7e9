import pickle

import numpy as np
import pytest
from mpi4py import MPI

from mpi_util import agree
from pyfw.comm import Backoff, Comm
from pyfw.errors import CommTimeout


def test_backoff_doubles_and_caps():
    b = Backoff(tmin=1e-6, tmax=4e-6, spin=0.0)
    delays = []
    for _ in range(5):
        b.sleep()
        delays.append(b.delay)
    assert delays == [1e-6, 2e-6, 4e-6, 4e-6, 4e-6]
    b.reset()
    assert b.delay == 0.0


def test_backoff_yields_before_it_sleeps():
    import time
    b = Backoff(tmin=1e-6, tmax=4e-6, spin=0.05)
    t0 = time.perf_counter()
    calls = 0
    while b.delay == 0.0:          # still yielding, not sleeping
        b.sleep()
        calls += 1
    assert time.perf_counter() - t0 >= 0.05 and calls > 1 and b.slept == 0.0
    b.reset()
    b.sleep()
    assert b.delay == 0.0          # progress starts a new yield window


def test_self_messages_are_counted():
    c = Comm(MPI.COMM_SELF)
    c.isend({"a": np.arange(3)}, 0, 5)
    obj, src, tag = c.recv(0, 5, timeout=5)
    assert src == 0 and tag == 5 and obj["a"].tolist() == [0, 1, 2]
    nbytes = len(pickle.dumps({"a": np.arange(3)}, protocol=pickle.HIGHEST_PROTOCOL))
    t = c.traffic()
    assert t["sent_msgs"] == [1] and t["recv_msgs"] == [1]
    assert t["sent_bytes"] == [nbytes] and t["recv_bytes"] == [nbytes]
    c.flush(timeout=5)


def test_unpicklable_fails_on_sender():
    c = Comm(MPI.COMM_SELF)
    with pytest.raises(Exception):
        c.isend(lambda x: x, 0, 1)
    assert c.traffic()["sent_msgs"] == [0]


def test_recv_deadline():
    c = Comm(MPI.COMM_SELF)
    with pytest.raises(CommTimeout, match="within 0.05 s"):
        c.recv(0, 9, timeout=0.05)


@pytest.mark.mpi(min_size=2)
def test_ring_counts_buffers_and_objects():
    c = Comm(MPI.COMM_WORLD).dup()
    right, left = (c.rank + 1) % c.size, (c.rank - 1) % c.size
    out = np.full(1000, c.rank, dtype=np.float64)
    inb = np.empty_like(out)
    req = c.Irecv(inb, left, 3)
    c.Send(out, right, 3)
    req.Wait()
    assert (inb == left).all()
    c.isend(("hello", c.rank), right, 4)
    obj, src, _ = c.recv(left, 4, timeout=30)
    c.flush(timeout=30)
    assert obj == ("hello", left) and src == left
    t = c.traffic()
    assert t["sent_bytes"][right] >= 8000 and t["recv_bytes"][left] >= 8000
    assert t["sent_msgs"][right] == 2 and t["recv_msgs"][left] == 2
    c.mpi.Barrier()
    c.free()


@pytest.mark.mpi(min_size=2)
def test_delivery_shaper_delays_arrival_not_the_sender():
    import time

    from pyfw.monitor.emulate import DeliveryShaper
    c = Comm(MPI.COMM_WORLD).dup()
    hold = 0.5                    # injected; a sender that waited pays it 3 times (1.5 s)
    c.shaper = DeliveryShaper(c.rank, c.size, latency={(0, 1): hold})
    verdict = True
    if c.rank == 0:
        t0 = time.perf_counter()
        for i in range(3):
            c.isend(i, 1, 7)
        c.flush(timeout=30)
        # a sender that waited pays >= 3 holds; under 2 leaves a whole hold for a busy box
        verdict = time.perf_counter() - t0 < 2 * hold
    elif c.rank == 1:
        t0 = time.perf_counter()
        got = [c.recv(0, 7, timeout=30)[0] for _ in range(3)]
        waited = time.perf_counter() - t0
        verdict = got == [0, 1, 2] and waited > 0.95 * hold  # held, order kept
    agree(verdict, "timing or data off")
    c.mpi.Barrier()


@pytest.mark.mpi(min_size=2)
def test_delivery_shaper_holds_buffer_sends_without_blocking_the_sender():
    import time

    from pyfw.comm import DeferredSend, testall, waitall
    from pyfw.monitor.emulate import DeliveryShaper
    c = Comm(MPI.COMM_WORLD).dup()
    hold = 0.5                    # injected; a sender that waited pays it 3 times (1.5 s)
    c.shaper = DeliveryShaper(c.rank, c.size, latency={(0, 1): hold})
    verdict = True
    if c.rank == 0:
        t0 = time.perf_counter()
        reqs = [c.Isend(np.full(1000, i, np.float64), 1, 5) for i in range(3)]
        posted = time.perf_counter() - t0
        early = testall(reqs)
        tested = time.perf_counter() - t0
        waitall(reqs, timeout=30)
        # not complete before the hold had passed (whenever a loaded box let us look)
        verdict = (all(isinstance(r, DeferredSend) for r in reqs) and posted < 2 * hold
                   and (not early or tested >= 0.95 * hold)
                   and time.perf_counter() - t0 >= 0.95 * hold)
    elif c.rank == 1:
        bufs = [np.zeros(1000) for _ in range(3)]
        t0 = time.perf_counter()
        waitall([c.Irecv(b, 0, 5) for b in bufs], timeout=30)
        waited = time.perf_counter() - t0
        verdict = ([b[0] for b in bufs] == [0.0, 1.0, 2.0] and waited > 0.95 * hold)
    agree(verdict, "timing or data off")
    c.mpi.Barrier()
    c.free()


def test_bound_finalize_ends_a_stuck_exit():
    """A finalize that blocks (stand-in: an exit handler that sleeps 30 s, running after the
    bound is armed) ends by SIGALRM after the grace period instead of hanging."""
    import signal
    import subprocess
    import sys
    import time
    code = ("import atexit, time; atexit.register(time.sleep, 30); "
            "from pyfw.comm import bound_finalize; bound_finalize(1); print('done')")
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.stdout.strip() == "done"
    assert res.returncode == -signal.SIGALRM and time.monotonic() - t0 < 20
