"""The farm's chunk forecast before and after, side by side in one launch (issue 41).

    python benchmarks/farm_forecast_ab.py [--ranks 256] [--task-ms 10] [--ideal 2]
                                          [--repeats 5] [--timeout 900]
                                          [--publish | --out DIR]

Before: the master forecast the end of a worker's running chunk from the chunk's start with
its whole length, floored at half the count of its last partial reply. After (the code as it
is): the forecast counts from the last partial reply, no floor. The floor held each
worker's next chunk back until its DONE came, so every worker waited a round trip between
chunks. (The run published at 3f5e6c6 also moved the workers' look for cancel messages
from 20 to 100 ms on its "after" side; that was reverted, see
``pyfw.farm.worker.CHUNK_CHECK_EVERY``, and both sides now run the code's own interval.)

On a shared machine one launch against another varies more than the change (at 256 ranks
on 2 cores the same code ran 1.57-2.11x ideal in consecutive launches), so both run in
**one** launch: the master alternates maps of ``time.sleep(tau)`` tasks, before / after,
``--repeats`` times each, switching its own forecast between maps. Per map: makespan / ideal, the workers' CPU per task (each
worker's process CPU from its first task of the map to its last) and how often a worker's
chunk ended with its next one already there. Reports medians and min-max per side and the
ratio after / before. Writes ``farm_forecast_ab.json`` (``--out DIR``; default
benchmarks/results/local/, ``--publish``: benchmarks/results/).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PUBLISHED = os.path.join(HERE, "results")


def _forecast_before(self, w, now):
    """The engine's forecast before the change (with its floor), for the 'before' maps."""
    mean = w.stats.mean_recent
    if mean is None or not w.inflight:
        return 0.0
    head = w.inflight[0]
    left = max(0.0, head.t_head + len(head.ids) * mean - now, head.left * mean * 0.5)
    return left + sum(c.left for c in itertools.islice(w.inflight, 1, None)) * mean


CPU: dict = {}          # on a worker: map key -> [first CPU, last CPU, tasks]


def sleep_task(key, tau, x):
    """Sleep ``tau``, metered under the map's ``key``."""
    cpu = time.process_time()
    rec = CPU.get(key)
    if rec is None:
        CPU[key] = [cpu, cpu, 1]
    else:
        rec[1] = cpu
        rec[2] += 1
    time.sleep(tau)
    return x


def child(out: str, tau: float, ideal: float, repeats: int) -> None:
    import functools

    from mpi4py import MPI

    from pyfw import Farm
    from pyfw.farm import _protocol as P
    from pyfw.farm.engine import Engine
    world = MPI.COMM_WORLD
    maps = []
    after = Engine._outstanding
    with Farm(world) as farm:
        if farm.is_master:
            eng = farm.engine
            on_done = eng._on_done
            ahead = [0, 0]        # final DONEs while tasks were pending: with a chunk queued, all

            def watched(msg, src):
                on_done(msg, src)
                if P.read_done(msg).status == P.OK and any(
                        r.has_pending() for r in eng.rounds.values()):
                    ahead[1] += 1
                    ahead[0] += bool(eng.workers[src].inflight)
            eng._on_done = watched
            workers = farm.size - 1
            tasks = max(workers, round(ideal * workers / tau))
            list(farm.map(functools.partial(sleep_task, "warm", tau),
                          range(workers * 4)))
            for rep in range(repeats):
                for side in (("before", "after") if rep % 2 == 0 else ("after", "before")):
                    Engine._outstanding = _forecast_before if side == "before" else after
                    ahead[:] = [0, 0]
                    key = f"{side}{rep}"
                    fn = functools.partial(sleep_task, key, tau)
                    t0 = time.perf_counter()
                    n = sum(1 for _ in farm.map(fn, range(tasks)))
                    wall = time.perf_counter() - t0
                    maps.append({"side": side, "key": key, "tasks": n, "wall_s": wall,
                                 "ideal_s": tasks * tau / workers,
                                 "next_chunk_there": ahead[0] / max(1, ahead[1])})
            Engine._outstanding = after
    got = world.gather(CPU, root=0)
    if world.rank == 0:
        for m in maps:
            recs = [g[m["key"]] for g in got[1:] if m["key"] in g]
            m["worker_cpu_us_per_task"] = 1e6 * sum(r[1] - r[0] for r in recs) / max(
                1, sum(r[2] - 1 for r in recs))
        with open(out, "w") as fh:
            json.dump({"ranks": world.size, "task_s": tau, "maps": maps}, fh)


def report(res: dict) -> str:
    lines = [f"{res['ranks']} ranks, flat, {res['task_s'] * 1e3:g} ms tasks, one launch, "
             f"{res['repeats']} maps per side alternating",
             "", "| | makespan / ideal: median | min-max | worker CPU us/task: median | "
             "min-max | next chunk already there |", "|---|---|---|---|---|---|"]
    med = {}
    for side in ("before", "after"):
        ms = [m for m in res["maps"] if m["side"] == side]
        r = [m["wall_s"] / m["ideal_s"] for m in ms]
        c = [m["worker_cpu_us_per_task"] for m in ms]
        a = [m["next_chunk_there"] for m in ms]
        med[side] = (statistics.median(r), statistics.median(c))
        lines.append(f"| {side} | {med[side][0]:.2f} | {min(r):.2f}-{max(r):.2f} | "
                     f"{med[side][1]:.0f} | {min(c):.0f}-{max(c):.0f} | "
                     f"{statistics.median(a):.0%} |")
    lines.append(f"| after / before | {med['after'][0] / med['before'][0]:.2f} | | "
                 f"{med['after'][1] / med['before'][1]:.2f} | | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
        return 0
    from pyfw.launch import run          # here: report.py imports this module for its table
    from pyfw.monitor import results
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--task-ms", type=float, default=10.0)
    ap.add_argument("--ideal", type=float, default=2.0, help="ideal makespan of a map (s)")
    ap.add_argument("--repeats", type=int, default=5, help="maps per side")
    ap.add_argument("--timeout", type=float, default=900.0)
    results.add_output_options(ap, PUBLISHED)
    a = ap.parse_args(argv)
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        done = run(a.ranks, [sys.executable, os.path.abspath(__file__), "--child", out,
                             str(a.task_ms / 1e3), str(a.ideal), str(a.repeats)],
                   timeout=a.timeout, cwd=ROOT)
        if done.returncode != 0:
            print(f"launch failed (exit {done.returncode})", file=sys.stderr)
            return 1
        with open(out) as fh:
            res = json.load(fh)
    finally:
        os.unlink(out)
    res["repeats"] = a.repeats
    print(report(res))
    results.write_json(results.output_dir(a), "farm_forecast_ab.json", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
