"""The dashboard in one process: numbers against known answers, the Prometheus format read
by Prometheus's own parser, the report, and the safety rules (local bind, token, read-only,
bad requests answered with a 4xx while the job goes on)."""
import http.client
import json
import math
import os
import socket
import urllib.error
import urllib.request

import pytest

from pyfw import Farm
from pyfw.dashboard import Dashboard, render_report
from pyfw.dashboard.history import History
from pyfw.dashboard.model import Rate
from pyfw.errors import ConfigurationError, TaskError
from pyfw.observe import Ticker, check, parse_address
from pyfw.snapshots import FarmSnapshot, LinkView, RoundView, WorkerView

parser = pytest.importorskip("prometheus_client.parser")


def _fail_on_7(x):
    if x == 7:
        raise ValueError("seven")
    return x * x


def _snapshot(done=40, finished=False, name_host="n1"):
    workers = (WorkerView(1, name_host, True, True, 25, 5, 1.5, 0.25, 100.0, 4, 5.0, 2, 3),
               WorkerView(2, "n2", False, False, 17, 4, 1.0, 0.5, None, None, 4.25, 0, None))
    links = LinkView(ranks=(0,), cols=(1, 2), latency_s=((2e-4, math.nan),),
                     method=(("last", ""),))
    return FarmSnapshot(elapsed_s=2.0, done=done, in_flight=6, left=54, failures=3,
                        duplicates=2, quarantined=1, quarantine=("task 9 quarantined",),
                        workers=workers, rounds=(RoundView("r", done, 100),), links=links,
                        pipeline_factor=2, finished=finished)


def _families(text):
    out = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_metrics_are_valid_prometheus_text_with_the_snapshot_numbers():
    hub = Dashboard(serve=False)
    src = hub.source("farm", 'job "A"\\b\nc')   # every character the format must escape
    src.publish(_snapshot(done=40))
    got = _families(hub.metrics())
    only = lambda name: [v for _, v in got[name]]  # noqa: E731
    assert only("pyfw_tasks_done_total") == [40]
    assert only("pyfw_tasks_in_flight") == [6] and only("pyfw_tasks_left") == [54]
    assert only("pyfw_task_failures_total") == [3]
    assert only("pyfw_straggler_copies_total") == [2]
    assert only("pyfw_tasks_quarantined_total") == [1]
    assert only("pyfw_workers_alive") == [1]
    labels = got["pyfw_tasks_done_total"][0][0]
    assert labels["job"] == 'job "A"\\b\nc'
    tasks = {lab["rank"]: v for lab, v in got["pyfw_worker_tasks_total"]}
    assert tasks == {"1": 25, "2": 17}
    assert {lab["rank"]: v for lab, v in got["pyfw_worker_busy"]} == {"1": 1, "2": 0}
    assert [v for lab, v in got["pyfw_worker_chunk_size"]] == [4]      # None is left out
    assert got["pyfw_link_latency_seconds"] == [({"job": labels["job"], "source": "0",
                                                  "src": "0", "dst": "1"}, 2e-4)]


def test_rate_and_eta_follow_the_published_counts():
    hub = Dashboard(serve=False)
    src = hub.source("farm", "j")
    for t, done in ((1.0, 10), (2.0, 30), (3.0, 50)):
        snap = _snapshot(done=done)
        src.publish(FarmSnapshot(**{**snap.__dict__, "elapsed_s": t}))
    view = hub.state()["sources"][0]
    assert view["derived"]["rate"] == pytest.approx(20.0)            # (50 - 10) / (3 - 1)
    assert view["derived"]["eta_s"] == pytest.approx((54 + 6) / 20.0)
    assert view["derived"]["total"] == 50 + 54 + 6
    assert [p["done"] for p in view["history"]] == [10, 30, 50]
    seq = hub.state()["seq"]
    assert hub.state(since=seq)["sources"][0]["history"] == []


def _chunky(window_rate, period=2.0, step=10, until=60.0, dt=0.25):
    """Rates a :class:`Rate` reports for a count that grows by ``step`` every ``period``
    seconds (a worker finishing a chunk), sampled every ``dt`` (the ticker) after 20 s."""
    out = []
    for k in range(int(until / dt) + 1):
        t = k * dt
        r = window_rate.add(t, step * int(t // period))
        if t >= 20:
            out.append(r)
    return out


class _PlainWindow:
    """The rate over exactly the last 5 s of samples (what the dashboard did before)."""

    def __init__(self):
        self.samples = []

    def add(self, t, count):
        self.samples.append((t, count))
        t0, c0 = next((a, c) for a, c in self.samples if a >= t - 5.0)
        return (count - c0) / (t - t0) if t > t0 else None


def test_rate_of_a_chunky_count_holds_steady():
    truth = 10 / 2.0                     # 5 tasks/s, counted in chunks of 10 every 2 s
    steady = _chunky(Rate())
    assert min(steady) >= 0.8 * truth and max(steady) <= 1.05 * truth
    # a plain 5 s window over the same counts swings by half (2 or 3 chunks in it)
    plain = _chunky(_PlainWindow())
    assert max(plain) / min(plain) >= 1.4
    # and a stall shows as a falling rate, not a frozen one
    r = Rate()
    for k in range(41):
        r.add(k * 0.25, 10 * (k // 8))          # 5 tasks/s for 10 s ...
    assert r.add(30.0, 50) < 0.5 * truth        # ... then nothing for 20 s


def _workers(tasks, t, unneeded=(0, 0)):
    return tuple(WorkerView(rank, "n", True, True, n, n // 5, t, 0.0, 1000.0, 5, 5.0, 1, 2,
                            skip)
                 for rank, n, skip in zip((1, 2), tasks, unneeded))


def test_worker_rates_use_the_totals_window_and_add_up_to_it():
    hub = Dashboard(serve=False)
    src = hub.source("farm", "j")
    base = _snapshot()
    # worker 1 finishes 10 tasks every 0.5 s, worker 2 finishes 30 every 2 s: 10 + 15 /s
    for k in range(81):
        t = k * 0.25
        a, b = 10 * int(t // 0.5), 30 * int(t // 2.0)
        src.publish(FarmSnapshot(**{**base.__dict__, "elapsed_s": t, "done": a + b,
                                    "workers": _workers((a, b), t)}))
        d = hub.state()["sources"][0]["derived"]
        if t >= 10:
            w1, w2 = d["worker_rates"]
            assert w1 == pytest.approx(20.0, rel=0.15) and w2 == pytest.approx(15.0, rel=0.3)
            assert w1 + w2 == pytest.approx(d["rate"], rel=0.25)
    got = {lab["rank"]: v for lab, v in _families(hub.metrics())["pyfw_worker_task_rate"]}
    assert got == {"1": pytest.approx(d["worker_rates"][0]), "2": pytest.approx(w2)}
    # once finished: the mean over the run, as the total's
    src.close(FarmSnapshot(**{**base.__dict__, "elapsed_s": 20.0, "done": 400 + 300,
                              "workers": _workers((400, 300), 20.0), "finished": True}))
    d = hub.state()["sources"][0]["derived"]
    assert d["worker_rates"] == [20.0, 15.0] and d["rate"] == 35.0


def test_a_finished_farm_has_nothing_in_flight_and_no_busy_worker():
    """The end-of-run report said FINISHED, LEFT 0, IN FLIGHT 6 and a busy worker: a
    straggler copy was still out after its twin had come back."""
    from types import SimpleNamespace
    from pyfw.farm.policies import WorkerStats
    from pyfw.farm.rounds import Chunk, RoundState
    from pyfw.farm.snapshot import farm_snapshot
    from pyfw.farm.policies import make_policy

    rnd = RoundState(1, range(12), abs, False, 12, make_policy("static"), "r")
    ids, items = rnd.take(12)
    first = Chunk(1, rnd, ids[:6], items[:6], 1, 0.0)
    second = Chunk(2, rnd, ids[6:], items[6:], 2, 0.0)
    copy = Chunk(3, rnd, ids[6:], items[6:], 1, 0.0)      # a straggler copy of ``second``
    copy.twin, second.twin = second, copy
    workers = {r: SimpleNamespace(rank=r, host="n", alive=True, inflight=[], stats=WorkerStats(r))
               for r in (1, 2)}
    workers[1].inflight, workers[2].inflight = [first, copy], [second]
    engine = SimpleNamespace(workers=workers, chunks={1: first, 2: second, 3: copy},
                             rounds={1: rnd}, pipeline=None, started=0.0, completed=0,
                             failures=0, duplicates=1, quarantined=[], master=0)
    snap = farm_snapshot(engine)
    assert snap.in_flight == 12 and snap.left == 0            # the copy is not a 13th task
    assert [w.busy for w in snap.workers] == [True, True]
    # the first chunk and the original of the second come back: only the copy is out
    rnd.deliver(ids[:6], list(items[:6]), None, 1)
    rnd.deliver(ids[6:], list(items[6:]), None, 2)
    del engine.chunks[1], engine.chunks[2]
    workers[1].inflight, workers[2].inflight = [copy], []
    engine.completed = 12
    snap = farm_snapshot(engine)
    assert snap.in_flight == 0 and snap.done == 12
    assert [(w.busy, w.depth, w.unneeded) for w in snap.workers] == [(False, 1, 1),
                                                                     (False, 0, 0)]
    # the round ended (the map returned) with the copy still out: the farm closes
    engine.rounds.clear()
    snap = farm_snapshot(engine, finished=True)
    assert snap.in_flight == 0 and not any(w.busy for w in snap.workers)
    hub = Dashboard(serve=False)
    hub.source("farm", "j").close(snap)
    got = _families(hub.metrics())
    assert [v for _, v in got["pyfw_tasks_in_flight"]] == [0]
    assert {lab["rank"]: v for lab, v in got["pyfw_worker_busy"]} == {"1": 0, "2": 0}
    assert {lab["rank"]: v for lab, v in got["pyfw_worker_unneeded_chunks"]} == {"1": 1,
                                                                                 "2": 0}


def test_history_keeps_the_whole_run_within_its_bound():
    h = History(maxlen=8)
    for i in range(1, 101):
        h.add(i, i)
    assert len(h) <= 8
    assert h.points[0] == 1 and h.points[-1] == 100      # first and newest kept
    assert h.points == sorted(h.points)
    assert h.since(50) == [p for p in h.points if p > 50]


def test_serial_farm_page_numbers_match_its_stats(tmp_path):
    report = tmp_path / "run.html"
    hub = Dashboard(serve=False, report=str(report))
    with Farm(dashboard=hub, on_error="collect") as farm:
        results = list(farm.map(_fail_on_7, range(60)))
    stats = farm.stats()
    assert isinstance(results[7], TaskError)
    view = hub.state()["sources"][0]
    latest = view["latest"]
    assert view["finished"] and latest["finished"]
    assert latest["done"] == stats["tasks"] == 60
    assert latest["failures"] == 1
    assert [w["tasks"] for w in latest["workers"]] == [w["tasks"] for w in stats["workers"]]
    assert latest["left"] == 0 and latest["in_flight"] == 0
    html = report.read_text()                       # written when the farm closed
    assert "http://" not in html and "https://" not in html and 'src="' not in html
    data = html.split('id="pyfw-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["sources"][0]["latest"]["done"] == 60


def test_report_data_cannot_close_its_script_block():
    state = {"format": 1, "seq": 0, "now": 0, "started": 0, "host": "h", "pid": 1,
             "sources": [{"name": "</script><script>alert(1)</script>"}]}
    html = render_report(state)
    block = html.split('id="pyfw-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(block)["sources"][0]["name"].startswith("</script>")


def test_dashboard_spec_is_checked_before_anything_starts(monkeypatch):
    monkeypatch.delenv("PYFW_DASHBOARD", raising=False)
    assert check(None) is None and check(False) is None
    assert check(True) == ("127.0.0.1", 8787)
    assert parse_address("9000") == ("127.0.0.1", 9000)
    assert parse_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for bad in ("abc", "host:", "70000", "1.2.3.4:-1", 3.5):
        with pytest.raises(ConfigurationError):
            check(bad)
    with pytest.raises(ConfigurationError, match="dashboard address"):
        Farm(dashboard="localhost:notaport")
    monkeypatch.setenv("PYFW_DASHBOARD", "9001")
    assert check(None) == ("127.0.0.1", 9001)


def test_a_failing_observer_never_fails_the_job(capsys):
    class Broken:
        def publish(self, snap):
            raise RuntimeError("observer bug")

        def close(self, snap):
            raise RuntimeError("observer bug")

    class Observer:
        def source(self, kind, name):
            return Broken()

    with Farm(dashboard=Observer()) as farm:
        assert list(farm.map(_fail_on_7, range(5))) == [0, 1, 4, 9, 16]
    assert "dashboard updates stopped: RuntimeError: observer bug" in capsys.readouterr().err


def test_ticker_publishes_at_most_once_per_interval():
    sent = []

    class Sink:
        def publish(self, snap):
            sent.append(snap)

    tick = Ticker(Sink(), lambda obj: obj, every=3600)
    for i in range(100):
        tick(i)
    assert sent == [0]
    tick.flush(7)
    assert sent == [0, 7]


# ---------------------------------------------------------------- the server
def _get(url, headers=None, method="GET"):
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def _raw(port, request: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        head = s.recv(4096).split(b"\r\n", 1)[0]
    return int(head.split()[1])


def test_non_local_bind_requires_the_token_on_every_request(capsys):
    hub = Dashboard(0, host="0.0.0.0")
    try:
        src = hub.source("farm", "j")
        src.publish(_snapshot())
        err = capsys.readouterr().err
        assert hub.token and f"?token={hub.token}" in err and "token required" in err
        port = hub.server.server_address[1]
        base = f"http://127.0.0.1:{port}"
        for path in ("/", "/api/state", "/metrics", "/static/app.js", "/nope"):
            assert _get(base + path)[0] == 401
            assert _get(base + path, {"Authorization": "Bearer wrong"})[0] == 403
        ok = {"Authorization": f"Bearer {hub.token}"}
        status, body, _ = _get(base + "/api/state", ok)
        assert status == 200 and json.loads(body)["sources"][0]["latest"]["done"] == 40
        status, body, headers = _get(f"{base}/?token={hub.token}")
        assert status == 200 and b"<html" in body and "HttpOnly" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";")[0]
        assert _get(base + "/metrics", {"Cookie": cookie})[0] == 200
        assert _get(base + "/metrics", {"Cookie": "pyfw_token=nope"})[0] == 403
        assert _get(base + "/metrics", {"Cookie": '"\\bad'})[0] == 401
        # read-only: nothing but GET and HEAD, whatever the token
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert _get(base + "/api/state", ok, method)[0] == 405
        assert _get(base + "/api/state?since=x", ok)[0] == 400
        assert _get(base + "/nope", ok)[0] == 404
        assert _raw(port, b"GET / HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n") == 431
        assert _raw(port, b"BOGUS / HTTP/1.1\r\n\r\n") == 405
        assert _raw(port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n") == 414
        src.publish(_snapshot(done=41))                 # the job goes on publishing
        assert json.loads(_get(base + "/api/state", ok)[1])["sources"][0]["latest"]["done"] == 41
    finally:
        hub.close()


def test_local_bind_needs_no_token_but_refuses_foreign_host_names():
    hub = Dashboard(0)
    try:
        assert hub.token is None and hub.url.startswith("http://127.0.0.1:")
        hub.source("farm", "j").publish(_snapshot())
        port = hub.server.server_address[1]
        assert _get(hub.url + "metrics")[0] == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/state", headers={"Host": "attacker.example"})
        assert conn.getresponse().status == 403          # DNS rebinding
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/state", headers={"Host": f"localhost:{port}"})
        assert conn.getresponse().status == 200
        status, _, headers = _get(hub.url + "api/state", method="HEAD")
        assert status == 200 and headers["Content-Type"] == "application/json"
    finally:
        hub.close()


def _initial_state(page: bytes) -> dict:
    block = page.decode().split('id="pyfw-initial">', 1)[1].split("</script>", 1)[0]
    return json.loads(block)


def test_live_page_carries_the_state_for_its_first_paint():
    """The page rendered "No job has published yet" until its first request came back (a
    screenshot taken at load saw only that): it now comes with the state inlined."""
    hub = Dashboard(0)
    try:
        status, page, _ = _get(hub.url)
        assert status == 200
        assert _initial_state(page)["sources"] == []          # no job yet: said so at once
        assert b"No job has published yet" not in page        # ... by the script, not HTML
        src = hub.source("farm", "</script><b>job</b>")
        src.publish(_snapshot(done=40))
        status, page, _ = _get(hub.url)
        state = _initial_state(page)                        # a name cannot end the block
        assert state["sources"][0]["name"] == "</script><b>job</b>"
        assert state["sources"][0]["latest"]["done"] == 40
        assert state["seq"] == json.loads(_get(hub.url + "api/state")[1])["seq"]
        assert page.index(b'id="pyfw-initial"') < page.index(b'src="static/app.js"')
    finally:
        hub.close()


def test_a_busy_port_leaves_the_job_running(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        hub = Dashboard(port)
        assert hub.server is None and "cannot listen" in capsys.readouterr().err
        with Farm(dashboard=hub) as farm:
            assert sum(farm.map(_fail_on_7, [1, 2, 3])) == 14
        assert hub.state()["sources"][0]["latest"]["done"] == 3


def test_env_var_gives_every_farm_of_the_process_one_shared_dashboard(monkeypatch, tmp_path):
    monkeypatch.setenv("PYFW_DASHBOARD", "127.0.0.1:0")
    monkeypatch.setenv("PYFW_REPORT", str(tmp_path / "r.html"))
    monkeypatch.setattr(Dashboard, "_shared", {})
    for n in (3, 4):
        with Farm() as farm:
            list(farm.map(_fail_on_7, range(n)))
    hub = Dashboard._shared[("127.0.0.1", 0)]
    try:
        assert [s["latest"]["done"] for s in hub.state()["sources"]] == [3, 4]
        assert os.path.getsize(tmp_path / "r.html") > 1000
    finally:
        hub.close()


def test_executor_and_domain_publish_too():
    import numpy as np
    from mpi4py import MPI

    from pyfw.domain import SlabDomain
    from pyfw.futures import Executor

    hub = Dashboard(serve=False)
    with Executor(dashboard=hub) as ex:
        assert list(ex.map(_fail_on_7, range(5))) == [0, 1, 4, 9, 16]
    dom = SlabDomain(MPI.COMM_SELF, (12, 4, 4), dashboard=hub)
    dom.add("T", fill=1.0)
    for _ in range(3):
        dom.step(lambda k0, k1: None, ["T"])
    dom.close()
    farm_view, dom_view = hub.state()["sources"]
    assert farm_view["latest"]["done"] == 5 and farm_view["finished"]
    latest = dom_view["latest"]
    assert dom_view["kind"] == "domain" and dom_view["finished"]
    assert latest["step"] == 3 and latest["cuts"] == [0, 12] and latest["moves"] == 0
    assert latest["speeds"] == [None]          # no monitor was created by watching
    assert dom._monitor is None and np.all(dom["T"] == 1.0)
