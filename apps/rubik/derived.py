"""Small tables derived from the code alone (symmetry classes, move tables), kept on disk
so a process does not recompute them at every start-up (about 1.2 s of CPU before the
first search node otherwise).

A set of arrays is stored as ``derived-<name>-<key>.npz`` in the table cache
(:func:`.cache.cache_dir`), where the key hashes the source files of the modules that
compute it and numpy's version: any change to that code makes a new file, so a stale one is
never read. Writes go through a temporary file renamed into place; where the directory
cannot be written the arrays are simply computed.
"""
import hashlib
import os

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
#: the modules whose code the derived tables depend on
SOURCES = ("cube.py", "coords.py", "symmetry.py", "packing.py", "reid.py", "derived.py")


_KEYS = []        # the key, once computed (a process reads several sets)


def _key():
    if not _KEYS:
        h = hashlib.blake2b(digest_size=10)
        h.update(np.__version__.encode())
        for name in SOURCES:
            with open(os.path.join(_HERE, name), "rb") as f:
                h.update(f.read())
        _KEYS.append(h.hexdigest())
    return _KEYS[0]


def cached_arrays(name, build):
    """The dict of arrays ``build()`` returns, read from the cache where a file made by
    this very code is there, else built (and stored for the next process)."""
    from .cache import cache_dir
    try:
        path = os.path.join(cache_dir(), f"derived-{name}-{_key()}.npz")
    except OSError:
        return build()
    if os.path.exists(path):
        try:
            with np.load(path) as f:
                return {k: f[k] for k in f.files}
        except (OSError, ValueError, EOFError):
            pass            # unreadable: rebuilt and replaced below
    arrays = build()
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
    return arrays
