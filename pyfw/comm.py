"""Thin layer over mpi4py that every pyfw runtime uses.

* **Pickle path** (lowercase, as mpi4py names it): ``isend(obj)`` / ``poll()`` / ``recv()``.
  Objects are pickled once here (so an unpicklable object fails on the sender, before any
  message exists), sent as a byte buffer, and received through a matched probe.
* **Buffer path** (uppercase): ``Send`` / ``Recv`` / ``Isend`` / ``Irecv`` of numpy arrays,
  never pickled.
* **Counters**: messages and bytes sent to and received from each peer
  (:meth:`Comm.traffic`), read by the link monitor.
* **Failure detection**: errors are returned, not fatal; under ``mpiexec --with-ft ulfm`` a dead
  peer surfaces as :class:`pyfw.errors.PeerFailure` naming the dead ranks, after which receives
  from the other peers go on working.
* **Waiting without burning a core**: :class:`Backoff`, and deadlines on every blocking receive.
* **Emulated slow links** (``PYFW_EMULATE_LINKS``, :mod:`pyfw.linkemu`): pickled
  messages are held by the receiver; buffer sends (``Isend``) are held by the sender and
  posted once due (a :class:`DeferredSend`, completed by :func:`testall` / :func:`waitall`),
  so in both cases the ranks keep computing while the "link" carries the message.

Tags are small fixed integers chosen by each runtime; identifiers (task ids, rounds) travel in
the payload, never in the tag (``MPI_TAG_UB`` can be as low as 32767).
"""
from __future__ import annotations

import atexit
import math
import os
import pickle
import signal
import time
from typing import Any

from mpi4py import MPI

from . import fabric, timerslack
from .errors import CommTimeout, PeerFailure

timerslack.restore()   # MPI is up: this rank's sleeps precise again (the launcher's start-up slack)
fabric.forget_default(os.environ)   # MPI is up: processes started from here decide for themselves

__all__ = ["Comm", "Backoff", "DeferredSend", "testall", "waitall", "bound_finalize",
           "ANY_SOURCE", "ANY_TAG", "world", "ULFM"]

#: ULFM is on (``mpiexec --with-ft ulfm``, ``pyfw-run --ft``): a dead rank is reported, not
#: fatal, and communicators can be revoked
ULFM = os.environ.get("OMPI_MCA_mpi_ft_enable") == "1"
ANY_SOURCE = MPI.ANY_SOURCE
ANY_TAG = MPI.ANY_TAG
_PROC_FAILED = {getattr(MPI, n) for n in ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING",
                                         "ERR_REVOKED") if hasattr(MPI, n)}


class Backoff:
    """Polling-loop pause: yield the CPU for the first ``spin`` seconds after progress, then
    sleep, starting at ``tmin`` and doubling to ``tmax``.

    ``reset()`` after any progress. The short yield phase answers a reply that comes
    within a fraction of a millisecond without paying a sleep's wake-up latency; the
    sleeps keep an idle rank off the CPU (essential when ranks outnumber cores) while
    adding at most ``tmax`` latency to a waiting receive.
    """

    __slots__ = ("tmin", "tmax", "spin", "delay", "slept", "_since")

    def __init__(self, tmin: float = 1e-6, tmax: float = 1e-3, spin: float = 2e-4):
        self.tmin, self.tmax, self.spin = tmin, tmax, spin
        self.delay = 0.0
        self.slept = 0.0
        self._since = None

    def reset(self) -> None:
        """Back to the shortest sleep (something happened)."""
        self.delay = 0.0
        self._since = None

    def sleep(self) -> None:
        """Wait once: yield the CPU during the first ``spin`` seconds, then sleep, doubling
        the sleep up to ``tmax``."""
        if self.spin > 0:
            now = time.perf_counter()
            if self._since is None:
                self._since = now
            if now - self._since < self.spin:
                os.sched_yield()
                return
        time.sleep(self.delay)
        self.slept += self.delay
        self.delay = min(self.tmax, max(self.tmin, 2.0 * self.delay))


def mpi_of(comm):
    """The mpi4py communicator inside ``comm``: a :class:`Comm`'s ``.mpi``; an mpi4py
    communicator (or anything without ``.mpi``) is returned as it is."""
    return getattr(comm, "mpi", comm)


class Comm:
    """A communicator with counters and failure detection.

    ``Comm(mpi_comm)`` wraps (does not duplicate) ``mpi_comm``; use :meth:`dup` for a private
    context. Set ``comm.shaper`` to an object with ``delay(peer, nbytes)`` (seconds) to emulate
    slow links on sends (see :mod:`pyfw.linkemu`); it is ``None`` by default and costs nothing.
    """

    def __init__(self, mpi_comm: MPI.Intracomm | None = None):
        timerslack.restore()   # when MPI_Init came after this module's import
        self.mpi = MPI.COMM_WORLD if mpi_comm is None else mpi_of(mpi_comm)
        self.rank = self.mpi.Get_rank()
        self.size = self.mpi.Get_size()
        self.host = MPI.Get_processor_name()
        self.mpi.Set_errhandler(MPI.ERRORS_RETURN)
        n = self.size
        # plain lists: cheaper to bump than numpy scalars, and numpy stays unimported
        self.sent_msgs = [0] * n
        self.sent_bytes = [0] * n
        self.recv_msgs = [0] * n
        self.recv_bytes = [0] * n
        self.failed: set[int] = set()
        self.shaper = None
        self._held: list[tuple[float, Any, int, int]] = []  # delivery-delayed messages
        self._last_due: dict[int, float] = {}
        self._send_due: dict[int, float] = {}   # deferred buffer sends: last due time per peer
        self._pending: list[tuple[MPI.Request, Any, int]] = []  # (request, buffer, dest)
        self.shaper = _shaper_from_env(self.rank, n)   # None unless links are emulated
        self._status = MPI.Status()

    # ---------------------------------------------------------------- construction
    def dup(self) -> "Comm":
        """A new Comm on a duplicate of this communicator (own message context). Collective."""
        return Comm(self.mpi.Dup())

    def free(self) -> None:
        """Complete pending sends (briefly) and free the communicator if it is not a world one."""
        self.flush(timeout=1.0, raise_on_timeout=False)
        if self.mpi not in (MPI.COMM_WORLD, MPI.COMM_SELF) and self.mpi != MPI.COMM_NULL:
            try:
                self.mpi.Free()
            except MPI.Exception:
                pass

    # ---------------------------------------------------------------- pickle path
    @staticmethod
    def dumps(obj: Any) -> bytes:
        """Pickle ``obj`` (protocol 5); raises the pickling error unchanged."""
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def isend(self, obj: Any, dest: int, tag: int) -> None:
        """Send a picklable object without blocking; completion is tracked internally."""
        self.isend_bytes(self.dumps(obj), dest, tag)

    def isend_bytes(self, data: bytes, dest: int, tag: int) -> None:
        """Send an already pickled payload without blocking (see :meth:`isend`)."""
        if dest in self.failed:
            return
        self._shape(dest, len(data))
        try:
            req = self.mpi.Isend([data, MPI.BYTE], dest, tag)
        except MPI.Exception as exc:
            self._handle(exc)
            return
        self._pending.append((req, data, dest))
        self.sent_msgs[dest] += 1
        self.sent_bytes[dest] += len(data)
        if len(self._pending) > 64:
            self.progress()

    def send(self, obj: Any, dest: int, tag: int, timeout: float | None = None) -> None:
        """Send an object and wait until the send buffer is free (bounded by ``timeout``)."""
        self.isend(obj, dest, tag)
        self.flush(timeout=timeout)

    def poll(self, source: int = ANY_SOURCE, tag: int = ANY_TAG):
        """Receive one pickled message if one is waiting: ``(obj, source, tag)`` or ``None``.

        Raises :class:`PeerFailure` (once per newly failed set of ranks) under ULFM.
        """
        if self._held:
            got = self._release(source, tag)
            if got is not None:
                return got
        st = self._status
        try:
            msg = self.mpi.Improbe(source, tag, st)
        except MPI.Exception as exc:
            self._handle(exc)
            return None
        if msg is None:
            return None
        src, tg, n = st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE)
        buf = bytearray(n)
        try:
            msg.Recv([buf, MPI.BYTE])
        except MPI.Exception as exc:
            self._handle(exc)
            return None
        self.recv_msgs[src] += 1
        self.recv_bytes[src] += n
        arrival = getattr(self.shaper, "arrival", None)
        if arrival is not None:
            hold_for = arrival(src, n)
            if hold_for > 0:
                # messages on one link keep their order (MPI's non-overtaking rule)
                due = max(time.perf_counter() + hold_for, self._last_due.get(src, 0.0))
                self._last_due[src] = due
                self._held.append((due, pickle.loads(buf), src, tg))
                return None
        return pickle.loads(buf), src, tg

    def _release(self, source: int, tag: int):
        """The earliest held message that is due and matches ``source``/``tag``, if any."""
        now = time.perf_counter()
        for i, (due, obj, src, tg) in enumerate(self._held):
            if due <= now and source in (ANY_SOURCE, src) and tag in (ANY_TAG, tg):
                del self._held[i]
                return obj, src, tg
        return None

    def recv(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, timeout: float | None = None,
             backoff: Backoff | None = None):
        """Wait for one pickled message: ``(obj, source, tag)``; :class:`CommTimeout` after
        ``timeout`` seconds. Sleeps with a capped backoff while nothing arrives."""
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = backoff or Backoff()
        while True:
            got = self.poll(source, tag)
            if got is not None:
                return got
            self.progress()
            if deadline is not None and time.monotonic() > deadline:
                raise CommTimeout(f"rank {self.rank}: nothing received from "
                                  f"{'any rank' if source == ANY_SOURCE else f'rank {source}'}"
                                  f" (tag {tag}) within {timeout:g} s")
            backoff.sleep()

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> bool:
        """True if a message from ``source`` with ``tag`` is waiting (does not receive it)."""
        try:
            return self.mpi.Iprobe(source, tag)
        except MPI.Exception as exc:
            self._handle(exc)
            return False

    # ---------------------------------------------------------------- buffer path
    def Send(self, buf: "np.ndarray", dest: int, tag: int = 0) -> None:
        """Blocking buffer send (mpi4py's ``Send``), counted in the traffic counters."""
        self._shape(dest, buf.nbytes)
        self._count_send(dest, buf.nbytes)
        self._call(self.mpi.Send, buf, dest, tag)

    def Recv(self, buf: "np.ndarray", source: int, tag: int = 0) -> None:
        """Blocking buffer receive (mpi4py's ``Recv``), counted in the traffic counters."""
        self._call(self.mpi.Recv, buf, source, tag)
        self._count_recv(source, buf.nbytes)

    def Isend(self, buf: "np.ndarray", dest: int, tag: int = 0) -> "MPI.Request | DeferredSend":
        """Non-blocking buffer send. On an emulated slow link (a delivery shaper) this returns
        a :class:`DeferredSend`: complete it with :func:`testall` / :func:`waitall`."""
        arrival = getattr(self.shaper, "arrival", None)
        if arrival is not None and dest >= 0:
            hold = arrival(dest, buf.nbytes)
            if hold > 0:
                self._count_send(dest, buf.nbytes)
                # per-link FIFO: MPI's non-overtaking rule holds for held sends too
                due = max(time.perf_counter() + hold, self._send_due.get(dest, 0.0))
                self._send_due[dest] = due
                return DeferredSend(self, buf, dest, tag, due)
        self._shape(dest, buf.nbytes)
        self._count_send(dest, buf.nbytes)
        return self._call(self.mpi.Isend, buf, dest, tag)

    def Irecv(self, buf: "np.ndarray", source: int, tag: int = 0) -> MPI.Request:
        # counted when posted: the bytes are on their way and this keeps Waitall cheap
        """Non-blocking buffer receive, counted when posted."""
        self._count_recv(source, buf.nbytes)
        return self._call(self.mpi.Irecv, buf, source, tag)

    def Sendrecv(self, sendbuf: "np.ndarray", dest: int, recvbuf: "np.ndarray", source: int,
                 sendtag: int = 0, recvtag: int = 0) -> None:
        """Buffer send-receive (mpi4py's ``Sendrecv``), counted both ways."""
        self._shape(dest, sendbuf.nbytes)
        self._count_send(dest, sendbuf.nbytes)
        self._call(self.mpi.Sendrecv, sendbuf, dest, sendtag, recvbuf, source, recvtag)
        self._count_recv(source, recvbuf.nbytes)

    def _count_send(self, dest, nbytes):
        if dest >= 0:
            self.sent_msgs[dest] += 1
            self.sent_bytes[dest] += nbytes

    def _count_recv(self, source, nbytes):
        if source >= 0:
            self.recv_msgs[source] += 1
            self.recv_bytes[source] += nbytes

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except MPI.Exception as exc:
            self._handle(exc)
            raise  # _handle raises PeerFailure for failures; anything else propagates

    # ---------------------------------------------------------------- completion
    def progress(self) -> None:
        """Retire completed non-blocking sends (cheap; call it in polling loops)."""
        if not self._pending:
            return
        reqs = [p[0] for p in self._pending]
        try:
            done = MPI.Request.Testsome(reqs)
        except MPI.Exception as exc:
            self._drop_failed_sends()
            self._handle(exc)
            return
        if done:
            keep = set(range(len(reqs))) - set(done)
            self._pending = [self._pending[i] for i in sorted(keep)]

    def flush(self, timeout: float | None = None, raise_on_timeout: bool = True) -> bool:
        """Wait until every pending send has completed; False (or CommTimeout) on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = Backoff()
        while self._pending:
            self.progress()
            if not self._pending:
                break
            if deadline is not None and time.monotonic() > deadline:
                if raise_on_timeout:
                    raise CommTimeout(f"rank {self.rank}: {len(self._pending)} send(s) "
                                      f"not completed within {timeout:g} s")
                return False
            backoff.sleep()
        return True

    def cancel_sends_to(self, dest: int) -> None:
        """Forget pending sends to ``dest`` (a dead or departed peer)."""
        keep = []
        for req, buf, d in self._pending:
            if d == dest:
                try:
                    req.Cancel()
                except MPI.Exception:
                    pass
            else:
                keep.append((req, buf, d))
        self._pending = keep

    # ---------------------------------------------------------------- failures
    def _handle(self, exc: MPI.Exception) -> None:
        """Turn a ULFM process-failure error into PeerFailure; re-raise anything else."""
        if exc.Get_error_class() not in _PROC_FAILED:
            raise exc
        new = self._acknowledge_failures()
        self._drop_failed_sends()
        if new:
            raise PeerFailure(new) from exc
        # failure already known (e.g. a pending request to a dead peer): nothing new to report

    def _acknowledge_failures(self) -> set[int]:
        try:
            self.mpi.Ack_failed()
            group = self.mpi.Get_failed()
        except (MPI.Exception, NotImplementedError, AttributeError):
            return set()
        try:
            ranks = group.Translate_ranks(list(range(group.Get_size())), self.mpi.Get_group())
        finally:
            group.Free()
        new = {r for r in ranks if r >= 0} - self.failed
        self.failed |= new
        if new:
            bound_finalize()
        return new

    def _drop_failed_sends(self) -> None:
        for dest in list(self.failed):
            self.cancel_sends_to(dest)

    # ---------------------------------------------------------------- emulation and counters
    def _shape(self, dest: int, nbytes: int) -> None:
        if self.shaper is not None and dest >= 0:
            delay = self.shaper.delay(dest, nbytes)
            if delay > 0:
                end = time.perf_counter() + delay
                if delay > 2e-3:  # long: sleep the bulk so emulation does not steal a core
                    time.sleep(delay - 1e-3)
                while time.perf_counter() < end:  # short, precise: sleep() is too coarse
                    pass

    def traffic(self) -> dict:
        """Per-peer message and byte counts since creation (or :meth:`reset_traffic`)."""
        return {"rank": self.rank, "size": self.size, "host": self.host,
                "sent_msgs": list(self.sent_msgs), "sent_bytes": list(self.sent_bytes),
                "recv_msgs": list(self.recv_msgs), "recv_bytes": list(self.recv_bytes)}

    def reset_traffic(self) -> None:
        """Zero the per-peer byte and message counters."""
        for a in (self.sent_msgs, self.sent_bytes, self.recv_msgs, self.recv_bytes):
            a[:] = [0] * len(a)


class DeferredSend:
    """A buffer send held back by an emulated link: the real ``Isend`` is posted the first
    time it is tested after its due time. The sender never blocks, so code that progresses
    its requests while computing (a halo exchange overlapped with the interior update) hides
    the emulated latency exactly as it would hide a real one, and code that just waits
    pays it in full."""

    __slots__ = ("comm", "buf", "dest", "tag", "due", "req")

    def __init__(self, comm: Comm, buf: "np.ndarray", dest: int, tag: int, due: float):
        self.comm, self.buf, self.dest, self.tag, self.due = comm, buf, dest, tag, due
        self.req: MPI.Request | None = None

    def Test(self) -> bool:
        """True once the emulated delay has passed and the real send completed."""
        if self.req is None:
            if time.perf_counter() < self.due:
                return False
            self.req = self.comm._call(self.comm.mpi.Isend, self.buf, self.dest, self.tag)
        return self.req.Test()

    def Wait(self, timeout: float | None = None) -> None:
        """Block until the send completed (after its emulated delay)."""
        waitall([self], timeout)

    def Cancel(self) -> None:
        """Drop the send if it has not left yet."""
        if self.req is not None:
            self.req.Cancel()
        self.due = float("inf")


def testall(reqs) -> bool:
    """``MPI.Request.Testall`` that also accepts :class:`DeferredSend` items."""
    if not any(isinstance(r, DeferredSend) for r in reqs):
        return MPI.Request.Testall(reqs)
    done = True
    for r in reqs:   # every request gets tested (progress), even after one is not done
        done = r.Test() and done
    return done


def waitall(reqs, timeout: float | None = None, what: str | None = None) -> None:
    """Complete ``reqs`` (MPI requests and/or :class:`DeferredSend`), polling with a capped
    backoff (no busy core when ranks outnumber cores); :class:`pyfw.errors.CommTimeout`
    after ``timeout`` seconds, saying ``what`` was not complete."""
    if timeout is None and not any(isinstance(r, DeferredSend) for r in reqs):
        if reqs:  # an empty list (common in the collective algorithms) costs no MPI call
            MPI.Request.Waitall(reqs)
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    backoff = Backoff(1e-6, 2e-4)
    while not testall(reqs):
        if deadline is not None and time.monotonic() > deadline:
            what = what or f"{sum(not r.Test() for r in reqs)} of {len(reqs)} request(s)"
            raise CommTimeout(f"{what} not complete within {timeout:g} s")
        backoff.sleep()


_FINALIZE_BOUND = False


def bound_finalize(grace: float | None = None) -> None:
    """After a process failure, do not let ``MPI_Finalize`` wait for ever.

    Under ULFM, Open MPI 5's finalize can block on the dead process (a PMIx fence that
    includes it; open-mpi/ompi#11404, seen here in about 1 run in 10-30 after a worker was
    SIGKILLed). Call this on every surviving rank once a failure is known: at interpreter
    exit (before mpi4py's ``MPI_Finalize``) it arms ``SIGALRM`` with its default action, so a
    finalize still stuck after ``grace`` seconds (``$PYFW_FINALIZE_GRACE``, default 15) ends
    the process. Results must already be written -- they are, since this runs at exit.
    """
    global _FINALIZE_BOUND
    if _FINALIZE_BOUND or not hasattr(signal, "alarm"):
        return
    _FINALIZE_BOUND = True
    if grace is None:
        grace = float(os.environ.get("PYFW_FINALIZE_GRACE", "15"))
    seconds = max(1, int(math.ceil(grace)))

    def arm():
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(seconds)

    atexit.register(arm)


def _shaper_from_env(rank: int, size: int):
    """The job's link emulation (:func:`pyfw.linkemu.shaper_from_env`), imported only when
    ``$PYFW_EMULATE_LINKS`` asks for it (it needs numpy, which a farm does not)."""
    if not os.environ.get("PYFW_EMULATE_LINKS"):
        return None
    from .linkemu import shaper_from_env
    return shaper_from_env(rank, size)


def world() -> Comm:
    """A :class:`Comm` over ``MPI.COMM_WORLD`` (for entry points only)."""
    return Comm(MPI.COMM_WORLD)
