"""Tuned collectives over numpy buffers, with an auto-tuner.

Dispatch (mpi4py uppercase signatures, communicator first, ``algorithm=`` to force one)::

    from pyfw import coll
    coll.allgather(comm, send, recv)            # picks per size from the tuned table
    coll.gather(comm, send, recv, root=2, algorithm="binomial")
    coll.alltoall(comm, send, recv); coll.bcast(comm, buf, root)
    coll.allreduce(comm, send, recv, op); coll.reduce(comm, send, recv, op, root)
    view = coll.allgather_view(comm, send)      # zero-copy SMP all-gather (read-only)
    b = coll.bind(comm); b.Allgather(send, recv) # the same dispatch, mpi4py method names
    coll.use_links(comm, monitor)               # re-rank for the link monitor's forecasts

``comm`` is an mpi4py Intracomm or a :class:`pyfw.comm.Comm`. Tune once per machine and
process count: ``pyfw-run -n N -- python -m pyfw.coll.tune`` (``mpiexec`` on a cluster);
without a table the dispatch uses native MPI (one notice line; none on one process, where
native is the only candidate). A 0-byte call is a no-op on every rank. The link cost model
(:mod:`~pyfw.coll.model`) adds to the tuned times the modelled change since tuning of each
algorithm's time under the current per-link latency/bandwidth forecasts. Algorithms live in one module per family:
:mod:`~pyfw.coll.gather`, :mod:`~pyfw.coll.allgather`, :mod:`~pyfw.coll.alltoall`,
:mod:`~pyfw.coll.bcast`, :mod:`~pyfw.coll.reduce`, :mod:`~pyfw.coll.smp`.

The pyfw algorithms' point-to-point traffic is not added to :class:`pyfw.comm.Comm` counters
(native MPI collectives cannot be counted either); the link monitor measures links itself.
"""
from .dispatch import (ALGORITHMS, COLLECTIVES, Bound, Plan, allgather, allreduce,  # noqa
                       alltoall, bcast, bind, forget_plans, gather, plan, reduce, use_links)
from .smp import SmpAllgather  # noqa: F401

__all__ = ["allgather", "gather", "alltoall", "bcast", "allreduce", "reduce",
           "allgather_view", "bind", "Bound", "use_links", "plan", "Plan", "forget_plans", "SmpAllgather", "ALGORITHMS",
           "COLLECTIVES"]


def allgather_view(comm, sendbuf):
    """Zero-copy SMP-aware all-gather: a read-only ``(p, *sendbuf.shape)`` array on the
    node's shared result, valid until this rank's second following call (collective)."""
    return plan(comm)._smp_object("direct").view(sendbuf)
