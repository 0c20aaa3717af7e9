"""Where the knee studies' simulations run: one after another in this process, or as an
ensemble, farm tasks on groups of ranks of one MPI job (issue 38).

A study names the runs it needs (:class:`Run`: knee command-line options, or any picklable
callable ``request(comm) -> dict``) and asks for them all at once with :func:`prefetch`;
its analysis then reads each result with :func:`result`, in whatever order its code asks.
Launched as one process, ``prefetch`` does nothing and ``result`` runs each simulation when
it is first asked for, serially, as the studies always did (a :class:`Run` through the
CLI). Under ``pyfw-run -n N -- python -m apps.knee.studies NAME [--ranks K]`` rank 0 runs
the study and ``prefetch`` hands the runs to the other ranks as farm tasks of ``K`` ranks
each (:func:`apps.knee.run_scenario` on the group's communicator). A run is bitwise the
same on any number of ranks (``tests/test_knee_scenario.py``), so the study's figures do
not change, only its wall time.

Results are kept by request for the whole process: the runs are deterministic, and the
fits repeat configurations (a later sweep, or two studies with the same scenario). Treat
a result as read-only: identical requests share it.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from dataclasses import dataclass

__all__ = ["Run", "session", "set_ranks", "prefetch", "result", "farm_active"]

#: finished runs by request
_RESULTS: dict = {}
#: the farm of an ensemble session (None: runs happen in this process)
_FARM = None
#: ranks of each simulation's group
_RANKS = 1


@dataclass(frozen=True)
class Run:
    """One knee run from command-line options: the grid, the scenario's options and the
    minutes of cooling. Called with a communicator it runs through
    :func:`~apps.knee.run_scenario`; :meth:`direct` runs the CLI serially (the studies' own
    path, kept as it was). Both return ``summary.json``'s document."""
    grid: tuple
    extra: tuple
    minutes: float

    def options(self) -> list:
        return list(self.grid) + ["--minutes", str(self.minutes)] + list(self.extra)

    def __call__(self, comm) -> dict:
        from ..cli import params_of, parser
        from ..scenario import run_scenario
        a = parser().parse_args(self.options())
        return run_scenario(params_of(a), comm, minutes=a.minutes, steps=a.steps,
                            history_every=a.history_every)

    def direct(self) -> dict:
        from mpi4py import MPI

        from ..cli import main
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(self.options() + ["--no-plots", "--quiet", "--out", out],
                            comm=MPI.COMM_SELF)
            if code != 0:
                raise RuntimeError(f"knee run failed with {list(self.extra)}")
            with open(os.path.join(out, "summary.json")) as fh:
                return json.load(fh)


def _direct(request):
    """Run ``request`` in this process: its own serial path, or on ``MPI.COMM_SELF``."""
    if hasattr(request, "direct"):
        return request.direct()
    from mpi4py import MPI
    return request(MPI.COMM_SELF)


def run_request(comm, request):
    """A farm task: ``request`` on its group's communicator (every rank of the group)."""
    return request(comm)


def set_ranks(ranks: int) -> None:
    """Ranks of each simulation's group in this process's ensemble (``--ranks``)."""
    global _RANKS
    if ranks < 1:
        raise ValueError(f"--ranks must be >= 1, got {ranks}")
    _RANKS = int(ranks)


def farm_active() -> bool:
    """Whether the runs go to a farm (an ensemble session of more than one rank)."""
    return _FARM is not None


def prefetch(requests) -> None:
    """Run every request not done yet, all at once as farm tasks in an ensemble session
    (nothing happens here otherwise: :func:`result` runs each when it is asked for)."""
    if _FARM is None:
        return
    todo = list(dict.fromkeys(r for r in requests if r not in _RESULTS))
    if not todo:
        return
    for request, doc in zip(todo, _FARM.map(run_request, todo, ranks=_RANKS)):
        _RESULTS[request] = doc


def result(request) -> dict:
    """The document of one request: prefetched, done before, or run now."""
    if request not in _RESULTS:
        if _FARM is not None:
            prefetch([request])
        else:
            _RESULTS[request] = _direct(request)
    return _RESULTS[request]


@contextlib.contextmanager
def session(comm=None):
    """An ensemble over ``comm`` (default ``COMM_WORLD``) if it has more than one rank:
    yields True on the rank that runs the study (the farm's master; the others serve its
    tasks until it leaves the block, then get False), or True alone without a farm."""
    global _FARM
    from mpi4py import MPI
    comm = MPI.COMM_WORLD if comm is None else comm
    if comm.Get_size() == 1:
        yield True
        return
    from pyfw import Farm
    with Farm(comm) as farm:
        if not farm.is_master:
            yield False
            return
        _FARM = farm
        try:
            yield True
        finally:
            _FARM = None
