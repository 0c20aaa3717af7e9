"""Tasks and functions used by the farm tests (importable by workers, hence a module)."""
import os
import time

from mpi4py import MPI

from pyfw import Task


def square(x):
    return x * x


def add(x, y):
    return x + y


def where(x):
    """(x, rank that ran it)."""
    return x, MPI.COMM_WORLD.Get_rank()


def fail_on_seven(x):
    if x == 7:
        raise ValueError(f"seven is not allowed (got {x})")
    return x


def fail_on_multiples(x, of=997):
    """x, except that multiples of ``of`` (0 included) raise: failures inside sub-batches of
    microsecond tasks."""
    if x % of == 0:
        raise ValueError(f"{x} is a multiple of {of}")
    return x


def nap_where(x, seconds=0.05):
    """Sleep, then say which rank ran task ``x``."""
    time.sleep(seconds)
    return MPI.COMM_WORLD.Get_rank()


def sleepy(seconds):
    time.sleep(seconds)
    return seconds


def unpicklable_result(x):
    return lambda: x


class Square(Task):
    def __init__(self, x):
        self.x = x

    def run(self, ctx):
        return self.x * self.x


class Holds(Task):
    """A task holding something unpicklable."""

    def __init__(self):
        self.fn = lambda: 1

    def run(self, ctx):
        return 1


class Spin(Task):
    """Runs up to ``seconds`` in small slices, stopping early when cancelled."""

    def __init__(self, i, seconds):
        self.i, self.seconds = i, seconds

    def run(self, ctx):
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            if ctx.cancelled():
                return ("cancelled", self.i)
            time.sleep(0.001)
        return ("done", self.i)


def _load_table(counter_key):
    return {"loaded_by": MPI.COMM_WORLD.Get_rank(), "pid": os.getpid(), "t": time.time()}


class UsesTable(Task):
    def __init__(self, i):
        self.i = i

    def run(self, ctx):
        table = ctx.resource("table", _load_table, "x")
        ctx.state["loads"] = ctx.state.get("loads", 0) + (1 if "seen" not in ctx.state else 0)
        ctx.state["seen"] = True
        return (self.i, ctx.rank, id(table), table["pid"])


def setup_marker(ctx, value):
    ctx.state["marker"] = value


class ReadsMarker(Task):
    def run(self, ctx):
        return ctx.state.get("marker")


def failing_setup(ctx):
    raise RuntimeError("table file missing: /nonexistent/table.bin")


class StraggleOnRank(Task):
    """Slow (``slow`` s) on ``rank`` the first time, fast elsewhere."""

    def __init__(self, i, rank, slow):
        self.i, self.rank, self.slow = i, rank, slow

    def run(self, ctx):
        if ctx.rank == self.rank:
            end = time.perf_counter() + self.slow
            while time.perf_counter() < end and not ctx.cancelled():
                time.sleep(0.002)
        return (self.i, ctx.rank)


def init_counter(value):
    global _INIT_VALUE
    _INIT_VALUE = value


def read_init(_):
    return _INIT_VALUE


def bad_init():
    raise OSError("cannot open /nonexistent/weights.bin")


def cpu_seconds(_):
    """(rank, (CPU time this worker process has used so far, its monotonic clock))."""
    return MPI.COMM_WORLD.Get_rank(), (time.process_time(), time.monotonic())
