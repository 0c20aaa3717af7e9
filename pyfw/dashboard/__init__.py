"""A live view of a running pyfw job: web page, JSON, Prometheus metrics, HTML report.

The runtimes publish immutable snapshots (:mod:`pyfw.snapshots`) into a :class:`Dashboard`
they are given (``Farm(dashboard=...)``, ``Executor(dashboard=...)``,
``SlabDomain(dashboard=...)``, or ``pyfw-run --dashboard [HOST:]PORT``); the dashboard's
server thread answers from those snapshots only:

* ``/``: the page (tasks done / in flight / left, rate, ETA, workers, failures, links, and
  for domain jobs the slab cuts over time and each rank's speed); refreshes every second.
* ``/api/state``: the same data as JSON (``?since=SEQ``: only history points after SEQ).
* ``/metrics``: Prometheus text format.

It listens on 127.0.0.1 unless told otherwise; any other address needs a token (printed
once with the URL). ``report=`` (or ``pyfw-run --report out.html``) writes a static,
self-contained HTML page with the plots of the whole run when the job ends.
"""
from .hub import Dashboard, Source
from .report import render_report, write_report

__all__ = ["Dashboard", "Source", "render_report", "write_report"]
