"""``python -m apps.rubik``: see :mod:`apps.rubik.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
