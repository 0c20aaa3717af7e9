"""The command line's start-up: what the solver's own process skips before its first node.

Imported by the package before numpy and numba, so it imports neither. Only where this
process is the command line (:func:`is_command_line`) does :func:`begin` change anything:
a program that imports :mod:`apps.rubik` keeps its BLAS threads, its garbage collector and
scipy as they were. ``benchmarks/rubik_startup.py`` measures each item (docs/rubik.md,
"Start-up"):

* OpenBLAS on one thread: the solver calls no BLAS, but the OpenBLAS that numpy loads
  starts a thread per core at import, which spins for ~0.1 s (0.1 s of CPU per process on
  2 cores, more on bigger nodes).
* No garbage collection during the imports: their objects trigger 250 collections, two of
  them full, 0.07 s that free about 1,100 objects (the rest live as long as the process);
  :func:`end` then freezes them (later collections skip them) and turns collection back on.
* No scipy: at its first kernel load numba imports ``scipy.linalg`` (0.1 s of CPU with what
  it pulls in: numpy.testing, f2py, unittest, ...) only to probe for a BLAS, which it would
  use for ``np.correlate`` and ``np.convolve``; the solver's kernels use neither, so the
  probe is answered "no BLAS" (numba then uses its own loop). Other imports of scipy, and
  numba's ``np.linalg`` support, which probes again when it is compiled, are unaffected.
"""
import gc
import os
import sys

#: the module names that run the command line (``python -m NAME``)
MODULES = ("apps.rubik", "pyfw.apps.rubik")
#: the console script
SCRIPT = "pyfw-rubik"


def is_command_line(orig_argv=None, argv=None) -> bool:
    """Whether this process is the solver's command line (``python -m apps.rubik``,
    ``python -m pyfw.apps.rubik``, ``pyfw-rubik``), from the interpreter's own arguments:
    known before the package imports anything."""
    orig = list(getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
    if any(a == "-m" and b in MODULES for a, b in zip(orig, orig[1:])):
        return True
    argv = sys.argv if argv is None else argv
    return bool(argv) and os.path.basename(argv[0]) == SCRIPT


class SkipNumbaBlasProbe:
    """Meta-path finder: refuses scipy to numba's BLAS probe (``_check_blas`` in
    ``numba.np.arraymath``) and to nothing else, then removes itself."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".", 1)[0] != "scipy":
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if (frame.f_code.co_name == "_check_blas"
                    and frame.f_globals.get("__name__") == "numba.np.arraymath"):
                remove_blas_probe_skip()
                raise ImportError("apps.rubik's command line: no BLAS for numba's kernels")
            frame = frame.f_back
        return None


def remove_blas_probe_skip():
    """Take :class:`SkipNumbaBlasProbe` off the import path (if it is on it)."""
    if SkipNumbaBlasProbe in sys.meta_path:
        sys.meta_path.remove(SkipNumbaBlasProbe)


def begin() -> bool:
    """Before the package's imports, in the command line's process: OpenBLAS on one thread
    (unless the environment says otherwise), garbage collection paused, numba's BLAS probe
    answered without scipy. Returns whether it paused the collector (for :func:`end`)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "scipy" not in sys.modules and SkipNumbaBlasProbe not in sys.meta_path:
        sys.meta_path.insert(0, SkipNumbaBlasProbe)
    paused = gc.isenabled()
    gc.disable()
    return paused


def end(paused: bool) -> None:
    """After the package's imports: what they made is frozen (never collected: later
    collections skip it) and the collector runs again, if :func:`begin` paused it."""
    if paused:
        gc.freeze()
        gc.enable()
