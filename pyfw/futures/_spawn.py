"""Spawn mode, parent side (private): start an executor's workers with ``MPI_Comm_spawn``
and farm over them.

When a program has no worker ranks (``python script.py``, ``mpiexec -n 1``), each executor
spawns its own workers, as ``mpi4py.futures`` does, running :mod:`pyfw.futures.server`.
The parent sends them what to prepare (the main module to import, ``path``, ``wdir``,
``env``, ``globals``), merges the intercommunicator so that it is rank 0 of an
intracommunicator, and runs an ordinary :class:`pyfw.farm.Farm` over it: adaptive chunks,
pipelining and uneven workers as for launched ranks. :func:`close` stops the farm and
disconnects; workers whose parent dies exit by themselves (see the server's watchdog).
"""
from __future__ import annotations

import os
import socket
import sys
import time
import warnings

from mpi4py import MPI

from ..farm import Farm
from . import _context
from ._context import WORKER_RUN_NAME

__all__ = ["max_workers_default", "python_flags", "spawn", "SpawnedFarm", "SpawnError",
           "SERVER_MODULE", "release", "greet_workers", "greet_parent", "say_last",
           "drain_workers"]

SERVER_MODULE = "pyfw.futures.server"

#: sys.flags that a spawned interpreter inherits (as mpi4py.futures passes them on)
_FLAG_OPTIONS = {"debug": "d", "optimize": "O", "dont_write_bytecode": "B",
                 "no_user_site": "s", "no_site": "S", "ignore_environment": "E",
                 "verbose": "v", "bytes_warning": "b", "quiet": "q",
                 "hash_randomization": "R", "isolated": "I", "safe_path": "P"}


class SpawnError(RuntimeError):
    """The workers could not be spawned; the message names the cause and the fix."""


def max_workers_default() -> int:
    """mpi4py's rule: ``$MPI4PY_FUTURES_MAX_WORKERS`` (or the deprecated
    ``$MPI4PY_MAX_WORKERS``), else the universe size minus the world size (at least 1),
    else 1."""
    for name in ("MPI4PY_FUTURES_MAX_WORKERS", "MPI4PY_MAX_WORKERS"):
        value = os.environ.get(name)
        if value is not None:
            if name == "MPI4PY_MAX_WORKERS":
                warnings.warn("environment variable MPI4PY_MAX_WORKERS is deprecated, use "
                              "MPI4PY_FUTURES_MAX_WORKERS", DeprecationWarning, stacklevel=3)
            return int(value)
    universe = MPI.COMM_WORLD.Get_attr(MPI.UNIVERSE_SIZE)
    if universe is not None:
        return max(universe - MPI.COMM_WORLD.Get_size(), 1)
    return 1


def python_flags() -> list[str]:
    """This interpreter's command-line flags, for the spawned ones (as mpi4py does)."""
    args = []
    for flag, opt in _FLAG_OPTIONS.items():
        value = getattr(sys.flags, flag, 0)
        if value > 0:
            args.append("-" + opt * int(value))
    args += ["-W" + opt for opt in sys.warnoptions]
    for opt, value in getattr(sys, "_xoptions", {}).items():
        args.append("-X" + opt if value is True else f"-X{opt}={value}")
    return args


def use_pkl5_option(value):
    """Validate ``use_pkl5`` / ``$MPI4PY_FUTURES_USE_PKL5`` as mpi4py does (a bad value of
    the variable warns). pyfw's farm has its own transport, so the value is not used."""
    if value is None:
        env = os.environ.get("MPI4PY_FUTURES_USE_PKL5")
        if env is not None:
            low = env.lower()
            if low in ("false", "no", "off", "n", "0"):
                return False
            if low in ("true", "yes", "on", "y", "1"):
                return True
            warnings.warn(f"environment variable MPI4PY_FUTURES_USE_PKL5: unexpected value "
                          f"{env!r}", RuntimeWarning, stacklevel=2)
    return bool(value)


def _allow_root() -> None:
    """Open MPI refuses to start as root unless told; a singleton's spawn starts its own
    PRRTE, which reads the PRTE_ pair (the OMPI_ pair alone is not enough)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        for prefix in ("OMPI", "PRTE"):
            os.environ.setdefault(f"{prefix}_ALLOW_RUN_AS_ROOT", "1")
            os.environ.setdefault(f"{prefix}_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


def _main_module(import_main: bool) -> dict:
    """How the workers find the parent's main module (None entries: nothing to import)."""
    if not import_main:
        return {}
    main = sys.modules["__main__"]
    # objects of classes defined there come back named after the workers' module
    sys.modules.setdefault(WORKER_RUN_NAME, main)
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    path = getattr(main, "__file__", None)
    return {"mod_name": name, "mod_path": path}


def _fix_hint(n: int) -> str:
    return (f"fix: launch the program with its workers instead, `pyfw-run -n {n + 1} -- "
            f"python -m pyfw.futures script.py`, or pass in_process=True to run the tasks in "
            f"this process on purpose")


def spawn(max_workers: int, python_exe=None, python_args=None, mpi_info=None):
    """``MPI_Comm_spawn`` ``max_workers`` servers; the intercommunicator to them."""
    if _context.importing_main:   # as mpi4py's recursive-spawn check, without the abort
        raise SpawnError("a worker importing the main program tried to spawn workers: put "
                         "the code that creates executors under "
                         "`if __name__ == '__main__':`")
    _allow_root()
    exe = sys.executable if python_exe is None else os.fspath(python_exe)
    args = python_flags() + list(python_args or []) + ["-m", SERVER_MODULE]
    # more workers than slots must still start (a singleton's own PRRTE does; mpiexec's
    # does not unless told): pyfw's idle workers sleep, they do not spin
    keys = {"map_by": "slot:OVERSUBSCRIBE"}
    if mpi_info:
        keys.update(dict(mpi_info.items() if hasattr(mpi_info, "items") else mpi_info))
    info = MPI.Info.Create()
    try:
        for k, v in keys.items():
            info.Set(str(k), str(v))
        return MPI.COMM_SELF.Spawn(exe, args, max_workers, info)
    except MPI.Exception as exc:
        raise SpawnError(
            f"pyfw.futures could not spawn {max_workers} worker(s) with MPI_Comm_spawn "
            f"({exc.Get_error_string()}; Open MPI printed the details above, if any). "
            f"Spawning needs Open MPI's runtime (prte beside mpiexec) and, inside a batch "
            f"job, the allocation's slots; {_fix_hint(max_workers)}") from exc
    finally:
        info.Free()


#: tiny messages each spawned worker sends its parent before any other traffic between
#: them: one per TCP interface at least (Open MPI's ob1 sends small messages over its TCP
#: modules in turn), so that every parent-worker TCP connection is dialled by the worker
#: alone. Open MPI 5.0's TCP BTL mishandles two peers dialling each other at once (both do
#: in a collective's exchange): the connection it drops is adopted after a disconnect and
#: its end-of-file aborts a healthy process, "An error occurred in Socket closed ... on a
#: NULL communicator" (open-mpi/ompi#14403, fixed after 5.0.x). mpi4py's spawn suite hung
#: on it here, the parent stuck in that abort.
GREETINGS = 16
_GREETING_TAG = 77


def greet_workers(intercomm) -> None:
    """Parent side: take every spawned worker's greetings, in rank order, before sending
    them anything (after the bcast, which only the parent sends)."""
    for rank in range(intercomm.Get_remote_size()):
        for _ in range(GREETINGS):
            intercomm.recv(source=rank, tag=_GREETING_TAG)


def greet_parent(parent) -> None:
    """Worker side of :func:`greet_workers`."""
    for _ in range(GREETINGS):
        parent.send(None, dest=0, tag=_GREETING_TAG)


#: the last message a worker sends on its farm's communicator (see :func:`drain_workers`)
_LAST_TAG = 32001


def say_last(comm) -> None:
    """Worker side, once it has served: the last message on the farm's communicator."""
    comm.send(None, dest=0, tag=_LAST_TAG)


def drain_workers(comm, timeout: float = 10.0) -> None:
    """Parent side, once the farm is closed: take in every message the workers sent on the
    farm's communicator ``comm``, up to each one's last (:func:`say_last`).

    The farm's stop does not wait for results still under way. Open MPI keeps a message
    that arrives for a freed communicator and hands it to the next communicator given the
    same context id: the next executor's farm then read it as its own (seen in mpi4py's
    suite: a ZeroDivisionError of one test's ``map`` came back as the result of
    ``time.sleep`` in the next test's fresh workers). Messages on one communicator from
    one sender are not overtaken, so after each worker's last one nothing of theirs is
    left in flight."""
    left = set(range(comm.Get_size())) - {comm.Get_rank()}
    status = MPI.Status()
    deadline = time.monotonic() + timeout
    pause = 1e-4
    while left and time.monotonic() < deadline:
        if not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
            time.sleep(pause)
            pause = min(2 * pause, 1e-2)
            continue
        source, tag = status.Get_source(), status.Get_tag()
        buf = bytearray(max(status.Get_count(MPI.BYTE), 1))
        comm.Recv([buf, MPI.BYTE], source=source, tag=tag)
        if tag == _LAST_TAG:
            left.discard(source)


class SpawnedFarm:
    """The farm of one executor's spawned workers, and how to tear it down."""

    def __init__(self, max_workers: int, options: dict, farm_options: dict):
        self.intercomm = spawn(max_workers, options.get("python_exe"),
                               options.get("python_args"), options.get("mpi_info"))
        sync = {"main": _main_module(options.get("main", True) is not False),
                "path": options.get("path"), "wdir": options.get("wdir"),
                "env": options.get("env"), "globals": options.get("globals"),
                "parent": (socket.gethostname(), os.getpid()),
                # what the parent can import, the workers can (pytest's rootdir, a path
                # set at run time): appended after their own entries, same interpreter only
                "sys_path": list(sys.path) if options.get("python_exe") is None else [],
                "farm": {k: v for k, v in farm_options.items() if k == "hierarchy"}}
        self.intercomm.bcast(sync, root=MPI.ROOT)
        greet_workers(self.intercomm)
        self.merged = self.intercomm.Merge(high=False)   # the parent is rank 0
        self.farm = Farm(self.merged, master=0, **farm_options)
        self.workers = _context.split_workers(self.farm)   # collective: COMM_NULL here

    def close(self, reason=None) -> None:
        """Stop the farm (the workers leave) and disconnect from them."""
        try:
            self.farm.close(reason)
            drain_workers(self.farm.comm.mpi)
        finally:
            release(self.farm.comm.mpi, self.merged, self.intercomm)


def release(*comms) -> None:
    """Free the communicators that span the parent and its workers, and disconnect the
    intercommunicator (the last one): Open MPI's finalize crashed in its dynamic-process
    clean-up when a spawned job had been disconnected but communicators derived from it
    were left."""
    *derived, intercomm = comms
    for comm in derived:
        try:
            if comm != MPI.COMM_NULL:
                comm.Free()
        except MPI.Exception:
            pass
    try:
        intercomm.Disconnect()
    except MPI.Exception:
        pass
