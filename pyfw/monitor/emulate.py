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
from typing import Mapping

import numpy as np

__all__ = ["LinkShaper", "DeliveryShaper", "parse_links", "Slowdown", "hold", "spin",
           "spin_cpu", "spin_work"]

#: below this, :func:`hold` only spins; above, it sleeps all but this much, then spins.
SPIN_TAIL = 1e-3


def spin(seconds: float) -> None:
    """Busy-wait ``seconds`` (holds the CPU)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def spin_cpu(seconds: float) -> None:
    """Busy-wait until this thread has used ``seconds`` of CPU time (``time.thread_time``):
    under contention it takes longer in wall time, like real work would."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def hold(seconds: float) -> None:
    """Wait ``seconds`` precisely: sleep the bulk (frees the CPU), spin the last ~1 ms."""
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    if seconds > 2 * SPIN_TAIL:
        time.sleep(seconds - SPIN_TAIL)
    while time.perf_counter() < end:
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


def _matrix(spec, size: int, default: float, directed: bool, name: str) -> np.ndarray:
    m = np.full((size, size), default, dtype=float)
    if spec is None:
        return m
    if np.isscalar(spec):
        m[:] = float(spec)
    elif isinstance(spec, Mapping):
        for (i, j), v in spec.items():
            if not (0 <= i < size and 0 <= j < size) or i == j:
                raise ValueError(f"{name}: bad link ({i}, {j}) for {size} ranks")
            m[i, j] = float(v)
            if not directed:
                m[j, i] = float(v)
    else:
        a = np.asarray(spec, dtype=float)
        if a.shape != (size, size):
            raise ValueError(f"{name}: expected a {size}x{size} matrix, got shape {a.shape}")
        m[:] = a
    np.fill_diagonal(m, default)
    return m


class LinkShaper:
    """Added latency (seconds) and capped bandwidth (bytes/s) per link, seen from ``rank``.

    ``LinkShaper(rank, size, latency={(0, 1): 2e-3}, bandwidth={(0, 1): 20e6})`` slows the
    link 0-1 both ways to 2 ms + 20 MB/s. ``bandwidth`` entries of ``inf`` (the default) add no
    per-byte cost. The object is the ``comm.shaper`` hook: ``delay(peer, nbytes)`` seconds.
    ``sent`` counts shaped sends per peer; ``delayed`` sums the seconds added.
    """

    def __init__(self, rank: int, size: int, latency=None, bandwidth=None,
                 directed: bool = False):
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} outside 0..{size - 1}")
        self.rank, self.size = rank, size
        self.latency = _matrix(latency, size, 0.0, directed, "latency")
        self.bandwidth = _matrix(bandwidth, size, np.inf, directed, "bandwidth")
        if (self.latency < 0).any() or (self.bandwidth <= 0).any():
            raise ValueError("latency must be >= 0 and bandwidth > 0")
        self._lat = self.latency[rank].copy()
        self._inv_bw = 1.0 / self.bandwidth[rank]
        self.sent = np.zeros(size, np.int64)
        self.delayed = 0.0

    @classmethod
    def for_comm(cls, comm, **kwargs) -> "LinkShaper":
        """Build the shaper for ``comm``'s rank and size and install it as ``comm.shaper``."""
        shaper = cls(comm.rank if hasattr(comm, "rank") else comm.Get_rank(),
                     comm.size if hasattr(comm, "size") else comm.Get_size(), **kwargs)
        comm.shaper = shaper
        return shaper

    def delay(self, peer: int, nbytes: int) -> float:
        """Seconds to hold a send of ``nbytes`` to ``peer`` (the ``comm.shaper`` hook)."""
        d = self._lat[peer] + nbytes * self._inv_bw[peer]
        if d > 0:
            self.sent[peer] += 1
            self.delayed += d
        return d

    def truth(self, i: int, j: int) -> tuple[float, float]:
        """Injected ``(latency_s, bandwidth_Bps)`` of the link i -> j (mean of both
        directions for a ping-pong: use :meth:`pingpong_truth`)."""
        return float(self.latency[i, j]), float(self.bandwidth[i, j])

    def pingpong_truth(self, i: int, j: int, nbytes: int) -> float:
        """Injected one-way time of a ping-pong of ``nbytes`` between i and j (RTT / 2)."""
        return 0.5 * (self.latency[i, j] + self.latency[j, i]
                      + nbytes / self.bandwidth[i, j] + nbytes / self.bandwidth[j, i])


class DeliveryShaper(LinkShaper):
    """Like :class:`LinkShaper`, but a message is *delivered* late instead of *sent* late.

    The sender never waits: the receiving :class:`pyfw.comm.Comm` holds a message from
    ``peer`` for ``latency + nbytes / bandwidth`` seconds before handing it out (the
    ``arrival`` hook, pickle path), so both ends keep computing meanwhile, as over a real
    long-haul link. This is the emulation the pipelined master-worker runtime needs.
    Every rank installs it (``PYFW_EMULATE_LINKS`` does this for every Comm of a job).
    """

    def delay(self, peer: int, nbytes: int) -> float:
        return 0.0

    def arrival(self, peer: int, nbytes: int) -> float:
        """Seconds to hold a message of ``nbytes`` that came from ``peer``."""
        return LinkShaper.delay(self, peer, nbytes)


def parse_links(spec: str) -> tuple[dict, dict]:
    """``"I-J:LATENCY[:BANDWIDTH],..."`` -> ({(i, j): latency_s}, {(i, j): bandwidth_Bps})."""
    lat, bw = {}, {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        parts = item.split(":")
        try:
            i, j = (int(x) for x in parts[0].split("-"))
            lat[(i, j)] = float(parts[1])
            if len(parts) > 2:
                bw[(i, j)] = float(parts[2])
        except (ValueError, IndexError) as exc:
            raise ValueError(f"bad link spec {item!r}: expected I-J:LATENCY_S[:BANDWIDTH_BPS]"
                             ) from exc
    return lat, bw
