"""apps.rubik: an optimal Rubik's cube solver (IDA* + pattern databases in numba) that runs
in one process or on pyfw's master-worker runtime.

Public API: :class:`Cube` (model, parsing, validation), :class:`Solver` (serial),
:func:`solve_parallel` (pyfw.farm), :data:`HEURISTICS`. CLI: ``python -m apps.rubik``.
"""
import gc as _gc
import os as _os
import sys as _sys


def _is_command_line():
    """Whether this process is the solver's command line (``python -m apps.rubik``,
    ``python -m pyfw.apps.rubik``, ``pyfw-rubik``): known before numpy loads."""
    argv = getattr(_sys, "orig_argv", None) or []
    if any(a == "-m" and b in ("apps.rubik", "pyfw.apps.rubik") for a, b in zip(argv, argv[1:])):
        return True
    return bool(_sys.argv) and _os.path.basename(_sys.argv[0]) == "pyfw-rubik"


_COMMAND_LINE = _is_command_line()
if _COMMAND_LINE:
    # The solver calls no BLAS, but the OpenBLAS that numpy and scipy (numba imports it)
    # load starts a thread per core at import, which spins ~0.1 s: 0.2 s of CPU before the
    # first search node on 2 cores, more per rank on bigger nodes.
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The imports below (numba's above all) make enough objects to trigger full garbage
    # collections, 0.06 s of CPU, that find nothing: the objects live as long as the process.
    _gc_was_enabled = _gc.isenabled()
    _gc.disable()

from .cube import Cube, InvalidCubeError, format_moves, invert_moves, parse_moves
from .solver import DEFAULT_HEURISTIC, HEURISTICS, Heuristic, SolveResult, Solver, verify

if _COMMAND_LINE and _gc_was_enabled:
    _gc.freeze()        # what the imports made is never collected: later collections skip it
    _gc.enable()

__all__ = ["Cube", "InvalidCubeError", "format_moves", "invert_moves", "parse_moves",
           "Solver", "SolveResult", "Heuristic", "HEURISTICS", "DEFAULT_HEURISTIC", "verify"]
