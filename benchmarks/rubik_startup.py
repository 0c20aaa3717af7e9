"""Rubik start-up: CPU and wall time from the interpreter's start to the first search node
of ``python -m apps.rubik`` in one process (no mpiexec), broken down by where it goes.

    python benchmarks/rubik_startup.py                       # this checkout, 7 runs
    git worktree add /tmp/rubik_old <sha>
    python benchmarks/rubik_startup.py --baseline /tmp/rubik_old --publish   # old vs new

Each run starts a fresh interpreter on ``python -m apps.rubik --scramble "R U F"
--heuristic nx --json`` (tables cached) with a probe (:func:`install_probe`, run by a
``sitecustomize`` put on the child's path) that times every import by the package it
belongs to, the table open, the derived tables, the kernels' loads from numba's cache and
the garbage collections (``gc.callbacks``), and stops at the end of the search's first slice
(``SubtreeSearch.step``: the kernel's load plus 18 nodes, microseconds of search). The
probe patches nothing the solver computes; it only wraps functions with timers.

Categories are exclusive: a nested import or load is charged to its own category, not to
the one that triggered it (numba imports most of its modules and scipy.linalg lazily at the
first kernel load; they count as numba's and scipy's imports). "interpreter" is the CPU the
process spent before the probe's first line (Python's own start-up and site), "other" the
rest (argument parsing, the heuristic's first bound, ...).

Runs alternate between the trees (after one unmeasured warm-up run each, which fills
numba's cache and the page cache), so load on a shared machine hits both alike. CPU
seconds are steadier than wall seconds there; both are reported, as the median and the
range over the runs. ``RUBIK_STARTUP_TRACE=1`` in the environment prints each import of
the solver's modules with its own and nested time (on the child's stderr).
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: the reported categories, in order
CATEGORIES = ("interpreter", "import numpy", "import numba, llvmlite", "import scipy",
              "import mpi4py (MPI_Init)", "import h5py", "import pyfw",
              "import apps.rubik", "symmetry tables (position_symmetry)",
              "table open and check", "derived tables", "kernel load (numba cache)",
              "import other", "garbage collection", "other")


def _import_category(name):
    top = name.split(".", 1)[0]
    if name == "pyfw.apps.rubik.position_symmetry":
        return "symmetry tables (position_symmetry)"
    if name.startswith(("pyfw.apps", "apps")) and top in ("pyfw", "apps"):
        return "import apps.rubik"
    return {"numpy": "import numpy", "numba": "import numba, llvmlite",
            "llvmlite": "import numba, llvmlite", "scipy": "import scipy",
            "mpi4py": "import mpi4py (MPI_Init)", "h5py": "import h5py",
            "pyfw": "import pyfw"}.get(top, "import other")


def install_probe():
    """Put the timers in place in a ``python -m apps.rubik ...`` process (called from the
    ``sitecustomize`` that :func:`_run_once` puts on its path, before the command runs):
    at the end of the first search slice the breakdown goes to ``$RUBIK_STARTUP_OUT`` and
    the process exits. ``$RUBIK_STARTUP_TREE``: the checkout that runs."""
    cpu_start, wall_start = time.process_time(), time.time()
    out_path, tree = os.environ["RUBIK_STARTUP_OUT"], os.environ["RUBIK_STARTUP_TREE"]
    import importlib._bootstrap as boot
    import importlib.util
    spawned = float(os.environ.get("RUBIK_STARTUP_SPAWNED", wall_start))
    totals, stack, per_module, patched = {}, [], {}, set()
    trace = os.environ.get("RUBIK_STARTUP_TRACE")

    def enter(cat, module=None):
        stack.append([cat, time.process_time(), time.perf_counter(), 0.0, 0.0, module])

    def leave():
        cat, c0, w0, child_c, child_w, module = stack.pop()
        c, w = time.process_time() - c0, time.perf_counter() - w0
        acc = totals.setdefault(cat, [0.0, 0.0])
        acc[0] += c - child_c
        acc[1] += w - child_w
        if trace and module and "rubik" in module:
            print(f"{'  ' * len(stack)}{module} {c * 1e3:.1f} ms, self {(c - child_c) * 1e3:.1f}",
                  file=sys.stderr)
        if module is not None:      # (numba re-imports a module it loads a kernel of)
            mine = per_module.setdefault(module, [0.0, 0.0])
            mine[0] += c - child_c
            mine[1] += w - child_w
        if stack:
            stack[-1][3] += c
            stack[-1][4] += w

    def timed(cat, fn):
        def wrapper(*a, **k):
            enter(cat)
            try:
                return fn(*a, **k)
            finally:
                leave()
        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        wrapper.__wrapped__ = fn
        return wrapper

    def first_node(step):
        def wrapper(self, *a, **k):
            status = step(self, *a, **k)
            cpu, wall = time.process_time(), time.time()
            report = {"cpu": cpu, "wall": wall - spawned,
                      "sections": dict(totals), "imports": per_module,
                      "modules": {m: m in sys.modules for m in
                                  ("mpi4py", "mpi4py.MPI", "h5py", "numba", "scipy")}}
            report["sections"]["interpreter"] = [cpu_start, wall_start - spawned]
            report["sections"]["other"] = [
                cpu - sum(c for c, _ in report["sections"].values()),
                report["wall"] - sum(w for _, w in report["sections"].values())]
            with open(out_path, "w") as f:
                import json
                json.dump(report, f)
            os._exit(0)
        return wrapper

    def patch(name, module):
        if name in patched:
            return
        patched.add(name)
        if name == "pyfw.apps.rubik.search":
            module.SubtreeSearch.step = first_node(module.SubtreeSearch.step)
        elif name == "pyfw.apps.rubik.solver":
            module.Heuristic.__init__ = timed("table open and check", module.Heuristic.__init__)
        elif name == "pyfw.apps.rubik.cache":
            module.load_or_build = timed("table open and check", module.load_or_build)
        elif name == "pyfw.apps.rubik.derived":
            module.cached_arrays = timed("derived tables", module.cached_arrays)
        elif name == "numba.core.dispatcher":
            d = module.Dispatcher
            d.compile = timed("kernel load (numba cache)", d.compile)

    find_and_load = boot._find_and_load

    def timed_find_and_load(name, import_):
        enter(_import_category(name), name)
        try:
            module = find_and_load(name, import_)
        finally:
            leave()
        patch(name, module)
        return module
    boot._find_and_load = timed_find_and_load     # the import statement calls it by name

    class TreeApps:
        """``pyfw.apps`` is ``tree/apps``, as an editable install of ``tree`` maps it."""
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "pyfw.apps":
                return None
            return importlib.util.spec_from_file_location(
                name, os.path.join(tree, "apps", "__init__.py"),
                submodule_search_locations=[os.path.join(tree, "apps")])
    sys.meta_path.insert(0, TreeApps)

    def collection(phase, info):
        if phase == "start":
            enter("garbage collection")
        else:
            leave()
    import gc
    gc.callbacks.append(collection)


def _run_once(tree, cli_args):
    import json
    import subprocess
    import tempfile
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "PMI_"))}   # no launcher
    env["PYTHONPATH"] = tree
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "sitecustomize.py"), "w") as f:
            # the probe is this file, loaded by its path (benchmarks/ is not a package)
            probe = os.path.abspath(__file__)
            f.write("import importlib.util as u\n"
                    f"s = u.spec_from_file_location('rubik_startup', {probe!r})\n"
                    "m = u.module_from_spec(s)\ns.loader.exec_module(m)\nm.install_probe()\n")
        out = os.path.join(tmp, "out.json")
        env.update(PYTHONPATH=os.pathsep.join([tmp, tree]), RUBIK_STARTUP_OUT=out,
                   RUBIK_STARTUP_TREE=tree, RUBIK_STARTUP_SPAWNED=repr(time.time()))
        proc = subprocess.run([sys.executable, "-m", "apps.rubik"] + cli_args, cwd=tree,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=600)
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"probe failed in {tree} (status {proc.returncode}, no "
                               f"search slice?):\n{proc.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)


#: modules whose own import time (median CPU) a summary lists
SLOWEST = 25


def _stats(values):
    values = sorted(values)
    n = len(values)
    median = values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])
    return {"median": median, "min": values[0], "max": values[-1]}


def summarize(runs):
    """Median and range of the total and of each category, CPU and wall."""
    out = {"cpu": _stats([r["cpu"] for r in runs]), "wall": _stats([r["wall"] for r in runs]),
           "sections": {}, "modules": runs[0]["modules"],
           "modules_always_same": all(r["modules"] == runs[0]["modules"] for r in runs)}
    for cat in CATEGORIES:
        vals = [r["sections"].get(cat, [0.0, 0.0]) for r in runs]
        out["sections"][cat] = {"cpu": _stats([v[0] for v in vals]),
                                "wall": _stats([v[1] for v in vals])}
    names = set().union(*(r["imports"] for r in runs))
    medians = {m: _stats([r["imports"].get(m, [0.0])[0] for r in runs])["median"]
               for m in names}
    out["slowest_imports_cpu"] = dict(sorted(medians.items(), key=lambda kv: -kv[1])[:SLOWEST])
    return out


def _cell(s):
    return f"{s['median']:.3f} [{s['min']:.3f}–{s['max']:.3f}]"


def table(results):
    """A markdown table of the summaries in ``results`` (label -> summary), side by side."""
    labels = list(results)
    head = ["seconds, median [min–max]"] + [f"{lab} {kind}" for lab in labels
                                            for kind in ("CPU", "wall")]
    rows = [["**to the first search node**"] +
            [f"**{_cell(results[lab][kind])}**" for lab in labels for kind in ("cpu", "wall")]]
    for cat in CATEGORIES:
        cells = [results[lab]["sections"][cat][kind] for lab in labels
                 for kind in ("cpu", "wall")]
        if all(c["max"] < 0.0005 for c in cells):
            continue
        rows.append([cat] + [_cell(c) for c in cells])
    rows.append(["imported mpi4py / h5py"] +
                [f"{'yes' if results[lab]['modules']['mpi4py'] else 'no'} / "
                 f"{'yes' if results[lab]['modules']['h5py'] else 'no'}"
                 for lab in labels for _ in ("cpu", "wall")])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main():
    import argparse
    import shlex
    import subprocess
    from pyfw.monitor.results import add_output_options, output_dir, write_json
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="measured runs per tree (default 7)")
    ap.add_argument("--baseline", metavar="TREE",
                    help="a checkout of the old code (git worktree) measured side by side")
    ap.add_argument("--tree", default=ROOT, help="the code measured (default this checkout)")
    ap.add_argument("--scramble", default="R U F")
    ap.add_argument("--heuristic", default="nx")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args()
    cli = ["--scramble", a.scramble, "--heuristic", a.heuristic, "--json"]
    trees = {}
    if a.baseline:
        trees["before"] = os.path.abspath(a.baseline)
    trees["after" if a.baseline else "now"] = os.path.abspath(a.tree)
    commits = {}
    for label, tree in trees.items():
        commits[label] = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", tree, "status", "--porcelain", "apps/rubik",
                                "pyfw/__init__.py"], capture_output=True, text=True).stdout
        if dirty.strip():
            commits[label] += " + uncommitted changes"
        _run_once(tree, cli)                      # warm-up: numba's cache, page cache
    runs = {label: [] for label in trees}
    for i in range(a.runs):
        for label, tree in trees.items():
            runs[label].append(_run_once(tree, cli))
        print(f"run {i + 1}/{a.runs}: " + ", ".join(
            f"{lab} {r[-1]['cpu']:.2f} s CPU" for lab, r in runs.items()), flush=True)
    results = {label: summarize(r) for label, r in runs.items()}
    print(table(results))
    write_json(output_dir(a), "rubik_startup.json",
               {"cli": "python -m apps.rubik " + shlex.join(cli), "runs": a.runs,
                "commits": commits, "results": results, "categories": list(CATEGORIES),
                "raw": {label: [{k: v for k, v in r.items() if k != "imports"} for r in rs]
                        for label, rs in runs.items()}})


if __name__ == "__main__":
    main()
