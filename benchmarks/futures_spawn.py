"""Spawn start-up, side by side: time from ``Executor()`` to the first result, pyfw.futures
against mpi4py.futures, both spawning their workers from a singleton (``python prog.py``).

    python benchmarks/futures_spawn.py [--workers 2 4] [--repeat 3] [--publish | --out DIR]

Each measurement is a fresh ``python`` process (spawning is per process: a second
executor in the same process reuses the runtime already started) run one after the other,
alternating the two stacks; the table gives the median and the spread. Writes
``futures_spawn.json`` to ``--out DIR`` (default ``benchmarks/results/local/``).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw.monitor.results import add_output_options, output_dir, write_json

PROGRAM = r'''
import json, sys, time
t0 = time.perf_counter()
from {module} import MPIPoolExecutor
if __name__ == "__main__":
    t1 = time.perf_counter()
    ex = MPIPoolExecutor({workers})
    fs = [ex.submit(abs, -i) for i in range({workers})]   # one call per worker
    fs[0].result()
    t2 = time.perf_counter()
    [f.result() for f in fs]
    t3 = time.perf_counter()
    ex.shutdown()
    t4 = time.perf_counter()
    print(json.dumps({{"import": t1 - t0, "first": t2 - t1, "all": t3 - t1,
                       "shutdown": t4 - t3}}))
'''

STACKS = {"pyfw.futures": "pyfw.futures", "mpi4py.futures": "mpi4py.futures"}


def _env():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE),
                                                       os.environ.get("PYTHONPATH", "")]))
    if hasattr(os, "geteuid") and os.geteuid() == 0:   # mpi4py's singleton spawn needs both
        for prefix in ("OMPI", "PRTE"):
            env.setdefault(f"{prefix}_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault(f"{prefix}_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.pop("MPI4PY_FUTURES_MAX_WORKERS", None)
    return env


def measure(module: str, workers: int, tmp: str) -> dict:
    path = os.path.join(tmp, f"spawn_{module.split('.')[0]}_{workers}.py")
    with open(path, "w") as fh:
        fh.write(PROGRAM.format(module=module, workers=workers))
    res = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300,
                         env=_env(), cwd=tmp)
    if res.returncode != 0:
        raise RuntimeError(f"{module}, {workers} workers failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeat", type=int, default=3)
    add_output_options(parser, os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    out = output_dir(args)
    tmp = os.path.join(out, "futures_spawn_tmp")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    for workers in args.workers:
        runs = {name: [] for name in STACKS}
        for _ in range(args.repeat):
            for name, module in STACKS.items():   # alternate: load drifts hit both alike
                runs[name].append(measure(module, workers, tmp))
        for name, got in runs.items():
            first = [r["first"] for r in got]
            rows.append({"stack": name, "workers": workers,
                         "first_result_s": statistics.median(first),
                         "min_s": min(first), "max_s": max(first),
                         "all_workers_s": statistics.median(r["all"] for r in got),
                         "shutdown_s": statistics.median(r["shutdown"] for r in got)})
    print(f"{'stack':16} {'workers':>7} {'first result s':>15} {'range s':>13} "
          f"{'all answered s':>15} {'shutdown s':>11}")
    for r in rows:
        print(f"{r['stack']:16} {r['workers']:7d} {r['first_result_s']:15.2f} "
              f"{r['min_s']:6.2f}-{r['max_s']:<6.2f} {r['all_workers_s']:15.2f} "
              f"{r['shutdown_s']:11.2f}")
    write_json(out, "futures_spawn.json", {"rows": rows, "repeat": args.repeat})
    return 0


if __name__ == "__main__":
    sys.exit(main())
