"""Stands in for ``mpi4py.futures`` when mpi4py's own ``demo/futures/test_futures.py`` runs
against :mod:`pyfw.futures` (see ``test_futures_mpi4py.py``, which rewrites the test file's
one ``from mpi4py import MPI, futures`` line to import this module as ``futures``).

Everything public comes from :mod:`pyfw.futures`. ``_core`` holds the three private mpi4py
names the kept tests read: ``SharedPool`` (set under ``python -m pyfw.futures``, the
shared-pool mode; None in spawn mode, ``mpiexec -n 1 python test_futures.py``),
``MAIN_RUN_NAME`` and ``RemoteTraceback`` (pyfw's equivalents).
"""
import json
import os
import sys
import types
import unittest

from pyfw.errors import RemoteTraceback
from pyfw.futures import *  # noqa: F401,F403
from pyfw.futures import __all__ as _public  # noqa: F401
from pyfw.futures import Executor as MPIPoolExecutor  # noqa: F401
from pyfw.futures import _context
from pyfw.futures.__main__ import WORKER_RUN_NAME

ThreadPoolExecutor = ProcessPoolExecutor = None   # mpi4py-only classes (tests excluded)

_core = types.SimpleNamespace(SharedPool=object() if _context.shared_pool() else None,
                              MAIN_RUN_NAME=WORKER_RUN_NAME, RemoteTraceback=RemoteTraceback)


def run(namespace: dict) -> None:
    """Run the test classes left in ``namespace`` minus the exclusions; print
    ``N passed, N failed`` and write the counts to ``$PYFW_SUITE_JSON``."""
    from test_futures_mpi4py import EXCLUDED
    for name in EXCLUDED:
        cls, _, test = name.partition(".")
        if test:
            if cls in namespace and hasattr(namespace[cls], test):
                delattr(namespace[cls], test)
        else:
            namespace.pop(cls, None)
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    # PYFW_SUITE_ONLY: comma-separated class names or Class.test names (a rerun, debugging)
    only = [x for x in os.environ.get("PYFW_SUITE_ONLY", "").split(",") if x]
    for obj in list(namespace.values()):
        if not (isinstance(obj, type) and issubclass(obj, unittest.TestCase)):
            continue
        if not only or obj.__name__ in only:
            suite.addTests(loader.loadTestsFromTestCase(obj))
            continue
        for name in only:
            cls, _, test = name.partition(".")
            if cls == obj.__name__ and test:
                suite.addTest(obj(test))
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=2).run(suite)
    bad = [str(t) for t, _ in result.failures + result.errors]
    passed = result.testsRun - len(bad) - len(result.skipped)
    print(f"{passed} passed, {len(bad)} failed, {len(result.skipped)} skipped", flush=True)
    out = os.environ.get("PYFW_SUITE_JSON")
    if out:
        with open(out, "w") as fh:
            json.dump({"passed": passed, "failed": bad, "skipped": len(result.skipped)}, fh)
