"""A farm job for the dashboard's browser test: ``python dashboard_job.py DIR``.

Run under ``pyfw-run --dashboard 127.0.0.1:0 --report DIR/report.html``. The master runs
round 1 (120 tasks, task 7 raises), writes ``DIR/phase1.json`` (the dashboard's URL and the
farm's stats), and waits for ``DIR/go``; then runs round 2 (180 tasks), closes the farm,
writes ``DIR/final.json`` and waits for ``DIR/exit`` -- so the test can look at the page
while the job runs and after it ended. Every wait is bounded.
"""
import faulthandler
import json
import os
import signal
import sys
import time

from mpi4py import MPI

from pyfw import Farm
from pyfw.dashboard import Dashboard

WAIT = 120.0


def work(x):
    if x == 7:
        raise ValueError("task 7 fails on purpose")
    time.sleep(0.004)
    return x * x


def wait_for(path):
    deadline = time.monotonic() + WAIT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"dashboard_job: {path} never appeared")
        time.sleep(0.05)


def dump(path, farm):
    hub = next(iter(Dashboard._shared.values()))
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"url": hub.url, "stats": farm.stats()}, fh)
    os.replace(tmp, path)


def main():
    faulthandler.register(signal.SIGTERM, all_threads=True)
    out = sys.argv[1]
    with Farm(MPI.COMM_WORLD, on_error="collect") as farm:
        if farm.is_master:
            list(farm.map(work, range(120)))
            dump(os.path.join(out, "phase1.json"), farm)
            wait_for(os.path.join(out, "go"))
            list(farm.map(work, range(180)))
    if farm.is_master:
        dump(os.path.join(out, "final.json"), farm)
        wait_for(os.path.join(out, "exit"))


if __name__ == "__main__":
    main()
