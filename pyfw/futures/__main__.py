"""``pyfw-run -n N -- python -m pyfw.futures (script.py | -m module | -c code) [args]``:
rank 0 runs the program; the other ranks serve every executor it creates.

As with ``python -m mpi4py.futures``: the program sees ``sys.argv`` as if run directly
(``[script.py, *args]``, ``[module path, *args]`` or ``['-c', *args]``); workers keep
their own command line and import the main script or module as ``__worker__`` (also
registered as ``__main__`` and ``__mp_main__``), so functions defined there can be
submitted, while its ``if __name__ == '__main__':`` block does not run on them.
"""
import os
import runpy
import sys
import traceback
import types

from mpi4py import MPI

from ..farm import Farm
from . import _context
from ._context import WORKER_RUN_NAME
from ._pool import Pool, close_own_pools


def _usage(error=None) -> int:
    python = os.path.basename(sys.executable)
    text = (f"usage: {python} -m pyfw.futures <pyfile> [arg] ...\n"
            f"   or: {python} -m pyfw.futures -m <module> [arg] ...\n"
            f"   or: {python} -m pyfw.futures -c <string> [arg] ...")
    if error:
        print(error, file=sys.stderr)
        print(text, file=sys.stderr)
        return 1
    print(text)
    return 0


def _check(argv):
    """None if the command line can run, else the exit status after printing why."""
    if not argv:
        return _usage("No path specified for execution")
    if argv[0] in ("-h", "--help"):
        return _usage()
    if argv[0] in ("-m", "-c"):
        return _usage(f"Argument expected for option: {argv[0]}") if len(argv) < 2 else None
    if argv[0].startswith("-"):
        return _usage(f"Unknown option: {argv[0]}")
    if not os.path.exists(argv[0]):
        return _usage(f"Path does not exist: {argv[0]}")
    return None


def _import_main_on_worker(argv) -> None:
    """Import the user's program as ``__worker__`` and let ``__main__`` refer to it."""
    module = types.ModuleType(WORKER_RUN_NAME)
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = sys.modules[WORKER_RUN_NAME] = module
    _context.importing_main = True
    try:
        if argv[0] == "-m":
            namespace = runpy.run_module(argv[1], run_name=WORKER_RUN_NAME)
        else:
            sys.path[0] = os.path.realpath(os.path.dirname(argv[0]))
            namespace = runpy.run_path(argv[0], run_name=WORKER_RUN_NAME)
    except BaseException:
        sys.modules["__main__"] = saved
        raise
    finally:
        _context.importing_main = False
    module.__dict__.update(namespace)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _run_program(argv) -> None:
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        sys.argv = ["-c"] + argv[2:]
        code = compile(argv[1], "<string>", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.realpath(os.path.dirname(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


def _serve_program(farm, argv) -> int:
    """Run the program on the master with a shared pool; returns its exit status."""
    pool = Pool(farm, own=False)
    _context.set_shared_pool(pool)
    status = 0
    try:
        _run_program(argv)
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            raise
    finally:
        # executors with a farm of their own over some of these workers (max_workers)
        # finish first: their workers are a task of the shared farm until then
        close_own_pools()
        _context.set_shared_pool(None)
        pool.close(wait=True)   # waits for every executor's work, as mpi4py does
    return status


def main(argv=None) -> int:
    """``python -m pyfw.futures``: run a script or module with rank 0 as the client and the
    other ranks as workers (as ``python -m mpi4py.futures``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    status = _check(argv)   # the same verdict on every rank: none is left in a collective
    if status is not None:
        return status
    world = MPI.COMM_WORLD
    if world.Get_rank() != 0 and argv[0] != "-c":
        try:
            _import_main_on_worker(argv)
        except BaseException:
            # the master is already waiting for this rank in the farm's first collective:
            # end the whole job (as `python -m mpi4py` does) instead of leaving it stuck
            traceback.print_exc()
            sys.stderr.flush()
            world.Abort(1)
    # the program's executors share this farm: its layout comes from the environment
    farm = Farm(world, hierarchy=os.environ.get("PYFW_FARM_HIERARCHY", "flat"))
    workers = _context.split_workers(farm)
    if not farm.is_master:
        with _context.serving_on(), _context.comm_workers_on(workers):
            farm.__enter__()
        return 0
    with farm:
        return _serve_program(farm, argv)


if __name__ == "__main__":
    sys.exit(main())
