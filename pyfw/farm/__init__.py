"""Adaptive self-scheduling master-worker runtime.

See :class:`Farm` (the pool), :class:`Task` (a unit of work), :class:`Context` (per-worker
state and cancellation) and :mod:`pyfw.farm.policies` (chunking and pipelining).
"""
from .master import Farm, Round
from .policies import POLICIES
from .task import Batch, Context, Done, Task

__all__ = ["Farm", "Round", "Batch", "Task", "Context", "Done", "POLICIES"]
