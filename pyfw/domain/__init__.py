"""Load-balanced slab domain decomposition for 3-D structured grids.

* :class:`SlabDomain` (``slab.py``): slabs along axis 0, fields with ghost planes, an
  overlapped stencil ``step``, scatter/gather, ``repartition`` (move boundaries).
* :mod:`.partition`: prefix-sum cuts from per-plane cost and per-rank speed (pure functions).
* :class:`Halo` (``halo.py``): non-blocking exchange of contiguous ghost planes.
* :class:`Balancer` (``balance.py``): moves boundaries when the time lost to imbalance exceeds
  the measured cost of moving.
* :mod:`.reductions`: global min/max/sum/mean and per-label statistics, identical for every
  decomposition.
* :mod:`.io`: HDF5 snapshots + XDMF, atomic checkpoints, restart on any rank count.
"""
from .balance import Balancer
from .halo import Halo
from . import io, partition, reductions  # noqa: F401  (modules)
from .slab import SlabDomain

__all__ = ["SlabDomain", "Halo", "Balancer", "partition", "reductions", "io"]
