"""Where a benchmark or study writes its results: a directory the user names, an untracked
default, or (only when asked) the tracked directory a generated report is built from.

A script calls :func:`add_output_options` on its parser with the tracked directory, then
:func:`output_dir` on the parsed arguments, and writes there (:func:`write_json` adds the
machine it ran on and the command line). So running a benchmark never overwrites the
published figures by accident::

    python benchmarks/farm_bench.py                   # -> benchmarks/results/local/
    python benchmarks/farm_bench.py --out /tmp/mine   # -> /tmp/mine/
    python benchmarks/farm_bench.py --publish         # -> benchmarks/results/ (tracked)
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys

__all__ = ["LOCAL", "add_output_options", "output_dir", "machine", "write_json", "alternate",
           "timed_job", "LAUNCH_T0_ENV"]

#: the launch's wall-clock time, handed to the ranks of a :func:`timed_job`
LAUNCH_T0_ENV = "PYFW_LAUNCH_T0"

#: the untracked subdirectory of the published directory that runs write by default
LOCAL = "local"


def add_output_options(parser, published: str) -> None:
    """Add ``--out DIR`` and ``--publish`` to ``parser``; ``published`` is the tracked
    results directory that ``--publish`` writes."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", metavar="DIR", default=None,
                       help=f"write the results to DIR (default: {_shown(published)}/{LOCAL}/, "
                            "untracked)")
    group.add_argument("--publish", action="store_true",
                       help=f"write the tracked results in {_shown(published)}/ (the "
                            "published figures)")
    parser.set_defaults(published_dir=published)


def output_dir(args) -> str:
    """The directory the parsed ``args`` ask for, created if missing."""
    if args.publish:
        path = args.published_dir
    else:
        path = args.out or os.path.join(args.published_dir, LOCAL)
    os.makedirs(path, exist_ok=True)
    return path


def machine() -> dict:
    """What the figures depend on: host, CPUs, Python, the date and the load average."""
    info = {"host": platform.node(), "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat()}
    try:
        info["load"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:   # not on every platform
        pass
    return info


def alternate(sizes, repeat: int, arms: dict, launch, keys):
    """Side-by-side launches: per size, every arm ``repeat`` times, the arms alternating
    launch by launch (load drifts hit them alike). ``launch(size, setting)`` (``setting``:
    the arm's value in ``arms``) returns a dict holding ``keys``. Yields one row per size and
    arm, once the size is done: ``{"ranks", "arm", "runs", key: spread, ...}``
    (:func:`pyfw.monitor.stats.spread`)."""
    from .stats import spread
    for size in sizes:
        runs = {arm: [] for arm in arms}
        for _ in range(repeat):
            for arm, setting in arms.items():
                runs[arm].append(launch(size, setting))
        for arm, got in runs.items():
            yield {"ranks": size, "arm": arm, "runs": got,
                   **{k: spread(r[k] for r in got) for k in keys}}


def timed_job(ranks: int, program: str, env: dict, what: str) -> dict:
    """Run ``python -c program`` under ``pyfw-run -n ranks`` with ``env``, the launch's
    wall-clock time in ``$PYFW_LAUNCH_T0`` (for the ranks to time their start-up from it);
    returns the last JSON line the job printed, with ``job_s`` (the whole job's wall time)
    added. A job that fails raises, naming ``what`` and ending with its stderr."""
    import json
    import subprocess
    import time
    env = dict(env)
    t0 = time.time()
    env[LAUNCH_T0_ENV] = repr(t0)
    p = subprocess.run(["pyfw-run", "-n", str(ranks), "--timeout", "600", "--",
                        sys.executable, "-c", program], env=env, capture_output=True,
                       text=True, timeout=700)
    wall = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{ranks} ranks, {what}: exit {p.returncode}\n{p.stderr[-2000:]}")
    row = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")][-1]
    return dict(row, job_s=wall)


def write_json(directory: str, name: str, data: dict) -> str:
    """Write ``data`` as ``directory/name`` with ``machine`` and ``command`` added where it
    has none; returns the path (and says it on stdout)."""
    data = dict(data)
    data.setdefault("machine", machine())
    data.setdefault("command", " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
                    if sys.argv and sys.argv[0] else None)
    path = os.path.join(directory, name)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    print(f"wrote {path}")
    return path


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
