"""The layer contract of the import graph (read from the source with ``ast``; no import runs).

Layers, lowest first: the base (``pyfw.comm``, ``pyfw.errors`` and the small modules beside
them that import nothing else of pyfw), the runtimes (every other module of ``pyfw``: farm,
futures, domain, coll, monitor, dashboard, testbed, the ``pyfw`` package face, ...), and the
apps (``apps.*``). A module may import its own layer or a lower one, never a higher one; and
no two modules may import each other, directly or round a longer circle. Every import counts,
also one inside a function (a late import hides a circle, it does not remove it).
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPS = ("pyfw", "apps")
#: the bottom layer: what every runtime may lean on
BASE = {"pyfw.comm", "pyfw.errors", "pyfw.linkemu", "pyfw.snapshots"}

#: Arrows allowed to break the contract: none today; an entry here needs its reason beside it
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


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


def layer(mod: str) -> int:
    if mod.split(".")[0] == "apps":
        return 2
    return 0 if mod in BASE else 1


def test_the_graph_was_read():
    assert {"pyfw.comm", "pyfw.coll.dispatch", "pyfw.farm.engine", "apps.rubik"} <= set(MODULES)
    assert "pyfw.errors" in GRAPH["pyfw.comm"]
    assert "pyfw.coll.plan" in GRAPH["pyfw.coll.tuner"]


def test_no_arrow_runs_up_a_layer():
    up = sorted((a, b) for a, deps in GRAPH.items() for b in deps
                if layer(b) > layer(a) and (a, b) not in KNOWN_EXCEPTIONS)
    assert up == [], "lower layer imports a higher one: " + \
        ", ".join(f"{a} -> {b}" for a, b in up)


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
    assert layer("pyfw.comm") < layer("pyfw.monitor.emulate") < layer("apps.knee.model")


def test_known_exceptions_are_still_real():
    # an exception whose arrow is gone must leave the set (so the set only shrinks)
    assert [e for e in KNOWN_EXCEPTIONS if e[1] not in GRAPH.get(e[0], ())] == []
