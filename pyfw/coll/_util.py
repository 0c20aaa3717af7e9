"""Shared helpers of the collective algorithms: byte views, tags, communicator unwrapping.

Every algorithm works on flat byte views (``memoryview`` of ``uint8``) of C-contiguous
buffers, so any numpy dtype (structured ones included) and any size, 0 included, go through
the same code. Blocks are addressed in bytes: block ``i`` of a receive buffer holding ``p``
blocks of ``b`` bytes is ``R[i*b:(i+1)*b]``.
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

# the one communicator unwrapping and waitall of pyfw, under the names the algorithms use
from ..comm import mpi_of as raw, waitall  # noqa: F401

IN_PLACE = MPI.IN_PLACE

#: point-to-point tags of the pyfw algorithms (below the MPI minimum ``TAG_UB`` of 32767).
#: Called through the dispatch, they run on a private duplicate of the communicator, so they
#: never meet user messages; called directly, do not use these tags yourself meanwhile.
TAG_GATHER = 32001
TAG_ALLGATHER = 32002
TAG_ALLTOALL = 32003
TAG_BCAST = 32004
TAG_REDUCE = 32005
TAG_SMP = 32006


def bview(buf) -> memoryview:
    """A writable-if-possible flat ``uint8`` memoryview of ``buf`` (numpy array, bytes-like,
    or an mpi4py-style ``[buf, datatype]`` pair). Raises ``ValueError`` for non-contiguous
    arrays (the pyfw algorithms move raw bytes)."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise ValueError("pyfw.coll algorithms need C-contiguous buffers")
        return memoryview(buf.reshape(-1).view(np.uint8))
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.format != "B":
        if mv.nbytes == 0:
            return memoryview(b"")
        mv = mv.cast("B")
    return mv


def nbytes(buf) -> int:
    """Size of a buffer in bytes (numpy array, bytes-like or ``[buf, datatype]``)."""
    try:
        return buf.nbytes
    except AttributeError:
        if isinstance(buf, (list, tuple)):
            return nbytes(buf[0])
        return memoryview(buf).nbytes


class Scratch:
    """A growing scratch byte buffer reused across calls (avoids re-faulting big pages)."""

    __slots__ = ("_buf",)

    def __init__(self):
        self._buf = np.empty(0, np.uint8)

    def get(self, n: int) -> memoryview:
        """A view of ``n`` bytes of the buffer, grown (doubling) where it is too small."""
        if self._buf.size < n:
            self._buf = np.empty(max(n, 2 * self._buf.size), np.uint8)
        return memoryview(self._buf)[:n]


_SCRATCH: dict[int, Scratch] = {}


def scratch(slot: int, n: int) -> memoryview:
    """``n`` bytes of the module-wide scratch buffer number ``slot`` (not re-entrant per slot)."""
    s = _SCRATCH.get(slot)
    if s is None:
        s = _SCRATCH[slot] = Scratch()
    return s.get(n)

