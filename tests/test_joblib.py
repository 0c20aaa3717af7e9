"""pyfw.joblib: joblib's "pyfw" backend over spawned pyfw.futures workers.

Each check runs in a subprocess with a hard timeout (it spawns MPI workers). scikit-learn
and joblib come with the ``dev`` extra; without them the test skips and says why.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = r'''
import json, os, sys
import joblib
import pyfw.joblib
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.svm import SVC

def pid(x):
    return os.getpid(), x * x

class Odd(Exception):
    pass

def fails_on_13(x):
    if x == 13:
        raise Odd(f"item {x}")
    return x

def search(X, y):
    grid = GridSearchCV(SVC(), {"C": [0.5, 1, 4], "gamma": [1e-3, 1e-4]}, cv=3)
    grid.fit(X, y)
    return {"best": grid.best_params_, "score": grid.best_score_,
            "means": grid.cv_results_["mean_test_score"].tolist(),
            "cv": cross_val_score(SVC(gamma=1e-3), X, y, cv=4).tolist()}

if __name__ == "__main__":
    X, y = load_digits(return_X_y=True)
    out = {"default": search(X, y)}        # joblib's default backend (n_jobs=None: serial)
    with joblib.parallel_backend("pyfw", n_jobs=2):
        out["pyfw"] = search(X, y)
        got = joblib.Parallel(batch_size=3)(joblib.delayed(pid)(i) for i in range(60))
        out["squares"] = [v for _, v in got]
        out["pids"] = len({p for p, _ in got})
        out["lambda"] = joblib.Parallel()(joblib.delayed(lambda v: v + 1)(i) for i in range(5))
        try:
            joblib.Parallel()(joblib.delayed(fails_on_13)(i) for i in range(40))
        except Odd as exc:
            out["error"] = [type(exc).__name__, str(exc)]
    with joblib.parallel_backend("pyfw"):
        out["n1"] = joblib.Parallel(n_jobs=1)(joblib.delayed(pid)(i) for i in range(3))[0][0]
        out["n3"] = len({p for p, _ in joblib.Parallel(n_jobs=3)(
            joblib.delayed(pid)(i) for i in range(60))})
    out["parent"] = os.getpid()
    json.dump(out, open(sys.argv[1], "w"))
'''


def test_sklearn_grid_search_matches_default_backend_and_joblib_contract(tmp_path):
    pytest.importorskip("joblib", reason="joblib is not installed (pip install -e '.[dev]')")
    pytest.importorskip("sklearn", reason="scikit-learn is not installed "
                                          "(pip install -e '.[dev]')")
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("MPI4PY_FUTURES_MAX_WORKERS", None)
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "o.json")], env=env,
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["pyfw"] == out["default"]            # same scores, same choice
    assert out["default"]["score"] > 0.9            # a real fit, not a degenerate one
    assert out["squares"] == [i * i for i in range(60)] and out["pids"] == 2
    assert out["lambda"] == [1, 2, 3, 4, 5]         # cloudpickled, as with loky
    assert out["error"] == ["Odd", "item 13"]       # the task's own exception type
    assert out["n1"] == out["parent"]               # n_jobs=1: in this process, as joblib
    assert out["n3"] == 3                           # n_jobs=3: three workers
