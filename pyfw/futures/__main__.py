"""``mpiexec -n N python -m pyfw.futures script.py [args]`` (or ``-m module``, ``-c code``):
rank 0 runs the program; the other ranks serve every :class:`pyfw.futures.Executor` it makes.
"""
import os
import runpy
import sys
import types

from mpi4py import MPI

from .. import futures
from ..farm import Farm

USAGE = "usage: python -m pyfw.futures (script.py | -m module | -c code) [args ...]"


def _import_main_on_worker(argv) -> None:
    """Make functions defined in the user's main program unpicklable-by-name on workers:
    run it as ``__mp_main__`` (its ``if __name__ == "__main__":`` block does not run) and
    let ``__main__`` refer to it, as multiprocessing's spawn start method does."""
    futures._importing_main = True
    try:
        if argv[0] == "-m":
            namespace = runpy.run_module(argv[1], run_name="__mp_main__")
        else:
            namespace = runpy.run_path(argv[0], run_name="__mp_main__")
    finally:
        futures._importing_main = False
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(namespace)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0 if argv else 2
    if argv[0] in ("-m", "-c") and len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    script = None if argv[0] in ("-m", "-c") else argv[0]
    if script is not None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    if MPI.COMM_WORLD.Get_rank() != 0 and argv[0] != "-c":
        _import_main_on_worker(argv)
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            futures._shared_farm = farm
            try:
                if argv[0] == "-m":
                    sys.argv = argv[1:]
                    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
                elif argv[0] == "-c":
                    sys.argv = ["-c"] + argv[2:]
                    exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
                else:
                    sys.argv = argv
                    runpy.run_path(argv[0], run_name="__main__")
            finally:
                for ex in list(futures._executors):
                    ex.shutdown(wait=True)
                futures._shared_farm = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
