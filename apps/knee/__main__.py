"""``python -m apps.knee``: see :mod:`apps.knee.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
