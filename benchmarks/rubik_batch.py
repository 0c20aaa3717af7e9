"""Rubik batches: random cubes (fixed seeds) solved as one batch on the farm, against the
same cubes one launch each and against the serial batch.

    python benchmarks/rubik_batch.py --cubes 100            # Cube.random(0..99), nx, 2 workers
    python benchmarks/rubik_batch.py --cubes 6 --out /tmp/b  # a short run
    python benchmarks/rubik_batch.py --cubes 10 --repeats 3  # the modes alternated 3 times

Three measurements of the same cubes, each the whole command's wall time (start-up, table
loads and MPI launch included):

* ``batch``: ``pyfw-run -n W+1 -- python -m apps.rubik --file F --json`` (W workers);
* ``serial``: ``python -m apps.rubik --file F --json`` (one process);
* ``launches``: ``pyfw-run -n W+1 -- python -m apps.rubik --facelets X --json`` per cube.

Reports cubes/s and cubes/s per core (the W workers' cores for the farm runs, one for the
serial batch), the batch's efficiency against W x the serial batch's rate (the issue's goal:
>= 0.9) and its speed over one launch per cube (medians over the repeats, each repeat's
ratio from its own runs), and the published figures of other solvers, labelled as such
(other CPUs).
"""
import argparse
import json
import os
import statistics
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
    from pyfw.apps.rubik import Cube
    from pyfw.apps.rubik.pruning import allowed
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
    """The three measurements (those in ``modes``, in that order) of the facelet strings
    ``cubes``."""
    out = {}
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(cubes) + "\n")
        path = f.name
    common = ["-m", "apps.rubik", "--heuristic", heuristic, "--json"]
    try:
        for mode in modes:
            if mode == "batch":
                wall, rows = _run(_launcher(workers, timeout) + common + ["--file", path],
                                  timeout)
                out["batch"] = _batch_row(wall, rows, len(cubes), workers)
            elif mode == "serial":
                wall, rows = _run([sys.executable] + common + ["--file", path], timeout)
                out["serial"] = _batch_row(wall, rows, len(cubes), 1)
            elif mode == "launches":
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
            else:
                raise ValueError(f"unknown mode {mode!r} (batch, serial, launches)")
            print(f"{mode}: {out[mode]['seconds']:.1f} s", flush=True)
    finally:
        os.unlink(path)
    _same_lengths(out)
    return out


def _same_lengths(out):
    """Every measurement found the same length for every cube (the batch rows carry a
    histogram, the launches a list)."""
    hist = {}
    for mode, r in out.items():
        h = r["lengths"]
        if isinstance(h, list):
            h = {str(k): h.count(k) for k in set(h)}
        hist[mode] = {str(k): v for k, v in h.items()}
    if len({json.dumps(h, sort_keys=True) for h in hist.values()}) > 1:
        raise RuntimeError(f"the modes disagree on the lengths: {hist}")


def summarise(runs):
    """Median and min-max of each mode's seconds over the repeats (``runs``: one dict of
    :func:`measure` per repeat), the other figures from the run nearest the median, and
    the ratios per repeat with their median."""
    res = {}
    for mode in runs[0]:
        secs = [r[mode]["seconds"] for r in runs]
        med = statistics.median(secs)
        row = dict(min(runs, key=lambda r: abs(r[mode]["seconds"] - med))[mode])
        n_per_s = row["cubes_per_second"] * row["seconds"]    # the number of cubes
        row.update(seconds=med, seconds_runs=secs, seconds_min=min(secs),
                   seconds_max=max(secs))
        row["cubes_per_second"] = n_per_s / med
        row["cubes_per_second_per_core"] = n_per_s / med / row["cores"]
        res[mode] = row
    for name, a, b, scale in (("batch_over_launches", "launches", "batch", 1),
                              ("batch_efficiency", "serial", "batch", None)):
        if a in res and b in res:
            # per repeat: b's rate over a's (efficiency: over workers x the serial rate)
            ratios = [r[a]["seconds"] / r[b]["seconds"] / (scale or r[b]["cores"])
                      for r in runs]
            res[name] = statistics.median(ratios)
            res[name + "_runs"] = ratios
    return res


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
    ap.add_argument("--repeats", type=int, default=1,
                    help="measure every mode this many times, alternating (medians and "
                         "min-max reported)")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    cubes = _facelets(a.cubes, a.first_seed, a.scramble_length)
    modes = a.modes.split(",")
    runs = []
    for rep in range(a.repeats):
        order = modes[rep % len(modes):] + modes[:rep % len(modes)]   # rotated: drift spreads
        print(f"repeat {rep + 1} of {a.repeats}: {', '.join(order)}", flush=True)
        runs.append(measure(cubes, a.heuristic, a.workers, a.timeout, order))
    res = summarise(runs)
    for k in ("batch_over_launches", "batch_efficiency"):
        if k in res:
            print(f"{k}: {res[k]:.2f} (repeats {', '.join(f'{x:.2f}' for x in res[k + '_runs'])})")
    data = {"heuristic": a.heuristic, "workers": a.workers, "cubes": a.cubes,
            "scramble_length": a.scramble_length, "repeats": a.repeats,
            "seeds": [a.first_seed, a.first_seed + a.cubes - 1], "results": res,
            "published_other_cpus": PUBLISHED}
    write_json(output_dir(a), "rubik_batch.json", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
