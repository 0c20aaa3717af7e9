"""Knee-cooling simulation: a procedural 1 mm knee phantom, the Pennes bioheat equation solved
by explicit finite differences on a load-balanced slab decomposition (:mod:`pyfw.domain`),
gel packs or a cryo-cuff, steady state then cooling transient.

Modules: ``tissues`` (property table, sources), ``phantom`` (geometry), ``kernel`` (numba),
``solver`` (tables, stability, stepping, steady state), ``model`` (the run), ``cli``,
``plots``. Run ``python -m apps.knee --help``.
"""
