"""pyfw.futures against every peer task pool, side by side in one run.

Peers: pyfw.futures (defaults), mpi4py.futures (default chunksize and the best of a few
hand-tuned ones), schwimmbad's MPIPool, Dask (dask-mpi under mpiexec; a LocalCluster of
processes when dask-mpi cannot start), charm4py's pool, Ray's multiprocessing Pool.
Scenarios, at 2 and 4 workers:

(a) 10^5 empty tasks (tasks/s; slower peers run fewer, see N_EMPTY, and the JSON says n);
(b) 10^4 tasks of 1 ms;
(c) 2,000 lognormal tasks (mean 4 ms), the first worker process to start is 3x slower;
    reported against the ideal ``work / sum(speeds)``;
(d) the first worker to reach task 500 of 2,000 (2 ms) is SIGKILLed: does the run finish,
    with how many results, each exactly once?

Tasks sleep rather than spin, so 4 workers on a 2-core machine measure scheduling, not
core sharing. Medians of ``--reps`` runs (3 for the slow peers: Dask, Ray, charm4py) with
min-max. Peers come from the ``bench`` extra (``pip install -e .[bench]``); a peer that cannot
start is reported with its error. Run under ``flock /tmp/pyfw-bench.lock``::

    python benchmarks/futures_peers.py [--workers 2 4] [--reps 5] [--peers ...]
                                       [--publish | --out DIR]

Writes ``futures_peers.json``, ``.txt`` (the table) and ``.png`` to ``--out DIR`` (default
``benchmarks/results/local/``; ``--publish``: the tracked ``benchmarks/results/``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from pyfw.monitor.results import add_output_options, machine, output_dir
from pyfw.monitor.stats import spread

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PEERS = ("pyfw", "mpi4py", "schwimmbad", "dask", "charm4py", "ray")
SLOW = ("dask", "charm4py", "ray")
MEAN_C, SIGMA_C = 4e-3, 0.8
#: (a) runs fewer empty tasks on peers too slow for 10^5 in reasonable time (rates compare)
N_EMPTY = {"mpi4py": 10_000, "schwimmbad": 10_000, "dask": 2_000, "dask-mpi": 2_000,
           "charm4py": 5_000}

_slow_self = None


# ---------------------------------------------------------------- tasks (run on workers)
def noop(x):
    return x


def sleep_ms(x):
    time.sleep(1e-3)
    return x


def uneven(args):
    """Sleep ``t`` seconds, 3x longer on the first worker process to claim ``marker``."""
    t, marker = args
    global _slow_self
    if _slow_self is None:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            _slow_self = True
        except FileExistsError:
            _slow_self = False
    time.sleep(t * (3 if _slow_self else 1))
    return t


def doomed(args):
    """Task ``i``; the first worker process to reach 500 claims ``marker`` and dies."""
    i, marker = args
    if i == 500:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            os.kill(os.getpid(), signal.SIGKILL)
        except FileExistsError:
            pass
    time.sleep(2e-3)
    return i


def lognormal_times(n=2000, seed=7):
    rng = random.Random(seed)
    mu = __import__("math").log(MEAN_C) - SIGMA_C ** 2 / 2
    return [rng.lognormvariate(mu, SIGMA_C) for _ in range(n)]


# ---------------------------------------------------------------- job side
def _time(mapper, fn, items, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        got = mapper(fn, items)
        out.append(time.perf_counter() - t0)
        assert len(got) == len(items)
    return out


def run_scenarios(peer, mapper, workers, reps, scenario, tmp, chunks=(None,)):
    """Timings of one peer (on its master) as a dict, per chunksize variant."""
    res = {}
    for cs in chunks:
        m = mapper if cs is None else (lambda f, xs, cs=cs: mapper(f, xs, cs))
        key = "default" if cs is None else f"chunksize={cs}"
        n_a = N_EMPTY.get(peer if cs is None else "tuned", 100_000)
        r = res[key] = {}
        if scenario in ("all", "a"):
            mapper_warm = m(noop, list(range(200)))
            assert mapper_warm == list(range(200))
            r["a"] = {"n": n_a, "times": _time(m, noop, list(range(n_a)), reps)}
        if cs is not None and cs > 16:
            continue   # large fixed chunks only pay on empty tasks
        if scenario in ("all", "b"):
            r["b"] = {"n": 10_000, "times": _time(m, sleep_ms, list(range(10_000)), reps)}
        if scenario in ("all", "c"):
            ts = lognormal_times()
            times = []
            for rep in range(reps):
                marker = os.path.join(tmp, f"slow-{key}-{rep}")
                times += _time(m, uneven, [(t, marker) for t in ts], 1)
            r["c"] = {"work_s": sum(ts), "times": times,
                      "ideal_s": sum(ts) / ((workers - 1) + 1 / 3)}
    if scenario == "d":
        marker = os.path.join(tmp, "doomed")
        got = mapper(doomed, [(i, marker) for i in range(2000)])
        res["d"] = {"results": len(got), "exactly_once": sorted(got) == list(range(2000))}
    return res


def job(args):
    peer, out, workers, reps, scen = (args.job, args.job_out, args.nworkers, args.reps,
                                      args.scenario)
    tmp = tempfile.mkdtemp(prefix="pyfw-peers-")

    def write(res):
        with open(out, "w") as fh:
            json.dump(res, fh)

    if peer == "pyfw":
        from pyfw.futures import Executor
        with Executor() as ex:
            write(run_scenarios(peer, lambda f, xs: list(ex.map(f, xs)), workers, reps,
                                scen, tmp))
    elif peer == "mpi4py":
        from mpi4py.futures import MPIPoolExecutor
        with MPIPoolExecutor() as ex:
            chunks = (None,) if scen == "d" else (None, 16, 128, 1024)
            write(run_scenarios(peer, lambda f, xs, cs=1: list(ex.map(f, xs, chunksize=cs)),
                                workers, reps, scen, tmp, chunks))
    elif peer == "schwimmbad":
        from schwimmbad import MPIPool
        pool = MPIPool()
        if not pool.is_master():
            pool.wait()
            return
        write(run_scenarios(peer, lambda f, xs: list(pool.map(f, xs)), workers, reps, scen,
                            tmp))
        pool.close()
    elif peer in ("dask", "dask-mpi"):
        _dask_job(peer, write, workers, reps, scen, tmp)
    elif peer == "ray":
        import ray
        from ray.util.multiprocessing import Pool
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        with Pool(processes=workers) as pool:
            write(run_scenarios(peer, lambda f, xs: pool.map(f, xs), workers, reps, scen,
                                tmp))
        ray.shutdown()
    elif peer == "charm4py":
        from charm4py import charm

        def main(_):
            def mapper(f, xs):   # charm.pool calls f(*item) for a tuple item: wrap those
                return charm.pool.map(f, [(x,) if isinstance(x, tuple) else x for x in xs])
            write(run_scenarios(peer, mapper, workers, reps, scen, tmp))
            charm.exit()
        charm.start(main)


def _dask_job(peer, write, workers, reps, scen, tmp):
    from distributed import Client
    if peer == "dask-mpi":
        from dask_mpi import initialize
        initialize(nthreads=1, dashboard=False)
        client = Client()
        client.wait_for_workers(workers, timeout=60)
    else:
        from distributed import LocalCluster
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)

    def mapper(f, xs):
        return client.gather(client.map(f, xs, pure=False))
    write(run_scenarios("dask", mapper, workers, reps, scen, tmp))
    client.close()


# ---------------------------------------------------------------- driver side
def command(peer, workers, out, reps, scen):
    py, me = sys.executable, os.path.abspath(__file__)
    tail = ["--job", peer, "--job-out", out, "--nworkers", str(workers), "--reps", str(reps),
            "--scenario", scen]
    from pyfw import launch
    if peer in ("pyfw", "mpi4py"):
        return launch.mpiexec_argv(workers + 1, [py, "-m", f"{peer}.futures", me] + tail,
                                   ft=scen == "d" and peer == "pyfw")
    if peer == "schwimmbad":
        return launch.mpiexec_argv(workers + 1, [py, me] + tail)
    if peer == "dask-mpi":
        return launch.mpiexec_argv(workers + 2, [py, me] + tail)
    if peer == "charm4py":
        return [py, "-m", "charmrun.start", f"+p{workers + 1}", me] + tail
    return [py, me] + tail


def run_peer(peer, workers, reps, scen, timeout):
    """(result dict or None, error text or None) of one job."""
    from pyfw import launch
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    os.remove(out)
    cmd = command(peer, workers, out, reps, scen)
    env = launch.mpi_env(nprocs=workers + 2)
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, cwd=HERE)
    try:
        text, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        launch.kill_job(proc)
        text, timed_out = (proc.communicate()[0] or ""), True
    took = time.time() - t0
    if os.path.exists(out):
        with open(out) as fh:
            return json.load(fh), None, took, timed_out
    tail = " | ".join(line for line in (text or "").strip().splitlines()[-4:])
    why = f"timed out after {timeout:.0f} s" if timed_out else f"exit {proc.returncode}"
    return None, f"{why}: {tail[-400:]}", took, timed_out


def summarise(times):
    return dict(spread(times), runs=len(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--peers", nargs="+", default=list(PEERS))
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--job-out", help=argparse.SUPPRESS)
    ap.add_argument("--nworkers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--scenario", default="all")
    ap.add_argument("--merge", action="store_true",
                    help="update the peers run into the existing JSON report (in the "
                         "output directory)")
    add_output_options(ap, RESULTS)
    args = ap.parse_args(argv)
    if args.job:
        return job(args)
    out = output_dir(args)
    path = os.path.join(out, "futures_peers.json")
    report = {"machine": machine(), "uptime_before": os.getloadavg(), "reps": args.reps,
              "peers": {}}
    if args.merge and os.path.exists(path):   # re-run some peers into an earlier report
        with open(path) as fh:
            report = json.load(fh)
        report.setdefault("merged_load", []).append(os.getloadavg())
    for peer in args.peers:
        for w in args.workers:
            reps = 3 if peer in SLOW else args.reps
            entry = report["peers"].setdefault(peer, {})[str(w)] = {"reps": reps}
            name = "dask-mpi" if peer == "dask" else peer
            res, err, took, _ = run_peer(name, w, reps, "all", 900)
            if res is None and peer == "dask":   # dask-mpi could not run: LocalCluster
                entry["dask_mpi_error"], name = err, "dask"
                res, err, took, _ = run_peer(name, w, reps, "all", 900)
            entry["ran_as"] = {"dask": "dask LocalCluster (processes)"}.get(name, name)
            entry["error"], entry["seconds"] = err, round(took, 1)
            if res is not None:
                entry["variants"] = {
                    k: {s: dict(v[s], **summarise(v[s]["times"])) for s in v} for k, v in
                    res.items()}
            dres, derr, _, _ = run_peer(name, w, 1, "d", 120)
            entry["d"] = (dres or {}).get("d", {"finished": False, "error": derr})
            if dres is not None:
                entry["d"]["finished"] = True
            print(json.dumps({peer: {w: entry}}, default=str)[:600], flush=True)
    report["uptime_after"] = os.getloadavg()
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1)
    text = table(report)
    print(text)
    with open(os.path.join(out, "futures_peers.txt"), "w") as fh:
        fh.write(text + "\n")
    plot(report, os.path.join(out, "futures_peers.png"))
    print(f"wrote {path}, .txt and .png")


def _best(entry, scen):
    """(default median, best median, best variant) of one scenario."""
    vs = entry.get("variants", {})
    meds = {k: v[scen]["median"] for k, v in vs.items() if scen in v}
    if not meds:
        return None, None, None
    if scen == "a":
        rate = {k: vs[k]["a"]["n"] / m for k, m in meds.items()}
        best = max(rate, key=rate.get)
        return rate.get("default"), rate[best], best
    best = min(meds, key=meds.get)
    return meds.get("default"), meds[best], best


def table(report):
    lines = ["peer | W | (a) tasks/s default [best] | (b) s | (c) s (ideal) | (d) finished, "
             "results, exactly once"]
    for peer, per_w in report["peers"].items():
        for w, e in per_w.items():
            if e.get("variants") is None:
                lines.append(f"{peer} | {w} | cannot run: {e['error']}")
                continue
            a, a_best, a_k = _best(e, "a")
            b, b_best, _ = _best(e, "b")
            c, c_best, _ = _best(e, "c")
            ideal = next(iter(e["variants"].values()))["c"]["ideal_s"]
            d = e["d"]
            lines.append(f"{e['ran_as']} | {w} | {a:,.0f} [{a_best:,.0f} {a_k}] | {b:.2f} "
                         f"[{b_best:.2f}] | {c:.2f} [{c_best:.2f}] ({ideal:.2f}) | "
                         f"{d.get('finished')}, {d.get('results')}, {d.get('exactly_once')}")
    return "\n".join(lines)


def plot(report, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    titles = ["(a) empty tasks: tasks/s (log)", "(b) 10^4 x 1 ms: seconds",
              "(c) lognormal, one worker 3x slower: time / ideal"]
    for ax, scen, title in zip(axes, "abc", titles):
        labels, vals, errs = [], [], []
        for peer, per_w in report["peers"].items():
            for w, e in per_w.items():
                if e.get("variants") is None:
                    continue
                v = e["variants"]["default"][scen]
                ideal = v.get("ideal_s", 1.0) if scen == "c" else 1.0
                if scen == "a":
                    med, lo, hi = (v["n"] / v["median"], v["n"] / v["max"],
                                   v["n"] / v["min"])
                else:
                    med, lo, hi = v["median"] / ideal, v["min"] / ideal, v["max"] / ideal
                labels.append(f"{peer} W={w}")
                vals.append(med)
                errs.append((med - lo, hi - med))
        ax.barh(labels, vals, xerr=list(zip(*errs)) if errs else None)
        if scen == "a":
            ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
