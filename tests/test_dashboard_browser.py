"""A user's look at a running farm job: ``pyfw-run --dashboard ... --report ...`` starts it,
headless Chromium loads the page while it runs and after it ended, and the numbers on the
page must be the job's own stats; /metrics is read by Prometheus's parser; the report
renders the same numbers from a file.

Needs Debian's ``chromium`` (``apt-get install -y chromium``): skipped with a message
when it is missing, except on CI (``CI`` set), where it must run.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from html.parser import HTMLParser

import pytest

from pyfw import launch

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "dashboard_job.py")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                  "--window-size=1280,1500"]
SETTLE = "--virtual-time-budget=4000"   # let the page's timers and requests run first
LAUNCH_TIMEOUT = 240.0


def _chromium():
    found = os.environ.get("PYFW_CHROMIUM") or next(
        (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    if found:
        return found
    why = "headless Chromium not found (apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{why}: CI must run the dashboard's browser test")
    print(f"\nSKIPPED dashboard browser test: {why}", file=sys.stderr)
    pytest.skip(why)


def _browse(chromium, url, *args, settle=True):
    """Chromium's output for ``url``; ``settle=False``: the first paint, as a screenshot or
    DOM dump taken when the page has loaded (no time for timers or requests)."""
    flags = CHROMIUM_FLAGS + ([SETTLE] if settle else [])
    with tempfile.TemporaryDirectory() as profile:   # a fresh profile: no sync, no state
        res = subprocess.run([chromium, *flags, f"--user-data-dir={profile}", *args,
                              url], capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


class _Page(HTMLParser):
    """The numbers the page shows: tiles (data-metric) and worker rows (data-rank)."""

    def __init__(self, html):
        super().__init__()
        self.metrics, self.workers, self.finished, self._rank = {}, {}, None, None
        self.states, self.rates = {}, {}
        self.html = html.split('<main id="sources">', 1)[1].split("</main>", 1)[0]  # drawn
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-finished" in a:
            self.finished = a["data-finished"] == "true"
        if "data-metric" in a:
            self.metrics[a["data-metric"]] = a.get("data-value")
        if tag == "tr" and "data-rank" in a:
            self._rank = int(a["data-rank"])
        if a.get("data-col") == "tasks" and self._rank is not None:
            self.workers[self._rank] = int(a["data-value"])
        if a.get("data-col") == "state" and self._rank is not None:
            self.states[self._rank] = a["data-value"]
        if a.get("data-col") == "rate" and self._rank is not None:
            self.rates[self._rank] = float(a["data-value"]) if a["data-value"] else None


def _await(path, job):
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while not os.path.exists(path):
        if job["done"].is_set():
            res = job["result"]
            pytest.fail(f"the job ended before writing {os.path.basename(path)}: exit "
                        f"{res.returncode}\n{res.stderr[-3000:]}")
        assert time.monotonic() < deadline, f"no {path} after {LAUNCH_TIMEOUT} s"
        time.sleep(0.1)
    with open(path) as fh:
        return json.load(fh)


def _check(page: _Page, stats: dict, finished: bool, failures: int):
    assert page.finished is finished
    assert int(page.metrics["done"]) == stats["tasks"]
    assert int(page.metrics["failures"]) == failures           # task 7 of each round raises
    assert int(page.metrics["duplicates"]) == stats["duplicates"]
    assert int(page.metrics["quarantined"]) == len(stats["quarantined"])
    assert int(page.metrics["workers"]) == sum(w["alive"] for w in stats["workers"])
    assert page.workers == {w["rank"]: w["tasks"] for w in stats["workers"]}
    if finished:   # nothing left running: no task in flight, no busy worker
        assert int(page.metrics["in_flight"]) == 0 and int(page.metrics["left"]) == 0
        assert set(page.states.values()) <= {"idle", "dead"}, page.states
        rates = [page.rates[w["rank"]] for w in stats["workers"]]
        assert sum(rates) == pytest.approx(stats["executions"] / float(page.metrics["elapsed"]),
                                           rel=1e-6)


def _start(tmp_path):
    report = tmp_path / "report.html"
    env = launch.observe_env("127.0.0.1:0", str(report))
    job = {"done": threading.Event()}

    def run():
        try:
            job["result"] = launch.run(3, [sys.executable, JOB, str(tmp_path)], env=env,
                                       timeout=LAUNCH_TIMEOUT, capture=True, cwd=HERE)
        finally:
            job["done"].set()

    threading.Thread(target=run, daemon=True).start()
    return job, report


def test_page_shows_the_jobs_own_numbers_while_running_and_after(tmp_path):
    chromium = _chromium()
    job, report = _start(tmp_path)
    try:
        first = _await(str(tmp_path / "phase1.json"), job)       # round 1 done, job open
        url = first["url"]
        # the first paint already shows the job (it said "No job has published yet")
        _check(_Page(_browse(chromium, url, "--dump-dom", settle=False)), first["stats"],
               finished=False, failures=1)
        _check(_Page(_browse(chromium, url, "--dump-dom")), first["stats"], finished=False,
               failures=1)
        assert first["stats"]["tasks"] == 120
        (tmp_path / "go").touch()
        final = _await(str(tmp_path / "final.json"), job)        # farm closed
        stats = final["stats"]
        assert stats["tasks"] == 300
        page = _Page(_browse(chromium, url, "--dump-dom"))
        _check(page, stats, finished=True, failures=2)
        # the links' colour scale says what it shows, in which unit
        assert "Colour: round-trip time on a log scale, dark = " in page.html
        shot = tmp_path / "dashboard.png"
        _browse(chromium, url, f"--screenshot={shot}")
        assert shot.stat().st_size > 10_000
        from prometheus_client.parser import text_string_to_metric_families
        with urllib.request.urlopen(url + "metrics", timeout=10) as r:
            fams = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
        assert fams["pyfw_tasks_done"].samples[0].value == 300
        per_rank = {int(s.labels["rank"]): s.value
                    for s in fams["pyfw_worker_tasks"].samples}
        assert per_rank == {w["rank"]: w["tasks"] for w in stats["workers"]}
        # the report: the same page from a file, no server
        _check(_Page(_browse(chromium, report.as_uri(), "--dump-dom")), stats, finished=True,
               failures=2)
    finally:
        (tmp_path / "go").touch()
        (tmp_path / "exit").touch()
        job["done"].wait(LAUNCH_TIMEOUT + 30)
    res = job["result"]
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.count("pyfw dashboard: http://127.0.0.1:") == 1   # printed once


DOMAIN_JOB = """
import sys, time
from mpi4py import MPI
from pyfw.domain import Balancer, SlabDomain
from pyfw.monitor import OnlineMonitor
comm = MPI.COMM_WORLD
dom = SlabDomain(comm, (24, 16, 16), monitor=OnlineMonitor(comm) if sys.argv[1] == "probe" else None)
dom.add("T", fill=1.0)
bal = Balancer(dom)
for _ in range(200):
    t0 = time.perf_counter()
    dom.step(lambda k0, k1: time.sleep(0.0005), ["T"])
    bal.record(time.perf_counter() - t0)
    bal.check()
dom.close()
"""


def test_domain_page_shows_link_heat_maps_when_links_are_probed(tmp_path):
    """A domain's own monitor measures rank speeds only, so its link view stayed null and
    the page showed nothing about links; with a probing monitor the heat maps appear, and
    without one the page says how to get them."""
    chromium = _chromium()
    pages = {}
    for mode in ("probe", "speeds"):
        report = tmp_path / f"{mode}.html"
        env = launch.observe_env(None, str(report))
        res = launch.run(2, [sys.executable, "-c", DOMAIN_JOB, mode], env=env,
                         timeout=LAUNCH_TIMEOUT, capture=True, cwd=HERE)
        assert res.returncode == 0, res.stderr[-3000:]
        html = report.read_text()
        data = json.loads(html.split('id="pyfw-data">', 1)[1].split("</script>", 1)[0])
        pages[mode] = (data["sources"][0]["latest"]["links"],
                       _Page(_browse(chromium, report.as_uri(), "--dump-dom")).html)
    links, dom = pages["probe"]
    assert links["ranks"] == [0, 1] and 0 < links["latency_s"][0][1] < 1.0
    assert links["bandwidth"][0][1] > 1e6
    assert 'data-link="r0-r1"' in dom and "Colour: one-way latency on a log scale" in dom
    assert "Colour: bandwidth on a log scale" in dom and 'data-links="none"' not in dom
    links, dom = pages["speeds"]
    assert links is None
    assert 'data-links="none"' in dom and "monitor=OnlineMonitor(comm)" in dom
