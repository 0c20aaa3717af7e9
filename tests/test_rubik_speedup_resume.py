"""benchmarks/rubik_speedup.py --resume: a long series measured over several idle windows
keeps the cubes a stopped run saved, runs only the others, and refuses another run's file."""
import importlib.util
import json
import os

import pytest

PATH = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "rubik_speedup.py")


@pytest.fixture
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("rubik_speedup", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    launched, stop = [], {"at": None}

    def fake_launch(ranks, heuristic, seed, *rest, **kw):   # 1 worker: 2 s, 2 workers: 1 s
        if seed == stop["at"]:
            raise KeyboardInterrupt                 # the run is stopped at this cube
        launched.append((ranks, seed))
        return {"length": 17, "seconds": {2: 2.0, 3: 1.0}[ranks], "generated": 1000 + seed}

    monkeypatch.setattr(mod, "launch", fake_launch)
    monkeypatch.setattr(mod, "plot", lambda configs, path: None)
    return mod, launched, stop


def test_resume_runs_only_the_cubes_a_stopped_run_did_not_finish(bench, tmp_path):
    mod, launched, stop = bench
    out = str(tmp_path / "series")     # --out DIR: the run writes DIR/rubik_speedup.json
    stop["at"] = 5
    with pytest.raises(KeyboardInterrupt):
        mod.main(["--seeds", "3-6", "--out", out])
    saved = json.load(open(os.path.join(out, "rubik_speedup.json")))
    assert not saved["complete"] and [c["seed"] for c in saved["configs"][0]["cubes"]] == [3, 4]
    stop["at"], launched[:] = None, []
    assert mod.main(["--seeds", "3-6", "--out", out, "--resume"]) == 0
    assert sorted({s for _, s in launched}) == [5, 6]               # only the rest ran
    got = json.load(open(os.path.join(out, "rubik_speedup.json")))
    assert got["complete"] and [c["seed"] for c in got["configs"][0]["cubes"]] == [3, 4, 5, 6]
    assert got["configs"][0]["summary"]["cubes"] == 4
    assert got["configs"][0]["summary"]["median_speedup"] == 2.0
    with pytest.raises(SystemExit, match="another run"):          # other settings: refused
        mod.main(["--seeds", "3-6", "--out", out, "--resume", "--no-steal"])
