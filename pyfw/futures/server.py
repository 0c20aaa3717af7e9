"""A spawned worker of :mod:`pyfw.futures` (run as ``python -m pyfw.futures.server`` by
``MPI_Comm_spawn``; see :mod:`pyfw.futures._spawn` for the parent's side).

It takes what the parent sends (the main module to import as ``__worker__``, ``path``,
``wdir``, ``env``, ``globals``), merges the intercommunicator (the parent is rank 0) and
serves the parent's farm like a launched rank, until the parent closes it. A watchdog
thread ends this process if the parent dies without closing (SIGKILL, a crash), so a
worker is never orphaned.
"""
from __future__ import annotations

import os
import runpy
import socket
import sys
import threading
import time
import types

from mpi4py import MPI

from . import _context
from ._context import WORKER_RUN_NAME

__all__ = ["main", "serve_parent"]


def _import_main(mod_name, mod_path, init_globals) -> None:
    """Import the parent's main script or module as ``__worker__`` (also registered as
    ``__main__``), so that functions defined there can be called here, while its
    ``if __name__ == '__main__':`` block does not run (as mpi4py.futures does)."""
    module = types.ModuleType(WORKER_RUN_NAME)
    if init_globals:
        module.__dict__.update(init_globals)
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = sys.modules[WORKER_RUN_NAME] = module
    if not (mod_name or mod_path):
        return
    _context.importing_main = True
    try:
        if mod_name and not mod_name.endswith("__main__"):
            namespace = runpy.run_module(mod_name, init_globals, run_name=WORKER_RUN_NAME)
        elif mod_path and os.path.exists(mod_path):
            if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated):
                sys.path[0] = os.path.realpath(os.path.dirname(mod_path))
            namespace = runpy.run_path(mod_path, init_globals, run_name=WORKER_RUN_NAME)
        else:
            return
    except BaseException:
        sys.modules["__main__"] = saved
        raise
    finally:
        _context.importing_main = False
    module.__dict__.update(namespace)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _apply(sync: dict) -> None:
    sys.path.extend(p for p in sync.get("sys_path", ()) if p not in sys.path)
    if sync.get("path"):
        sys.path.extend(sync["path"])
    if sync.get("wdir") is not None:
        os.chdir(sync["wdir"])
    if sync.get("env"):
        os.environ.update({str(k): str(v) for k, v in sync["env"].items()})
    main = sync.get("main") or {}
    _import_main(main.get("mod_name"), main.get("mod_path"), sync.get("globals"))


def _parent_gone(host: str, pid: int) -> threading.Event:
    """A daemon thread that ends this process when the parent process is gone.

    On the parent's host it watches the pid (a pidfd where the kernel has one, else a
    poll each 0.5 s). Elsewhere Open MPI's daemons end the job when the parent's side
    goes (its PRRTE is tied to the parent). ``stopping`` is set at a normal end: the
    parent may then exit before this worker does, which is no reason to complain."""
    stopping = threading.Event()
    if host != socket.gethostname():
        return stopping

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def watch() -> None:
        fd = None
        if hasattr(os, "pidfd_open"):
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                fd = None
        if fd is not None:
            import select
            select.select([fd], [], [])   # readable once the process has ended
        else:
            while alive():
                time.sleep(0.5)
        if stopping.wait(2.0):   # the parent ended normally after closing: leave quietly
            return
        print(f"pyfw.futures worker {os.getpid()}: the parent process {pid} died without "
              f"closing its executor; exiting", file=sys.stderr, flush=True)
        os._exit(1)

    threading.Thread(target=watch, name="pyfw-futures-parent-watchdog", daemon=True).start()
    return stopping


class _Failed:
    """The farm's worker setup on a worker whose preparation failed: raises that error,
    so that the parent's executor breaks with it (as mpi4py's does) instead of hanging."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def __call__(self, ctx):
        raise self.exc


def serve_parent(parent, sync: dict, setup=None) -> None:
    """Merge the intercommunicator ``parent`` (its one remote process, the program, becomes
    rank 0) and serve the program's farm until it closes; then free and disconnect."""
    from ..farm import Farm
    from ._spawn import release, say_last
    merged = parent.Merge(high=True)
    farm = Farm(merged, master=0, setup=setup, **sync.get("farm", {}))
    workers = _context.split_workers(farm)
    try:
        with _context.serving_on(), _context.comm_workers_on(workers):
            farm.__enter__()
        say_last(farm.comm.mpi)   # the program drains up to it (see _spawn.drain_workers)
    finally:
        release(farm.comm.mpi, merged, parent)


def main() -> int:
    """Serve the parent's executor; returns the exit status."""
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        print("pyfw.futures.server is started by a pyfw.futures executor (MPI_Comm_spawn), "
              "not by hand", file=sys.stderr)
        return 2
    from ._spawn import greet_parent
    sync = parent.bcast(None, root=0)
    greet_parent(parent)   # before any other traffic: see _spawn.GREETINGS
    stopping = _parent_gone(*sync["parent"])
    setup = None
    try:
        _apply(sync)
    except BaseException as exc:   # the farm still forms; its first round fails with this
        setup = _Failed(exc)
    try:
        serve_parent(parent, sync, setup)
    finally:
        stopping.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
