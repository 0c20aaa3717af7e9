"""What a farm shows of its progress: the master's progress line (a bar on a terminal, a
plain line every few seconds in a batch log or under ``pyfw-run``), and the documented
demo's "left" and ETA on the dashboard although it passes a generator."""
import http.client
import io
import json
import os
import socket
import sys
import threading
import time
import urllib.request

from pyfw import launch
from pyfw.farm.progress import Progress

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH_TIMEOUT = 180.0


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _run_round(progress, clock, per_step, steps, dt):
    for _ in range(steps):
        clock.t += dt
        progress.update(per_step)
    progress.close()


def test_off_a_terminal_a_line_every_few_seconds_and_one_at_the_end():
    clock, log = _Clock(), io.StringIO()
    p = Progress("round-0", 1000, None, stream=log, every=5.0, clock=clock)
    _run_round(p, clock, 10, 100, 0.125)              # 80 tasks/s for 12.5 s
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and "\033" not in log.getvalue()
    assert lines == ["pyfw farm round-0: 400/1000 tasks (40.0%) after 0:05, 80 tasks/s, "
                     "ETA 0:07",
                     "pyfw farm round-0: 800/1000 tasks (80.0%) after 0:10, 80 tasks/s, "
                     "ETA 0:02",
                     "pyfw farm round-0: 1000/1000 tasks in 0:12, 80 tasks/s, ended"]


def test_a_short_round_off_a_terminal_prints_nothing_and_false_silences_it():
    clock, log = _Clock(), io.StringIO()
    _run_round(Progress("r", 50, None, stream=log, clock=clock), clock, 1, 50, 0.0625)
    assert log.getvalue() == ""                        # 3.1 s: under the 5 s interval
    clock, log = _Clock(), io.StringIO()
    _run_round(Progress("r", None, False, stream=log, clock=clock), clock, 1, 500, 0.0625)
    assert log.getvalue() == ""                        # Farm(progress=False)
    clock, log = _Clock(), io.StringIO()
    _run_round(Progress("r", None, None, stream=log, clock=clock), clock, 1, 120, 0.0625)
    assert log.getvalue().splitlines() == ["pyfw farm r: 80 tasks 16 tasks/s elapsed 0:05",
                                           "pyfw farm r: 120 tasks in 0:07, 16 tasks/s, "
                                           "ended"]    # no total known: counts only


def test_on_a_terminal_a_bar_redrawn_in_place():
    clock, term = _Clock(), _Terminal()
    _run_round(Progress("r", 100, None, stream=term, clock=clock), clock, 1, 100, 0.1)
    out = term.getvalue()
    assert out.startswith("\rr [") and out.endswith("\033[K\n") and out.count("\n") == 1
    assert "r [##############################] 100/100 100.0% 10 tasks/s ETA 0:00" in out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_demo_under_pyfw_run_shows_left_eta_and_progress_lines():
    """The README's demo farms out a generator: the dashboard said "left ?" and "ETA ?"
    for the whole run and no progress reached its log. It passes total= now, and the
    master's stderr (not a terminal under pyfw-run) gets a line every interval."""
    port = _free_port()
    env = launch.observe_env(f"127.0.0.1:{port}", None)
    code = ("import sys; from pyfw.farm import progress; progress.Progress.EVERY = 0.2; "
            "from pyfw.farm.demo import main; sys.exit(main(sys.argv[1:]))")
    ntasks = 6000
    job = {"done": threading.Event()}

    def run():
        try:
            job["result"] = launch.run(3, [sys.executable, "-c", code, "--tasks", str(ntasks)],
                                       env=env, timeout=LAUNCH_TIMEOUT, capture=True,
                                       cwd=HERE)
        finally:
            job["done"].set()

    threading.Thread(target=run, daemon=True).start()
    running = []
    while not job["done"].wait(0.2):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=5) as r:
                state = json.load(r)
        except (OSError, http.client.HTTPException):
            continue   # not up yet, or going down with the job (a reply cut short)
        for src in state["sources"]:
            if not src["finished"] and src["latest"]["done"] > 0:
                running.append((src["latest"], src["derived"]))
    res = job["result"]
    assert res.returncode == 0, res.stderr[-3000:]
    assert running, "never saw the job running on its dashboard"
    for latest, derived in running:
        assert isinstance(latest["left"], int) and latest["left"] >= 0
        assert derived["total"] == ntasks
        assert latest["done"] + latest["in_flight"] + latest["left"] == ntasks
    assert any(d["eta_s"] is not None and d["eta_s"] > 0 for _, d in running)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("pyfw farm round-0: ")]
    assert len(lines) >= 2, res.stderr[-3000:]
    assert all(f"/{ntasks} tasks" in ln for ln in lines)
    assert lines[-1].startswith(f"pyfw farm round-0: {ntasks}/{ntasks} tasks in ")
