"""The layer contract of the import graph (read from the source with ``ast``; no import runs).

Layers, lowest first (:data:`LAYERS`)::

    base < monitor < coll < {farm, domain} < pyfw < futures < {launch, dashboard} < testbed
         < apps

This is ``base < monitor < {farm, domain, coll} < futures < {launch, testbed, dashboard} <
apps`` made exact where the code is: the domain's reductions use the tuned collectives (so
``coll`` sits below ``domain``, and may never import it); ``pyfw`` itself, the package face
that re-exports the farm and the errors, sits above the runtimes; and the test bed launches
its jobs through the launcher (so it sits above ``launch``, which learns of a test bed only
from the profile ``pyfw-cluster up`` writes).

The base is ``pyfw.comm``, ``pyfw.errors`` and the small modules beside them that import
nothing else of pyfw; they may lean on each other. ``pyfw.observe`` is one of them: runtimes
publish through it and the launcher checks addresses with it, and it names the dashboard
only as configuration, never in an import. Everywhere else a module may import its own unit
(the package it belongs to in :data:`LAYERS`) or a unit of a lower layer; never a higher
layer, and never a peer of its own layer (units in braces are peers). No module
imports another package's ``_``-prefixed module (``apps.knee`` may not reach into
``pyfw.domain._util``). And no two modules may import each other, directly or round a longer
circle. Every import counts, also one inside a function (a late import hides a circle, it
does not remove it).
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPS = ("pyfw", "apps")

#: units per layer, lowest first; a module belongs to the unit that is its longest dotted
#: prefix (``pyfw.farm.engine`` -> ``pyfw.farm``; each app is a unit of its own; ``pyfw``
#: is the package face alone: a new top-level module of pyfw needs an entry here)
LAYERS = (
    ("base", ("pyfw.comm", "pyfw.errors", "pyfw.linkemu", "pyfw.snapshots", "pyfw.observe",
              "pyfw.exitguard", "pyfw.jobguard", "pyfw.timerslack", "pyfw.fabric",
              "pyfw.bytecode")),
    ("monitor", ("pyfw.monitor",)),
    ("collectives", ("pyfw.coll",)),
    ("runtimes", ("pyfw.farm", "pyfw.domain")),
    ("face", ("pyfw",)),
    ("futures", ("pyfw.futures",)),
    ("ecosystem", ("pyfw.joblib",)),   # adapters over futures for other libraries
    ("tools", ("pyfw.launch", "pyfw.dashboard")),
    ("testbed", ("pyfw.testbed",)),
    ("apps", ("apps",)),
)

#: Arrows allowed to break the contract, each with its reason beside it
KNOWN_EXCEPTIONS: set[tuple[str, str]] = {
    # ``python -m pyfw.monitor transports`` sweeps Open MPI's transports by launching one
    # job each through the launcher: a command line of the monitor, imported by nothing; the
    # fix is to move that sweep to a tool above the launcher (e.g. a benchmark)
    ("pyfw.monitor.__main__", "pyfw.launch"),
}


def _modules() -> dict[str, str]:
    """Dotted module name -> file, for every .py under pyfw/ and apps/."""
    out = {}
    for top in TOPS:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith((".", "__pycache__")))
            for f in sorted(files):
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(d, f), ROOT)[:-3].split(os.sep)
                    if rel[-1] == "__init__":
                        rel = rel[:-1]
                    out[".".join(rel)] = os.path.join(d, f)
    return out


MODULES = _modules()


def _imports(name: str, path: str) -> set[str]:
    """The modules of pyfw/apps that ``name`` imports (a ``from A import b`` of a submodule b
    is an arrow to A.b; of a name in A, an arrow to A)."""
    is_pkg = path.endswith("__init__.py")
    pkg = name if is_pkg else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:  # ``import pyfw.x.y`` of a name: its module
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def unit(mod: str) -> str:
    """The unit of :data:`LAYERS` that ``mod`` belongs to (each app is one: ``apps.knee``)."""
    parts = mod.split(".")
    if parts[0] == "apps":
        return ".".join(parts[:2])
    best = max((u for _, units in LAYERS for u in units
                if u == mod or (u != "pyfw" and mod.startswith(u + "."))), key=len, default=None)
    if best is None:
        raise LookupError(f"{mod} has no layer: add its unit to LAYERS")
    return best


def layer(mod: str) -> int:
    """Index in :data:`LAYERS` of the layer that ``mod`` belongs to."""
    u = unit(mod)
    top = "apps" if u.startswith("apps") else u
    return next(i for i, (_, units) in enumerate(LAYERS) if top in units)


def forbidden(a: str, b: str) -> str | None:
    """Why the arrow ``a -> b`` breaks the contract, or None."""
    if unit(a) != unit(b):
        if layer(b) > layer(a):
            return "up a layer"
        if layer(b) == layer(a) and layer(a) != 0:   # the base's modules lean on each other
            return "to a peer"
    parts = b.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:i])
            if not (a == owner or a.startswith(owner + ".")):
                return f"into {owner}'s private {part}"
    return None


def test_the_graph_was_read():
    assert {"pyfw.comm", "pyfw.coll.dispatch", "pyfw.farm.engine", "apps.rubik"} <= set(MODULES)
    assert "pyfw.errors" in GRAPH["pyfw.comm"]
    assert "pyfw.coll.plan" in GRAPH["pyfw.coll.tuner"]


def test_every_module_has_a_layer():
    assert [m for m in MODULES if not _has_layer(m)] == []


def _has_layer(mod):
    try:
        layer(mod)
    except LookupError:
        return False
    return True


def test_no_arrow_breaks_the_layers():
    bad = sorted((a, b, why) for a, deps in GRAPH.items() for b in deps
                 if (a, b) not in KNOWN_EXCEPTIONS and (why := forbidden(a, b)))
    assert bad == [], "arrows against the layers:\n" + \
        "\n".join(f"  {a} -> {b}: {why}" for a, b, why in bad)


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    graph = {a: {b for b in deps if (a, b) not in KNOWN_EXCEPTIONS} for a, deps in GRAPH.items()}
    assert _cycles(graph) == []


def test_the_checks_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    order = ["pyfw.comm", "pyfw.monitor.emulate", "pyfw.coll.tuner", "pyfw.farm.engine",
             "pyfw", "pyfw.futures.executor", "pyfw.launch", "pyfw.testbed.cli",
             "apps.knee.model"]
    assert [layer(m) for m in order] == sorted({layer(m) for m in order})   # strictly rising
    assert forbidden("pyfw.farm.engine", "pyfw.futures.executor") == "up a layer"
    assert forbidden("pyfw.farm.engine", "pyfw.domain.slab") == "to a peer"
    assert forbidden("pyfw.coll.tuner", "pyfw.domain.reductions") == "up a layer"
    assert forbidden("pyfw.domain.reductions", "pyfw.coll") is None
    assert forbidden("pyfw.comm", "pyfw.errors") is None
    assert forbidden("pyfw.observe", "pyfw.dashboard") == "up a layer"
    assert forbidden("pyfw", "pyfw.farm") is None and forbidden("pyfw.farm.task", "pyfw")
    assert forbidden("pyfw.launch", "pyfw.dashboard.hub") == "to a peer"
    assert forbidden("pyfw.launch", "pyfw.testbed.agent") == "up a layer"
    assert forbidden("apps.knee.model", "apps.rubik.cube") == "to a peer"
    assert forbidden("apps.knee.model", "pyfw.domain._util") == \
        "into pyfw.domain's private _util"
    assert forbidden("pyfw.futures.executor", "pyfw.farm._protocol") == \
        "into pyfw.farm's private _protocol"
    assert forbidden("pyfw.coll.algorithms.bcast", "pyfw.coll._util") is None   # its own
    assert forbidden("pyfw.farm.engine", "pyfw.monitor.forecast") is None
    assert forbidden("pyfw.futures.__main__", "pyfw.futures.executor") is None
    assert forbidden("pyfw.monitor.forecast", "pyfw.farm.engine") == "up a layer"


def test_known_exceptions_are_still_real():
    # an exception whose arrow is gone must leave the set (so the set only shrinks)
    assert [e for e in KNOWN_EXCEPTIONS if e[1] not in GRAPH.get(e[0], ())] == []
