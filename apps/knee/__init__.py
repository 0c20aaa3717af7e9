"""Knee-cooling simulation: a procedural 1 mm knee phantom, the Pennes bioheat equation solved
by explicit finite differences on a load-balanced slab decomposition (:mod:`pyfw.domain`),
gel packs or a cryo-cuff, steady state then cooling transient.

Modules: ``tissues`` (property table, sources), ``phantom`` (geometry), ``kernel`` (numba),
``solver`` (tables, stability, stepping, steady state), ``model`` (the run), ``scenario``
(one run on a given communicator, as a function), ``cli``, ``plots``. Run
``python -m apps.knee --help``; from Python, ``apps.knee.run_scenario(params, comm)``.
"""

__all__ = ["Params", "run_scenario"]


def __getattr__(name):
    # imported on first use: ``import apps.knee`` stays light (no mpi4py, no numba)
    if name == "Params":
        from .model import Params
        return Params
    if name == "run_scenario":
        from .scenario import run_scenario
        return run_scenario
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
