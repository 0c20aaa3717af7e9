"""Active probes: ping-pong per pair, NetPIPE-style sweep, ring and all-gather tests.

All probes are **collective over** ``comm`` (a :class:`pyfw.comm.Comm` or an mpi4py
intracommunicator; pass a dedicated one, e.g. ``comm.dup()``), use only non-blocking calls
polled against a deadline, and honour ``comm.shaper`` (see :mod:`pyfw.monitor.emulate`), so a
probe over an emulated slow link measures that link. They bypass the Comm's traffic counters,
so a passive profile shows the application's traffic, not the monitor's.

Method (the computing-network study's): every measurement is repeated ``reps=8`` times (each
repetition ``iters`` round trips, timed as a whole; one-way time = RTT / 2) and summarized by
``method="study"`` (drop the 2 slowest, average the rest); ``"median"`` and ``"min"`` are
options (:func:`pyfw.monitor.stats.summarize`). Per link, a Hockney fit ``T(m) = alpha + m /
bandwidth`` over the sizes.

Scheduling: pairs run in the rounds of a round-robin tournament (:func:`round_robin`: p-1
rounds of p/2 disjoint pairs for even p, p rounds for odd p), so each rank is in at most one
probe at a time. Before each pair measures, the two ranks shake hands, so a partner that is
still busy in an earlier round does not inflate the timings.

Deadlines: a peer that does not answer within ``timeout`` seconds (``round_timeout`` for the
hand-shake and the final exchange of results) makes the waiting rank cancel its requests and
raise :class:`ProbeTimeout` (a :class:`pyfw.errors.CommTimeout`) naming the link, the size and
the silent rank. Every rank then fails in bounded time; nothing hangs.

Wire format: tags ``TAG_SYNC`` (1 int64: hand-shake), ``TAG_CTL`` (1 int64: iterations chosen
by the initiator in a sweep) and ``TAG_DATA`` (raw bytes); results are exchanged with
``Iallgather`` of float64 arrays.

Entry points: :func:`probe_pairs` (matrix of every pair), :func:`sweep` (NetPIPE sizes,
calibrated iterations), :func:`pingpong` (one pair), :func:`ring_test`,
:func:`allgather_test`, :func:`netpipe_sizes`, :data:`STUDY_SIZES`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..comm import mpi_of
from ..errors import CommTimeout
from .emulate import hold
from .stats import Hockney, hockney_fit, summarize

__all__ = ["STUDY_SIZES", "ProbeTimeout", "LinkMatrix", "round_robin", "netpipe_sizes",
           "probe_pairs", "sweep", "pingpong", "ring_test", "allgather_test"]

#: message sizes of the computing-network study (bytes)
STUDY_SIZES = (80, 320, 640, 16384, 65536)

TAG_SYNC, TAG_CTL, TAG_DATA = 32601, 32602, 32603
_SPIN = 5e-4   # poll without sleeping this long (TCP rendezvous needs steady progress)
_TMIN, _TMAX, _FRAC = 2e-5, 1e-3, 0.02  # sleep <= 2 % of the time waited so far


class ProbeTimeout(CommTimeout):
    """A probe partner did not answer in time. ``rank``: who waited; ``peer``: the silent
    rank (None for a collective test); ``what``: the measurement."""

    def __init__(self, message: str, rank: int, peer: int | None, what: str):
        super().__init__(message)
        self.rank, self.peer, self.what = rank, peer, what


# ----------------------------------------------------------------------------- helpers
def round_robin(p: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair once (circle method); ``(a, b)``, a < b."""
    if p < 2:
        return []
    n = p + (p % 2)  # odd p: a bye (rank n-1 = p) sits out each round
    others = list(range(1, n))
    rounds = []
    for _ in range(n - 1):
        ring = [0] + others
        pairs = []
        for k in range(n // 2):
            a, b = ring[k], ring[n - 1 - k]
            if a < p and b < p:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        others = others[-1:] + others[:-1]
    return rounds


def netpipe_sizes(max_bytes: int = 1 << 20, start: int = 1, perturb: int = 3) -> list[int]:
    """NetPIPE-style sizes: powers of two from ``start`` to ``max_bytes``, each also at
    ``+-perturb`` bytes (to straddle protocol thresholds) when ``perturb`` > 0."""
    sizes = set()
    m = max(1, start)
    while m <= max_bytes:
        sizes.add(m)
        if perturb and m > 2 * perturb:
            sizes.update((m - perturb, m + perturb))
        m *= 2
    return sorted(s for s in sizes if 0 < s <= max_bytes + perturb)


def _shaper(comm):
    return getattr(comm, "shaper", None)


class _Waiter:
    """Polls requests with spin-then-backoff; raises ProbeTimeout after ``timeout`` s."""

    def __init__(self, rank: int):
        self.rank = rank

    def __call__(self, reqs, timeout: float, peer, what: str) -> None:
        if MPI.Request.Testall(reqs):
            return
        t0 = time.perf_counter()
        while True:
            if MPI.Request.Testall(reqs):
                return
            waited = time.perf_counter() - t0
            if waited > timeout:
                for r in reqs:
                    try:
                        if r != MPI.REQUEST_NULL:
                            r.Cancel()
                    except MPI.Exception:
                        pass
                who = f"rank {peer}" if peer is not None else "some rank"
                raise ProbeTimeout(
                    f"rank {self.rank}: {what}: no answer from {who} within {timeout:g} s "
                    f"(the peer is slow, busy elsewhere, or dead)", self.rank, peer, what)
            if waited > _SPIN:
                time.sleep(min(_TMAX, max(_TMIN, _FRAC * waited)))


def _hold(shaper, peer: int, nbytes: int) -> None:
    if shaper is not None:
        hold(shaper.delay(peer, nbytes))


def _roundtrips(mpi, shaper, wait, peer, n, iters, initiator, a, b, timeout, what) -> float:
    """``iters`` ping-pongs of ``n`` bytes with ``peer``; returns elapsed seconds."""
    t0 = time.perf_counter()
    if initiator:
        for _ in range(iters):
            r = mpi.Irecv([b, n, MPI.BYTE], peer, TAG_DATA)
            _hold(shaper, peer, n)
            s = mpi.Isend([a, n, MPI.BYTE], peer, TAG_DATA)
            wait([r, s], timeout, peer, what)
    else:
        bufs = (a, b)
        r = mpi.Irecv([a, n, MPI.BYTE], peer, TAG_DATA)
        for k in range(iters):
            wait([r], timeout, peer, what)
            _hold(shaper, peer, n)
            s = mpi.Isend([bufs[k % 2], n, MPI.BYTE], peer, TAG_DATA)
            if k + 1 < iters:
                r = mpi.Irecv([bufs[(k + 1) % 2], n, MPI.BYTE], peer, TAG_DATA)
            wait([s], timeout, peer, what)
    return time.perf_counter() - t0


def _handshake(mpi, wait, peer, timeout, what) -> None:
    out, inn = np.ones(1, np.int64), np.zeros(1, np.int64)
    r = mpi.Irecv(inn, peer, TAG_SYNC)
    s = mpi.Isend(out, peer, TAG_SYNC)
    wait([r, s], timeout, peer, f"{what}: hand-shake")


def _pair(comm, peer, sizes, reps, iters, warmup, timeout, round_timeout, target,
          max_iters) -> np.ndarray:
    """Measure the link to ``peer`` (both ranks call); initiator gets (k, reps) one-way
    times, the responder an all-NaN array."""
    mpi, shaper = mpi_of(comm), _shaper(comm)
    me = mpi.Get_rank()
    wait = _Waiter(me)
    initiator = me < peer
    nmax = max(sizes)
    a = np.zeros(nmax, np.uint8)
    b = np.zeros(nmax, np.uint8)
    out = np.full((len(sizes), reps), np.nan)
    link = f"probe {min(me, peer)}<->{max(me, peer)}"
    _handshake(mpi, wait, peer, round_timeout, link)
    for k, n in enumerate(sizes):
        what = f"{link} at {n} B"
        if iters == "auto":
            t1 = _roundtrips(mpi, shaper, wait, peer, n, 1, initiator, a, b, timeout, what)
            ctl = np.zeros(1, np.int64)
            if initiator:
                ctl[0] = max(1, min(max_iters, math.ceil(target / max(t1, 1e-9))))
                wait([mpi.Isend(ctl, peer, TAG_CTL)], timeout, peer, what)
            else:
                wait([mpi.Irecv(ctl, peer, TAG_CTL)], timeout, peer, what)
            it = int(ctl[0])
        else:
            it = int(iters)
            for _ in range(warmup):
                _roundtrips(mpi, shaper, wait, peer, n, 1, initiator, a, b, timeout, what)
        for r in range(reps):
            el = _roundtrips(mpi, shaper, wait, peer, n, it, initiator, a, b, timeout, what)
            if initiator:
                out[k, r] = el / (2 * it)
    return out


def _allgather(mpi, local: np.ndarray, timeout: float, what: str) -> np.ndarray:
    p = mpi.Get_size()
    local = np.ascontiguousarray(local, dtype=float)
    full = np.empty((p,) + local.shape, dtype=float)
    req = mpi.Iallgather(local, full)
    _Waiter(mpi.Get_rank())([req], timeout, None, what)
    return full


# ----------------------------------------------------------------------------- results
@dataclass
class LinkMatrix:
    """Result of :func:`probe_pairs` / :func:`sweep`, the same on every rank.

    ``raw[i, j, k, r]``: one-way seconds of repetition r at ``sizes[k]`` on link i-j
    (symmetric; NaN on the diagonal and for links not probed); ``time[i, j, k]`` its summary by
    ``method``; ``alpha[i, j]`` (s) and ``bandwidth[i, j]`` (B/s) the Hockney fit per link.
    """

    sizes: list
    raw: np.ndarray
    method: str = "study"
    reps: int = 8
    iters: object = 1
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.raw = np.asarray(self.raw, dtype=float)
        p, k = self.raw.shape[0], len(self.sizes)
        self.time = np.full((p, p, k), np.nan)
        self.alpha = np.full((p, p), np.nan)
        self.bandwidth = np.full((p, p), np.nan)
        for i in range(p):
            for j in range(p):
                if i != j and np.isfinite(self.raw[i, j]).any():
                    self.time[i, j] = [summarize(r[np.isfinite(r)], self.method)
                                       for r in self.raw[i, j]]
                    fit = hockney_fit(self.sizes, self.time[i, j])
                    self.alpha[i, j], self.bandwidth[i, j] = fit.alpha, fit.bandwidth

    @property
    def size(self) -> int:
        """Number of ranks."""
        return self.raw.shape[0]

    def hockney(self, i: int, j: int) -> Hockney:
        """The fitted model of link i-j."""
        b = self.bandwidth[i, j]
        return Hockney(self.alpha[i, j], 1.0 / b if b > 0 else math.nan)

    def latency(self, nbytes: int | None = None) -> np.ndarray:
        """p x p one-way time at ``nbytes`` (one of ``sizes``; default the smallest)."""
        k = 0 if nbytes is None else self.sizes.index(nbytes)
        return self.time[:, :, k]

    def to_dict(self) -> dict:
        """JSON-ready dict (NaN -> None); :meth:`from_dict` reverses it."""
        def clean(a):
            return np.where(np.isfinite(a), a, np.nan).tolist()
        d = {"kind": "pairs", "sizes": list(map(int, self.sizes)), "method": self.method,
             "reps": self.reps, "iters": self.iters, "size": self.size,
             "raw": clean(self.raw), "time": clean(self.time), "alpha": clean(self.alpha),
             "bandwidth": clean(self.bandwidth), "meta": self.meta}
        return _nan_to_none(d)

    @classmethod
    def from_dict(cls, d: dict) -> "LinkMatrix":
        """Rebuild a matrix from :meth:`to_dict` output."""
        raw = np.array(_none_to_nan(d["raw"]), dtype=float)
        return cls(d["sizes"], raw, d.get("method", "study"), d.get("reps", raw.shape[-1]),
                   d.get("iters", 1), d.get("meta", {}))


def _nan_to_none(x):
    if isinstance(x, float):
        return None if math.isnan(x) else x
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    return x


def _none_to_nan(x):
    if x is None:
        return math.nan
    if isinstance(x, list):
        return [_none_to_nan(v) for v in x]
    return x


# ----------------------------------------------------------------------------- probes
def probe_pairs(comm, sizes=STUDY_SIZES, reps: int = 8, method: str = "study", iters=1,
                warmup: int = 1, timeout: float = 10.0, round_timeout: float | None = None,
                pairs=None, target: float = 2e-3, max_iters: int = 1000) -> LinkMatrix:
    """Ping-pong every pair (or only ``pairs``) at ``sizes``; collective; same result on all
    ranks.

    ``iters`` round trips per repetition (``"auto"``: calibrated so a repetition lasts about
    ``target`` seconds, NetPIPE-style). ``timeout``: seconds to wait for any one answer;
    ``round_timeout`` (default ``10 * timeout``): for the pair hand-shake and the final
    exchange, which also wait for other pairs. Raises :class:`ProbeTimeout` on every rank
    that is left waiting. Arguments must be identical on every rank.
    """
    mpi = mpi_of(comm)
    p, me = mpi.Get_size(), mpi.Get_rank()
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError("sizes must be positive byte counts")
    if reps < 1:
        raise ValueError("reps must be >= 1")
    summarize([1.0], method)  # validates the method name on every rank
    round_timeout = 10 * timeout if round_timeout is None else round_timeout
    wanted = None if pairs is None else {(min(a, b), max(a, b)) for a, b in pairs}
    mine = np.full((p, len(sizes), reps), np.nan)
    t0 = time.perf_counter()
    for rnd in round_robin(p):
        for a, b in rnd:
            if wanted is not None and (a, b) not in wanted:
                continue
            if me in (a, b):
                peer = b if me == a else a
                mine[peer] = _pair(comm, peer, sizes, reps, iters, warmup, timeout,
                                   round_timeout, target, max_iters)
    full = _allgather(mpi, mine, round_timeout, "probe_pairs: exchange of results")
    raw = np.full_like(full, np.nan)
    for i in range(p):
        for j in range(i + 1, p):
            raw[i, j] = raw[j, i] = full[i, j]  # the initiator (lower rank) measured it
    meta = {"elapsed_s": time.perf_counter() - t0, "warmup": warmup,
            "shaped": _shaper(comm) is not None, "host": MPI.Get_processor_name()}
    return LinkMatrix(sizes, raw, method, reps, iters, meta)


def sweep(comm, max_bytes: int = 1 << 20, perturb: int = 3, reps: int = 8,
          method: str = "study", target: float = 2e-3, **kwargs) -> LinkMatrix:
    """NetPIPE-style sweep of every pair: :func:`netpipe_sizes` up to ``max_bytes``, each
    repetition calibrated to about ``target`` seconds. Same arguments as :func:`probe_pairs`."""
    return probe_pairs(comm, netpipe_sizes(max_bytes, 1, perturb), reps=reps, method=method,
                       iters="auto", target=target, **kwargs)


def pingpong(comm, peer: int, sizes=STUDY_SIZES, reps: int = 8, method: str = "study",
             iters=1, warmup: int = 1, timeout: float = 10.0, target: float = 2e-3,
             max_iters: int = 1000) -> dict:
    """Ping-pong with one ``peer`` (both ranks call it, naming each other).

    Returns ``{"sizes", "time" (summary per size, s), "raw", "alpha", "bandwidth"}`` on both
    ranks (the lower rank measures and sends its figures to the other).
    """
    mpi = mpi_of(comm)
    me = mpi.Get_rank()
    if peer == me or not 0 <= peer < mpi.Get_size():
        raise ValueError(f"rank {me}: bad peer {peer}")
    sizes = [int(s) for s in sizes]
    raw = _pair(comm, peer, sizes, reps, iters, warmup, timeout, timeout, target, max_iters)
    wait = _Waiter(me)
    if me < peer:
        wait([mpi.Isend(raw, peer, TAG_CTL)], timeout, peer, "pingpong: results")
    else:
        wait([mpi.Irecv(raw, peer, TAG_CTL)], timeout, peer, "pingpong: results")
    t = [summarize(r, method) for r in raw]
    fit = hockney_fit(sizes, t)
    return {"sizes": sizes, "time": t, "raw": raw.tolist(), "alpha": fit.alpha,
            "bandwidth": fit.bandwidth, "method": method}


def ring_test(comm, sizes=STUDY_SIZES, reps: int = 8, method: str = "study", iters: int = 1,
              warmup: int = 1, timeout: float = 10.0) -> dict:
    """Bidirectional ring: every rank sends ``m`` bytes to both neighbours and receives from
    both, all at once. Per size: ``time[rank][k]`` (s per exchange, summarized), ``max``
    over ranks, and ``bandwidth`` = 2 m / max (bytes each rank pushes out per second).
    Collective; needs >= 2 ranks."""
    mpi, shaper = mpi_of(comm), _shaper(comm)
    p, me = mpi.Get_size(), mpi.Get_rank()
    wait = _Waiter(me)
    right, left = (me + 1) % p, (me - 1) % p
    peers = [right] if left == right else [right, left]
    sizes = [int(s) for s in sizes]
    nmax = max(sizes)
    sbuf = np.zeros(nmax, np.uint8)
    rbufs = [np.zeros(nmax, np.uint8) for _ in peers]
    mine = np.full(len(sizes), np.nan)
    for k, n in enumerate(sizes):
        times = []
        for r in range(warmup + reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                reqs = [mpi.Irecv([rb, n, MPI.BYTE], q, TAG_DATA) for rb, q in zip(rbufs, peers)]
                for q in peers:
                    _hold(shaper, q, n)
                    reqs.append(mpi.Isend([sbuf, n, MPI.BYTE], q, TAG_DATA))
                wait(reqs, timeout, left, f"ring test at {n} B")
            if r >= warmup:
                times.append((time.perf_counter() - t0) / iters)
        mine[k] = summarize(times, method)
    full = _allgather(mpi, mine, timeout, "ring test: exchange of results")
    worst = np.nanmax(full, axis=0)
    return {"kind": "ring", "sizes": sizes, "method": method, "time": full.tolist(),
            "max": worst.tolist(), "bandwidth": (2 * np.array(sizes) / worst).tolist()}


def allgather_test(comm, sizes=STUDY_SIZES, reps: int = 8, method: str = "study",
                   iters: int = 1, warmup: int = 1, timeout: float = 10.0) -> dict:
    """Time ``Iallgather`` of ``m`` bytes per rank (native collective: not shaped by
    ``comm.shaper``). Per size: ``time[rank][k]`` and ``max`` over ranks (s per call)."""
    mpi = mpi_of(comm)
    p, me = mpi.Get_size(), mpi.Get_rank()
    wait = _Waiter(me)
    sizes = [int(s) for s in sizes]
    nmax = max(sizes)
    sbuf = np.zeros(nmax, np.uint8)
    rbuf = np.zeros(nmax * p, np.uint8)
    mine = np.full(len(sizes), np.nan)
    for k, n in enumerate(sizes):
        times = []
        for r in range(warmup + reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                req = mpi.Iallgather([sbuf, n, MPI.BYTE], [rbuf, n, MPI.BYTE])
                wait([req], timeout, None, f"all-gather test at {n} B")
            if r >= warmup:
                times.append((time.perf_counter() - t0) / iters)
        mine[k] = summarize(times, method)
    full = _allgather(mpi, mine, timeout, "all-gather test: exchange of results")
    return {"kind": "allgather", "sizes": sizes, "method": method, "time": full.tolist(),
            "max": np.nanmax(full, axis=0).tolist()}
