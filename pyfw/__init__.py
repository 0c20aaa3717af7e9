"""pyfw: adaptive MPI runtimes for clusters, grids and ad-hoc networks of uneven machines."""
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .farm import Context, Done, Farm, Round, Task

__version__ = "0.1.0"
__all__ = ["Farm", "Round", "Task", "Context", "Done"] + list(_errors_all)
