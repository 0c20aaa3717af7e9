"""pyfw: adaptive MPI runtimes for clusters, grids and ad-hoc networks of uneven machines."""
import os as _os

# Under mpiexec a rank's stdout is a pty: numba (imported later by kernels) would then have
# colorama append an escape sequence to stdout at exit, corrupting JSON and CSV output.
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .farm import Context, Done, Farm, Round, Task

__version__ = "0.1.0"
__all__ = ["Farm", "Round", "Task", "Context", "Done"] + list(_errors_all)
