"""The exceptions pyfw users catch, in one place."""
from __future__ import annotations

__all__ = [
    "PyfwError", "RemoteTraceback", "TaskError", "TaskSerializationError", "TaskQuarantined",
    "FarmBroken", "PeerFailure", "CommTimeout", "ConfigurationError", "InitializerFailed",
    "RemoteError", "JournalError", "TestBedBusy",
]


class PyfwError(Exception):
    """Base class of every error pyfw raises on purpose."""


class ConfigurationError(PyfwError, ValueError):
    """An invalid option (unknown policy name, bad rank count, ...), raised on every rank."""


class RemoteTraceback(PyfwError):
    """The formatted traceback of an exception raised on another rank (used as ``__cause__``,
    never raised itself)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class TaskError(PyfwError):
    """A task raised on a worker. ``__cause__`` holds the remote traceback.

    Attributes: ``index`` (position of the task in its round), ``rank`` and ``host`` of the
    worker, ``exc_type`` (name of the remote exception class), ``exception`` (the remote
    exception object when it could be pickled, else None).
    """

    def __init__(self, index, rank, host, exc_type, message, exception=None, attempts=1):
        super().__init__(f"task {index} failed on rank {rank} ({host}) after "
                         f"{attempts} attempt(s): {exc_type}: {message}")
        self.index, self.rank, self.host = index, rank, host
        self.exc_type, self.message, self.exception, self.attempts = (
            exc_type, message, exception, attempts)

    def __reduce__(self):
        return (type(self), (self.index, self.rank, self.host, self.exc_type, self.message,
                             self.exception, self.attempts))


class TaskQuarantined(TaskError):
    """A task failed (raised, timed out, or killed its worker) too many times and was set aside."""


class TaskSerializationError(PyfwError, TypeError):
    """A task, or its result, cannot be pickled; raised on the master before anything is sent."""


class FarmBroken(PyfwError):
    """The runtime cannot go on (every worker lost, or it was shut down); pending work fails."""


class PeerFailure(PyfwError):
    """One or more ranks died (detected through ULFM). ``ranks`` lists them."""

    def __init__(self, ranks):
        self.ranks = sorted(ranks)
        super().__init__(f"rank(s) {self.ranks} failed")


class CommTimeout(PyfwError, TimeoutError):
    """A receive did not complete before its deadline (a peer is slow or gone)."""


class InitializerFailed(PyfwError):
    """An executor's initializer raised on a worker (``pyfw.futures`` turns it into
    ``BrokenExecutor``, as mpi4py does; the message holds the worker's traceback)."""


class RemoteError(PyfwError):
    """A collective operation failed on another rank (:mod:`pyfw.domain`); the message names
    the rank and the error."""


class JournalError(PyfwError):
    """A farm's result journal file exists but cannot be read (named in the message)."""


class TestBedBusy(PyfwError, RuntimeError):
    """``up`` or ``down`` of a test bed that another process is using (the message names it)."""

    __test__ = False   # not a pytest class
