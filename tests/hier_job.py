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
The master writes a JSON summary to OUT.
"""
import json
import os
import signal
import sys
import time

from mpi4py import MPI

from pyfw import Farm

RANK = MPI.COMM_WORLD.Get_rank()
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
    while not r2.finished:
        farm.step()
        for batch in r2.drain():
            kept += batch.ids
    out["kept"] = sorted(kept) == list(range(200))
    st = farm.stats()
    out["workers"] = [[w["rank"], w.get("role"), w.get("via"), w["tasks"]] for w in st["workers"]]
    out["tasks"], out["executions"] = st["tasks"], st["executions"]
    out["computed_by_submaster"] = sum(w.get("computed_tasks", 0) for w in st["workers"])
    return out


def main():
    mode, path = sys.argv[1], sys.argv[2]
    kwargs = {"hierarchy": "node"}
    if mode == "retries":
        kwargs["retries"] = 2
    if mode == "timeout":
        kwargs["task_timeout"] = 0.5
    if mode == "journal":
        kwargs["journal"] = sys.argv[3]
    with Farm(MPI.COMM_WORLD, **kwargs) as farm:
        if not farm.is_master:
            return
        if mode == "contract":
            out = contract(farm)
        elif mode == "retries":
            out = {"values": list(farm.map(flaky, range(40)))}
        elif mode == "timeout":
            got = list(farm.map(straggle, range(20)))
            out = {"values": [v for v, _, _ in got], "ranks": [r for _, r, _ in got],
                   "stragglers_won": sum(1 for _, _, s in got if s),
                   "duplicates": farm.stats()["duplicates"]}
        elif mode == "kill-submaster":
            got, killed = [], False
            for i, value in enumerate(farm.map(square, range(600))):
                got.append(value[0])
                if i == 100 and not killed:
                    sub = int(os.environ.get("HIER_SUBMASTER", "2"))
                    os.kill(farm.engine.workers[sub].pid, signal.SIGKILL)
                    killed = True
            st = farm.stats()
            out = {"values": got, "alive": {w["rank"]: w["alive"] for w in st["workers"]}}
        elif mode == "kill-node-worker":
            got = list(farm.map(suicide, range(600)))
            st = farm.stats()
            out = {"values": [v for v, _ in got],
                   "alive": {w["rank"]: w["alive"] for w in st["workers"]}}
        elif mode == "journal":
            got = list(farm.map(journaled, range(300)))
            out = {"values": [v for v, _ in got], "runs": sorted({r for _, r in got}),
                   "resumed": farm.journal.resumed}
        else:
            raise SystemExit(f"unknown mode {mode}")
    with open(path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
