"""Helpers shared by the MPI tests: one verdict, gathered from every rank."""
import traceback

from mpi4py import MPI


def agree(ok, msg="", comm=MPI.COMM_WORLD):
    """Collective: every rank passes its verdict (``ok`` and a message saying why not);
    every rank fails together, naming each failing rank and its message (no rank is left
    waiting in a later collective, no failure goes unseen)."""
    verdicts = comm.allgather((bool(ok), str(msg)))
    bad = [f"rank {r}: {m}" for r, (o, m) in enumerate(verdicts) if not o]
    assert not bad, "\n".join(bad)


def everywhere(fn, comm=MPI.COMM_WORLD):
    """Run fn on every rank; fail on every rank if any rank failed (no hang)."""
    try:
        fn()
        ok, err = True, ""
    except Exception:  # noqa: BLE001
        ok, err = False, "failed:\n" + traceback.format_exc()
    agree(ok, err, comm)
