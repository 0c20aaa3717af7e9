"""joblib backends side by side: pyfw's (spawned pyfw.futures workers) against loky
(joblib's default) and dask's (a dask.distributed LocalCluster), same workers, same work.

    python benchmarks/joblib_peers.py [--workers 2] [--repeat 3] [--publish | --out DIR]

Two workloads: a scikit-learn ``GridSearchCV`` (SVC on the digits set, 3 x 2 grid, 3
folds: 18 fits of ~0.1-0.3 s) and ``Parallel`` over numpy tasks of ~10 ms (a 120 x 120
matrix product repeated). Each measurement is a fresh ``python`` process per backend,
alternating the backends: *cold* is the first call (workers start: spawn, loky's
processes, the dask cluster; timed from before the backend is imported), *warm* the
median of the calls after it on the same workers. Each workload's answer (the grid
search's best score, the tasks' sum) must be the same for every backend. Writes
``joblib_peers.json`` to ``--out DIR`` (default ``benchmarks/results/local/``).
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
import numpy as np
import joblib
from joblib import Parallel, delayed

def matmul_task(seed):
    a = np.random.default_rng(seed).standard_normal((120, 120))
    for _ in range(25):
        a = np.tanh(a @ a / 120.0)
    return float(a.sum())

def run(WORKLOAD, WORKERS):
    if WORKLOAD == "gridsearch":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC
        X, y = load_digits(return_X_y=True)
        grid = GridSearchCV(SVC(), {"C": [0.5, 1, 4], "gamma": [1e-3, 3e-4]}, cv=3,
                            n_jobs=WORKERS)
        grid.fit(X, y)
        return round(grid.best_score_, 12)
    out = Parallel(n_jobs=WORKERS)(delayed(matmul_task)(i) for i in range(200))
    return round(sum(out), 6)

if __name__ == "__main__":   # pyfw's workers import this file: no work at import
    BACKEND, WORKERS, WORKLOAD = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    CALLS = int(sys.argv[4])
    t0 = time.perf_counter()
    if BACKEND == "pyfw":
        import pyfw.joblib
        context = joblib.parallel_backend("pyfw")
    elif BACKEND == "dask":
        from dask.distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        context = joblib.parallel_backend("dask")
    else:
        context = joblib.parallel_backend("loky")
    times, answers = [], []
    with context:
        for _ in range(CALLS):
            t = time.perf_counter()
            answers.append(run(WORKLOAD, WORKERS))
            times.append(time.perf_counter() - t)
            if len(times) == 1:
                cold = time.perf_counter() - t0   # the backend's start-up included
    if BACKEND == "dask":
        client.close()
        cluster.close()
    print(json.dumps({"cold": cold, "warm": times[1:], "answers": answers}))
'''

BACKENDS = ("pyfw", "loky", "dask")
WORKLOADS = ("gridsearch", "numpy_10ms")


def _env():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE),
                                                       os.environ.get("PYTHONPATH", "")]))
    env.pop("MPI4PY_FUTURES_MAX_WORKERS", None)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"   # one core per worker, whichever backend starts it
    return env


def measure(backend: str, workers: int, workload: str, calls: int, tmp: str) -> dict:
    path = os.path.join(tmp, "joblib_peer.py")
    with open(path, "w") as fh:
        fh.write(PROGRAM)
    res = subprocess.run([sys.executable, path, backend, str(workers), workload, str(calls)],
                         capture_output=True, text=True, timeout=900, env=_env(), cwd=tmp)
    if res.returncode != 0:
        raise RuntimeError(f"{backend} / {workload} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _stat(values) -> dict:
    values = list(values)
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3,
                        help="fresh processes per backend and workload")
    parser.add_argument("--calls", type=int, default=3,
                        help="calls per process: the first is cold, the others warm")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    add_output_options(parser, os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    out = output_dir(args)
    tmp = os.path.join(out, "joblib_peers_tmp")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    for workload in args.workloads:
        runs = {b: [] for b in BACKENDS}
        for _ in range(args.repeat):
            for backend in BACKENDS:   # alternate: load drifts hit every backend alike
                runs[backend].append(measure(backend, args.workers, workload, args.calls,
                                             tmp))
        answers = {b: sorted({a for r in got for a in r["answers"]})
                   for b, got in runs.items()}
        for backend, got in runs.items():
            rows.append({"workload": workload, "backend": backend, "workers": args.workers,
                         "cold_s": _stat(r["cold"] for r in got),
                         "warm_s": _stat(w for r in got for w in r["warm"]),
                         "answers": answers[backend],
                         "same_answer": answers[backend] == answers["loky"]})
    print(f"{'workload':12} {'backend':8} {'cold s median [min-max]':>26} "
          f"{'warm s median [min-max]':>26} same")
    for r in rows:
        c, w = r["cold_s"], r["warm_s"]
        print(f"{r['workload']:12} {r['backend']:8} "
              f"{c['median']:10.2f} [{c['min']:.2f}-{c['max']:.2f}]      "
              f"{w['median']:10.2f} [{w['min']:.2f}-{w['max']:.2f}]      {r['same_answer']}")
    write_json(out, "joblib_peers.json", {"rows": rows, "repeat": args.repeat,
                                          "calls": args.calls, "workers": args.workers})
    return 0


if __name__ == "__main__":
    sys.exit(main())
