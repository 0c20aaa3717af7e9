"""apps.rubik: an optimal Rubik's cube solver (IDA* + pattern databases in numba) that runs
in one process or on pyfw's master-worker runtime.

Public API: :class:`Cube` (model, parsing, validation), :class:`Solver` (serial),
:func:`solve_parallel` (pyfw.farm), :data:`HEURISTICS`. CLI: ``python -m apps.rubik``.
"""
from .cube import Cube, InvalidCubeError, format_moves, invert_moves, parse_moves
from .solver import DEFAULT_HEURISTIC, HEURISTICS, Heuristic, SolveResult, Solver, verify

__all__ = ["Cube", "InvalidCubeError", "format_moves", "invert_moves", "parse_moves",
           "Solver", "SolveResult", "Heuristic", "HEURISTICS", "DEFAULT_HEURISTIC", "verify"]
