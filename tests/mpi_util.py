"""Helpers shared by the MPI tests."""
import traceback

from mpi4py import MPI


def everywhere(fn, comm=MPI.COMM_WORLD):
    """Run fn on every rank; fail on every rank if any rank failed (no hang)."""
    try:
        fn()
        err = None
    except Exception:  # noqa: BLE001
        err = traceback.format_exc()
    errs = comm.allgather(err)
    bad = [(r, e) for r, e in enumerate(errs) if e]
    assert not bad, f"rank {bad[0][0]} failed:\n{bad[0][1]}"
