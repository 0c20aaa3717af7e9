"""Progress of a round on the master (a bar on a terminal, a line every few seconds
elsewhere), and the end-of-run summary table."""
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
    """Progress of one round on the master's stderr.

    On a terminal, a bar redrawn at most 5 times a second: ``name [#####.....] done/total
    pct rate ETA``. Anywhere else (a rank's stderr under ``pyfw-run``/mpiexec, a batch
    job's log) a plain line every ``every`` seconds (5), as the apps print theirs, and a
    last one when the round ends -- a round shorter than ``every`` prints nothing.
    ``enabled``: None (the default: as just said), True (the same), False (silent:
    ``Farm(progress=False)``). ``clock``: seconds, monotonic (tests pass their own).
    Lines come as results arrive, so a round whose tasks each take longer than ``every``
    prints one line per result.
    """

    EVERY = 5.0

    def __init__(self, name: str, total: int | None, enabled: bool | None = None,
                 stream=None, every: float | None = None, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.enabled = enabled is not False
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = self.EVERY if every is None else float(every)
        self.name, self.total = name, total
        self.done = 0
        self.clock = clock
        self.t0 = clock()
        self.next_draw = 0.0 if self.tty else self.t0 + self.every
        self.lines = 0   # plain lines written (off a terminal)

    def update(self, n: int) -> None:
        """Record ``n`` more finished tasks; redraw if due."""
        self.done += n
        if self.enabled:
            now = self.clock()
            if now >= self.next_draw:
                self.next_draw = now + (0.2 if self.tty else self.every)
                self.draw(now)

    def line(self, now: float, final: bool = False) -> str:
        """The progress line now (done/total, rate, ETA; ``final``: the round's summary)."""
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        if final and not self.tty:
            of = f"/{self.total}" if self.total else ""
            return (f"{self.name}: {self.done}{of} tasks in {_hms(elapsed)}, "
                    f"{rate:,.0f} tasks/s, ended")
        if self.total:
            frac = min(1.0, self.done / self.total)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta_s = _hms(eta) if eta != float("inf") else "?"
            if not self.tty:
                return (f"{self.name}: {self.done}/{self.total} tasks ({100 * frac:.1f}%) "
                        f"after {_hms(elapsed)}, {rate:,.0f} tasks/s, ETA {eta_s}")
            bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
            return (f"{self.name} [{bar}] {self.done}/{self.total} {100 * frac:5.1f}% "
                    f"{rate:,.0f} tasks/s ETA {eta_s}")
        sep = ":" if not self.tty else ""
        return f"{self.name}{sep} {self.done} tasks {rate:,.0f} tasks/s elapsed {_hms(elapsed)}"

    def draw(self, now: float, final: bool = False) -> None:
        """Write the progress line to the stream (redrawn in place on a terminal)."""
        if self.tty:
            self.stream.write("\r" + self.line(now) + "\033[K")
        else:
            self.stream.write("pyfw farm " + self.line(now, final) + "\n")
            self.lines += 1
        self.stream.flush()

    def close(self) -> None:
        """Draw the last line and end it (off a terminal: only if a line was written)."""
        if not self.enabled:
            return
        if self.tty:
            self.draw(self.clock())
            self.stream.write("\n")
            self.stream.flush()
        elif self.lines:
            self.draw(self.clock(), final=True)


def _role(w: dict) -> str:
    if w.get("role") == "submaster":
        return "sub-master"
    return "worker" if w.get("via") is None else f"via:{w['via']}"


def _runs(w: dict) -> tuple[int, float]:
    """Tasks run on this rank itself and its busy seconds (a sub-master's row in
    :meth:`Farm.stats` counts its node's tasks; here only those it computed)."""
    if w.get("role") == "submaster":
        return w.get("computed_tasks", 0), w.get("computed_busy_s", 0.0)
    return w["tasks"], w["busy_s"]


def format_summary(stats: dict) -> str:
    """A per-worker table from :meth:`pyfw.farm.Farm.stats`.

    The header counts distinct ``tasks`` done (and the results a resumed run took from its
    journal instead of running them); the rows count task *runs* on each rank, so they sum
    to ``executions``: more than the tasks when straggler copies or retries ran, fewer
    when tasks were quarantined or a dead sub-master's last figures never came. In a
    two-level farm the ``role`` column tells direct workers, sub-masters (their own runs;
    their node's workers follow them) and node workers (``via:N``, N their sub-master).
    """
    workers = stats["workers"]
    runs = [_runs(w) for w in workers]
    executions = stats.get("executions", sum(n for n, _ in runs))
    tasks, journal = stats["tasks"], stats.get("from_journal", 0)
    head = (f"pyfw farm: {tasks:,} tasks in {stats['elapsed_s']:.3f} s on {len(workers)} "
            f"worker(s)")
    if journal:
        head += f" and {journal:,} results from the journal (not run again)"
    head += f"; the rows count {executions:,} task runs"
    extra = executions - tasks
    if extra > 0:
        head += (f", {extra:,} more: copies from {stats['duplicates']} duplicate chunk(s) "
                 f"and failed attempts run again ({stats.get('failures', 0)})")
    elif extra < 0:
        head += f", {-extra:,} fewer: quarantined, or never reported by a dead sub-master"
    head += f"; {len(stats['quarantined'])} quarantined"
    rows = [head,
            f"{'rank':>5} {'host':<14} {'role':<10} {'alive':>5} {'tasks':>9} {'chunks':>7} "
            f"{'busy s':>9} {'idle s':>9} {'sent B':>11} {'recv B':>11}"]
    for w, (n, busy) in zip(workers, runs):
        rows.append(f"{w['rank']:>5} {str(w['host'])[:14]:<14} {_role(w):<10} "
                    f"{str(w['alive']):>5} {n:>9} {w['chunks']:>7} {busy:>9.3f} "
                    f"{w['idle_s']:>9.3f} {w['bytes_to']:>11} {w['bytes_from']:>11}")
    return "\n".join(rows)
