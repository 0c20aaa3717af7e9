"""Run as ``python -m pyfw.futures futures_fault_script.py OUT MARKER`` under ULFM: a worker
SIGKILLed mid-map (results still complete, each exactly once), then every worker killed
(``result()``, pending futures, ``map``, leaving ``with`` and the next executor all raise
BrokenExecutor or return, instead of waiting for ever)."""
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
        pending = [ex.submit(time.sleep, 0.5) for _ in range(4)]
        try:
            ex.submit(die, 0).result(timeout=60)
        except BrokenExecutor as exc:
            out["broken"] = type(exc).__name__
        out["pending"] = sorted({type(f.exception(timeout=60)).__name__ for f in pending})
        try:
            list(ex.map(abs, range(5), timeout=60))
        except BrokenExecutor:
            out["map_broken"] = True
    # leaving `with` above returned; a new executor on the broken pool fails at once
    try:
        Executor().submit(abs, 1)
    except BrokenExecutor:
        out["next_executor"] = "BrokenExecutor"
    json.dump(out, open(out_path, "w"))
