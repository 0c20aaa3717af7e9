"""Two-level farm jobs for test_farm_hierarchy.py: ``python hier_job.py MODE OUT [journal]``.

Run with ``PYFW_FARM_NODE_SIZE=2`` on 5 ranks: node {0, 1} holds the master and a direct
worker, node {2, 3} a sub-master (2) and its worker (3), node {4} a direct worker.

MODE ``contract``: ordered and unordered maps, a task's error (type and the rank that really
ran it), retries, two rounds at once with one cancelled while its tasks run, a task_timeout
copy of a straggler, and the statistics (every worker, exactly once).
MODE ``kill-submaster`` (ULFM): the master SIGKILLs the sub-master mid-map.
MODE ``kill-node-worker`` (ULFM): rank $HIER_KILL_RANK (default 3), behind a sub-master,
SIGKILLs itself mid-map (``HIER_SUBMASTER`` names the sub-master for ``kill-submaster``).
MODE ``journal``: 300 tasks with a result journal, each recording the run id.
MODE ``rejoin`` (ULFM, 6 ranks, ``PYFW_FARM_NODE_SIZE=3`` or three real nodes of two): the
issue-36 reproduction. $HIER_TASKS tasks (24) of $HIER_TASK_S seconds (0.8), each polling
``ctx.cancelled()`` every 10 ms; once $HIER_KILL_AFTER seconds (one task's time) have passed
*and* the node workers of the last node have each finished a task and are inside the next,
the master SIGKILLs that node's sub-master. The node workers are to rejoin the master as direct workers.
MODE ``kill-submaster-at-end`` (ULFM): the master kills the last node's sub-master as it
leaves the farm, before it can know (every rank bounds its MPI_Finalize: a rank that never
heard of the death may wait for it there, open-mpi/ompi#11404).
MODE ``exit-in-task`` (ULFM): rank $HIER_EXIT_RANK raises $HIER_EXIT_KIND (``SystemExit`` or
``KeyboardInterrupt``) in its 3rd task of 60 of 20 ms; it leaves the farm.
MODE ``exit-in-setup`` (ULFM): rank $HIER_EXIT_RANK raises $HIER_EXIT_KIND in the setup.
The master writes a JSON summary to OUT; every other rank that leaves its ``with Farm``
quietly writes OUT.rankN.
"""
import faulthandler
import json
import os
import signal
import sys
import time

from mpi4py import MPI

from pyfw import Farm, Task
from pyfw.comm import bound_finalize
from pyfw.farm.progress import format_summary

RANK = MPI.COMM_WORLD.Get_rank()
faulthandler.register(signal.SIGUSR1)   # where a hung rank is: kill -USR1 it
_count = 0


def square(x):
    time.sleep(0.001)
    return x * x, RANK


def uneven(x):
    time.sleep(0.0002 * (x * 7 % 5))
    return x * x, RANK


def failing(x):
    if x == 7:
        raise KeyError(f"bad {x}")
    return x


def flaky(x):
    """Tasks 3, 13, 23, 33 fail the first time they run, wherever that is, and succeed when
    retried anywhere. (A per-process "first time" made task 13 fail on three different
    workers in a loaded run, using up its three attempts.) The marker files live beside the
    job's output, a directory of its own per test."""
    if x % 10 == 3:
        marker = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), f"flaky-{x}")
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return x
        raise RuntimeError("transient")
    return x


def slow(x, ctx=None):
    time.sleep(0.05)
    return x


_straggled = []


def straggle(x):
    if RANK == 3 and not _straggled:   # behind the sub-master: a copy must win elsewhere
        _straggled.append(x)
        time.sleep(3.0)
        return x, RANK, "straggler"
    time.sleep(0.01)
    return x, RANK, ""


def suicide(x):
    global _count
    _count += 1
    if RANK == int(os.environ.get("HIER_KILL_RANK", "3")) and _count == 20:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.002)
    return x, RANK


def journaled(x):
    time.sleep(0.005)
    return x, os.environ.get("PYFW_RUN_ID", "?")


def _mark(name):
    """An empty file beside the job's output (the master reads them: who runs what now)."""
    folder = os.path.dirname(os.path.abspath(sys.argv[2]))
    open(os.path.join(folder, name), "w").close()


def _marked(name):
    return os.path.exists(os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), name))


class Poll(Task):
    """A long task that polls ``ctx.cancelled()`` every 10 ms and gives up when it says so,
    marking its start and end (``start-RANK-I``, ``end-RANK-I``)."""

    def __init__(self, i, seconds):
        self.i, self.seconds = i, seconds

    def run(self, ctx):
        _mark(f"start-{RANK}-{self.i}")
        t_end = time.monotonic() + self.seconds
        while time.monotonic() < t_end:
            if ctx.cancelled():
                return None
            time.sleep(0.01)
        _mark(f"end-{RANK}-{self.i}")
        return self.i, RANK


def _inside_a_task(rank, ntasks):
    return any(_marked(f"start-{rank}-{i}") and not _marked(f"end-{rank}-{i}")
               for i in range(ntasks))


def _mid_run(rank, ntasks):
    """``rank`` has finished a task and is inside the next one."""
    return (any(_marked(f"end-{rank}-{i}") for i in range(ntasks))
            and _inside_a_task(rank, ntasks))


def rejoin(farm):
    """Kill the second node's sub-master while its node workers are inside a task; every
    result and where it came from."""
    ntasks = int(os.environ.get("HIER_TASKS", "24"))
    seconds = float(os.environ.get("HIER_TASK_S", "0.8"))
    kill_after = float(os.environ.get("HIER_KILL_AFTER", str(seconds)))
    lay = farm._layout
    node, sub = max(lay.submasters.items())
    node_workers = lay.members[node][1:]
    t0 = time.monotonic()
    rnd = farm.open([Poll(i, seconds) for i in range(ntasks)])
    got, killed = [], None
    while not rnd.finished:
        farm.step()
        for batch in rnd.drain():
            now = time.monotonic() - t0
            got += [[tid, value, batch.rank, now] for tid, value in zip(batch.ids, batch.values)]
        if killed is None and time.monotonic() - t0 >= kill_after and all(
                _mid_run(r, ntasks) for r in node_workers):
            os.kill(farm.engine.workers[sub].pid, signal.SIGKILL)
            killed = {"at": time.monotonic() - t0, "done": len(got),
                      "running": sorted(r for r in range(1, farm.size)
                                        if _inside_a_task(r, ntasks))}
    rnd.close()
    st = farm.stats()
    return {"results": got, "killed": killed, "wall": time.monotonic() - t0,
            "submaster": sub, "node_workers": node_workers, "seconds": seconds,
            "ntasks": ntasks, "alive": {w["rank"]: w["alive"] for w in st["workers"]},
            "hosts": {w["rank"]: w["host"] for w in st["workers"]}}


_exits = {"n": 0}


def _exit_now():
    kind = os.environ.get("HIER_EXIT_KIND", "SystemExit")
    raise SystemExit(3) if kind == "SystemExit" else KeyboardInterrupt()


def exiting(x):
    _exits["n"] += 1
    if RANK == int(os.environ["HIER_EXIT_RANK"]) and _exits["n"] == 3:
        _exit_now()
    time.sleep(0.02)
    return x, RANK


def exit_in_setup(ctx):
    if RANK == int(os.environ["HIER_EXIT_RANK"]):
        _exit_now()


def contract(farm):
    out = {"hierarchy": farm.hierarchy}
    got = list(farm.map(square, range(1000)))
    out["ordered"] = [v for v, _ in got] == [x * x for x in range(1000)]
    # uneven tasks finish out of order inside a node: every ordered map still in order
    for _ in range(4):
        out["ordered"] &= [v for v, _ in farm.map(uneven, range(400))] == \
            [x * x for x in range(400)]
    out["ranks"] = sorted({r for _, r in got})
    out["unordered"] = sorted(i for i, _ in farm.map(square, range(300), unordered=True))
    try:
        list(farm.map(failing, range(20)))
    except Exception as exc:
        cause = getattr(exc, "exception", None)
        out["error"] = [type(exc).__name__, type(cause).__name__, exc.index, exc.rank]
    r1 = farm.open(slow, range(200), name="cancelled")
    r2 = farm.open(square, range(200), name="kept")
    done = 0
    while done < 5:
        farm.step()
        done += sum(len(b.ids) for b in r1.drain())
    t0 = time.perf_counter()
    r1.cancel(wait=True)   # while its tasks run on every node, the sub-master's included
    out["cancel_s"] = time.perf_counter() - t0
    r1.close()
    kept = []
    while True:   # r2 may have finished while r1's cancel waited: drain before looking
        for batch in r2.drain():
            kept += batch.ids
        if r2.finished:
            break
        farm.step()
    out["kept"] = sorted(kept) == list(range(200))
    # a tail copy of r2's last chunk may still run on the node when r2 is done, and the
    # sub-master's figures follow its chunks: once none is out, they must add up within
    # the sub-master's next report (no run lost, none counted twice)
    deadline = time.monotonic() + 10
    while farm.engine.chunks and time.monotonic() < deadline:
        farm.step()
    settle = time.monotonic() + 3
    st = farm.stats()
    while st["executions"] < st["tasks"] and time.monotonic() < settle:
        farm.step()
        st = farm.stats()
    out["workers"] = [[w["rank"], w.get("role"), w.get("via"), w["tasks"]] for w in st["workers"]]
    out["tasks"], out["executions"] = st["tasks"], st["executions"]
    out["computed_by_submaster"] = sum(w.get("computed_tasks", 0) for w in st["workers"])
    out["summary"] = format_summary(st)
    return out


def run(farm, mode):
    """The master's part of MODE: the summary to write."""
    if mode == "contract":
        return contract(farm)
    if mode == "retries":
        return {"values": list(farm.map(flaky, range(40)))}
    if mode == "timeout":
        got = list(farm.map(straggle, range(20)))
        return {"values": [v for v, _, _ in got], "ranks": [r for _, r, _ in got],
                "stragglers_won": sum(1 for _, _, s in got if s),
                "duplicates": farm.stats()["duplicates"]}
    if mode == "kill-submaster":
        got, killed = [], False
        for i, value in enumerate(farm.map(square, range(600))):
            got.append(value[0])
            if i == 100 and not killed:
                sub = int(os.environ.get("HIER_SUBMASTER", "2"))
                os.kill(farm.engine.workers[sub].pid, signal.SIGKILL)
                killed = True
        st = farm.stats()
        return {"values": got, "alive": {w["rank"]: w["alive"] for w in st["workers"]}}
    if mode == "kill-node-worker":
        got = list(farm.map(suicide, range(600)))
        st = farm.stats()
        return {"values": [v for v, _ in got],
                "alive": {w["rank"]: w["alive"] for w in st["workers"]}}
    if mode == "journal":
        got = list(farm.map(journaled, range(300)))
        return {"values": [v for v, _ in got], "runs": sorted({r for _, r in got}),
                "resumed": farm.journal.resumed}
    if mode == "rejoin":
        return rejoin(farm)
    if mode == "kill-submaster-at-end":   # killed as the master leaves: nobody waits
        got = list(farm.map(square, range(200)))
        _, sub = max(farm._layout.submasters.items())
        os.kill(farm.engine.workers[sub].pid, signal.SIGKILL)
        return {"values": [v for v, _ in got]}
    if mode == "auto":      # hierarchy="auto": what it chose, and that it works
        got = list(farm.map(square, range(1000)))    # >= 0.25 s: long enough to measure
        return {"hierarchy": farm.hierarchy, "reason": farm.hierarchy_reason,
                "values": [v for v, _ in got]}
    if mode in ("exit-in-task", "exit-in-setup"):
        got = list(farm.map(exiting, range(60)))
        st = farm.stats()
        return {"values": [v for v, _ in got], "ranks": sorted({r for _, r in got}),
                "alive": {w["rank"]: w["alive"] for w in st["workers"]}}
    raise SystemExit(f"unknown mode {mode}")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    kwargs = {"hierarchy": "auto" if mode == "auto" else "node"}
    if mode == "retries":
        kwargs["retries"] = 2
    if mode == "timeout":
        kwargs["task_timeout"] = 0.5
    if mode == "journal":
        kwargs["journal"] = sys.argv[3]
    if mode == "exit-in-setup":
        kwargs["setup"] = exit_in_setup
    if mode == "kill-submaster-at-end":
        bound_finalize()
    with Farm(MPI.COMM_WORLD, **kwargs) as farm:
        if farm.is_master:
            out = run(farm, mode)
    if not farm.is_master:   # left the farm quietly; says whether its finalize is bounded
        from pyfw import comm
        with open(f"{path}.rank{RANK}", "w") as fh:
            fh.write("bounded" if comm._FINALIZE_BOUND else "unbounded")
        return
    with open(path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
