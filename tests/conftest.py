"""Test harness shared by the serial and the MPI runs.

Under mpiexec, rank 0 prints the usual pytest report; the other ranks write theirs to
``.test-reports/<run>-rank<r>.log`` (shown by ./run-tests when a launch fails) so the
terminal stays readable.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _mpi_rank():
    if "mpi4py.MPI" not in sys.modules:
        return None
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank() if MPI.Is_initialized() else None


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not config.getoption("with_mpi", default=False):
        return
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    xml = config.getoption("xmlpath", default=None)
    if rank != 0:
        if xml:  # only rank 0 writes the junit report the runner reads
            config.option.xmlpath = None
        reports = os.path.join(ROOT, ".test-reports")
        os.makedirs(reports, exist_ok=True)
        log = open(os.path.join(reports, f"mpi{size}-rank{rank}.log"), "w")
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            from _pytest.terminal import TerminalWriter
            reporter._tw = TerminalWriter(file=log)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
