"""Immutable views of a running job that runtimes publish and observers (the dashboard) read.

This module is the seam between the runtimes and anything that watches them: the farm and
the domain build one small frozen snapshot per tick (:mod:`pyfw.farm.snapshot`,
:mod:`pyfw.domain.snapshot`) and hand it to an injected :class:`Channel`; an observer keeps
the snapshots and never touches a runtime's own state, and no runtime imports an observer.
Snapshots hold plain numbers, strings and tuples only, so another thread may read them at
any time and :func:`as_dict` turns them into JSON.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

__all__ = ["WorkerView", "RoundView", "LinkView", "FarmSnapshot", "DomainSnapshot",
           "Channel", "as_dict", "DEFAULT_PORT", "ENV_TOKEN"]

#: where both sides of the seam meet: the dashboard's default port and the environment
#: variable of its access token (:mod:`pyfw.observe` and :mod:`pyfw.dashboard` read them)
DEFAULT_PORT = 8787
ENV_TOKEN = "PYFW_DASHBOARD_TOKEN"


@dataclass(frozen=True)
class WorkerView:
    """One farm worker. ``busy``: it holds tasks whose results are still needed; ``tasks``:
    task runs finished on it (straggler copies and retries included); ``speed``: tasks per
    second *while busy*, smoothed over its recent chunks (the scheduler's estimate, None
    until measured; its throughput, tasks finished per second of wall time, is what the
    dashboard derives from successive ``tasks`` counts); ``chunk``: size of its newest chunk
    in flight (None when idle); ``depth``: chunks in flight on it now; ``unneeded``: how
    many of those are no longer needed (a straggler copy whose twin came back first, or a
    chunk of a cancelled or finished round: the worker was told to skip it);
    ``depth_limit``: how many chunks the pipeline allows it; ``group``: the multi-rank
    group it belongs to now, as ``"gid:k"`` (k ranks), ``"reserved"`` while a waiting
    multi-rank task holds it, else None."""

    rank: int
    host: str
    alive: bool
    busy: bool
    tasks: int
    chunks: int
    busy_s: float
    idle_s: float
    speed: float | None
    chunk: int | None
    mean_chunk: float | None
    depth: int
    depth_limit: int | None
    unneeded: int = 0
    group: str | None = None


@dataclass(frozen=True)
class RoundView:
    """One active round: tasks finished, total (None while a lazy source is unread)."""

    name: str
    done: int
    total: int | None


@dataclass(frozen=True)
class LinkView:
    """Forecasts of the links between ranks: ``latency_s[i][j]`` (seconds, NaN where not
    measured), ``bandwidth`` (bytes/s, may be empty) and the forecaster each bank trusts.
    ``ranks`` names the rows, ``cols`` the columns (a farm only knows master-worker links:
    one row)."""

    ranks: tuple
    cols: tuple
    latency_s: tuple
    bandwidth: tuple = ()
    method: tuple = ()
    what: str = "one-way latency"


@dataclass(frozen=True)
class FarmSnapshot:
    """The master's view of a farm at ``elapsed_s`` seconds after it started.

    ``done`` counts distinct tasks finished (as :meth:`pyfw.farm.Farm.stats` ``tasks``);
    ``in_flight`` tasks of the active rounds sent and not back, each counted once (a
    straggler copy is not a second task, and a copy whose twin already came back holds no
    task in flight: see :attr:`WorkerView.unneeded`); ``left`` tasks not yet sent (None when
    unknown: a lazy source without ``total=`` or a length hint);
    ``failures`` failed attempts (a task that raised, a worker lost under it, a timeout);
    ``duplicates`` straggler copies sent; ``quarantined`` how many tasks were set aside and
    ``quarantine`` what was said about the first 50 of them."""

    elapsed_s: float
    done: int
    in_flight: int
    left: int | None
    failures: int
    duplicates: int
    quarantined: int
    quarantine: tuple
    workers: tuple
    rounds: tuple
    links: LinkView | None
    pipeline_factor: int | None
    finished: bool = False
    kind: str = "farm"


@dataclass(frozen=True)
class DomainSnapshot:
    """One rank's view (rank 0) of a slab domain at step ``step``: the cuts, the planes and
    the forecast speed of every rank (plane cost per compute second, NaN until measured),
    the boundary moves so far, and the monitor's link forecasts when it probes links."""

    elapsed_s: float
    step: int
    shape: tuple
    cuts: tuple
    speeds: tuple
    step_s: float
    moves: int
    links: LinkView | None
    finished: bool = False
    kind: str = "domain"


class Channel(Protocol):
    """Where a runtime sends its snapshots (injected; e.g. a dashboard's source)."""

    def publish(self, snapshot) -> None:
        """Take the runtime's newest state (called on the runtime's own thread: be quick)."""

    def close(self, snapshot) -> None:
        """Take the final state; the runtime publishes nothing after this."""


def as_dict(snapshot) -> dict:
    """A snapshot as plain JSON-ready data (nested views become dicts)."""
    return dataclasses.asdict(snapshot)
