"""The master-worker runtime: results, errors, rounds, cancellation, bad input.

The same tests run serially (1 process: the serial mode) and under mpiexec at 2 and 4 ranks.
Verdicts that only the master can check are shared with the workers, so a failure fails
every rank instead of leaving workers waiting.
"""
import collections
import functools
import json
import re
import time

import pytest
from mpi4py import MPI

import farm_tasks as ft
from pyfw import (ConfigurationError, Farm, FarmBroken, RemoteTraceback, TaskError,
                  TaskSerializationError)
from pyfw.farm import POLICIES
from pyfw.farm import _protocol as P

COMM = MPI.COMM_WORLD
both = pytest.mark.parametrize("mode", [
    pytest.param("serial", marks=[]),
    pytest.param("mpi", marks=pytest.mark.mpi(min_size=2)),
])


def comm_for(mode):
    return MPI.COMM_SELF if mode == "serial" else COMM


def run_master(comm, body, **farm_kwargs):
    """Run ``body(farm)`` on the master; return its value on every rank (None on failure
    is re-raised everywhere as AssertionError)."""
    outcome = None
    with Farm(comm, **farm_kwargs) as farm:
        if farm.is_master:
            try:
                outcome = ("ok", body(farm))
            except Exception as exc:  # shared so that workers fail too
                outcome = ("error", f"{type(exc).__name__}: {exc}")
    outcome = comm.bcast(outcome, root=0)
    if outcome[0] == "error":
        raise AssertionError(f"master failed: {outcome[1]}")
    return outcome[1]


@both
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_returns_each_result_exactly_once(mode, policy):
    comm = comm_for(mode)
    n = 503

    def body(farm):
        ordered = list(farm.map(ft.where, range(n)))
        unordered = list(farm.map(ft.square, range(n), unordered=True))
        return ordered, unordered, farm.stats()

    ordered, unordered, stats = run_master(comm, body, policy=policy, tail_duplication=False)
    assert [x for x, _ in ordered] == list(range(n))
    assert sorted(unordered) == [(i, i * i) for i in range(n)]
    assert stats["tasks"] == 2 * n
    assert stats["executions"] == 2 * n   # no task ran twice
    if comm.size > 1:
        assert {r for _, r in ordered} <= set(range(1, comm.size))


@both
def test_map_forms_match_builtin_map(mode):
    comm = comm_for(mode)

    def body(farm):
        return (list(farm.map([ft.Square(i) for i in range(50)])),
                list(farm.map(ft.add, range(10), range(100, 110))),
                list(farm.starmap(ft.add, [(1, 2), (3, 4)])),
                list(farm.map(ft.square, (i for i in range(30)), chunksize=7)),
                list(farm.map(ft.square, [])))

    tasks, two, star, lazy, empty = run_master(comm, body)
    assert tasks == [i * i for i in range(50)]
    assert two == list(map(ft.add, range(10), range(100, 110)))
    assert star == [3, 7] and lazy == [i * i for i in range(30)] and empty == []


@both
def test_task_error_carries_remote_traceback(mode):
    comm = comm_for(mode)

    def body(farm):
        try:
            list(farm.map(ft.fail_on_seven, range(20)))
        except TaskError as exc:
            return (exc.index, exc.rank, exc.exc_type, str(exc), type(exc.__cause__).__name__,
                    str(exc.__cause__), type(exc.exception).__name__)
        return None

    got = run_master(comm, body)
    assert got is not None, "the failing task did not raise"
    index, rank, exc_type, msg, cause_type, cause, original = got
    assert index == 7 and exc_type == "ValueError" and original == "ValueError"
    assert "seven is not allowed" in msg and f"rank {rank}" in msg
    assert cause_type == "RemoteTraceback"
    assert "fail_on_seven" in cause and "Worker rank" in cause and "ValueError" in cause
    if comm.size > 1:
        assert rank >= 1


@both
def test_collect_mode_and_retries(mode):
    comm = comm_for(mode)

    def body(farm):
        out = list(farm.map(ft.fail_on_seven, range(10)))
        return [type(v).__name__ if isinstance(v, Exception) else v for v in out], \
            [v.attempts for v in out if isinstance(v, TaskError)]

    values, attempts = run_master(comm, body, on_error="collect", retries=2)
    assert values == [0, 1, 2, 3, 4, 5, 6, "TaskError", 8, 9]
    assert attempts == [3]   # first run + 2 retries, then reported


@both
def test_failures_among_microsecond_tasks_keep_their_places(mode):
    """Tasks of microseconds run in timed sub-batches of up to thousands (and long chunks
    reply in parts): each failure must still land on its own task, each value on its own."""
    comm = comm_for(mode)
    n = 40_000

    def body(farm):
        out = list(farm.map(ft.fail_on_multiples, range(n)))
        failed = [i for i, v in enumerate(out) if isinstance(v, TaskError)]
        wrong = [i for i, v in enumerate(out) if not isinstance(v, TaskError) and v != i]
        indices = [out[i].index for i in failed]
        return failed, wrong, indices

    failed, wrong, indices = run_master(comm, body, on_error="collect")
    assert failed == list(range(0, n, 997)) and indices == failed
    assert wrong == []


@both
def test_rounds_and_cancellation_return_workers_to_idle(mode):
    comm = comm_for(mode)

    def body(farm):
        seen = []
        for rnd_no in range(3):          # several waves over the same workers
            rnd = farm.open([ft.Spin(i, 0.02 if i == 0 else 30.0) for i in range(40)])
            first = next(iter(rnd))
            seen.append(first.result)
            t0 = time.perf_counter()
            rnd.cancel()                 # waits until every worker is idle again
            seen.append(time.perf_counter() - t0)
            if farm.engine.__class__.__name__ == "Engine":
                assert not farm.engine.chunks, "chunks still in flight after cancel"
                assert all(not w.inflight for w in farm.engine.workers.values())
        after = list(farm.map(ft.square, range(20)))
        return seen, after

    seen, after = run_master(comm, body)
    firsts, waits = seen[0::2], seen[1::2]
    assert all(f == ("done", 0) for f in firsts)
    assert max(waits) < 5.0              # the 30 s tasks stopped promptly
    assert after == [i * i for i in range(20)]


@both
def test_setup_and_resources_load_once_per_worker(mode):
    comm = comm_for(mode)

    def body(farm):
        marks = list(farm.map([ft.ReadsMarker() for _ in range(10)]))
        uses = list(farm.map([ft.UsesTable(i) for i in range(60)]))
        return marks, uses

    marks, uses = run_master(comm, body, setup=ft.setup_marker, setup_args=("hello",))
    assert marks == ["hello"] * 10
    per_rank = {}
    for _, rank, table_id, pid in uses:
        per_rank.setdefault(rank, set()).add((table_id, pid))
    assert all(len(v) == 1 for v in per_rank.values())   # one table object per worker


@both
def test_failing_setup_breaks_the_farm_with_its_cause(mode):
    # the same error type at the same point in both modes: FarmBroken at the first map,
    # the setup's own error (with its traceback) as the cause
    comm = comm_for(mode)

    def body(farm):
        try:
            list(farm.map(ft.square, range(10)))
        except FarmBroken as exc:
            return str(exc), str(exc.__cause__.__cause__)
        return None

    got = run_master(comm, body, setup=ft.failing_setup)
    assert got is not None
    assert "setup function failed" in got[0] and "table file missing" in got[0]
    assert "failing_setup" in got[1]


@pytest.mark.mpi(min_size=2)
def test_a_long_chunk_hands_over_its_results_in_parts():
    """A chunk running longer than PARTIAL_EVERY sends what it has done so far: the master
    gets a worker's first results while the rest of its chunk still runs."""
    k = 16                                            # 16 x 50 ms: a 0.8 s chunk each

    def body(farm):
        n = k * farm.num_workers
        arrived = {}
        t0 = time.monotonic()
        for i, rank in farm.map(ft.nap_where, range(n), unordered=True, chunksize=k):
            arrived.setdefault(rank, []).append(time.monotonic() - t0)
        return n, {r: (len(ts), ts[0], ts[-1]) for r, ts in arrived.items()}

    n, per_rank = run_master(COMM, body)
    assert sum(c for c, _, _ in per_rank.values()) == n
    # without partial replies a chunk's results arrive together; with them, its first
    # results come back while the rest of the chunk runs (a part every 0.2 s)
    spans = [last - first for _, first, last in per_rank.values()]
    assert max(spans) > 2 * P.PARTIAL_EVERY, per_rank


@pytest.mark.mpi(min_size=2)
def test_a_round_probes_each_worker_with_at_most_two_tasks_before_timing_it():
    """A worker not yet timed in a round gets one-task probes, at most two of them in
    flight, whatever depth the pipeline has reached: a second map after a first (the
    workers measured, the depth fixed at 8 here) must not send each worker eight single
    tasks before the first of them returns (issue 41: up to 32 at 256 ranks)."""
    from pyfw.farm.engine import PROBES_IN_FLIGHT

    def body(farm):
        eng = farm.engine
        send = eng._send
        held = []    # chunks of the round a worker held when sent another, still untimed

        def watched(w, rnd, ids, items, now):
            if rnd.task_time.get(w.rank) is None:
                held.append(sum(1 for c in w.inflight if c.rnd is rnd))
            return send(w, rnd, ids, items, now)
        eng._send = watched
        try:
            nap = functools.partial(ft.nap_where, seconds=0.005)
            n = 40 * farm.num_workers
            first = sorted(i for i, _ in farm.map(nap, range(n), unordered=True))
            second = sorted(i for i, _ in farm.map(nap, range(n), unordered=True))
        finally:
            eng._send = send
        return n, first, second, held

    n, first, second, held = run_master(COMM, body, pipeline_depth=8)
    assert first == second == list(range(n))
    assert held and max(held) < PROBES_IN_FLIGHT, held


@pytest.mark.mpi(min_size=3)
def test_a_long_round_trip_forecast_does_not_hand_one_worker_the_round():
    """A worker holds at most its share of what a round has left, however long the round
    trips the pipeline forecasts. A master saturated by a map of 1 ms tasks at 256 ranks
    learnt round trips of 1-3 s; with the lead time alone as the bound, the first node to
    return its probe of the next map got 1.7 s of work at once and a quarter of the map
    (issue 41). Here every worker's round trip is forecast at 3 s, the round is 1.2 s of
    work: without the share bound one worker ran 596 of 600 tasks."""
    def body(farm):
        nap = functools.partial(ft.nap_where, seconds=0.002)
        list(farm.map(nap, range(100)))             # every worker timed
        pipeline = farm.engine.pipeline
        pipeline.rtt_of = lambda rank=None: 3.0      # what a saturated master measured
        try:
            return list(farm.map(nap, range(600)))
        finally:
            del pipeline.rtt_of
    ranks = run_master(COMM, body, tail_duplication=False)
    assert len(ranks) == 600
    shares = collections.Counter(ranks)
    even = 600 / (COMM.size - 1)
    assert max(shares.values()) < 2 * even, shares


@pytest.mark.mpi(min_size=2)
def test_unpicklable_task_fails_on_every_rank():
    if COMM.rank == 0:
        with pytest.raises(TaskSerializationError, match=r"task 3 .*Holds.* cannot be pickled"):
            with Farm(COMM) as farm:
                list(farm.map([ft.Square(0), ft.Square(1), ft.Square(2), ft.Holds()],
                              chunksize=1))
    else:
        with pytest.raises(FarmBroken, match="TaskSerializationError"):
            with Farm(COMM) as farm:
                pass


@pytest.mark.mpi(min_size=2)
def test_unpicklable_function_and_result():
    def body(farm):
        out = []
        try:
            list(farm.map(lambda x: x, range(3)))
        except TaskSerializationError as exc:
            out.append(str(exc))
        try:
            list(farm.map(ft.unpicklable_result, range(3)))
        except TaskError as exc:
            out.append((exc.exc_type, str(exc)))
        return out

    fn_msg, (res_type, res_msg) = run_master(COMM, body)
    assert "cannot be pickled" in fn_msg and "lambda" in fn_msg
    assert res_type == "TaskSerializationError" and re.search(r"result of task [0-2] cannot be pickled", res_msg)


@both
def test_bad_inputs_give_clear_errors_on_every_rank(mode):
    comm = comm_for(mode)
    with pytest.raises(ConfigurationError, match="unknown scheduling policy 'quickest'"):
        Farm(comm, policy="quickest")
    with pytest.raises(ConfigurationError, match="on_error"):
        Farm(comm, on_error="ignore")

    def body(farm):
        try:
            list(farm.map([ft.Square(1), 42]))
        except TypeError as exc:
            return str(exc)

    msg = run_master(comm, body)
    assert "item 1 is a int, not a pyfw.Task" in msg


@both
def test_stats_summary_json(mode, tmp_path_factory):
    comm = comm_for(mode)
    path = str(tmp_path_factory.mktemp("stats") / "stats.json") if comm.rank == 0 else None

    def body(farm):
        list(farm.map(ft.square, range(1000)))
        farm.write_stats(path)
        return json.load(open(path))

    stats = run_master(comm, body)
    assert stats["tasks"] == 1000
    # straggler copies may run some tasks twice; every run is accounted for
    executions = sum(w["tasks"] for w in stats["workers"])
    assert stats["executions"] == executions
    assert 1000 <= executions <= 1000 + stats["duplicates"] * 1000
    assert len(stats["workers"]) == max(1, comm.size - 1)
    if comm.size > 1:
        assert all(w["bytes_to"] > 0 and w["bytes_from"] > 0
                   for w in stats["workers"] if w["tasks"])


@pytest.mark.mpi(min_size=3)
def test_straggler_is_overtaken_by_a_copy():
    # rank 1 would take 20 s per task; with a 0.3 s task timeout copies go elsewhere
    def body(farm):
        t0 = time.perf_counter()
        out = list(farm.map([ft.StraggleOnRank(i, 1, 20.0) for i in range(6)], chunksize=1))
        return out, time.perf_counter() - t0, farm.stats()["duplicates"]

    out, elapsed, dups = run_master(COMM, body, task_timeout=0.3, policy="ss")
    assert [i for i, _ in out] == list(range(6))
    assert elapsed < 15.0 and dups >= 1


@pytest.mark.mpi(min_size=3)
def test_tail_duplication_copies_the_last_chunk_and_can_be_turned_off():
    # who computed each result tells who won, not a wall-clock race: with duplication rank
    # 1's task (20 s there, cancelled once a copy wins) must come back from a fast worker
    def body(farm):
        out = {}
        for dup, slow in ((True, 20.0), (False, 1.5)):
            before = farm.stats()["duplicates"]
            rnd = farm.open([ft.StraggleOnRank(i, 1, slow) for i in range(4)], chunksize=1,
                            tail_duplication=dup)
            t0 = time.perf_counter()
            res = sorted(d.result for d in rnd)
            out[dup] = (res, time.perf_counter() - t0, farm.stats()["duplicates"] - before)
        return out

    out = run_master(COMM, body, policy="ss")
    for dup in (True, False):
        assert [i for i, _ in out[dup][0]] == [0, 1, 2, 3]
    assert out[True][2] >= 1, out[True]                  # a copy was made ...
    assert all(rank != 1 for _, rank in out[True][0]), out[True]  # ... and beat the slow one
    assert out[False][2] == 0                            # nobody helped ...
    if any(rank == 1 for _, rank in out[False][0]):      # ... so the slow one finished it
        assert out[False][1] >= 1.4                      # (a lower bound: load only adds)


class Counting:
    """An endless task stream that remembers how far it was read."""

    def __init__(self):
        self.read = 0

    def __iter__(self):
        while True:
            self.read += 1
            yield self.read


@both
def test_endless_stream_is_read_lazily_and_abandoning_it_cancels(mode):
    comm = comm_for(mode)

    def body(farm):
        stream = Counting()
        got = []
        for value in farm.map(ft.square, stream):     # ordered, endless
            got.append(value)
            if len(got) == 5000:
                break
        read_when_stopped = stream.read
        after = list(farm.map(ft.square, range(10)))  # the farm is usable again
        return got[:3], read_when_stopped, after, farm.engine.rounds == {}

    first, read, after, no_rounds = run_master(comm, body)
    assert first == [1, 4, 9] and after == [i * i for i in range(10)] and no_rounds
    assert read < 5000 + 250_000          # bounded read-ahead, not the whole (endless) stream


@pytest.mark.mpi(min_size=2)
def test_idle_workers_and_master_do_not_burn_a_core():
    # CPU as a fraction of the wall time each process measured itself over the same span
    # (a loaded box stretches the span; a polling loop that burns a core stays near 1)
    def cpu_by_rank(farm):
        got = {}
        for rank, cpu in farm.map(ft.cpu_seconds, range(50 * farm.num_workers),
                                  chunksize=1):
            got[rank] = max(cpu, got.get(rank, (0.0, 0.0)))
        return got

    def body(farm):
        before = cpu_by_rank(farm)
        master0 = time.process_time()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:   # nothing to do: the master waits in its loop
            farm.engine.step()
        master = (time.process_time() - master0) / (time.perf_counter() - t0)
        after = cpu_by_rank(farm)
        return master, {r: (after[r][0] - before[r][0]) / (after[r][1] - before[r][1])
                        for r in before if r in after}

    master_share, worker_share = run_master(COMM, body)
    assert master_share < 0.3, f"idle master used {master_share:.0%} of a core"
    assert worker_share and max(worker_share.values()) < 0.4, worker_share


@pytest.mark.mpi(min_size=2)
def test_a_worker_gets_its_next_chunk_before_it_runs_dry():
    """The master sends a worker's next chunk while the current one still runs (the lead
    time before its forecast end), so workers do not wait a round trip between chunks. A
    forecast floored at half a chunk held every next chunk back until the DONE came."""
    def body(farm):
        eng = farm.engine
        on_done = eng._on_done
        seen = []                      # per final DONE: did that worker hold another chunk?

        def watched(msg, src):
            on_done(msg, src)
            reply = P.read_done(msg)
            if reply.status == P.OK and any(r.has_pending() for r in eng.rounds.values()):
                seen.append(len(eng.workers[src].inflight) > 0)
        eng._on_done = watched
        try:
            out = list(farm.map(ft.sleepy, [0.02] * (12 * (COMM.size - 1)), chunksize=2))
        finally:
            eng._on_done = on_done
        return len(out), seen

    n, seen = run_master(COMM, body, tail_duplication=False)
    assert n == 12 * (COMM.size - 1)
    # chunks of 40 ms, lead time about a millisecond: all but the first few arrive ahead
    assert len(seen) >= 3 and sum(seen) >= len(seen) // 2, seen
