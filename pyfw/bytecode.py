"""pyfw's own modules compiled once by the launcher, not once per rank.

A rank that imports a module without current bytecode compiles it from source. An editable
install (``pip install -e``, as in the README) writes no bytecode, and where
``PYTHONDONTWRITEBYTECODE`` is set (some CI images and shared machines set it) no rank ever
writes it either: every rank of every job then compiles pyfw's modules again, about 50 ms
of CPU per rank (0.2 s for the whole package). On a node with many ranks per core that is
start-up time: 256 ranks on 2 cores spent 6-7 s of the job's start compiling
(benchmarks/farm_scale.py, "pyfw imported").

:func:`ensure_compiled` writes the missing or stale bytecode of the pyfw package, as ``pip
install`` of a wheel does at install time; :mod:`pyfw.launch` calls it before it starts a
job. It touches only pyfw's own directory, checks its 90-odd files in 2 ms when nothing is
stale, and does nothing where that directory cannot be written (an installed, read-only
package has its bytecode from the install) or where ``$PYFW_PRECOMPILE`` is ``0``.
"""
from __future__ import annotations

import os

__all__ = ["ensure_compiled", "ENV"]

#: set to 0 to leave pyfw's bytecode alone
ENV = "PYFW_PRECOMPILE"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def ensure_compiled(package_dir: str = _PACKAGE_DIR, env: dict | None = None) -> bool:
    """Compile the modules under ``package_dir`` (pyfw's by default) whose bytecode is
    missing or older than their source. True when every module's bytecode is current
    afterwards; False when it was left alone (``$PYFW_PRECOMPILE=0``, a directory that
    cannot be written, a module that does not compile: its rank reports that itself)."""
    env = os.environ if env is None else env
    if env.get(ENV, "1") == "0" or not os.access(package_dir, os.W_OK):
        return False
    import compileall
    try:
        # the interpreter's default optimisation level: the bytecode the ranks will look for
        return bool(compileall.compile_dir(package_dir, quiet=2, workers=1))
    except OSError:
        return False
