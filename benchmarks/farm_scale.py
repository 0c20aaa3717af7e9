"""Farm at scale on one box: flat against two-level, makespan, CPU per task by role, start-up.

    python benchmarks/farm_scale.py [--ranks 16,64] [--modes floor,flat,node16,node32]
                                    [--task-ms 1,10,100] [--ideal 1.0] [--repeats 1]
                                    [--timeout 900] [--profile] [--testbed]
                                    [--publish | --out DIR]

Every (ranks, mode) is one ``pyfw-run`` launch whose master runs one ``Farm.map`` of
``time.sleep(tau)`` tasks per task duration, back to back, sized so that the ideal makespan
``tasks * tau / (ranks - 1)`` is ``--ideal`` seconds (every rank but the master computes: in
node mode the sub-masters run pieces between their scheduling turns). ``nodeK`` is
``hierarchy="node"`` with ``PYFW_FARM_NODE_SIZE=K`` (blocks of K consecutive ranks are a
"node"); a mode whose blocks hold every rank has no sub-master and is skipped.

What it reports, side by side:

* **makespan / ideal** and **tasks/s** of every map;
* **CPU seconds per task by role**: every rank reads its own process CPU time
  (``time.process_time``) around its share of each map -- the master around the map, a worker
  from its first task of the map to its last, a sub-master from the first chunk it accepts
  or task it runs to the last results it sends up -- and the master gathers them by
  role (master, sub-masters, workers). On one box every rank shares the same cores, so the
  sum is the machine's CPU per task; ``busy`` is that sum over the cores the map had
  (``cpu / (cores * wall)``: near 1, the box was saturated);
* **start-up**: per rank, wall-clock marks from the launch (``time.time()`` taken by this
  script just before ``mpiexec``) to the process start (from ``/proc``), ``mpi4py`` loaded,
  ``MPI_Init`` done, ``pyfw`` imported, ``Farm()`` built (its ``Dup`` and the node split) and,
  on the master, every top-level worker's hello received; the last rank to reach each mark
  and the per-rank CPU seconds between marks (on an oversubscribed box start-up is bounded
  by the sum of that CPU over all ranks divided by the cores).

``floor`` (a mode) is the box's own limit, no scheduler: ``ranks - 1`` forked processes,
no MPI, each sleeping its even share of the tasks (``ideal / tau`` sleeps of ``tau``) in a
loop, started together; its makespan / ideal and CPU per sleep are what a perfect farm on
this box would approach (the wake-ups of hundreds of sleepers on two cores are not free).

A mode with ``:unordered`` (``flat:unordered``) runs its maps unordered: results as they
arrive, no window. A mode with ``:NAME``, NAME a scheduling policy (``flat:fac2``), runs
its maps with that policy instead of the default; options combine with ``+``
(``flat:fac2+unordered``). A mode with ``:again`` times each map after an untimed one like
it, as a farm serving map after map (an MCMC sampler's steps) runs all but its first. An
ordered map dispatches only ``window`` (65,536) tasks past the first result not yet handed
out; beside it, the unordered map is the bound that an ordered map larger than its window
(``--ideal 20`` from 128 ranks on 10 ms tasks) should reach.

``--repeats N`` runs every mode N times, the modes alternated (each repeat starts one mode
later), and the summary gives per (ranks, mode, task) the median and min-max of makespan /
ideal, tasks/s and CPU per task, with each run's makespan over the ``floor``'s and the
``flat`` farm's of the same repeat (side by side: the shared box's speed moves between
runs more than most changes do; ``floor`` is in the default modes for that).

``--profile`` runs cProfile on the master's maps and on one worker (and one sub-master in
node mode) and writes their top functions beside the results (``farm_scale_prof_*.txt``).
``--testbed`` runs the same on the multi-node test bed (prefix ``h11``, 8 nodes x 32 slots:
the node split is the real one; torn down at the end).

Writes ``farm_scale.json`` to ``--out DIR`` (default benchmarks/results/local/;
``--publish``: the tracked benchmarks/results/) and prints the tables.
"""
from __future__ import annotations

import json
import os
import sys
import time

T_MAIN = time.time()                # the interpreter has started and read this script
CPU_MAIN = time.process_time()

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PUBLISHED = os.path.join(HERE, "results")
T0_ENV = "PYFW_SCALE_T0"            # the launch's wall-clock time, for the ranks' marks
DEPTH_ENV = "PYFW_SCALE_DEPTH"      # --pipeline-depth for the child (0: automatic)
ORDER_ENV = "PYFW_SCALE_UNORDERED"  # "1": the child's maps are unordered
POLICY_ENV = "PYFW_SCALE_POLICY"    # the child's maps' scheduling policy ("": the default)
AGAIN_ENV = "PYFW_SCALE_AGAIN"      # "1": each timed map follows an untimed one like it
TESTBED_PREFIX = "h11"
MARKS = ("proc", "main", "mpi4py", "mpi_init", "pyfw", "farm", "ready")


# ----------------------------------------------------------------------------- the task
class Meter:
    """A rank's CPU time around its share of each map, keyed by the task duration: at the
    first and the last task it runs of that map, plus its chunk count (a worker's)."""

    def __init__(self):
        self.first: dict = {}
        self.last: dict = {}
        self.tasks: dict = {}
        self.chunks: dict = {}
        self.key = None

    def task(self, key) -> None:
        cpu = time.process_time()
        if key not in self.first:
            self.first[key] = cpu
            self.tasks[key] = 0
            self.chunks[key] = 0
        self.last[key] = cpu
        self.tasks[key] += 1
        self.key = key

    def chunk(self) -> None:
        if self.key is not None:
            self.chunks[self.key] += 1

    def touch(self, key) -> None:
        """A sub-master at work on a map (accepting a chunk, sending results up), which it
        may be without running a task of it itself: its window spans that too."""
        if key is None:
            return
        cpu = time.process_time()
        if key not in self.first:
            self.first[key] = cpu
            self.tasks[key] = 0
            self.chunks[key] = 0
        self.last[key] = cpu

    def windows(self) -> dict:
        return {str(k): {"cpu_s": self.last[k] - self.first[k], "tasks": self.tasks[k],
                         "chunks": self.chunks[k]} for k in self.first}


METER = Meter()


def sleep_task(seconds, x):
    """The benchmark's task: sleep ``seconds`` (no CPU), metered on the rank that runs it."""
    METER.task(seconds)
    time.sleep(seconds)
    return x


def unmetered_task(seconds, x):
    """The untimed map's task (``:again``): the same sleep, outside the meter's windows."""
    time.sleep(seconds)
    return x


# ----------------------------------------------------------------------------- one launch
def _process_start() -> float:
    """Wall-clock time this process was started (from /proc; 10 ms resolution)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return float("nan")


def child(out: str, durations: list[float], ideal: float, hierarchy: str, profile: bool):
    """One launch: every rank marks its start-up, the master runs one map per duration, and
    every rank's marks and CPU windows are gathered on the master, which writes ``out``."""
    marks = {"proc": (_process_start(), 0.0), "main": (T_MAIN, CPU_MAIN)}

    def mark(name):
        marks[name] = (time.time(), time.process_time())

    import mpi4py
    mpi4py.rc.initialize = False      # MPI_Init apart from loading the module
    mpi4py.rc.finalize = True
    from mpi4py import MPI
    mark("mpi4py")
    MPI.Init()
    mark("mpi_init")

    from pyfw import Farm
    from pyfw.farm.worker import WorkerLoop
    mark("pyfw")
    heavy = sorted(m for m in ("numpy", "h5py", "numba", "scipy", "matplotlib")
                   if m in sys.modules)

    run_chunk = WorkerLoop.run_chunk

    def counted(self, chunk, t_got):   # a worker's chunks per map (sub-masters do not run it)
        run_chunk(self, chunk, t_got)
        METER.chunk()
    WorkerLoop.run_chunk = counted

    from pyfw.farm.hierarchy import SubMaster
    accept, send_up = SubMaster._accept, SubMaster._send

    def tau_of(f):                     # the map's key: fn is partial(sleep_task, tau)
        fn = f.rnd.fn
        return fn.args[0] if getattr(fn, "func", None) is sleep_task else None

    def accepted(self):
        took = accept(self)
        for f in self.forwards.values():
            METER.touch(tau_of(f))
        return took

    def sent_up(self, f, status, now):
        METER.touch(tau_of(f))
        send_up(self, f, status, now)
    SubMaster._accept, SubMaster._send = accepted, sent_up

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    prof = None
    depth = int(os.environ.get(DEPTH_ENV, "0")) or None
    farm = Farm(world, hierarchy=hierarchy, pipeline_depth=depth)
    mark("farm")
    role = "master" if farm.is_master else (
        "worker" if farm._layout is None else farm._layout.role(rank))
    if profile and rank in _profiled(farm):
        import cProfile
        prof = cProfile.Profile(time.process_time)   # CPU, not wall: ranks share cores
    phases = []
    cpu_enter = time.process_time()
    if prof is not None and not farm.is_master:
        prof.enable()
    with farm:
        if farm.is_master:
            eng = farm.engine
            while not all(w.hello for w in eng.workers.values()):
                eng.step()
            mark("ready")
            if profile:
                import cProfile
                prof = cProfile.Profile(time.process_time)   # CPU, not wall: ranks share cores
            options = (os.environ.get(ORDER_ENV) == "1", os.environ.get(POLICY_ENV) or None)
            for tau in durations:
                if os.environ.get(AGAIN_ENV) == "1":   # the farm has run a map like it
                    _phase(farm, tau, ideal, None, *options, task=unmetered_task)
                phases.append(_phase(farm, tau, ideal, prof, *options))
    if prof is not None:
        prof.disable()
    cpu_farm = time.process_time() - cpu_enter
    mine = {"rank": rank, "role": role, "marks": marks, "meter": METER.windows(),
            "cpu_farm_s": cpu_farm, "heavy": heavy}
    if prof is not None:
        import io
        import pstats
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
        mine["profile"] = text.getvalue()
    everyone = world.gather(mine, root=0)
    if rank == 0:
        with open(out, "w") as fh:
            json.dump({"ranks": size, "hierarchy": farm.hierarchy, "phases": phases,
                       "ranks_info": everyone, "t_end": time.time()}, fh)


def _profiled(farm) -> set:
    """The ranks --profile profiles besides the master: a worker; in node mode the first
    sub-master and one of its node's workers."""
    lay = farm._layout
    if lay is None or not lay.submasters:
        return {1}
    sub = min(lay.submasters.values())
    return {sub, sub + 1}


def _phase(farm, tau: float, ideal: float, prof, unordered: bool = False,
           policy: str | None = None, task=sleep_task) -> dict:
    """One map of sleep tasks lasting ``tau`` on ``farm``, timed on the master."""
    import functools
    eng = farm.engine
    workers = farm.size - 1
    tasks = max(workers, round(ideal * workers / tau))
    fn = functools.partial(task, tau)
    msgs0 = int(sum(eng.comm.sent_msgs)), int(sum(eng.comm.recv_msgs))
    idle0 = eng.idle_master
    if prof is not None:
        prof.enable()
    dup0 = eng.duplicates
    cpu0, t0 = time.process_time(), time.perf_counter()
    n = 0
    for _ in farm.map(fn, range(tasks), unordered=unordered, policy=policy):
        n += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if prof is not None:
        prof.disable()
    return {"task_s": tau, "tasks": n, "wall_s": wall, "ideal_s": tasks * tau / workers,
            "master_cpu_s": cpu, "master_idle_s": eng.idle_master - idle0,
            "master_sent_msgs": int(sum(eng.comm.sent_msgs)) - msgs0[0],
            "master_recv_msgs": int(sum(eng.comm.recv_msgs)) - msgs0[1],
            # how deep the pipeline went (the round trip it saw), and tail copies
            "pipeline": farm.stats().get("pipeline"),
            "duplicates": eng.duplicates - dup0}


# ----------------------------------------------------------------------------- driver
def floor_one(ranks: int, durations, ideal: float) -> dict:
    """The ``floor`` mode: ``ranks - 1`` forked sleepers (see the module docstring), one
    phase per task duration, in the summaries' shape."""
    phases = []
    cores = os.cpu_count() or 1
    for tau in durations:
        k = max(1, round(ideal / tau))
        t0 = time.perf_counter()
        pids = []
        for _ in range(ranks - 1):
            pid = os.fork()
            if pid == 0:     # a sleeper: nothing but the tasks' sleeps
                try:
                    for _ in range(k):
                        time.sleep(tau)
                finally:
                    os._exit(0)
            pids.append(pid)
        cpu = 0.0
        for pid in pids:
            _, _, usage = os.wait4(pid, 0)
            cpu += usage.ru_utime + usage.ru_stime
        wall = time.perf_counter() - t0
        n = k * (ranks - 1)
        phases.append({"task_s": tau, "tasks": n, "wall_s": wall, "ideal_s": k * tau,
                       "makespan_over_ideal": wall / (k * tau), "tasks_per_s": n / wall,
                       "cpu_s": {"master": 0.0, "submasters": 0.0, "workers": cpu},
                       "cpu_us_per_task": {"master": 0.0, "submasters": 0.0,
                                           "workers": 1e6 * cpu / n},
                       "cpu_us_per_task_total": 1e6 * cpu / n, "busy": cpu / (cores * wall)})
    return {"ranks": ranks, "mode": "floor", "hierarchy": None, "phases": phases}


def parse_mode(mode: str) -> tuple[str, int | None]:
    """``flat`` -> (flat, None); ``nodeK`` -> (node, K); ``node`` -> (node, None: the real
    shared-memory split, as on the test bed); a ``:unordered`` suffix is left aside (see
    :func:`unordered`)."""
    mode = mode.partition(":")[0]
    if mode == "flat":
        return "flat", None
    if mode.startswith("node"):
        k = mode[4:]
        return "node", int(k) if k else None
    raise ValueError(f"unknown mode {mode!r}: flat, node or nodeK")


#: a mode's options besides a policy: its maps unordered; each map timed after an untimed
#: one like it (a farm that serves map after map, as an MCMC sampler's steps do: rounds
#: after the first start with what the last one measured)
FLAGS = ("unordered", "again")


def _options(mode: str) -> list[str]:
    """A mode's options after its ``:``, joined by ``+`` (``flat:fac2+unordered``)."""
    from pyfw.farm import POLICIES
    opts = [o for o in mode.partition(":")[2].split("+") if o]
    for o in opts:
        if o not in FLAGS and o not in POLICIES:
            raise ValueError(f"unknown option {o!r} in mode {mode!r}: {', '.join(FLAGS)} "
                             f"or a policy ({', '.join(sorted(POLICIES))})")
    return opts


def unordered(mode: str) -> bool:
    """Whether ``mode`` (``flat:unordered``) runs its maps unordered."""
    return "unordered" in _options(mode)


def again(mode: str) -> bool:
    """Whether ``mode`` (``flat:again``) times each map after an untimed one like it."""
    return "again" in _options(mode)


def policy_of(mode: str) -> str | None:
    """The scheduling policy a mode names (``flat:fac2``), None for the default."""
    return next((o for o in _options(mode) if o not in FLAGS), None)


def launch_one(ranks: int, mode: str, durations, ideal, timeout, profile, bed=None,
               depth: int = 0) -> dict:
    """Run one (ranks, mode) launch; returns its summary (see :func:`summarize`)."""
    import tempfile

    from pyfw.launch import run
    hierarchy, node_size = parse_mode(mode)
    env = dict(os.environ)
    extra = None
    if bed is not None:
        from pyfw.testbed.agent import launch_options
        from pyfw.testbed.netns import job_env
        env, extra = job_env(bed, env), launch_options(bed)
    env.pop("PYFW_FARM_NODE_SIZE", None)
    env[DEPTH_ENV] = str(depth or 0)
    env[ORDER_ENV] = "1" if unordered(mode) else "0"
    env[POLICY_ENV] = policy_of(mode) or ""
    env[AGAIN_ENV] = "1" if again(mode) else "0"
    if node_size:
        env["PYFW_FARM_NODE_SIZE"] = str(node_size)
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        t0 = time.time()
        env[T0_ENV] = repr(t0)
        res = run(ranks, [sys.executable, os.path.abspath(__file__), "--child", out,
                          ",".join(map(repr, durations)), repr(ideal), hierarchy,
                          "1" if profile else "0"],
                  timeout=timeout, capture=True, env=env, extra=extra, cwd=ROOT)
        t_exit = time.time()
        if res.returncode != 0 or os.path.getsize(out) == 0:
            raise RuntimeError(f"{ranks} ranks {mode}: exit {res.returncode}"
                               f"{' (timed out)' if res.timed_out else ''}\n"
                               f"{(res.stderr or '')[-3000:]}")
        with open(out) as fh:
            raw = json.load(fh)
    finally:
        os.unlink(out)
    return summarize(raw, ranks, mode, t0, t_exit)


ROLE_GROUPS = {"master": "master", "submaster": "submasters", "worker": "workers",
               "node-worker": "workers"}


def summarize(raw: dict, ranks: int, mode: str, t0: float, t_exit: float) -> dict:
    """Per map: makespan/ideal, tasks/s, CPU per task by role; start-up marks."""
    import statistics
    info = raw["ranks_info"]
    cores = os.cpu_count() or 1
    phases = []
    for ph in raw["phases"]:
        key = str(ph["task_s"])
        cpu = {"master": ph["master_cpu_s"], "submasters": 0.0, "workers": 0.0}
        chunks = {"submasters": 0, "workers": 0}
        counts = {"submasters": 0, "workers": 0}
        ran = {"submasters": 0, "workers": 0}     # tasks run (a sub-master: by itself)
        for r in info:
            group = ROLE_GROUPS[r["role"]]
            if group == "master":
                continue
            counts[group] += 1
            win = r["meter"].get(key)
            if win is not None:
                cpu[group] += win["cpu_s"]
                chunks[group] += win["chunks"]
                ran[group] += win["tasks"]
        n, wall = ph["tasks"], ph["wall_s"]
        total = sum(cpu.values())
        phases.append(dict(ph, makespan_over_ideal=wall / ph["ideal_s"], tasks_per_s=n / wall,
                           cpu_s=cpu, cpu_us_per_task={k: 1e6 * v / n for k, v in cpu.items()},
                           cpu_us_per_task_total=1e6 * total / n,
                           busy=total / (cores * wall), worker_chunks=chunks["workers"],
                           ranks_by_role=counts, tasks_by_role=ran))
    startup = {}
    for name in MARKS[1:]:
        at = [r["marks"][name][0] - t0 for r in info if name in r["marks"]]
        if at:
            startup[name] = {"last_s": max(at), "median_s": statistics.median(at)}
    at = [r["marks"]["proc"][0] - t0 for r in info]
    startup["proc"] = {"last_s": max(at), "median_s": statistics.median(at)}
    cpu_between = {}
    for a, b in zip(MARKS[1:], MARKS[2:6]):
        per = [r["marks"][b][1] - r["marks"][a][1] for r in info]
        cpu_between[f"{a}->{b}"] = {"median_s": statistics.median(per), "sum_s": sum(per)}
    cpu_between["start->main"] = {"median_s": statistics.median(r["marks"]["main"][1]
                                                                 for r in info),
                                  "sum_s": sum(r["marks"]["main"][1] for r in info)}
    out = {"ranks": ranks, "mode": mode, "hierarchy": raw["hierarchy"], "phases": phases,
           "startup": startup, "startup_cpu": cpu_between,
           "teardown_s": t_exit - raw["t_end"], "job_s": t_exit - t0,
           "heavy_modules": info[0]["heavy"],
           "cpu_farm_s": {g: sum(r["cpu_farm_s"] for r in info if ROLE_GROUPS[r["role"]] == g)
                          for g in ("master", "submasters", "workers")}}
    profiles = {r["role"] + str(r["rank"]): r["profile"] for r in info if "profile" in r}
    if profiles:
        out["profiles"] = profiles
    return out


def table(results: list[dict]) -> str:
    rows = ["| ranks | mode | task | tasks | wall s | / ideal | tasks/s | CPU us/task: master"
            " | sub-masters | workers | total | busy |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for p in r["phases"]:
            c = p["cpu_us_per_task"]
            rows.append(f"| {r['ranks']} | {r['mode']} | {p['task_s'] * 1e3:g} ms | "
                        f"{p['tasks']:,} | {p['wall_s']:.2f} | {p['makespan_over_ideal']:.2f} | "
                        f"{p['tasks_per_s']:,.0f} | {c['master']:.1f} | {c['submasters']:.1f} | "
                        f"{c['workers']:.1f} | {p['cpu_us_per_task_total']:.1f} | "
                        f"{p['busy']:.2f} |")
    return "\n".join(rows)


def startup_table(results: list[dict]) -> str:
    rows = ["| ranks | mode | process started | mpi4py loaded | MPI_Init done | pyfw imported"
            " | Farm built | Farm ready | job end | CPU/rank: python | mpi4py | MPI_Init | "
            "pyfw | Farm() |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r["mode"] == "floor":
            continue            # no MPI, no launch
        s, c = r["startup"], r["startup_cpu"]
        rows.append(
            f"| {r['ranks']} | {r['mode']} | " + " | ".join(
                f"{s[m]['last_s']:.1f}" for m in ("proc", "mpi4py", "mpi_init", "pyfw",
                                                   "farm", "ready"))
            + f" | {r['job_s']:.1f} | " + " | ".join(
                f"{1e3 * c[k]['median_s']:.0f} ms" for k in (
                    "start->main", "main->mpi4py", "mpi4py->mpi_init", "mpi_init->pyfw",
                    "pyfw->farm")) + " |")
    return "\n".join(rows)


def runs_at(mode: str, ranks: int) -> bool:
    """Whether ``mode`` means something at ``ranks``: node blocks that hold every rank
    leave no sub-master (that is the flat farm)."""
    if mode == "floor":
        return True
    hierarchy, k = parse_mode(mode)
    return not (hierarchy == "node" and k is not None and k >= ranks)


def summarise(results: list[dict]) -> list[dict]:
    """Per (ranks, mode, task duration) over the repeats: makespan / ideal, tasks/s and
    CPU us per task as median, min and max, and two ratios taken within each repeat (the
    modes of a repeat ran minutes apart at most): the makespan over the ``floor``'s (the
    box's own limit that repeat) and over the ``flat`` farm's."""
    from pyfw.monitor.stats import spread   # the driver's, not the ranks' (numpy)
    by_key: dict = {}
    for r in results:
        for p in r["phases"]:
            by_key.setdefault((r["ranks"], r["mode"], p["task_s"]), []).append(
                (r.get("repeat", 0), p))
    out = []
    for (ranks, mode, tau), runs in sorted(by_key.items(), key=lambda kv: (
            kv[0][0], kv[0][2], kv[0][1] != "floor", kv[0][1] != "flat", kv[0][1])):
        row = {"ranks": ranks, "mode": mode, "task_s": tau, "repeats": len(runs),
               "makespan_over_ideal": spread([p["makespan_over_ideal"] for _, p in runs]),
               "tasks_per_s": spread([p["tasks_per_s"] for _, p in runs]),
               "cpu_us_per_task": spread([p["cpu_us_per_task_total"] for _, p in runs])}
        for ref in ("floor", "flat"):
            if mode in (ref, "floor"):
                continue
            base = {rep: p["wall_s"] for rep, p in by_key.get((ranks, ref, tau), [])}
            ratios = [p["wall_s"] / base[rep] for rep, p in runs if rep in base]
            if ratios:
                row[f"over_{ref}"] = spread(ratios, keep_runs=True)
        out.append(row)
    return out


def summary_table(summary: list[dict]) -> str:
    """Medians over the repeats with [min-max]."""
    def fmt(x, digits=2):
        if x is None:
            return ""
        return (f"{x['median']:.{digits}f} [{x['min']:.{digits}f}-{x['max']:.{digits}f}]"
                if x["min"] != x["max"] else f"{x['median']:.{digits}f}")
    rows = ["| ranks | mode | task | repeats | / ideal | / floor | / flat | tasks/s | "
            "CPU us/task |", "|---|---|---|---|---|---|---|---|---|"]
    for row in summary:
        rows.append(f"| {row['ranks']} | {row['mode']} | {row['task_s'] * 1e3:g} ms | "
                    f"{row['repeats']} | {fmt(row['makespan_over_ideal'])} | "
                    f"{fmt(row.get('over_floor'))} | {fmt(row.get('over_flat'))} | "
                    f"{fmt(row['tasks_per_s'], 0)} | {fmt(row['cpu_us_per_task'], 1)} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":   # a rank: nothing of pyfw imported before its marks
        out, durations, ideal, hierarchy, profile = argv[1:6]
        child(out, [float(x) for x in durations.split(",")], float(ideal), hierarchy,
              profile == "1")
        return 0
    import argparse

    from pyfw.monitor.results import add_output_options, output_dir, write_json
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="16,64", help="comma-separated rank counts "
                    "(the issue's full set: 16,64,128,256)")
    ap.add_argument("--modes", default="floor,flat,node16,node32",
                    help="flat, nodeK (blocks of K ranks), node (the real split), floor "
                         "(forked sleepers, no scheduler: the box's limit); a ':unordered' "
                         "suffix runs the maps unordered (no window), ':again' times each "
                         "map after an untimed one like it, ':POLICY' with that "
                         "scheduling policy (flat:fac2), '+' joins them")
    ap.add_argument("--task-ms", default="1,10,100", help="task durations (ms)")
    ap.add_argument("--ideal", type=float, default=1.0,
                    help="ideal makespan of each map (s): sets the number of tasks")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0, help="per launch (s)")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the master's maps, a worker and a sub-master")
    ap.add_argument("--pipeline-depth", type=int, default=0,
                    help="chunks in flight per worker (Farm(pipeline_depth=...); default "
                         "0: the farm's automatic depth)")
    ap.add_argument("--testbed", action="store_true",
                    help=f"on the test bed (prefix {TESTBED_PREFIX}, 8 nodes x 32 slots)")
    add_output_options(ap, PUBLISHED)
    a = ap.parse_args(argv)
    where = output_dir(a)
    durations = [float(x) / 1e3 for x in a.task_ms.split(",")]
    modes = a.modes.split(",")
    results = []
    bed, tb = None, None
    if a.testbed:
        from pyfw.testbed import TestBed
        tb = TestBed(TESTBED_PREFIX)
        bed = tb.up(nodes=8, slots=32)
        sizes = [256]
        modes = [m for m in modes if m in ("flat", "node")] or ["flat", "node"]
    else:
        sizes = [int(x) for x in a.ranks.split(",")]
    try:
        for ranks in sizes:
            runnable = [m for m in modes if runs_at(m, ranks)]
            for rep in range(a.repeats):
                # the modes alternate, starting one later each repeat: the box's drift
                # over the minutes of a run falls on all of them alike
                shift = rep % len(runnable) if runnable else 0
                for mode in runnable[shift:] + runnable[:shift]:
                    load = os.getloadavg()[0]
                    if mode == "floor":
                        r = floor_one(ranks, durations, a.ideal)
                    else:
                        print(f"{ranks} ranks, {mode}, repeat {rep + 1} (load {load:.1f}) "
                              "...", flush=True)
                        r = launch_one(ranks, mode, durations, a.ideal, a.timeout, a.profile,
                                       bed, a.pipeline_depth)
                    r["repeat"], r["load_before"] = rep, load
                    results.append(r)
                    print(table([r]).split("\n", 2)[2], flush=True)
    finally:
        if tb is not None:
            tb.down()
    summary = summarise(results)
    print("\n" + table(results) + "\n\n" + startup_table(results) + "\n\n"
          + summary_table(summary))
    name = "farm_scale_testbed.json" if a.testbed else "farm_scale.json"
    for r in results:
        for who, text in r.pop("profiles", {}).items():
            path = os.path.join(where, f"farm_scale_prof_{r['ranks']}_{r['mode']}_{who}.txt")
            with open(path, "w") as fh:
                fh.write(text)
    write_json(where, name, {"cores": os.cpu_count(), "ideal_s": a.ideal,
                             "testbed": a.testbed, "repeats": a.repeats,
                             "summary": summary, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
