"""Multi-rank task jobs for test_farm_groups.py: ``python group_job.py MODE OUT``.

MODE ``contract``: fixed width (every task's group: its size, its members' world ranks, an
allreduce inside the task), mixed widths in one round (1, 2, 3), a Task subclass with a
``ranks`` attribute and ``ctx.comm``, ordinary tasks afterwards on the same workers.
MODE ``backfill``: one task of the full width among many single-rank ones; when each ran.
MODE ``raise``: a task raises on group rank 1 while rank 0 waits for it in a barrier.
MODE ``kill`` (ULFM): group rank 1 of task 3 SIGKILLs itself inside the task, once.
MODE ``killmix`` (ULFM): widths 1-3, every task a loop of allreduces; the last member of
task 4 (width 2) and the root of task 8 (width 3) SIGKILL themselves between two of them,
once each.
MODE ``joinkill`` (ULFM): world rank 2 dies as it is about to join its first group's
communicator (after its partner has entered the call that cannot be cancelled); 10
two-rank tasks, then 20 more.
MODE ``nodemode``: a two-level farm (``hierarchy="node"``, nodes of PYFW_FARM_NODE_SIZE
ranks): 24 tasks of widths 1 and 2, with a member killed once under ULFM if KILL is set.
MODE ``journal``: 12 two-rank tasks with a result journal; task 7 fails the first run.
MODE ``nodes``: 12 two-rank tasks (where their members run).
The master writes a JSON summary to OUT.
"""
import json
import os
import signal
import sys
import time

from mpi4py import MPI

import pyfw

WORLD = MPI.COMM_WORLD.Get_rank()
OUT = sys.argv[2]


def members(comm, x):
    """Who runs the task, checked by a collective over the group."""
    ranks = comm.allgather(WORLD)
    hosts = comm.allgather(MPI.Get_processor_name())
    total = comm.allreduce(x * 10 + comm.Get_rank())
    return {"x": x, "size": comm.Get_size(), "ranks": ranks, "hosts": hosts, "sum": total}


class Wide(pyfw.Task):
    def __init__(self, x, ranks):
        self.x, self.ranks = x, ranks

    def run(self, ctx):
        return ctx.comm.allreduce(self.x)


def timed(comm, x):
    t0 = time.time()
    time.sleep(0.3 if comm.Get_size() > 1 else 0.05)
    comm.Barrier()
    return {"x": x, "size": comm.Get_size(), "t0": t0, "t1": time.time()}


def raise_on_one(comm, x):
    if x == 3 and comm.Get_rank() == 1:
        raise KeyError(f"bad item {x}")
    comm.Barrier()
    return x


def kill_one(comm, x):
    marker = os.path.join(os.path.dirname(os.path.abspath(OUT)), "killed")
    if x == 3 and comm.Get_rank() == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    comm.Barrier()
    return x * x


def allreduce_loop(comm, x):
    """Ten allreduces 20 ms apart; task 4 loses its last member halfway, task 8 its root
    (whose value is the result), once each."""
    total = 0
    victim = {4: comm.Get_size() - 1, 8: 0}.get(x)
    for step in range(10):
        if step == 5 and comm.Get_rank() == victim:
            marker = os.path.join(os.path.dirname(os.path.abspath(OUT)), f"killed-{x}")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.02)
        total += comm.allreduce(x)
    return (x, comm.Get_size(), total)


def fail_first_run(comm, x):
    marker = os.path.join(os.path.dirname(os.path.abspath(OUT)), "second-run")
    if x == 7 and not os.path.exists(marker):
        raise RuntimeError("first run")
    return (x, comm.allreduce(1), os.environ.get("RUN_ID"))


def main():
    mode = sys.argv[1]
    on_error = "collect" if mode in ("raise", "journal") else "raise"
    journal = os.path.join(os.path.dirname(os.path.abspath(OUT)), "run.h5") \
        if mode == "journal" else None
    out = {}
    hierarchy = "node" if mode == "nodemode" else "flat"
    if os.environ.get("STUCK_GRACE"):     # the master's wait for members nothing releases
        from pyfw.farm import groups
        groups.STUCK_GRACE = float(os.environ["STUCK_GRACE"])
    if mode == "joinkill" and WORLD == 2:
        from pyfw.farm import worker

        def die_before_joining(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        worker._create_watched = die_before_joining
    with pyfw.Farm(MPI.COMM_WORLD, on_error=on_error, journal=journal,
                   hierarchy=hierarchy) as farm:
        if not farm.is_master:
            return
        t0 = time.time()
        if mode == "contract":
            out["fixed"] = list(farm.map(members, range(12), ranks=2))
            out["mixed"] = list(farm.map(members, range(12), ranks=lambda x: 1 + x % 3))
            out["tasks"] = list(farm.map([Wide(x, 1 + x % 2) for x in range(8)]))
            out["after"] = list(farm.map(pow, range(10), [2] * 10))
        elif mode == "nodes":
            out["fixed"] = list(farm.map(members, range(12), ranks=2))
        elif mode == "backfill":
            width = farm.num_workers
            items = list(range(30))
            out["width"] = width
            out["runs"] = list(farm.map(timed, items,
                                        ranks=lambda x: width if x == 2 else 1))
        elif mode == "raise":
            got = list(farm.map(raise_on_one, range(8), ranks=2))
            out["values"] = [v if not isinstance(v, Exception) else
                             [type(v).__name__, type(v.exception).__name__, str(v)]
                             for v in got]
            out["after"] = list(farm.map(pow, range(6), [2] * 6))
        elif mode == "kill":
            out["values"] = list(farm.map(kill_one, range(10), ranks=2))
            out["after"] = list(farm.map(pow, range(6), [2] * 6))
            out["alive"] = farm.num_workers
        elif mode == "joinkill":
            out["values"] = list(farm.map(members, range(10), ranks=2))
            out["more"] = list(farm.map(members, range(10, 30), ranks=2))
            out["after"] = list(farm.map(pow, range(6), [2] * 6))
            out["alive"] = farm.num_workers
        elif mode == "killmix":
            out["values"] = list(farm.map(allreduce_loop, range(16),
                                          ranks=lambda x: 1 + x % 3))
            out["after"] = list(farm.map(pow, range(6), [2] * 6))
            out["alive"] = farm.num_workers
        elif mode == "nodemode":
            fn = kill_one if os.environ.get("KILL") else members
            out["values"] = list(farm.map(fn, range(24), ranks=lambda x: 1 + x % 2))
            out["after"] = list(farm.map(pow, range(6), [2] * 6))
            out["alive"] = farm.num_workers
        elif mode == "journal":
            got = list(farm.map(fail_first_run, range(12), ranks=2))
            out["values"] = [v if not isinstance(v, Exception) else "error" for v in got]
        out["elapsed"] = time.time() - t0
        out["stats"] = {k: farm.stats()[k] for k in ("tasks", "duplicates")}
    with open(OUT, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
