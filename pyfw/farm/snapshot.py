"""The farm's snapshot for observers: :func:`farm_snapshot` reads the master's engine (in
the master's own thread) and returns an immutable :class:`pyfw.snapshots.FarmSnapshot`."""
from __future__ import annotations

import time

from ..snapshots import FarmSnapshot, LinkView, RoundView, WorkerView

__all__ = ["farm_snapshot"]

QUARANTINE_SHOWN = 50


def farm_snapshot(engine, finished: bool = False) -> FarmSnapshot:
    """What the master knows now: progress, workers, failures, links."""
    workers = tuple(_worker(engine, w) for _, w in sorted(engine.workers.items()))
    in_flight = _in_flight(engine)
    links = _links(engine)
    pipeline = engine.pipeline
    return FarmSnapshot(
        elapsed_s=time.perf_counter() - engine.started, done=engine.completed,
        in_flight=in_flight, left=_left(engine),
        failures=engine.failures, duplicates=engine.duplicates,
        quarantined=len(engine.quarantined),
        quarantine=tuple(str(q) for q in engine.quarantined[:QUARANTINE_SHOWN]),
        workers=workers,
        rounds=tuple(RoundView(r.name, r.ndone, r.total) for r in engine.rounds.values()),
        links=links, pipeline_factor=None if pipeline is None else pipeline.factor,
        finished=finished)


def _left(engine) -> int | None:
    """Tasks of the active rounds not yet sent (None if a lazy source is not read out).
    Reads only what the rounds hold: never pulls from a task source."""
    left = 0
    for rnd in engine.rounds.values():
        if rnd.cancelled:
            continue
        left += len(rnd.retry) + rnd._buffered()
        if not rnd.exhausted:
            if rnd.total is None:
                return None
            left += rnd.total - rnd.next_tid
    return left


def _needed(engine, chunk) -> int:
    """Tasks of ``chunk`` whose results are still needed: none once its round is cancelled,
    ended or has their results (a straggler copy whose twin came back first)."""
    rnd = chunk.rnd
    if rnd.cancelled or engine.rounds.get(rnd.rid) is not rnd:
        return 0
    ids, done = chunk.ids, rnd.done
    if isinstance(ids, range) and not done.overlaps(ids.start, ids.stop):
        return chunk.left   # the usual case, O(log) ids: nothing of it is done yet
    return min(chunk.left, sum(1 for t in ids if t not in done))


def _in_flight(engine) -> int:
    """Tasks out on workers whose results are still needed, each counted once (a
    straggler's copy is not a second task)."""
    chunks = engine.chunks
    n = 0
    for c in chunks.values():
        twin = c.twin
        if twin is not None and twin.cid < c.cid and twin.cid in chunks:
            continue
        n += _needed(engine, c)
    return n


def _worker(engine, w) -> WorkerView:
    s = w.stats
    mean = s.mean_recent
    newest = w.inflight[-1] if w.inflight else None
    chunk = None if newest is None else len(newest.ids)
    limit = None
    if engine.pipeline is not None:
        chunk_time = None if mean is None or chunk is None else mean * chunk
        limit = engine.pipeline.depth(chunk_time, w.rank)
    unneeded = sum(1 for c in w.inflight if not _needed(engine, c))
    return WorkerView(
        rank=w.rank, host=str(w.host), alive=w.alive,
        busy=w.alive and unneeded < len(w.inflight),
        tasks=s.tasks, chunks=s.chunks, busy_s=s.busy, idle_s=s.idle,
        speed=None if not mean else 1.0 / mean, chunk=chunk,
        mean_chunk=s.tasks / s.chunks if s.chunks else None, depth=len(w.inflight),
        depth_limit=limit, unneeded=unneeded, group=_group_of(engine, w.rank))


def _group_of(engine, rank: int) -> str | None:
    groups = getattr(engine, "groups", None)   # the serial engine has none
    if groups is None:
        return None
    g = groups.member_of.get(rank)
    if g is not None:
        return f"{g.gid & 0xFFFFFF}:{g.width}"   # the count; the high bits name the master
    return "reserved" if rank in groups.reserved else None


def _links(engine) -> LinkView | None:
    """The pipeline's forecast round trip from the master to each worker."""
    fc = engine.pipeline.forecasts() if engine.pipeline is not None else {}
    if not fc:
        return None
    ranks = tuple(sorted(engine.workers))
    rtt = tuple(fc[r]["rtt_s"] if r in fc else float("nan") for r in ranks)
    method = tuple(fc[r]["forecaster"] if r in fc else "" for r in ranks)
    return LinkView(ranks=(engine.master,), cols=ranks, latency_s=(rtt,), method=(method,),
                    what="round trip master-worker (network + polling)")
