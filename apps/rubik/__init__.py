"""apps.rubik: an optimal Rubik's cube solver (IDA* + pattern databases in numba) that runs
in one process or on pyfw's master-worker runtime.

Public API: :class:`Cube` (model, parsing, validation), :class:`Solver` (serial),
:func:`solve_parallel` (pyfw.farm), :data:`HEURISTICS`. CLI: ``python -m apps.rubik``.
"""
from . import startup as _startup

# the command line's own process skips what it does not need (see .startup)
_paused = _startup.begin() if _startup.is_command_line() else False

from .cube import Cube, InvalidCubeError, format_moves, invert_moves, parse_moves  # noqa: E402
from .solver import (DEFAULT_HEURISTIC, HEURISTICS, Heuristic, SolveResult, Solver,  # noqa: E402
                     verify)

_startup.end(_paused)

__all__ = ["Cube", "InvalidCubeError", "format_moves", "invert_moves", "parse_moves",
           "Solver", "SolveResult", "Heuristic", "HEURISTICS", "DEFAULT_HEURISTIC", "verify"]
