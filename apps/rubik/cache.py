"""On-disk cache of pruning tables: versioned, checksummed, memory-mapped.

Each table is two files in the cache directory: ``<name>.bin`` (raw bytes) and
``<name>.json`` (format, table version, build parameters, size, BLAKE2b digest). A table
whose metadata does not match what the caller asks for (stale) or whose bytes do not
match the digest (corrupt, truncated) is rebuilt; the full digest is checked once per
version of the file (``<name>.verified`` remembers it, see :func:`_verified_before`).
Writes go to a temporary file renamed into place under an exclusive lock, so concurrent
processes on a node build a table once and then all map the same file (the OS page cache
shares it between them).

The directory is ``cache_dir`` if given, else ``$PYFW_RUBIK_CACHE``, else
``~/.cache/pyfw/rubik``.

A process that probes a large table at random all the time (a search worker) can instead
take a :func:`private_copy` in 2 MB pages: every probe of a 4 KB-paged table the size of the
huge one also misses the TLB, and the page walk costs about as much as the load itself.
"""
import fcntl
import hashlib
import json
import mmap
import os
import sys
import time

import numpy as np

FORMAT = 1


def cache_dir(path=None):
    """The cache directory (created if missing)."""
    d = path or os.environ.get("PYFW_RUBIK_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "pyfw", "rubik")
    os.makedirs(d, exist_ok=True)
    return d


def digest(buf):
    """Hex BLAKE2b digest of a bytes-like object or array."""
    h = hashlib.blake2b(digest_size=20)
    mv = memoryview(np.ascontiguousarray(buf)).cast("B")
    step = 1 << 26
    for i in range(0, len(mv), step):
        h.update(mv[i:i + step])
    return h.hexdigest()


def private_copy(arr):
    """``(copy, advised)``: a read-only copy of the array ``arr`` (same dtype and shape) in
    this process's own anonymous memory, advised for transparent huge pages (2 MB) where
    the system allows it.

    Independent random probes of the 1.67 GB huge table take about half as long in 2 MB
    pages as in the shared 4 KB page-cache mapping (docs/decisions.md: the page
    walk of a TLB miss costs about as much as the load). The price is one copy per process
    instead of one per node, and the copy's time at start-up. ``advised`` is False where
    ``madvise`` is unavailable or refused (the copy then has ordinary pages)."""
    n = int(arr.nbytes)
    buf = mmap.mmap(-1, max(n, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advised = False
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            buf.madvise(mmap.MADV_HUGEPAGE)   # before the first touch: faults take 2 MB pages
            advised = True
        except OSError:
            pass
    flat = np.frombuffer(buf, arr.dtype, count=arr.size)   # keeps ``buf`` alive
    src = arr.reshape(-1)
    step = max(1, (1 << 26) // max(arr.itemsize, 1))
    for i in range(0, arr.size, step):
        flat[i:i + step] = src[i:i + step]
    out = flat.reshape(arr.shape)
    out.flags.writeable = False
    return out, advised


def huge_page_bytes():
    """Bytes of this process's anonymous memory in transparent huge pages (Linux
    ``/proc/self/smaps_rollup``), or None where that is not available."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Progress:
    """A one-line progress bar on stderr (silent when ``enabled`` is false); where stderr is
    not a terminal (a batch job's log) a plain line every ``EVERY`` seconds instead."""

    EVERY = 5.0

    def __init__(self, label, total, enabled=True, stream=None):
        self.label, self.total, self.enabled = label, max(total, 1), enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self.next_line = self.t0 + self.EVERY
        self.done = 0

    def update(self, done, note="", force=False):
        """Record ``done`` units of work and redraw the bar (off a terminal: a line every
        ``EVERY`` seconds, or now with ``force``)."""
        self.done = done
        if not self.enabled:
            return
        frac = min(done / self.total, 1.0)
        now = time.perf_counter()
        if self.tty:
            bar = "#" * int(30 * frac)
            self.stream.write(f"\r{self.label}: [{bar:<30}] {100 * frac:5.1f}% "
                              f"{now - self.t0:6.1f}s {note}   ")
        elif force or now >= self.next_line:
            self.next_line = now + self.EVERY
            self.stream.write(f"{self.label}: {100 * frac:5.1f}% after {now - self.t0:.0f} s "
                              f"{note}\n")
        self.stream.flush()

    def close(self, note="done"):
        """Show the bar complete with ``note`` and end its line."""
        if self.enabled:
            self.update(self.total, note, force=True)
            if self.tty:
                self.stream.write("\n")
            self.stream.flush()


def _meta_ok(meta, want):
    return all(meta.get(k) == v for k, v in want.items())


def _read(path, want, verify):
    """The memory-mapped table, or None if missing, stale or corrupt."""
    jpath, bpath = path + ".json", path + ".bin"
    try:
        with open(jpath) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None, "missing"
    if not _meta_ok(meta, want):
        return None, "stale"
    try:
        if os.path.getsize(bpath) != meta["nbytes"]:
            return None, "corrupt (size)"
    except OSError:
        return None, "missing"
    arr = np.memmap(bpath, dtype=np.uint8, mode="r")
    if verify and not _verified_before(path, meta, arr):
        if digest(arr) != meta["blake2b"]:
            return None, "corrupt (checksum)"
        _mark_verified(path, meta, arr)
    return arr, "ok"


# A full checksum of the 1.67 GB table costs every process 2.5 s at start-up. Once a file
# has passed it, ``<name>.verified`` records the file's identity (inode, size, mtime,
# ctime), the digest it matched and a digest of 64 blocks spread over the file; later loads
# that find all of these unchanged skip the full pass. Any write, truncation or replacement
# of the file changes its identity, so it is checked in full again.
SAMPLE_BLOCKS, SAMPLE_BYTES = 64, 4096


def _identity(bpath):
    st = os.stat(bpath)
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _sample_digest(arr):
    n = arr.size
    h = hashlib.blake2b(digest_size=20)
    if n <= SAMPLE_BLOCKS * SAMPLE_BYTES:
        h.update(memoryview(np.ascontiguousarray(arr)).cast("B"))
    else:
        for k in range(SAMPLE_BLOCKS):
            a = (n - SAMPLE_BYTES) * k // (SAMPLE_BLOCKS - 1)
            h.update(memoryview(np.ascontiguousarray(arr[a:a + SAMPLE_BYTES])).cast("B"))
    return h.hexdigest()


def _verified_before(path, meta, arr):
    try:
        with open(path + ".verified") as f:
            mark = json.load(f)
        return (mark.get("blake2b") == meta["blake2b"]
                and mark.get("identity") == _identity(path + ".bin")
                and mark.get("sample") == _sample_digest(arr))
    except (OSError, ValueError):
        return False


def _mark_verified(path, meta, arr):
    mark = {"blake2b": meta["blake2b"], "identity": _identity(path + ".bin"),
            "sample": _sample_digest(arr)}
    tmp = f"{path}.verified.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(mark, f)
        os.replace(tmp, path + ".verified")
    except OSError:          # a read-only cache: every load checks the file in full
        pass


def load_or_build(name, version, params, build, directory=None, progress=True, verify=True,
                  log=None):
    """A read-only memory-mapped uint8 table, built by ``build(progress)`` if needed.

    ``version`` and ``params`` (a JSON-able dict) identify the content: a cached file with
    other values is stale and rebuilt. ``build`` must return a 1-D uint8 array; with
    ``build=None`` a missing table raises LookupError instead.
    Returns ``(array, status)`` where status is ``"cached"`` or ``"built (<reason>)"``.
    """
    d = cache_dir(directory)
    path = os.path.join(d, name)
    want = {"format": FORMAT, "name": name, "version": version, "params": params}
    arr, why = _read(path, want, verify)
    if arr is not None:
        return arr, "cached"
    if build is None:
        raise LookupError(f"table {name} is not in the cache {d} ({why})")
    with open(path + ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # e.g. a farm's workers and master loading at once: one builds, the rest wait
            if log:
                log(f"table {name}: {why}; another process is building it, waiting")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            arr, why2 = _read(path, want, verify)  # another process may have built it
            if arr is not None:
                return arr, "cached"
            if log:
                log(f"table {name}: {why}, building")
            data = np.ascontiguousarray(build(progress), dtype=np.uint8).ravel()
            meta = dict(want, nbytes=int(data.nbytes), blake2b=digest(data),
                        created=time.strftime("%Y-%m-%dT%H:%M:%S"))
            tmp = f"{path}.bin.tmp{os.getpid()}"
            data.tofile(tmp)
            os.replace(tmp, path + ".bin")
            tmp = f"{path}.json.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(meta, f, indent=1)
            os.replace(tmp, path + ".json")
            _mark_verified(path, meta, np.memmap(path + ".bin", dtype=np.uint8, mode="r"))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    arr, _ = _read(path, want, verify=False)
    return arr, f"built ({why})"
