"""A farm job whose worker on rank 2 dies in one way: ``python worker_death_job.py KIND OUT``.

40 tasks of 10 ms; the 6th task that rank 2 runs ends the rank by KIND (see ``KINDS``). The
master writes a JSON summary to OUT: the task indices it got back, the rank that computed
each, and which workers the farm still counts alive. Every other rank serves, then exits
normally.
"""
import ctypes
import json
import os
import signal
import sys
import time

from mpi4py import MPI

from pyfw import Farm, Task

DYING_RANK, DYING_AT, NTASKS, SECONDS = 2, 6, 40, 0.01


def _segfault():
    ctypes.string_at(0)


def _break_the_loop():
    """A fault of the worker loop itself (not of a task): sending this task's result
    raises."""
    from pyfw.farm import worker

    def reply(self, *args):
        raise RuntimeError("the worker loop's own fault")
    worker.WorkerLoop.reply = reply


#: every way a worker can end, by name
KINDS = {
    "os_exit": lambda: os._exit(9),
    "sys_exit": lambda: sys.exit(3),
    "keyboard_interrupt": lambda: (_ for _ in ()).throw(KeyboardInterrupt()),
    "sigkill": lambda: os.kill(os.getpid(), signal.SIGKILL),
    "sigterm": lambda: os.kill(os.getpid(), signal.SIGTERM),
    "segfault": _segfault,
    "c_exit": lambda: ctypes.CDLL(None).exit(3),
    "loop_fault": _break_the_loop,
}


class Work(Task):
    def __init__(self, i, kind):
        self.i, self.kind = i, kind

    def __repr__(self):
        return f"Work({self.i})"

    def run(self, ctx):
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        if ctx.rank == DYING_RANK and ctx.state["n"] == DYING_AT:
            KINDS[self.kind]()
            if self.kind != "loop_fault":   # that one fails when the task's result is sent
                time.sleep(1)    # a signal may take a moment; the task must not finish
        time.sleep(SECONDS)
        return (self.i, ctx.rank)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            results = list(farm.map(Work(i, kind) for i in range(NTASKS)))
            summary = {"indices": [i for i, _ in results], "ranks": [r for _, r in results],
                       "alive": [w["alive"] for w in farm.stats()["workers"]]}
            with open(out, "w") as fh:
                json.dump(summary, fh)


if __name__ == "__main__":
    main()
