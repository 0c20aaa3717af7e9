"""Where benchmark and study results go (pyfw.monitor.results) and the {median, min, max}
summary they store (pyfw.monitor.stats.spread): a run never overwrites the tracked results
unless asked with --publish."""
import argparse
import json
import os

import pytest

from pyfw.monitor import results
from pyfw.monitor.stats import spread


def _args(tmp_path, *argv):
    ap = argparse.ArgumentParser()
    results.add_output_options(ap, str(tmp_path / "published"))
    return ap.parse_args(list(argv))


def test_default_is_the_untracked_local_directory(tmp_path):
    out = results.output_dir(_args(tmp_path))
    assert out == str(tmp_path / "published" / "local") and os.path.isdir(out)


def test_out_names_the_directory_and_publish_the_tracked_one(tmp_path):
    assert results.output_dir(_args(tmp_path, "--out", str(tmp_path / "mine"))) == \
        str(tmp_path / "mine")
    assert results.output_dir(_args(tmp_path, "--publish")) == str(tmp_path / "published")
    with pytest.raises(SystemExit):   # one or the other
        _args(tmp_path, "--publish", "--out", str(tmp_path / "mine"))


def test_write_json_records_the_machine_and_keeps_the_data(tmp_path):
    path = results.write_json(str(tmp_path), "x.json", {"a": 1, "command": "given"})
    got = json.load(open(path))
    assert got["a"] == 1 and got["command"] == "given"
    assert got["machine"]["cpus"] == os.cpu_count() and "host" in got["machine"]


def test_spread_against_sorted_values():
    assert spread([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "min": 1.0, "max": 10.0}
    assert spread([5, 4, 6], keep_runs=True)["runs"] == [5.0, 4.0, 6.0]
    with pytest.raises(ValueError):
        spread([])


def test_alternate_interleaves_the_arms_and_summarises_each():
    """Side-by-side launches: per size the arms take turns launch by launch (a drift in the
    machine's load then hits every arm alike), and each arm's runs are summarised apart."""
    order = []

    def launch(size, setting):
        order.append((size, setting))
        return {"t": size + setting * len(order)}

    rows = list(results.alternate([4, 8], 2, {"peer": 1, "ours": 2}, launch, ("t",)))
    assert order == [(4, 1), (4, 2), (4, 1), (4, 2), (8, 1), (8, 2), (8, 1), (8, 2)]
    assert [(r["ranks"], r["arm"]) for r in rows] == [(4, "peer"), (4, "ours"),
                                                      (8, "peer"), (8, "ours")]
    assert [run["t"] for run in rows[1]["runs"]] == [4 + 2 * 2, 4 + 2 * 4]
    assert rows[1]["t"] == spread([8, 12])


@pytest.mark.launch
def test_timed_job_hands_the_launch_time_to_the_ranks_and_reads_the_last_json_line():
    program = ("import json, os, time\n"
               "from mpi4py import MPI\n"
               "since = time.time() - float(os.environ['PYFW_LAUNCH_T0'])\n"
               "if MPI.COMM_WORLD.rank == 0:\n"
               "    print(json.dumps({'first': 1}))\n"
               "    print(json.dumps({'since_s': since}))\n")
    row = results.timed_job(2, program, dict(os.environ), "a test job")
    assert set(row) == {"since_s", "job_s"}
    assert 0 < row["since_s"] < row["job_s"]
    with pytest.raises(RuntimeError, match="2 ranks, a failing job: exit"):
        results.timed_job(2, "raise SystemExit(3)", dict(os.environ), "a failing job")
