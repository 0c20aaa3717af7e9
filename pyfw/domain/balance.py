"""When and how to move slab boundaries during a run.

Each rank feeds :meth:`Balancer.record` the compute time of every step (update calls only,
never halo waits: ``SlabDomain.step`` returns exactly that). Every ``every`` steps
:meth:`Balancer.check` (collective) gathers the window means, smooths them per rank with an
exponential moving average, and derives speeds ``s_i = cost_i / t_i`` (plane cost per
second). It proposes new cuts with :func:`~pyfw.domain.partition.partition` and moves the
boundaries only when

* the time lost to imbalance since the last move, ``sum over steps of (t_max - t_mean)``,
  exceeds the estimated cost of moving (measured on the previous move: seconds per byte plus a
  fixed part; a conservative guess before the first move), and
* the predicted gain per step is above ``min_gain`` of the current step time and above one
  plane's time on the slowest rank, and
* the previous check proposed moving the boundaries the same way (hysteresis: a one-off
  noisy window, e.g. another process stealing a core for a moment, moves nothing).

Every rank takes the decision from the same gathered numbers, so all agree without a vote.
"""
from __future__ import annotations

import numpy as np

from . import partition as _part

__all__ = ["Balancer"]


class Balancer:
    """Measurement-based boundary mover for a :class:`~pyfw.domain.slab.SlabDomain`.

    ``every``: steps between checks; ``alpha``: EMA weight of the newest window;
    ``min_gain``: relative predicted gain needed to move; ``guess_bandwidth`` (bytes/s) and
    ``guess_latency`` (s): move-cost model until a move has been measured.
    """

    def __init__(self, domain, every: int = 20, alpha: float = 0.5, min_gain: float = 0.10,
                 guess_bandwidth: float = 1e9, guess_latency: float = 2e-3):
        if every < 1:
            raise ValueError("every must be >= 1")
        self.dom = domain
        self.every = int(every)
        self.alpha = float(alpha)
        self.min_gain = float(min_gain)
        self.sec_per_byte = 1.0 / guess_bandwidth
        self.latency = guess_latency
        self.ema = None            # smoothed compute time per step, per rank
        self.loss = 0.0            # seconds lost to imbalance since the last move
        self._window = []
        self._last_dir = None      # direction of the previous proposal (for hysteresis)
        self.steps = 0
        self.history = []          # one dict per check (for logs and tests)

    def record(self, seconds: float) -> None:
        """Add one step's compute time (this rank)."""
        self._window.append(float(seconds))
        self.steps += 1

    def move_cost(self, new_cuts) -> float:
        """Estimated seconds to move from the current cuts to ``new_cuts``."""
        d = self.dom
        plane = int(np.prod(d.plane_shape)) * sum(a.itemsize for a in d.fields.values())
        moved = int(np.abs(np.asarray(new_cuts) - d.cuts).sum()) * plane
        return self.latency + moved * self.sec_per_byte

    def check(self, force: bool = False):
        """Collective, every ``every`` recorded steps (no-op otherwise): decide and, if worth
        it, repartition. Returns the new cuts when boundaries moved, else None."""
        if not force and (self.steps == 0 or self.steps % self.every):
            return None
        d = self.dom
        w = np.array([np.mean(self._window) if self._window else 0.0, len(self._window)])
        self._window = []
        allw = d.comm.mpi.allgather(w)
        t = np.array([x[0] for x in allw])
        nsteps = float(allw[0][1])
        if np.any(t <= 0):
            return None
        self.loss += nsteps * (t.max() - t.mean())
        self.ema = t if self.ema is None else self.alpha * t + (1 - self.alpha) * self.ema
        costs = _part.slab_costs(d.cost, d.cuts)
        speeds = costs / self.ema
        new = _part.partition(d.cost, speeds, d.min_planes)
        now = float(self.ema.max())
        pred = _part.bottleneck(d.cost, speeds, new)
        plane_time = float((d.cost.max() / speeds).max()) if d.cost.max() > 0 else 0.0
        gain = now - pred
        cost = self.move_cost(new)
        rec = {"step": self.steps, "times": t.tolist(), "cuts": d.cuts.tolist(),
               "imbalance": float(t.max() / t.mean() - 1), "loss": self.loss,
               "move_cost": cost, "gain": gain, "moved": False}
        self.history.append(rec)
        worth = (not np.array_equal(new, d.cuts) and gain > self.min_gain * now
                 and gain > plane_time)
        direction = np.sign(new - d.cuts) if worth else None
        confirmed = (direction is not None and self._last_dir is not None
                     and np.array_equal(direction, self._last_dir))
        self._last_dir = direction
        if not (worth and (force or (confirmed and self.loss > cost))):
            return None
        self._last_dir = None
        info = d.repartition(new)
        spent = float(d.comm.mpi.allreduce(info["seconds"], op=_max()))
        nbytes = float(d.comm.mpi.allreduce(info["bytes"], op=_max()))
        if nbytes > 0:
            self.sec_per_byte = max(spent - self.latency, 0.0) / nbytes
        # the EMA was measured on the old slabs: rescale it to the new ones
        self.ema = _part.slab_costs(d.cost, new) / speeds
        self.loss = 0.0
        rec.update(moved=True, new_cuts=new.tolist(), seconds=spent)
        return new


def _max():
    from mpi4py import MPI
    return MPI.MAX
