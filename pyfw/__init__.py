"""pyfw: adaptive MPI runtimes for clusters, grids and ad-hoc networks of uneven machines."""
import os as _os

# Under mpiexec a rank's stdout is a pty: numba (imported later by kernels) would then have
# colorama append an escape sequence to stdout at exit, corrupting JSON and CSV output.
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
import sys as _sys
if "mpi4py.MPI" not in _sys.modules:
    # before this process's MPI_Init: no second lost in Open MPI's idle libfabric BTL
    from .fabric import exclude_idle_ofi as _exclude_idle_ofi
    _exclude_idle_ofi(_os.environ, mark=True)
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all

__version__ = "0.1.0"
__all__ = ["Farm", "Round", "Task", "Context", "Done"] + list(_errors_all)

#: the runtime's names, from pyfw.farm
_FARM_NAMES = ("Farm", "Round", "Task", "Context", "Done")
#: variables a launcher (Open MPI's mpiexec, PMIx, PMI: Slurm, MPICH) sets for each rank
LAUNCHER_ENV = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")


def under_launcher() -> bool:
    """Whether this process is a rank a launcher started (else it runs alone, and MPI can be
    left alone: mpi4py and a singleton ``MPI_Init`` cost 0.1 s, a second where Open MPI's
    libfabric BTL is not left out, see :mod:`pyfw.fabric`)."""
    return any(k in _os.environ for k in LAUNCHER_ENV)


if under_launcher():
    # a rank under a launcher: importing pyfw initializes MPI, as it always has
    from .farm import Context, Done, Farm, Round, Task
else:
    def __getattr__(name):
        """A process started alone imports the runtime (mpi4py, MPI_Init: 0.1 s or more)
        only when a name of it is used: ``python -m apps.rubik`` on one core never is."""
        import importlib.util
        if name in _FARM_NAMES:
            value = getattr(importlib.import_module(".farm", __name__), name)
        elif importlib.util.find_spec(f"{__name__}.{name}") is not None:
            value = importlib.import_module(f".{name}", __name__)   # pyfw.comm, ...
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__():
        return sorted(set(globals()) | set(_FARM_NAMES))
