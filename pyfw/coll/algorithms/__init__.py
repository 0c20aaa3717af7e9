"""The algorithms, one module per collective family: :mod:`.gather`, :mod:`.allgather`,
:mod:`.alltoall`, :mod:`.bcast`, :mod:`.reduce` (the SMP-aware all-gather is
:mod:`pyfw.coll.smp`). Each function takes the communicator first, then mpi4py's uppercase
arguments; each module has an ``ALGORITHMS`` dict (``reduce``: ``ALLREDUCE`` and ``REDUCE``).
"""
