"""What runs on the workers for :mod:`pyfw.futures`, and how their errors come back (private).

A submitted call travels pre-pickled (``bytes``), so that an argument that fails to pickle
fails its own future on the master and one that fails to unpickle raises inside its own
task on the worker, with the task's own exception type in both cases (as in mpi4py).
``map`` sends the user's function once per chunk and the items bare.

An executor's worker-side setup (``initializer``, ``path``, ``wdir``, ``env``, ``globals``)
runs once per worker before that executor's first task there; a failure is remembered and
fails every later task of that executor on that worker with :class:`InitializerFailed`,
which the master turns into ``BrokenExecutor``.
"""
from __future__ import annotations

import os
import pickle
import sys
import traceback

from ..errors import InitializerFailed, TaskError

__all__ = ["Setup", "SubmitCall", "MapCall", "user_exception", "is_initializer_failure"]

_done_setups: dict = {}   # executor id -> None (ran fine) or the traceback text of its failure


class Setup:
    """The worker-side preparation of one executor (picklable; runs once per worker)."""

    __slots__ = ("exid", "initializer", "initargs", "path", "wdir", "env", "globals")

    def __init__(self, exid, initializer=None, initargs=(), path=None, wdir=None, env=None,
                 globals=None):
        self.exid, self.initializer, self.initargs = exid, initializer, tuple(initargs)
        self.path, self.wdir, self.env, self.globals = path, wdir, env, globals

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)

    @property
    def needed(self) -> bool:
        """True if a worker has anything to set up before its first task."""
        return any(v is not None for v in (self.initializer, self.path, self.wdir, self.env,
                                           self.globals))

    def ensure(self) -> None:
        """Run once on this worker; raise InitializerFailed if it failed (now or before)."""
        if self.exid not in _done_setups:
            try:
                self._apply()
            except BaseException as exc:  # mpi4py treats any initializer exception as fatal
                _done_setups[self.exid] = "".join(traceback.format_exception(exc))
            else:
                _done_setups[self.exid] = None
        failed = _done_setups[self.exid]
        if failed is not None:
            raise InitializerFailed(f"the executor's initializer failed on this worker:\n"
                                    f"{failed}")

    def _apply(self) -> None:
        if self.path:
            sys.path.extend(self.path)
        if self.wdir is not None:
            os.chdir(self.wdir)
        if self.env:
            os.environ.update({str(k): str(v) for k, v in self.env.items()})
        if self.globals:
            vars(sys.modules["__main__"]).update(self.globals)
        if self.initializer is not None:
            self.initializer(*self.initargs)


class SubmitCall:
    """Worker side of ``submit``: unpickle ``(fn, args, kwargs)``, call it, and pickle the
    result here (a result that cannot be pickled raises its own error in the task; the
    master unpickles it for its future alone)."""

    __slots__ = ("setup",)

    def __init__(self, setup: Setup | None):
        self.setup = setup

    def __getstate__(self):
        return (self.setup,)

    def __setstate__(self, state):
        (self.setup,) = state

    def __call__(self, *call):
        """``(blob)``, or ``(comm, blob)`` for a call on several ranks: ``fn(comm, ...)``."""
        if self.setup is not None:
            self.setup.ensure()
        fn, args, kwargs = pickle.loads(call[-1])
        if len(call) == 2:
            args = (call[0], *args)
        return pickle.dumps(fn(*args, **kwargs), pickle.HIGHEST_PROTOCOL)


class MapCall:
    """Worker side of ``map`` when the executor has a setup (else the bare function is sent)."""

    __slots__ = ("setup", "fn")

    def __init__(self, setup: Setup, fn):
        self.setup, self.fn = setup, fn

    def __getstate__(self):
        return self.setup, self.fn

    def __setstate__(self, state):
        self.setup, self.fn = state

    def __call__(self, *args):
        self.setup.ensure()
        return self.fn(*args)


def is_initializer_failure(err) -> bool:
    """True if ``err`` is a worker's report that its initializer failed."""
    return isinstance(err, TaskError) and isinstance(err.exception, InitializerFailed)


def user_exception(err: BaseException) -> BaseException:
    """The exception a user of mpi4py.futures would see for a failed task: the task's own
    exception with the remote traceback as ``__cause__``, and a note saying where it ran.
    A :class:`pyfw.TaskError` stays as it is only when the original exception could not be
    pickled (or the task was quarantined after killing workers)."""
    if not isinstance(err, TaskError) or err.exception is None:
        return err
    exc = err.exception
    exc.__cause__ = err.__cause__
    exc.pyfw_task = {"index": err.index, "rank": err.rank, "host": err.host,
                     "attempts": err.attempts}
    if hasattr(exc, "add_note"):
        exc.add_note(f"(pyfw: raised on worker rank {err.rank} ({err.host}), attempt "
                     f"{err.attempts})")
    return exc
