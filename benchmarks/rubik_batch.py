"""Rubik batches: random cubes (fixed seeds) solved as one batch on the farm, against the
same cubes one launch each and against the serial batch.

    python benchmarks/rubik_batch.py --cubes 100            # Cube.random(0..99), nx, 2 workers
    python benchmarks/rubik_batch.py --cubes 6 --out /tmp/b  # a short run

Three measurements of the same cubes, each the whole command's wall time (start-up, table
loads and MPI launch included):

* ``batch``: ``pyfw-run -n W+1 -- python -m apps.rubik --file F --json`` (W workers);
* ``serial``: ``python -m apps.rubik --file F --json`` (one process);
* ``launches``: ``pyfw-run -n W+1 -- python -m apps.rubik --facelets X --json`` per cube.

Reports cubes/s and cubes/s per core (the W workers' cores for the farm runs, one for the
serial batch), the batch's efficiency against W x the serial batch's rate (the issue's goal:
>= 0.9), and the published figures of other solvers, labelled as such (other CPUs).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from pyfw.monitor.results import add_output_options, output_dir, write_json

#: published figures of other optimal solvers, on other CPUs (docs/rubik.md, issue 40)
PUBLISHED = [
    {"solver": "vcube (21 GiB tables)", "threads": 8, "cubes_per_second": 6.0},
    {"solver": "nxopt", "threads": 8, "cubes_per_second": 3.8},
    {"solver": "nxopt31 (2.6 GB), cube_solver_test", "threads": 12,
     "cubes_per_second": 1 / 1.46},
    {"solver": "vcube308, cube_solver_test", "threads": 12, "cubes_per_second": 1 / 0.29},
]


def _facelets(n, base, scramble_length=None):
    """``Cube.random(seed)`` for the seeds ``base..base + n - 1``, or with
    ``scramble_length`` random canonical scrambles of that many moves (same seeds): short,
    for a quick run with a small table."""
    import random
    from apps.rubik import Cube
    from apps.rubik.pruning import allowed
    if scramble_length is None:
        return [Cube.random(base + i).facelets() for i in range(n)]
    out = []
    for i in range(n):
        rng, moves = random.Random(base + i), []
        while len(moves) < scramble_length:
            m = rng.randrange(18)
            if allowed(moves[-1] // 3 if moves else None, m // 3):
                moves.append(m)
        out.append(Cube.from_moves(moves).facelets())
    return out


def _run(cmd, timeout, stdin=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       input=stdin)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return wall, rows


def _launcher(workers, timeout):
    return ["pyfw-run", "-n", str(workers + 1), "--timeout", str(int(timeout)), "--",
            sys.executable]


def measure(cubes, heuristic, workers, timeout, modes):
    """The three measurements (those in ``modes``) of the facelet strings ``cubes``."""
    out = {}
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(cubes) + "\n")
        path = f.name
    common = ["-m", "apps.rubik", "--heuristic", heuristic, "--json"]
    try:
        if "batch" in modes:
            wall, rows = _run(_launcher(workers, timeout) + common + ["--file", path], timeout)
            out["batch"] = _batch_row(wall, rows, len(cubes), workers)
            print(f"batch on {workers} workers: {out['batch']}", flush=True)
        if "serial" in modes:
            wall, rows = _run([sys.executable] + common + ["--file", path], timeout)
            out["serial"] = _batch_row(wall, rows, len(cubes), 1)
            print(f"serial batch: {out['serial']}", flush=True)
        if "launches" in modes:
            walls, lengths = [], []
            for x in cubes:
                wall, rows = _run(_launcher(workers, timeout) + common + ["--facelets", x],
                                  timeout)
                walls.append(wall)
                lengths.append(rows[-1]["length"])
            total = sum(walls)
            out["launches"] = {"seconds": total, "cubes_per_second": len(cubes) / total,
                               "cubes_per_second_per_core": len(cubes) / total / workers,
                               "cores": workers, "lengths": lengths,
                               "per_launch_seconds": walls}
            print(f"one launch each on {workers} workers: {total:.1f} s", flush=True)
    finally:
        os.unlink(path)
    return out


def _batch_row(wall, rows, n, cores):
    s = rows[-1]["summary"]
    cubes = [r for r in rows if "length" in r]
    assert s["cubes"] == n and len(cubes) == n, (s, len(cubes))
    assert all(r["verified"] for r in cubes)
    return {"seconds": wall, "solve_seconds": s["seconds"],
            "cubes_per_second": n / wall, "cubes_per_second_per_core": n / wall / cores,
            "cores": cores, "lengths": s["lengths"], "slowest": s["slowest"],
            "nodes_per_second": s["nodes_per_second"], "generated": s["generated"],
            # the workers' time inside tasks over the solve's wall time: the scheduling's
            # losses (idle workers, the master's turns) apart from the host's speed
            "busy_fraction": sum(r["busy_seconds"] for r in cubes) / (cores * s["seconds"]),
            "per_cube": {r["line"]: [r["length"], round(r["seconds"], 3)] for r in cubes}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cubes", type=int, default=100, help="how many (default 100)")
    ap.add_argument("--first-seed", type=int, default=0, help="Cube.random(seed) from here")
    ap.add_argument("--scramble-length", type=int, default=None,
                    help="random scrambles of this many moves instead of random positions "
                         "(a quick run, e.g. 14 with --heuristic phase1)")
    ap.add_argument("--heuristic", default="nx")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", default="batch,serial,launches",
                    help="which of batch, serial, launches to run (comma-separated)")
    ap.add_argument("--timeout", type=float, default=7200.0, help="per command, seconds")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    cubes = _facelets(a.cubes, a.first_seed, a.scramble_length)
    res = measure(cubes, a.heuristic, a.workers, a.timeout, a.modes.split(","))
    if "batch" in res and "serial" in res:
        res["batch_efficiency"] = (res["batch"]["cubes_per_second"] /
                                   (a.workers * res["serial"]["cubes_per_second"]))
        print(f"batch efficiency against {a.workers} x serial: "
              f"{res['batch_efficiency']:.2f} (goal >= 0.9)")
    data = {"heuristic": a.heuristic, "workers": a.workers, "cubes": a.cubes,
            "scramble_length": a.scramble_length,
            "seeds": [a.first_seed, a.first_seed + a.cubes - 1], "results": res,
            "published_other_cpus": PUBLISHED}
    write_json(output_dir(a), "rubik_batch.json", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
