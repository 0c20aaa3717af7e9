"""HDF5 result journal: finished tasks survive a job that is killed outright.

Layout of ``run.h5`` (readable with plain h5py)::

    /rounds/<round name>/index   int64[n]   task indices
    /rounds/<round name>/offset  int64[n]   where each pickled result starts in blob
    /rounds/<round name>/blob    uint8[m]   the results, pickled one after the other

Crash safety: results are buffered and, at most every ``interval`` seconds, written as a new
segment file ``run.h5.d/seg-NNNNNN.h5`` through a temporary name and an atomic rename, so a
kill at any moment leaves only complete files behind (losing at most the last interval).
Every ``consolidate_every`` segments, and on close, the segments are merged into ``run.h5``
the same way. On restart the journal reads ``run.h5`` plus any segments.
"""
from __future__ import annotations

import glob
import os
import pickle
import time

from ..errors import JournalError

__all__ = ["Journal", "JournalError"]  # JournalError lives in pyfw.errors; importable here too


def _read_file(path: str, into: dict) -> None:
    import h5py   # here, not at import: a farm without a journal never loads HDF5
    import numpy as np
    try:
        with h5py.File(path, "r") as f:
            rounds = f.get("rounds")
            if rounds is None:
                return
            for name, g in rounds.items():
                idx = g["index"][()]
                off = g["offset"][()]
                blob = g["blob"][()]
                ends = np.append(off[1:], len(blob))
                entries = into.setdefault(name, {})
                for i, a, b in zip(idx.tolist(), off.tolist(), ends.tolist()):
                    entries[i] = blob[a:b].tobytes()
    except (OSError, KeyError) as exc:
        raise JournalError(f"cannot read result journal {path!r}: {exc}") from exc


def _write_file(path: str, data: dict) -> None:
    """Write {round name: {index: pickled bytes}} to ``path`` atomically."""
    import h5py
    import numpy as np
    tmp = f"{path}.tmp-{os.getpid()}"
    with h5py.File(tmp, "w") as f:
        rounds = f.create_group("rounds")
        f.attrs["format"] = "pyfw-journal-1"
        for name, entries in data.items():
            if not entries:
                continue
            g = rounds.create_group(name)
            idx = np.fromiter(sorted(entries), dtype=np.int64, count=len(entries))
            parts = [entries[i] for i in idx.tolist()]
            lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
            off = np.zeros(len(parts), dtype=np.int64)
            np.cumsum(lens[:-1], out=off[1:])
            g["index"] = idx
            g["offset"] = off
            g["blob"] = np.frombuffer(b"".join(parts), dtype=np.uint8)
    os.replace(tmp, path)


class Journal:
    """Records successful results per round and hands them back on restart."""

    def __init__(self, path: str, interval: float = 0.5, consolidate_every: int = 64):
        self.path = os.fspath(path)
        self.segdir = self.path + ".d"
        self.interval = interval
        self.consolidate_every = consolidate_every
        self.loaded: dict[str, dict[int, bytes]] = {}
        if os.path.exists(self.path):
            _read_file(self.path, self.loaded)
        self.segments = sorted(glob.glob(os.path.join(self.segdir, "seg-*.h5")))
        for seg in self.segments:
            _read_file(seg, self.loaded)
        for tmp in glob.glob(os.path.join(self.segdir, "*.tmp-*")) + glob.glob(self.path + ".tmp-*"):
            os.remove(tmp)  # a write that was interrupted: never renamed, never counted
        self.buffer: dict[str, dict[int, bytes]] = {}
        self.nbuffered = 0
        self.last_flush = time.monotonic()
        self.rounds_started = 0
        self.resumed = sum(len(v) for v in self.loaded.values())

    def next_round(self) -> int:
        """Start the next round's records (rounds are numbered in the order the job opens them)."""
        n = self.rounds_started
        self.rounds_started += 1
        return n

    def completed(self, name: str) -> dict:
        """{task index: result} already recorded for round ``name``."""
        return {i: pickle.loads(b) for i, b in self.loaded.get(name, {}).items()}

    def record(self, name: str, rec) -> None:
        """Buffer the results of a record ``(ids, values, errors, rank)`` of round ``name``
        (failed tasks are not kept); written as a new segment every ``interval`` seconds."""
        ids, values, errors, rank = rec
        if rank < 0:
            return  # this record came from the journal itself
        buf = self.buffer.setdefault(name, {})
        for pos, (tid, value) in enumerate(zip(ids, values)):
            if errors and pos in errors:
                continue
            buf[tid] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self.nbuffered += len(ids)
        if time.monotonic() - self.last_flush >= self.interval:
            self.flush()

    def flush(self) -> None:
        """Write buffered results as a new segment (atomic)."""
        self.last_flush = time.monotonic()
        if not self.nbuffered:
            return
        os.makedirs(self.segdir, exist_ok=True)
        seg = os.path.join(self.segdir, f"seg-{len(self.segments):06d}.h5")
        _write_file(seg, self.buffer)
        for name, entries in self.buffer.items():
            self.loaded.setdefault(name, {}).update(entries)
        self.segments.append(seg)
        self.buffer, self.nbuffered = {}, 0
        if len(self.segments) >= self.consolidate_every:
            self.consolidate()

    def consolidate(self) -> None:
        """Merge everything into the main file (atomic) and remove the segments."""
        _write_file(self.path, self.loaded)
        for seg in self.segments:
            os.remove(seg)
        self.segments = []
        try:
            os.rmdir(self.segdir)
        except OSError:
            pass

    def close(self) -> None:
        """Merge the segments into the journal file and close it."""
        self.flush()
        if self.segments or not os.path.exists(self.path):
            self.consolidate()
