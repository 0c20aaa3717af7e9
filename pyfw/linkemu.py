"""Emulated slow links, at the transport level (below every runtime).

This kernel has no delay qdisc (netem), so latency between test-bed nodes or ranks of one
machine is emulated in process: :class:`LinkShaper` plugs into the ``shaper`` hook of
:class:`pyfw.comm.Comm` and makes the sender wait; :class:`DeliveryShaper` makes the receiving
Comm hold a message back instead (nobody blocks, as on a real long-haul link). A job gets a
:class:`DeliveryShaper` on every Comm from ``PYFW_EMULATE_LINKS="I-J:LATENCY_S[:BANDWIDTH_BPS],..."``
(:func:`shaper_from_env`, called by Comm). Bandwidth caps between test-bed nodes are real
(tc tbf, :mod:`pyfw.testbed`); only delay needs this module. :mod:`pyfw.monitor.emulate`
re-exports everything here beside its slow-rank tools.
"""
from __future__ import annotations

import os
import time
from typing import Mapping

import numpy as np

__all__ = ["LinkShaper", "DeliveryShaper", "parse_links", "shaper_from_env", "hold", "spin",
           "SPIN_TAIL", "ENV"]

#: the environment variable that installs a :class:`DeliveryShaper` on every Comm of a job
ENV = "PYFW_EMULATE_LINKS"

#: below this, :func:`hold` only spins; above, it sleeps all but this much, then spins.
SPIN_TAIL = 1e-3


def spin(seconds: float) -> None:
    """Busy-wait ``seconds`` (holds the CPU)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
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
        """No delay at the sender (0): this shaper holds messages on arrival instead."""
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


def shaper_from_env(rank: int, size: int, environ=None):
    """The :class:`DeliveryShaper` ``$PYFW_EMULATE_LINKS`` asks for (links between ranks that
    exist in a communicator of ``size``), or None when it is unset."""
    spec = (os.environ if environ is None else environ).get(ENV)
    if not spec:
        return None
    lat, bw = parse_links(spec)
    lat = {k: v for k, v in lat.items() if max(k) < size}
    bw = {k: v for k, v in bw.items() if max(k) < size}
    return DeliveryShaper(rank, size, latency=lat, bandwidth=bw)
