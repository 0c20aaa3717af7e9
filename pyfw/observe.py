"""How a runtime gets an observer (the dashboard) without importing it.

A runtime takes ``dashboard=`` from its user, checks it with :func:`check` on every rank
(a bad address fails everywhere, before any message), and on its serving rank calls
:func:`attach`, which returns a :class:`~pyfw.snapshots.Channel` or None. The runtime then
feeds a :class:`Ticker` every loop turn; the ticker builds a snapshot at most every
``every`` seconds and publishes it. This module is the only place that names
:mod:`pyfw.dashboard`, and imports it only when a dashboard is asked for.

``dashboard=`` accepts ``None`` (use ``$PYFW_DASHBOARD``, set by ``pyfw-run --dashboard``),
``False`` (off), ``True`` (127.0.0.1:8787), a port, ``"[HOST:]PORT"``, or an observer object
with a ``source(kind, name)`` method (e.g. a :class:`pyfw.dashboard.Dashboard`).
``$PYFW_REPORT`` names a static HTML report written when the job ends.

Which observer an address starts is configuration, not an import: :data:`DEFAULT_OBSERVER`
(``module:class``, the dashboard), or ``$PYFW_OBSERVER``. So this module sits in the base
layer: the runtimes publish through it, ``pyfw-run`` checks addresses with
:func:`parse_address`, and neither depends on the dashboard package.
"""
from __future__ import annotations

import importlib
import os
import sys
import time

from .errors import ConfigurationError

__all__ = ["ENV_DASHBOARD", "ENV_REPORT", "ENV_TOKEN", "ENV_OBSERVER", "DEFAULT_PORT",
           "DEFAULT_OBSERVER", "parse_address", "check", "attach", "observer_class", "Ticker"]

ENV_DASHBOARD = "PYFW_DASHBOARD"
ENV_REPORT = "PYFW_REPORT"
ENV_OBSERVER = "PYFW_OBSERVER"
#: the observer an address or ``$PYFW_REPORT`` starts (``module:class``; the class has
#: ``shared(address, report=...)``, see :meth:`pyfw.dashboard.Dashboard.shared`)
DEFAULT_OBSERVER = "pyfw.dashboard:Dashboard"


def __getattr__(name):
    # the dashboard's constants live in pyfw.snapshots, which loads dataclasses: imported
    # on first use, so a farm without a dashboard (and pyfw-run) does not pay for it
    if name in ("DEFAULT_PORT", "ENV_TOKEN"):
        from . import snapshots
        return getattr(snapshots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_address(text) -> tuple[str, int]:
    """``(host, port)`` from ``PORT``, ``:PORT``, ``HOST:PORT`` or ``[IPv6]:PORT``; host
    defaults to 127.0.0.1. Port 0 picks a free port."""
    text = str(text).strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        num = int(port)
    except ValueError:
        num = -1
    if not 0 <= num <= 65535:
        raise ConfigurationError(f"dashboard address {text!r}: expected [HOST:]PORT with a "
                                 f"port from 0 to 65535 (e.g. 8787 or 0.0.0.0:8787)")
    return host, num


def check(spec):
    """The normalised ``dashboard=`` argument: None (off), ``(host, port)``, or an observer
    object. Raises :class:`ConfigurationError` on a bad one (call it on every rank)."""
    if spec is None:
        spec = os.environ.get(ENV_DASHBOARD) or None
        if spec is None:
            return None
    if spec is False:
        return None
    if spec is True:
        from .snapshots import DEFAULT_PORT
        return ("127.0.0.1", DEFAULT_PORT)
    if hasattr(spec, "source"):
        return spec
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise ConfigurationError(f"dashboard= takes a port, '[HOST:]PORT', True/False or a "
                                 f"pyfw.dashboard.Dashboard, got {type(spec).__name__}")
    return parse_address(spec)


def attach(spec, kind: str, name: str):
    """A channel for one job on the serving rank, or None when nothing observes it.

    ``spec`` comes from :func:`check`. Address specs share one dashboard per address in the
    process (a second farm in the same job shows up beside the first); ``$PYFW_REPORT``
    alone gives a report without a server.
    """
    report = os.environ.get(ENV_REPORT) or None
    if spec is None and report is None:
        return None
    if spec is not None and not isinstance(spec, tuple):
        return spec.source(kind, name)
    return observer_class().shared(spec, report=report).source(kind, name)


def observer_class():
    """The configured observer class (:data:`DEFAULT_OBSERVER` or ``$PYFW_OBSERVER``),
    imported only now: a job that is not observed never loads it."""
    spec = os.environ.get(ENV_OBSERVER) or DEFAULT_OBSERVER
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"observer {spec!r} (${ENV_OBSERVER}): expected an "
                                 f"importable module:class: {exc}") from exc


class Ticker:
    """Publishes ``build(obj)`` on ``channel`` at most every ``every`` seconds.

    The runtime calls the ticker once per loop turn (cheap when not due) and :meth:`close`
    at the end. A failure while building or publishing is reported once on stderr and
    stops the ticker: watching a job never breaks it. ``seconds`` is the time spent here.
    """

    def __init__(self, channel, build, every: float = 0.25):
        self.channel, self.build, self.every = channel, build, every
        self.next = 0.0
        self.seconds = 0.0
        self.live = True

    def __call__(self, obj) -> None:
        now = time.monotonic()
        if now < self.next or not self.live:
            return
        self.next = now + self.every
        self._send(self.channel.publish, obj)
        self.seconds += time.monotonic() - now

    def flush(self, obj) -> None:
        """Publish now, due or not (e.g. at the end of a round)."""
        self.next = 0.0
        self(obj)

    def close(self, obj) -> None:
        """Publish the final snapshot (marked finished)."""
        if self.live:
            self._send(self.channel.close, obj, finished=True)
            self.live = False

    def _send(self, how, obj, **kw) -> None:
        try:
            how(self.build(obj, **kw))
        except Exception as exc:  # noqa: BLE001 -- an observer must never fail the job
            self.live = False
            print(f"pyfw: dashboard updates stopped: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
