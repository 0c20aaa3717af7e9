"""Every farm message is built through ``pyfw/farm/_protocol.py``'s helpers (issue 36).

An AST check of ``pyfw/farm/``: no tuple literal is passed to a call that sends or packs a
message -- ``reply``, ``send``, ``isend``, ``isend_bytes``, ``_post``, ``dumps`` -- neither
directly, nor through a local name bound to one, nor (for the calls that take a whole
message: ``isend``, ``send``, ``_post``, ``dumps``) anywhere inside the message outside a
helper's call. The checker is itself checked against snippets that must fail.
"""
import ast
import os
import textwrap

import pytest

FARM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyfw",
                    "farm")
#: calls that put something on the wire (or pickle it for the wire)
SENDS = {"reply", "send", "isend", "isend_bytes", "_post", "dumps"}
#: of those, the ones whose first argument is a whole message
WHOLE_MESSAGE = {"send", "isend", "_post", "dumps"}
#: the module that defines the wire format may build tuples
EXEMPT = {"_protocol.py"}


def _called_name(call: ast.Call) -> str | None:
    fn = call.func
    if isinstance(fn, ast.Attribute):
        return fn.attr
    if isinstance(fn, ast.Name):
        return fn.id
    return None


def _tuples_outside_calls(node: ast.AST):
    """Tuple literals in ``node`` that are not inside a nested call (a helper builds those)."""
    if isinstance(node, ast.Tuple):
        yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.Call):
            yield from _tuples_outside_calls(child)


def _tuple_names(func: ast.AST) -> set[str]:
    """Local names a function binds to a tuple literal (``msg = ("stop", None)``)."""
    names = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Tuple):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def offenders(source: str, filename: str = "<snippet>") -> list[str]:
    """``file:line: what`` for every raw tuple handed to a send in ``source``."""
    tree = ast.parse(source, filename)
    tupled_in = {}   # call -> tuple-bound names of its innermost function (outer ones first)
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = _tuple_names(func)
            for node in ast.walk(func):
                tupled_in[id(node)] = names
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _called_name(call) not in SENDS:
            continue
        name, tupled = _called_name(call), tupled_in.get(id(call), set())
        args = list(call.args) + [k.value for k in call.keywords]
        for pos, arg in enumerate(args):
            if isinstance(arg, ast.Tuple):
                why = "a tuple literal"
            elif isinstance(arg, ast.Name) and arg.id in tupled:
                why = f"{arg.id!r}, bound to a tuple literal"
            elif pos == 0 and name in WHOLE_MESSAGE and next(_tuples_outside_calls(arg), None):
                why = "a message holding a tuple literal"
            else:
                continue
            found.append(f"{filename}:{call.lineno}: {why} passed to {name}()")
    return found


def _farm_sources():
    for name in sorted(os.listdir(FARM)):
        if name.endswith(".py") and name not in EXEMPT:
            path = os.path.join(FARM, name)
            with open(path) as fh:
                yield os.path.relpath(path, os.path.dirname(os.path.dirname(FARM))), fh.read()


def test_farm_builds_every_message_through_the_protocol_helpers():
    sources = list(_farm_sources())
    assert len(sources) >= 10          # the check read the farm, not an empty folder
    found = [f for path, text in sources for f in offenders(text, path)]
    assert found == [], "build these through pyfw/farm/_protocol.py:\n" + "\n".join(found)


@pytest.mark.parametrize("snippet", [
    'self.comm.isend(("stop", None, []), rank, P.CTRL)',
    'self._post(("cancel", rid), w.rank)',
    'data = Comm.dumps((cid, rid, ids, payload))',
    'Comm.dumps(P.pack_work(cid, rid, ids, Comm.dumps((fn, items))))',
    'self.reply(cid, rid, ids, values, errors, (n, s, s2, 0, 0, t, t), "ok")',
    'comm.isend([("pong", t)], master, P.CTRL)',
    'comm.send(reply=(cid, rid), dest=0, tag=13)',
    '''
    def stop(self, rank):
        msg = ("stop", None, [])
        self.comm.isend(msg, rank, P.CTRL)
    ''',
])
def test_the_check_catches_raw_tuples(snippet):
    assert offenders(textwrap.dedent(snippet)), snippet


@pytest.mark.parametrize("snippet", [
    'self.comm.isend(P.ctrl("stop", None, []), rank, P.CTRL)',
    'Comm.dumps(P.pack_work(cid, rid, ids, P.pack_payload(fn, items)))',
    'self.reply(cid, rid, ids, values, [(p, info) for p in x], P.Stats(*s), P.OK)',
    'pickle.loads(data)',
    '''
    def stop(self, rank):
        msg = P.ctrl("stop", None, [])
        pair = (1, 2)
        self.comm.isend(msg, rank, P.CTRL)
    ''',
])
def test_the_check_passes_messages_built_by_helpers(snippet):
    assert offenders(textwrap.dedent(snippet)) == [], snippet
