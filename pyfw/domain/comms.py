"""Communicators for code that runs on every rank of a domain (public API).

* :func:`as_comm`: a :class:`pyfw.comm.Comm` from an mpi4py communicator (or a pyfw one);
* :func:`agree`: collective: raise on every rank when any rank failed, so no rank goes on
  to a message the failed one will never send.

Used by :mod:`pyfw.domain` itself and by applications built on it (``apps.knee``).
"""
from __future__ import annotations

import traceback

from mpi4py import MPI

from ..comm import Comm
from ..errors import ConfigurationError, RemoteError

__all__ = ["as_comm", "agree"]


def as_comm(comm) -> Comm:
    """A :class:`pyfw.comm.Comm` for ``comm`` (a pyfw Comm is returned as it is)."""
    if isinstance(comm, Comm):
        return comm
    if comm is None:
        raise ConfigurationError("pass a communicator (mpi4py or pyfw.comm.Comm)")
    if isinstance(comm, MPI.Comm):
        return Comm(comm)
    raise ConfigurationError(f"not a communicator: {comm!r}")


def agree(comm: Comm, exc: BaseException | None, what: str = "operation") -> None:
    """Collective: raise on every rank if ``exc`` is set on any rank.

    The rank that failed re-raises its own exception; the others raise :class:`RemoteError`
    (a :class:`ConfigurationError` if the original was one) naming the first failing rank.
    """
    msg = None if exc is None else (type(exc).__name__, str(exc),
                                    isinstance(exc, ConfigurationError),
                                    "".join(traceback.format_exception_only(type(exc), exc)))
    verdicts = comm.mpi.allgather(msg)
    bad = [(r, v) for r, v in enumerate(verdicts) if v is not None]
    if not bad:
        return
    if exc is not None:
        raise exc
    r, (name, text, is_config, _) = bad[0]
    err = f"{what} failed on rank {r}: {name}: {text}"
    if is_config:
        raise ConfigurationError(err)
    raise RemoteError(err)
