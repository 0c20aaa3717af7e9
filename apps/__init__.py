"""Reference applications on pyfw: ``apps.rubik`` (optimal cube solver) and ``apps.knee``
(knee-cooling simulation)."""
import os as _os

# As in pyfw/__init__.py: no colorama escape on a rank's pty stdout at exit (numba loads
# after this line in both apps).
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
