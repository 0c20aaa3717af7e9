"""Run as ``python -m pyfw.futures futures_fault_script.py OUT MARKER`` under ULFM: a worker
SIGKILLed mid-map (results still complete, each exactly once), then every worker killed
(``result()`` raises BrokenExecutor instead of waiting for ever)."""
import json
import os
import signal
import sys
import time

from pyfw.futures import BrokenExecutor, Executor


def step(x, marker):
    if x == 60 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)   # the first worker to run item 60 dies
    time.sleep(0.002)
    return x * x


def die(_):
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    out_path, marker = sys.argv[1], sys.argv[2]
    out = {}
    with Executor() as ex:
        out["results"] = list(ex.map(step, range(200), [marker] * 200))
        out["workers_left"] = ex.num_workers
        t0 = time.monotonic()
        try:
            ex.submit(die, 0).result(timeout=60)
        except BrokenExecutor as exc:
            out["broken"] = [type(exc).__name__, round(time.monotonic() - t0, 1)]
        json.dump(out, open(out_path, "w"))
