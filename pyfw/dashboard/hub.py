"""The dashboard's store: sources (one per observed job) keep their latest snapshot and a
bounded history; the HTTP server and the report read from here."""
from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time

from ..snapshots import DEFAULT_PORT, ENV_TOKEN, as_dict
from .history import History
from .model import Rate, clean, derived, domain_point, farm_point

__all__ = ["Dashboard", "Source"]

_POINT = {"farm": farm_point, "domain": domain_point}


class Source:
    """One observed job (a :class:`~pyfw.snapshots.Channel`): the runtime publishes into it."""

    def __init__(self, hub: "Dashboard", sid: int, kind: str, name: str, maxlen: int):
        self.hub, self.id, self.kind, self.name = hub, sid, kind, name
        self.latest = None
        self.derived: dict = {}
        self.history = History(maxlen)
        self.rate = Rate()
        self.worker_rate: dict[int, Rate] = {}   # rank -> its tasks' rate (farm only)
        self.version = 0
        self._cache = (-1, None)
        self.finished = False

    def publish(self, snapshot) -> None:
        """Called by the runtime's ticker (in the job's thread): cheap, no serialisation."""
        t = snapshot.elapsed_s
        if snapshot.kind == "farm":
            rate = self.rate.add(t, snapshot.done)
            rates = [self.worker_rate.setdefault(w.rank, Rate()).add(t, w.tasks)
                     for w in snapshot.workers]
            extra = derived(snapshot, rate, rates)
        else:
            extra = derived(snapshot, self.rate.add(t, snapshot.step))
        point = _POINT[snapshot.kind](snapshot, extra["rate"])
        with self.hub.lock:
            self.latest, self.derived = snapshot, extra
            self.version += 1
            self.history.add(self.hub._next_seq(), point)

    def close(self, snapshot) -> None:
        """The job ended: keep its final snapshot (and write the report, if one is asked)."""
        self.publish(snapshot)
        self.finished = True
        self.hub._closed(self)

    def view(self, since: int) -> dict | None:
        """JSON-ready: latest snapshot, rate/ETA, and the history after ``since``."""
        with self.hub.lock:
            snap, extra, version = self.latest, dict(self.derived), self.version
            points = self.history.since(since)
        if snap is None:
            return None
        cached_version, latest = self._cache
        if cached_version != version:
            latest = clean(as_dict(snap))
            self._cache = (version, latest)
        return {"id": self.id, "kind": self.kind, "name": self.name,
                "finished": self.finished, "latest": latest, "derived": clean(extra),
                "history": clean(points)}


class Dashboard:
    """Live view of a job: collects snapshots and, unless ``serve=False``, serves them.

    ``host``/``port``: where to listen (127.0.0.1 by default; port 0 picks a free one,
    see :attr:`url`). A host other than a loopback address requires a token: ``token`` or
    ``$PYFW_DASHBOARD_TOKEN``, else a random one, printed once with the URL and checked on
    every request. ``report``: path of a static HTML report written whenever a job ends.
    ``history``: points kept per job (the whole run, thinned as it grows).
    """

    _shared: dict = {}
    _shared_lock = threading.Lock()

    def __init__(self, port: int = DEFAULT_PORT, host: str = "127.0.0.1", *,
                 token: str | None = None, report: str | None = None, serve: bool = True,
                 history: int = 2000, stream=None):
        self.lock = threading.Lock()
        self.sources: list[Source] = []
        self.report = report
        self.maxlen = int(history)
        self.started = time.time()
        self.stream = stream if stream is not None else sys.stderr
        self._seq = 0
        self.server = None
        self.url = None
        self.token = None
        if serve:
            self._serve(host, int(port), token)
        atexit.register(self._at_exit)

    @classmethod
    def shared(cls, address: tuple | None, report: str | None = None) -> "Dashboard":
        """The process's dashboard for ``address`` (``(host, port)``, None: report only)."""
        with cls._shared_lock:
            hub = cls._shared.get(address)
            if hub is None:
                if address is None:
                    hub = cls(serve=False, report=report)
                else:
                    hub = cls(address[1], address[0], report=report,
                              token=os.environ.get(ENV_TOKEN) or None)
                cls._shared[address] = hub
            elif report and not hub.report:
                hub.report = report
            return hub

    # ---------------------------------------------------------------- channels
    def source(self, kind: str, name: str) -> Source:
        """A new channel for one job (``kind``: "farm" or "domain")."""
        if kind not in _POINT:
            raise ValueError(f"unknown source kind {kind!r}")
        with self.lock:
            src = Source(self, len(self.sources), kind, name, self.maxlen)
            self.sources.append(src)
        return src

    def _next_seq(self) -> int:
        self._seq += 1   # under self.lock
        return self._seq

    def _closed(self, src: Source) -> None:
        if self.report:
            self.write_report(self.report)

    # ---------------------------------------------------------------- reading
    def state(self, since: int = -1) -> dict:
        """Everything the page shows, as JSON-ready data (history after ``since`` only)."""
        with self.lock:
            sources, seq = list(self.sources), self._seq
        views = [v for v in (s.view(since) for s in sources) if v is not None]
        return {"format": 1, "seq": seq, "now": time.time(), "started": self.started,
                "host": socket.gethostname(), "pid": os.getpid(), "sources": views}

    def metrics(self) -> str:
        """The Prometheus text exposition of the latest snapshots."""
        from .metrics import render
        with self.lock:
            items = [(s, s.latest, dict(s.derived)) for s in self.sources
                     if s.latest is not None]
        return render(items)

    def write_report(self, path: str) -> str:
        """Write the static, self-contained HTML report of the whole run to ``path``."""
        from .report import write_report
        return write_report(self.state(), path)

    # ---------------------------------------------------------------- serving
    def _serve(self, host: str, port: int, token: str | None) -> None:
        from .server import start
        try:
            self.server, self.url, self.token = start(self, host, port, token)
        except OSError as exc:   # a busy port must not stop the job
            print(f"pyfw dashboard: cannot listen on {host}:{port} ({exc}); the job goes on "
                  f"without it", file=self.stream, flush=True)
            return
        note = " (token required: not a local address)" if self.token else ""
        print(f"pyfw dashboard: {self.url}{note}", file=self.stream, flush=True)

    def close(self) -> None:
        """Stop serving (the job is not affected)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def _at_exit(self) -> None:
        if self.report and any(not s.finished for s in self.sources):
            try:
                self.write_report(self.report)
            except Exception as exc:  # noqa: BLE001 -- exiting anyway
                print(f"pyfw dashboard: report not written: {exc}", file=self.stream)
