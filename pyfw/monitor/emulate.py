"""Emulated heterogeneity with known ground truth: slow links and slow ranks.

**Links.** :class:`LinkShaper` plugs into the ``shaper`` hook of :class:`pyfw.comm.Comm`
(``comm.shaper = LinkShaper(...)``): before every send to ``peer`` of ``nbytes`` bytes the
sender waits ``latency[peer] + nbytes / bandwidth[peer]`` seconds. A ping-pong over such a
link therefore takes, one way, ``T(m) = (alpha0 + L) + m * (beta0 + 1/B)`` where ``alpha0,
beta0`` are the real shared-memory figures (sub-microsecond, well below ms-scale injections).
The probes in :mod:`pyfw.monitor.probes` honour the same hook, so they measure what the
runtimes experience.

Links are given as a dict ``{(i, j): value}`` (symmetric unless ``directed=True``), a full
``p x p`` matrix, or a scalar for every link; missing links are unshaped. Every rank builds the
same shaper (same arguments) and keeps its own row; :meth:`LinkShaper.truth` returns the
injected numbers for tests and benchmarks.

**Ranks.** :class:`Slowdown` makes a rank ``factor`` times slower at whatever it computes inside
``with slowdown:`` (it pads the block's wall time by ``(factor - 1) x`` its duration, spinning by
default so the CPU is really held, like a slower core). :func:`spin_work` is calibrated synthetic
work: ``units / rate`` seconds of CPU time, so a rank's true speed is known exactly.

Waiting uses :func:`hold`: sleep for the bulk of a long delay, spin the last fraction of a
millisecond, which keeps precision without stealing a core from other ranks when they
outnumber the cores.
"""
from __future__ import annotations

import time

from ..linkemu import (SPIN_TAIL, DeliveryShaper, LinkShaper, hold, parse_links,  # noqa: F401
                       spin)

__all__ = ["LinkShaper", "DeliveryShaper", "parse_links", "Slowdown", "hold", "spin",
           "spin_cpu", "spin_work"]

def spin_cpu(seconds: float) -> None:
    """Busy-wait until this thread has used ``seconds`` of CPU time (``time.thread_time``):
    under contention it takes longer in wall time, like real work would."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def spin_work(units: float, rate: float = 1e6) -> float:
    """Calibrated synthetic work: burn ``units / rate`` seconds of this thread's CPU time
    (:func:`spin_cpu`); returns that many seconds.

    A rank doing ``spin_work(n, rate=r)`` has a true speed of ``r`` units per CPU second
    (times ``1/factor`` inside a :class:`Slowdown`), which is what a speed forecaster should
    find. Counting CPU rather than wall time makes it behave like real work on a loaded
    machine: a rank that shares its core takes longer, exactly as a slowed rank does, so the
    ratio of two ranks' speeds stays the injected one.
    """
    seconds = units / rate
    spin_cpu(seconds)
    return seconds


class Slowdown:
    """Make the code inside ``with Slowdown(factor):`` take ``factor`` times as long.

    ``busy=True`` (default) behaves like a slower CPU: the block's *CPU* time ``c`` is
    measured and another ``(factor - 1) * c`` of CPU time is burnt, so the rank needs
    ``factor`` times the CPU of a normal one. Measuring CPU rather than wall time keeps the
    factor exact on a loaded machine: a pre-emption inside the block is not multiplied by
    ``factor`` (with wall time it was, and a 2x rank sharing its core looked 4x slower).
    ``busy=False`` sleeps ``(factor - 1)`` times the block's wall time (like a rank that is
    pre-empted). ``factor`` must be >= 1; 1 is a no-op. ``padded`` sums the seconds added.
    """

    def __init__(self, factor: float = 1.0, busy: bool = True):
        if not factor >= 1.0:
            raise ValueError(f"slowdown factor must be >= 1, got {factor!r}")
        self.factor, self.busy = float(factor), busy
        self.padded = 0.0
        self._t0 = 0.0

    def __enter__(self) -> "Slowdown":
        self._t0 = time.thread_time() if self.busy else time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self.factor == 1.0:
            return
        if self.busy:
            pad = (self.factor - 1.0) * (time.thread_time() - self._t0)
            spin_cpu(pad)
        else:
            pad = (self.factor - 1.0) * (time.perf_counter() - self._t0)
            hold(pad)
        self.padded += pad

    def run(self, fn, *args, **kwargs):
        """Call ``fn(*args, **kwargs)`` slowed down; returns its result."""
        with self:
            return fn(*args, **kwargs)
