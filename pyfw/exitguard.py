"""Turn a worker rank's unplanned exit into a death the MPI runtime sees.

Under ULFM (``pyfw-run --ft``) Open MPI notices a rank killed by a signal, or one that
exits with status 0 without finalizing, but not one that *exits* with a non-zero status:
PRRTE files that as "exited with non-zero status" and tells nobody, so the master never
learns of the death and ``MPI_Finalize`` waits for the rank for ever. Everything else that
ends a worker is such an exit: ``os._exit(9)``, ``exit(3)`` from native code, ``sys.exit``
escaping a task.

:func:`install`, called once when a worker starts serving, arms a guard until the
interpreter's normal exit: while armed, an ``os._exit`` or a C ``exit()`` prints one line
naming the rank and how it left, and then ends the process with ``SIGKILL``, a death that
ULFM reports to the master and that a job without ``--ft`` ends on at once.
:func:`leave` does the same on purpose (the worker calls it, through :func:`task_exit`,
for ``SystemExit`` or ``KeyboardInterrupt`` raised inside a task).

The C ``exit()`` hook is an ``__cxa_atexit`` entry (glibc passes it the exit status) under
a handle of our own: disarming runs and removes it with ``__cxa_finalize`` while Python is
still alive, so a normal exit never calls back into a finalized interpreter. Only on glibc;
elsewhere ``os._exit`` and :func:`leave` are still guarded. A C ``_exit(status)`` cannot be
caught in-process (status 0 is seen by ULFM all the same). Forked children are never
affected: every hook checks the pid it was installed in.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import sys

__all__ = ["install", "leave", "task_exit", "armed"]

_state: dict = {"pid": None, "rank": None, "host": None, "armed": False}
_real_exit = os._exit
_EXIT_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)   # glibc: fn(arg, status)
_hook_refs: list = []     # the C callback and our handle, alive as long as the process


def armed() -> bool:
    """True while this process's exit is guarded (a worker serving, before its normal
    exit)."""
    return _state["armed"] and _state["pid"] == os.getpid()


def install(rank: int | None = None, host: str | None = None) -> None:
    """Guard this process (a worker rank) until its normal interpreter exit. Idempotent.
    ``rank`` and ``host`` name it in the message; by default its rank in the job (from the
    launcher's environment) and this machine's name."""
    if armed():
        return
    if rank is None:
        rank = _launcher_rank()
    _state.update(pid=os.getpid(), rank=rank, host=host or socket.gethostname(), armed=True)
    os._exit = _guarded_os_exit
    _hook_native_exit()
    atexit.register(_disarm)


#: what the line of a rank that leaves says (a job without fault tolerance is ending then:
#: :func:`pyfw.launch.run` watches its stderr for it)
LEFT_MARK = "left the farm:"


def leave(reason: str) -> None:
    """Leave the farm now: print why, then end this process by ``SIGKILL`` (never
    returns). Pending output is flushed; results not yet sent are lost and run elsewhere."""
    rank, host = _state["rank"], _state["host"] or socket.gethostname()
    line = f"pyfw: rank {'?' if rank is None else rank} on {host} {LEFT_MARK} {reason}\n"
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- a closed or broken stream must not stop us
            pass
    try:
        os.write(2, line.encode(errors="replace"))
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
    _real_exit(137)    # not reached: SIGKILL cannot be caught


def task_exit(exc: BaseException, item=None, fn=None, star: bool = False) -> None:
    """A task raised ``SystemExit`` or ``KeyboardInterrupt``: on a guarded worker that is the
    rank leaving (:func:`leave`, never returns); elsewhere (serial farm, master) it returns
    and the caller re-raises. ``item`` (a Task, or ``fn``'s argument, a tuple with ``star``)
    names the task in the message."""
    if not armed():
        return
    what = f"{type(exc).__name__}({_exit_arg(exc)})"
    leave(f"{what} in task {_describe(item, fn, star)}")


# ------------------------------------------------------------------ internals
def _guarded_os_exit(status: int) -> None:
    if armed():
        leave(f"os._exit({status})")
    _real_exit(status)


def _native_exit(_arg, status: int) -> None:
    if armed():
        leave(f"exit({status}) from native code")


def _hook_native_exit() -> None:
    """Register :func:`_native_exit` to run inside C ``exit()`` (glibc only)."""
    if _hook_refs or not _is_glibc():
        return
    libc = ctypes.CDLL(None)
    handle = ctypes.create_string_buffer(1)     # its address names our entries
    hook = _EXIT_HOOK(_native_exit)
    libc.__cxa_atexit.argtypes = [_EXIT_HOOK, ctypes.c_void_p, ctypes.c_void_p]
    if libc.__cxa_atexit(hook, None, ctypes.addressof(handle)) == 0:
        _hook_refs.extend([libc, hook, handle])


def _disarm() -> None:
    """The normal interpreter exit: stop guarding, and run and drop the C exit hook now
    (it must not be called once the interpreter is gone)."""
    if _state["pid"] == os.getpid():
        _state["armed"] = False
        os._exit = _real_exit
    if _hook_refs:    # in a forked child too: it inherited the entry
        libc, _, handle = _hook_refs
        libc.__cxa_finalize.argtypes = [ctypes.c_void_p]
        libc.__cxa_finalize(ctypes.addressof(handle))


def _launcher_rank() -> int | None:
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _is_glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError, AttributeError):
        return False


def _exit_arg(exc: BaseException) -> str:
    return "" if not exc.args else ", ".join(repr(a) for a in exc.args)


def _describe(item, fn, star: bool, limit: int = 80) -> str:
    """``f(1, 2)`` for a function's task, the Task's repr otherwise; at most ``limit``
    characters."""
    try:
        if fn is None:
            text = repr(item)
        else:
            args = item if star else (item,)
            name = getattr(fn, "__qualname__", None) or type(fn).__name__
            text = f"{name}({', '.join(repr(a) for a in args)})"
    except Exception:  # noqa: BLE001 -- a broken __repr__ must not hide the exit
        text = f"<{type(item).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."
