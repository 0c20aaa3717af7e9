"""Progress bar with ETA on the master's terminal, and the end-of-run summary table."""
from __future__ import annotations

import sys
import time

__all__ = ["Progress", "format_summary"]


def _hms(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """``name [#####.....] done/total pct rate ETA`` on stderr, redrawn at most 5 times/s.

    Shown only when ``enabled`` is True, or None and stderr is a terminal.
    """

    def __init__(self, name: str, total: int | None, enabled: bool | None = None,
                 stream=None):
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled = enabled
        self.name, self.total = name, total
        self.done = 0
        self.t0 = time.monotonic()
        self.next_draw = 0.0

    def update(self, n: int) -> None:
        """Record ``n`` more finished tasks; redraw at most every 0.2 s."""
        self.done += n
        if self.enabled:
            now = time.monotonic()
            if now >= self.next_draw:
                self.next_draw = now + 0.2
                self.draw(now)

    def line(self, now: float) -> str:
        """The progress line now (done/total, rate, ETA)."""
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta_s = _hms(eta) if eta != float("inf") else "?"
            return (f"{self.name} [{bar}] {self.done}/{self.total} {100 * frac:5.1f}% "
                    f"{rate:,.0f} tasks/s ETA {eta_s}")
        return f"{self.name} {self.done} tasks {rate:,.0f} tasks/s elapsed {_hms(elapsed)}"

    def draw(self, now: float) -> None:
        """Write the progress line to the stream."""
        self.stream.write("\r" + self.line(now) + "\033[K")
        self.stream.flush()

    def close(self) -> None:
        """Draw the last line and end it."""
        if self.enabled:
            self.draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()


def format_summary(stats: dict) -> str:
    """A per-worker table from :meth:`pyfw.farm.Farm.stats`."""
    rows = [f"pyfw farm: {stats['tasks']} tasks in {stats['elapsed_s']:.3f} s on "
            f"{len(stats['workers'])} worker(s); {stats['duplicates']} duplicate chunk(s), "
            f"{len(stats['quarantined'])} quarantined",
            f"{'rank':>5} {'host':<14} {'alive':>5} {'tasks':>9} {'chunks':>7} "
            f"{'busy s':>9} {'idle s':>9} {'sent B':>11} {'recv B':>11}"]
    for w in stats["workers"]:
        rows.append(f"{w['rank']:>5} {str(w['host'])[:14]:<14} {str(w['alive']):>5} "
                    f"{w['tasks']:>9} {w['chunks']:>7} {w['busy_s']:>9.3f} {w['idle_s']:>9.3f} "
                    f"{w['bytes_to']:>11} {w['bytes_from']:>11}")
    return "\n".join(rows)
