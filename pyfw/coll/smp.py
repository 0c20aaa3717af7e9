"""SMP-aware all-gather over MPI-3 shared-memory windows.

The communicator is split by node (``Split_type(COMM_TYPE_SHARED)``); each node holds one
shared window with room for the whole result three times (calls rotate over three slots).

1. every rank writes its block straight into its place in the node's shared result;
2. node barrier; the node leaders (node-local rank 0) exchange their nodes' blocks with
   ``direct`` (all leaders at once) or ``bruck`` (⌈lg nodes⌉ steps, uniform ranks per node)
   into the shared result, then a second node barrier (skipped on one node);
3. every rank copies the result out (:meth:`SmpAllgather.__call__`), or takes a read-only
   numpy view of it with no copy at all (:meth:`SmpAllgather.view`).

A view stays valid until this rank starts the second following call on the same object
(three slots rotate: another rank of the node can be one call ahead, so with two a view
was overwritten while its rank was still in the next call), so read it before then or copy
it.

``SmpAllgather(comm, nodes=k)`` emulates k nodes on one machine (rank i goes to node i mod k;
all ranks must really share memory): it exercises the leader exchange in tests.
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .algorithms import allgather as _ag
from ._util import IN_PLACE, TAG_SMP as TAG, bview, raw, scratch, waitall

__all__ = ["SmpAllgather", "LEADER_ALGORITHMS"]

LEADER_ALGORITHMS = ("direct", "bruck")
#: result slots in the window: a view lives until its rank starts the second next call
SLOTS = 3


class SmpAllgather:
    """A reusable SMP-aware all-gather on ``comm`` (collective to create and to call).

    ``leader`` chooses the exchange between node leaders: ``"direct"`` or ``"bruck"``
    (Bruck needs the same number of ranks on every node; otherwise direct is used).
    """

    def __init__(self, comm, nodes: int | None = None, leader: str = "direct"):
        if leader not in LEADER_ALGORITHMS:
            raise ValueError(f"leader exchange must be one of {LEADER_ALGORITHMS}")
        c = raw(comm)
        self.comm = c
        self.rank, self.size = r, p = c.Get_rank(), c.Get_size()
        if nodes is None:
            self.node = c.Split_type(MPI.COMM_TYPE_SHARED, key=r)
        else:
            self.node = c.Split(r % nodes, key=r)
        nr = self.node.Get_rank()
        my_leader = self.node.bcast(r, root=0)
        leader_of = c.allgather(my_leader)
        self.leaders = sorted(set(leader_of))
        self.members = [[i for i in range(p) if leader_of[i] == ld] for ld in self.leaders]
        self.node_index = self.leaders.index(my_leader)
        self.is_leader = nr == 0
        self.leader_comm = c.Split(0 if self.is_leader else MPI.UNDEFINED, key=r)
        ppn = {len(m) for m in self.members}
        self.leader = leader if (leader == "direct" or len(ppn) == 1) else "direct"
        self.contiguous = [m == list(range(m[0], m[0] + len(m))) for m in self.members]
        self.order = np.array([i for m in self.members for i in m])
        self.sorted_nodes = bool((self.order == np.arange(p)).all())
        self.win = self._retired = None
        self.cap = 0
        self.base = None
        self.slot = 0

    @property
    def nnodes(self) -> int:
        """Number of shared-memory nodes in the communicator."""
        return len(self.leaders)

    # -------------------------------------------------------------- shared memory
    def _reserve(self, nbytes: int) -> None:
        """Make the window hold three slots of ``nbytes`` (collective over the node).

        A grown window replaces the old one, which is freed only at the next call: a view
        of the previous call lives in it and must stay valid until then (freeing it at once
        left that view on unmapped memory: reading it segfaulted, on one node as on two)."""
        self._free_window(self._retired)
        self._retired = None
        if nbytes <= self.cap and self.win is not None:
            return
        self._retired = self.win
        cap = -(-max(nbytes, 2 * self.cap, 64) // 64) * 64  # slots stay 64-byte aligned
        self.win = MPI.Win.Allocate_shared(SLOTS * cap if self.is_leader else 0, 1,
                                           comm=self.node)
        buf, _ = self.win.Shared_query(0)
        self.base = np.frombuffer(buf, np.uint8)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.cap = cap
        self.slot = 0

    def _sync(self) -> None:
        self.win.Sync()
        self.node.Barrier()
        self.win.Sync()

    @staticmethod
    def _free_window(win) -> None:
        if win is not None:
            win.Unlock_all()
            win.Free()

    def free(self) -> None:
        """Release the window and the node/leader communicators (collective)."""
        for win in (self._retired, self.win):
            self._free_window(win)
        self._retired = self.win = self.base = None
        for c in (self.leader_comm, self.node):
            if c != MPI.COMM_NULL:
                c.Free()
        self.leader_comm = self.node = MPI.COMM_NULL

    # -------------------------------------------------------------- the collective
    def _gather(self, S, b: int) -> np.ndarray:
        """Steps 1–2: returns the shared result (p*b bytes) as a uint8 array."""
        p, r = self.size, self.rank
        n = p * b
        self._reserve(n)
        off = self.slot * self.cap
        self.slot = (self.slot + 1) % SLOTS
        H = self.base[off:off + n]
        H[r * b:(r + 1) * b] = S
        self._sync()
        if self.nnodes > 1:
            if self.is_leader:
                self._exchange(H, b)
            self._sync()
        return H

    def _exchange(self, H: np.ndarray, b: int) -> None:
        lc = self.leader_comm
        me = self.node_index
        if self.leader == "bruck":
            if self.sorted_nodes:
                _ag.bruck(lc, IN_PLACE, H)
                return
            k = len(self.members[0])
            P = np.frombuffer(scratch(5, self.size * b), np.uint8).reshape(self.size, b)
            Ha = H.reshape(self.size, b)
            P[me * k:(me + 1) * k] = Ha[self.members[me]]
            _ag.bruck(lc, IN_PLACE, P)
            Ha[self.order] = P
            return
        Ha = H.reshape(self.size, b)
        mine = self.members[me]
        if self.contiguous[me]:
            out = H[mine[0] * b:(mine[-1] + 1) * b]
        else:
            out = np.ascontiguousarray(Ha[mine])
        reqs, unpack = [], []
        for j, m in enumerate(self.members):
            if j == me:
                continue
            if self.contiguous[j]:
                reqs.append(lc.Irecv(H[m[0] * b:(m[-1] + 1) * b], j, TAG))
            else:
                tmp = np.empty((len(m), b), np.uint8)
                reqs.append(lc.Irecv(tmp, j, TAG))
                unpack.append((m, tmp))
        for j in range(self.nnodes):
            if j != me:
                reqs.append(lc.Isend(out, j, TAG))
        waitall(reqs)
        for m, tmp in unpack:
            Ha[m] = tmp

    def __call__(self, sendbuf, recvbuf) -> None:
        """All-gather into ``recvbuf`` (mpi4py ``Allgather`` semantics; IN_PLACE allowed)."""
        R = bview(recvbuf)
        b = R.nbytes // self.size
        if sendbuf is IN_PLACE:
            S = R[self.rank * b:(self.rank + 1) * b]
        else:
            S = bview(sendbuf)
            if S.nbytes != b:
                raise ValueError(f"allgather: send block is {S.nbytes} B but the receive "
                                 f"buffer holds {self.size} blocks of {b} B")
        if b == 0:
            return
        R[:] = self._gather(S, b)

    def view(self, sendbuf) -> np.ndarray:
        """Zero-copy all-gather: a read-only array of shape ``(p, *sendbuf.shape)`` on the
        node's shared result. Valid until this rank's second following call on this object."""
        a = np.asarray(sendbuf)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        b = a.nbytes
        shape = (self.size,) + a.shape
        if b == 0:
            return np.empty(shape, a.dtype)
        H = self._gather(bview(a), b)
        out = H.view(a.dtype).reshape(shape)
        out.flags.writeable = False
        return out

