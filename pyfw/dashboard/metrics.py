"""Prometheus text exposition format (version 0.0.4) of the dashboard's latest snapshots.

Written here rather than with ``prometheus_client``: the format for a few gauges and
counters is four escaping rules, and pyfw runs on cluster nodes where every extra
dependency is friction; the tests parse the output with ``prometheus_client``'s own parser.
Every sample carries ``job`` (the source's name) and ``source`` (its id) labels.
"""
from __future__ import annotations

import math

__all__ = ["render", "Family"]


def _escape_label(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(x) -> str:
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(x) if x != int(x) or abs(x) >= 1e15 else str(int(x))


class Family:
    """One metric: ``# HELP``, ``# TYPE`` and its samples."""

    def __init__(self, name: str, kind: str, help_text: str):
        self.name, self.kind, self.help = name, kind, help_text
        self.samples: list[str] = []

    def add(self, labels: dict, value) -> None:
        """Add one sample with its labels."""
        if value is None:
            return
        inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
        self.samples.append(f"{self.name}{{{inner}}} {_number(value)}")

    def text(self) -> str:
        """The family in Prometheus text format."""
        help_text = self.help.replace("\\", "\\\\").replace("\n", "\\n")
        return "\n".join([f"# HELP {self.name} {help_text}", f"# TYPE {self.name} {self.kind}",
                          *self.samples])


_FARM = [  # name, type, help, value(snapshot, derived)
    ("pyfw_tasks_done_total", "counter", "Distinct tasks finished.", lambda s, d: s.done),
    ("pyfw_tasks_in_flight", "gauge",
     "Tasks sent to workers whose results are still needed (each counted once).",
     lambda s, d: s.in_flight),
    ("pyfw_tasks_left", "gauge", "Tasks not yet sent (absent while unknown).",
     lambda s, d: s.left),
    ("pyfw_task_rate", "gauge", "Tasks finished per second (recent window).",
     lambda s, d: d.get("rate")),
    ("pyfw_eta_seconds", "gauge", "Estimated seconds until the active rounds end.",
     lambda s, d: d.get("eta_s")),
    ("pyfw_task_failures_total", "counter", "Failed task attempts (raised, lost, timed out).",
     lambda s, d: s.failures),
    ("pyfw_straggler_copies_total", "counter", "Copies of chunks sent to beat stragglers.",
     lambda s, d: s.duplicates),
    ("pyfw_tasks_quarantined_total", "counter", "Tasks set aside after repeated losses.",
     lambda s, d: s.quarantined),
    ("pyfw_workers_alive", "gauge", "Workers alive.",
     lambda s, d: sum(1 for w in s.workers if w.alive)),
]
_WORKER = [  # name, type, help, value(worker view, its derived rate)
    ("pyfw_worker_busy", "gauge", "1 while the worker holds tasks whose results are needed.",
     lambda w, r: int(w.busy)),
    ("pyfw_worker_alive", "gauge", "1 while the worker is alive.",
     lambda w, r: int(w.alive)),
    ("pyfw_worker_tasks_total", "counter", "Task runs on the worker.", lambda w, r: w.tasks),
    ("pyfw_worker_busy_seconds_total", "counter", "Seconds the worker spent on chunks.",
     lambda w, r: w.busy_s),
    ("pyfw_worker_idle_seconds_total", "counter", "Seconds the worker waited for work.",
     lambda w, r: w.idle_s),
    ("pyfw_worker_task_rate", "gauge",
     "Task runs finished per second on the worker (same window as pyfw_task_rate).",
     lambda w, r: r),
    ("pyfw_worker_speed", "gauge",
     "Tasks per second while the worker computes (smoothed over its recent chunks).",
     lambda w, r: w.speed),
    ("pyfw_worker_chunk_size", "gauge", "Tasks in the worker's newest chunk in flight.",
     lambda w, r: w.chunk),
    ("pyfw_worker_pipeline_depth", "gauge", "Chunks in flight on the worker.",
     lambda w, r: w.depth),
    ("pyfw_worker_unneeded_chunks", "gauge",
     "Chunks on the worker whose results are no longer needed (told to skip them).",
     lambda w, r: w.unneeded),
    ("pyfw_worker_pipeline_limit", "gauge", "Chunks the pipeline allows in flight.",
     lambda w, r: w.depth_limit),
]
_DOMAIN = [
    ("pyfw_domain_step", "gauge", "Steps done.", lambda s, d: s.step),
    ("pyfw_domain_step_rate", "gauge", "Steps per second (recent window).",
     lambda s, d: d.get("rate")),
    ("pyfw_domain_moves_total", "counter", "Slab boundary moves.", lambda s, d: s.moves),
]


def render(items) -> str:
    """``items``: (source, latest snapshot, derived dict) triples."""
    fams: dict[str, Family] = {}

    def fam(name, kind, help_text):
        if name not in fams:
            fams[name] = Family(name, kind, help_text)
        return fams[name]

    up = fam("pyfw_job_finished", "gauge", "1 once the job has ended.")
    elapsed = fam("pyfw_elapsed_seconds", "gauge", "Seconds since the job started.")
    for src, snap, extra in items:
        base = {"job": src.name, "source": src.id}
        up.add(base, int(snap.finished))
        elapsed.add(base, snap.elapsed_s)
        if snap.kind == "farm":
            _farm(fam, base, snap, extra)
        else:
            _domain(fam, base, snap, extra)
    return "\n".join(f.text() for f in fams.values() if f.samples) + "\n"


def _farm(fam, base, snap, extra) -> None:
    for name, kind, help_text, get in _FARM:
        fam(name, kind, help_text).add(base, get(snap, extra))
    rates = extra.get("worker_rates") or [None] * len(snap.workers)
    for w, rate in zip(snap.workers, rates):
        labels = {**base, "rank": w.rank, "host": w.host}
        for name, kind, help_text, get in _WORKER:
            fam(name, kind, help_text).add(labels, get(w, rate))
    _links(fam, base, snap.links)


def _domain(fam, base, snap, extra) -> None:
    for name, kind, help_text, get in _DOMAIN:
        fam(name, kind, help_text).add(base, get(snap, extra))
    planes = fam("pyfw_domain_planes", "gauge", "Planes each rank owns.")
    speed = fam("pyfw_domain_rank_speed", "gauge",
                "Forecast speed of each rank (plane cost per compute second).")
    for r in range(len(snap.cuts) - 1):
        labels = {**base, "rank": r}
        planes.add(labels, snap.cuts[r + 1] - snap.cuts[r])
        if r < len(snap.speeds):
            speed.add(labels, snap.speeds[r])
    _links(fam, base, snap.links)


def _links(fam, base, links) -> None:
    if links is None:
        return
    lat = fam("pyfw_link_latency_seconds", "gauge",
              "Forecast link time between two ranks (see the job's link view).")
    bw = fam("pyfw_link_bandwidth_bytes_per_second", "gauge", "Forecast link bandwidth.")
    for i, src in enumerate(links.ranks):
        for j, dst in enumerate(links.cols):
            labels = {**base, "src": src, "dst": dst}
            value = links.latency_s[i][j]
            if value is not None and math.isfinite(value):
                lat.add(labels, value)
            if links.bandwidth:
                b = links.bandwidth[i][j]
                if b is not None and math.isfinite(b):
                    bw.add(labels, b)
