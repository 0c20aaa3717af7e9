"""A farm job for the launch tests: ``python farm_job.py MODE OUT [journal]``.

MODE ``kill``: the worker on rank 2 SIGKILLs itself after finishing 20 tasks; the master
must still return every result exactly once (run under ``--with-ft ulfm``).
MODE ``poison``: task 5 SIGKILLs whatever worker runs it; it must be quarantined while
every other result comes back.
MODE ``journal``: 400 tasks of 10 ms (or ``seconds``: ``farm_job.py journal OUT JOURNAL
[seconds]``) with a result journal; each task records the run id (env PYFW_RUN_ID) that
computed it.
The master writes a JSON summary to OUT.
"""
import faulthandler
import json
import os
import signal
import sys
import time

from mpi4py import MPI

from pyfw import Farm, Task, TaskQuarantined


class Work(Task):
    def __init__(self, i, kill_rank=None, kill_after=None, poison=False, seconds=0.005):
        self.i, self.kill_rank, self.kill_after = i, kill_rank, kill_after
        self.poison, self.seconds = poison, seconds

    def run(self, ctx):
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        if self.poison or (ctx.rank == self.kill_rank and ctx.state["n"] > self.kill_after):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.seconds)
        return (self.i, ctx.rank, os.environ.get("PYFW_RUN_ID", "?"))


def main():
    # a job killed by the test harness's deadline shows where every rank was stuck
    faulthandler.register(signal.SIGTERM, all_threads=True)
    mode, out = sys.argv[1], sys.argv[2]
    comm = MPI.COMM_WORLD
    n = 200
    kwargs = {}
    if mode == "kill":
        tasks = [Work(i, kill_rank=2, kill_after=20) for i in range(n)]
    elif mode == "poison":
        tasks = [Work(i, poison=(i == 5)) for i in range(n)]
        kwargs = dict(max_attempts=2, on_error="collect")
    elif mode == "journal":
        n = 400
        seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.01
        tasks = [Work(i, seconds=seconds) for i in range(n)]
        kwargs = dict(journal=sys.argv[3])
    else:
        raise SystemExit(f"unknown mode {mode}")
    with Farm(comm, **kwargs) as farm:
        if farm.is_master:
            results = list(farm.map(tasks, unordered=True))
            stats = farm.stats()
            summary = {
                "indices": [i for i, _ in results],
                "values": [v if not isinstance(v, Exception) else
                           {"error": type(v).__name__, "msg": str(v)} for _, v in results],
                "alive": [w["alive"] for w in stats["workers"]],
                "tasks_run": stats["tasks"],
                "resumed": farm.journal.resumed if farm.journal else 0,
            }
            with open(out, "w") as fh:
                json.dump(summary, fh)


if __name__ == "__main__":
    main()
