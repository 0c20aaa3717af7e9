"""The farm's non-blocking round API (Farm.open/step, Round.drain/release/close), the face
pyfw.futures is built on: several rounds at once, a bounded window, closing early."""
import pytest
from mpi4py import MPI

import farm_tasks as ft
from pyfw.farm import Batch, Farm


def drive(farm, rounds, limit=200_000):
    """Step until every round finished; {round index: {task id: value or error}}."""
    got = {i: {} for i in range(len(rounds))}
    for _ in range(limit):
        for i, rnd in enumerate(rounds):
            for batch in rnd.drain():
                assert isinstance(batch, Batch)
                for pos, (tid, value) in enumerate(zip(batch.ids, batch.values)):
                    err = batch.errors.get(pos) if batch.errors else None
                    got[i][tid] = err if err is not None else value
        if all(rnd.finished for rnd in rounds):
            break
        farm.step()
    for rnd in rounds:
        rnd.close()
    return got


def exercise(farm):
    squares = farm.open(ft.square, range(500))
    sums = farm.open(ft.add, range(50), range(100, 150))   # zipped: fn(x, y)
    pairs = farm.open(ft.add, iter([(1, 2), (3, 4)]), star=True, total=2)
    failing = farm.open(ft.fail_on_seven, range(10))
    got = drive(farm, [squares, sums, pairs, failing])
    assert got[0] == {i: i * i for i in range(500)}
    assert got[1] == {i: 2 * i + 100 for i in range(50)}
    assert got[2] == {0: 3, 1: 7}
    assert type(got[3][7]).__name__ == "TaskError" and got[3][3] == 3

    windowed = farm.open(ft.square, range(100), window=10)
    seen = {}
    for _ in range(100_000):   # nothing past 10 + the acknowledged index is dispatched
        for batch in windowed.drain():
            seen.update(zip(batch.ids, batch.values))
        assert max(seen, default=0) < 10 + len(seen)
        windowed.release(len(seen))
        if windowed.finished:
            break
        farm.step()
    windowed.close()
    assert seen == {i: i * i for i in range(100)}

    early = farm.open(ft.sleepy, [0.05] * 40)
    farm.step()
    early.close()                  # cancels what has not run; the farm goes on
    assert drive(farm, [farm.open(ft.square, [3])])[0] == {0: 9}


def test_round_api_serial():
    with Farm(MPI.COMM_SELF) as farm:
        exercise(farm)


@pytest.mark.mpi(min_size=2)
def test_round_api_mpi():
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            exercise(farm)




@pytest.mark.mpi(min_size=2)
def test_an_eager_round_fills_every_pipeline_at_once():
    """Once the farm knows its task times, a round's second chunk for a worker waits until
    the first is nearly done (its lead time, a forecast round trip); an eager round sends
    it at once, as far as the pipeline depth (2 or more) allows. Two dispatch turns decide
    it (the first gives every worker one chunk of a round it has not timed): no clock
    races. (Whether the plain round held its second chunks back depends on the forecast
    round trip, which queueing behind pipelined chunks can inflate: only counted.)"""
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            n = farm.num_workers
            once = dict(chunksize=1, tail_duplication=False)   # no copies left running
            drive(farm, [farm.open(ft.square, range(200), **once)])   # round trips
            hold = farm.open(ft.square, [1])     # an open round keeps the measured times
            drive(farm, [farm.open(ft.sleepy, [0.5] * 2 * n, **once)])
            sent = {}
            for eager in (False, True):
                rnd = farm.open(ft.sleepy, [0.5] * 2 * n, eager=eager, **once)
                farm.step()
                farm.step()
                sent[eager] = farm.in_flight
                rnd.cancel(wait=True)
                rnd.close()
            hold.close()
            assert sent[True] == 2 * n and n <= sent[False] <= 2 * n, sent


@pytest.mark.mpi(min_size=2)
def test_the_master_sleeps_longer_only_while_every_worker_has_timed_work():
    """An idle master turn costs CPU that the workers sharing its cores could use. While every
    worker holds tasks of a measured time, the idle sleeps grow past the 1 ms cap, up to a
    quarter of the work left (10 ms at most here, with 0.4 s of work per worker). While a
    worker is untimed or has nothing, they stay at 1 ms, so its next task goes out at once.
    The sleeps asked for are recorded, not timed: no clock race."""
    from pyfw.farm.engine import IDLE_SLEEP_MAX, IDLE_SLEEP_MIN
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            n, engine = farm.num_workers, farm.engine
            longest, last = [0.0], [engine.backoff.slept]

            def record(eng):
                longest[0] = max(longest[0], eng.backoff.slept - last[0])
                last[0] = eng.backoff.slept
            engine.observer = record
            once = dict(chunksize=1, tail_duplication=False)
            drive(farm, [farm.open(ft.sleepy, [0.2] * n, **once)])    # untimed, then empty
            untimed = longest[0]
            longest[0] = 0.0
            got = drive(farm, [farm.open(ft.sleepy, [0.2] * 2 * n, eager=True, **once)])
            busy = longest[0]
            engine.observer = None
            assert got[0] == {i: 0.2 for i in range(2 * n)}
            assert untimed <= IDLE_SLEEP_MIN + 1e-9, untimed      # (sums of floats)
            assert IDLE_SLEEP_MIN + 1e-9 < busy <= IDLE_SLEEP_MAX + 1e-9, busy


def test_an_ordered_rounds_chunks_are_capped_only_when_it_outgrows_its_window():
    from pyfw.farm.policies import make_policy
    from pyfw.farm.rounds import WINDOW_SHARE, RoundState

    def rnd(total, window):
        return RoundState(0, range(total or 10), abs, False, total, make_policy("fac2"), "r",
                          window=window)
    assert rnd(1000, None).chunk_cap(8) is None          # unordered: nothing waits
    assert rnd(1000, 1000).chunk_cap(8) is None          # every task inside the window
    assert rnd(1001, 1000).chunk_cap(8) == 1000 // (WINDOW_SHARE * 8)
    assert rnd(None, 1000).chunk_cap(8) == 1000 // (WINDOW_SHARE * 8)   # a lazy source
    assert rnd(10**6, 100).chunk_cap(255) == 1           # never empty


@pytest.mark.mpi(min_size=2)
def test_no_chunk_of_an_ordered_round_larger_than_its_window_holds_up_the_others():
    """A round of 600 tasks with a window of 48: unchecked, the factoring policy's first
    chunks (600 / (2 x workers) tasks) would fill the window at once, and the dispatch of
    everything behind a chunk would wait for it. Every chunk now takes at most
    48 / (4 x workers) tasks; a reply (a Batch) never holds more than its chunk."""
    from pyfw.farm.rounds import WINDOW_SHARE
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            window = 48
            cap = max(1, window // (WINDOW_SHARE * farm.num_workers))
            rnd = farm.open(ft.square, range(600), window=window, policy="fac2")
            seen, largest, upto = {}, 0, 0
            for _ in range(200_000):
                for batch in rnd.drain():
                    largest = max(largest, len(batch.ids))
                    seen.update(zip(batch.ids, batch.values))
                while upto in seen:     # handed out in order up to here
                    upto += 1
                rnd.release(upto)
                if rnd.finished:
                    break
                farm.step()
            rnd.close()
            assert seen == {i: i * i for i in range(600)}
            assert 1 <= largest <= cap, (largest, cap)
