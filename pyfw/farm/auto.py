"""``hierarchy="auto"``: flat or two-level by the flat master's measured load (private).

A flat master spends ``c`` of CPU per result; with ``W`` workers finishing tasks of ``t``
seconds it is busy ``c * W / t``, and once that nears 1 the master is the farm's ceiling and
sub-masters pay (docs/hierarchy.md). ``c`` and ``t`` belong to the program (task length,
result size) and the machine, so they are measured, not assumed: a flat farm built with
``hierarchy="auto"`` records its master's busiest round when it closes, per program, in
:func:`cache_path`; the next ``auto`` farm of that program scales that load to its own
worker count (the master's load grows with the results per second, so with the workers
while it keeps up) and goes two-level from :data:`AUTO_BUSY`. A program never measured falls
back to the worker count (:data:`pyfw.farm.hierarchy.AUTO_MIN_WORKERS`).
"""
from __future__ import annotations

import json
import os
import sys
import time

#: predicted flat-master load (CPU seconds per wall second) from which ``auto`` goes
#: two-level: at 0.7 the master already answers late (its queue grows with its load)
AUTO_BUSY = 0.7

#: a round with fewer results, or shorter (s), says little about the master's steady load
MIN_RESULTS = 200
MIN_WALL_S = 0.2

CACHE_ENV = "PYFW_FARM_CACHE"


def cache_path() -> str:
    """``$PYFW_FARM_CACHE``, else ``$XDG_CACHE_HOME/pyfw/farm/auto.json`` or
    ``~/.cache/pyfw/farm/auto.json``."""
    path = os.environ.get(CACHE_ENV)
    if path:
        return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pyfw", "farm", "auto.json")


def program_key() -> str:
    """What a record is kept under: the running program's path (``-m`` modules included:
    Python puts their file in ``argv[0]``)."""
    prog = sys.argv[0] if sys.argv and sys.argv[0] else "<interactive>"
    return os.path.abspath(prog) if prog not in ("-c", "<interactive>") else prog


def _read(path: str) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def lookup(key: str | None = None, path: str | None = None) -> dict | None:
    """The record of program ``key`` (default: this one), or None."""
    rec = _read(path or cache_path()).get(key or program_key())
    ok = isinstance(rec, dict) and rec.get("workers", 0) > 0 and rec.get("busy") is not None
    return rec if ok else None


def remember(load: dict, workers: int, key: str | None = None,
             path: str | None = None) -> bool:
    """Keep a flat master's round ``load`` (``Engine.master_peak``) with ``workers`` for
    program ``key``; False if the cache cannot be written (never an error: it is advice)."""
    path = path or cache_path()
    data = _read(path)
    data[key or program_key()] = {
        "workers": int(workers), "busy": float(load["busy"]),
        "cpu_per_result_us": load.get("cpu_per_result_us"),
        "results_per_s": round(load["results"] / load["wall_s"], 1) if load.get("wall_s")
        else None, "date": time.strftime("%Y-%m-%d %H:%M")}
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
        os.replace(tmp, path)   # a reader sees the old file or the new, never half of one
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def predicted_busy(record: dict, workers: int) -> float:
    """The flat master's load with ``workers`` workers, from a record of another count."""
    return record["busy"] * workers / record["workers"]


def choose(workers: int, nodes: int, record: dict | None,
           min_workers: int) -> tuple[str, str]:
    """``(mode, why)``: ``node`` only on two or more nodes, when the measured load predicts
    a busy flat master (or, unmeasured, from ``min_workers`` workers)."""
    if nodes < 2:
        return "flat", "one node"
    if record is None:
        mode = "node" if workers >= min_workers else "flat"
        return mode, f"not measured yet: {workers} workers against {min_workers}"
    busy = predicted_busy(record, workers)
    mode = "node" if busy >= AUTO_BUSY else "flat"
    return mode, (f"flat master busy {record['busy']:.2f} with {record['workers']} workers "
                  f"measured, {busy:.2f} predicted with {workers} (two-level from "
                  f"{AUTO_BUSY})")
