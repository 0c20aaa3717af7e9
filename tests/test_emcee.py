"""emcee 3 with ``pool=`` a pyfw.futures executor: with the same seed, the same chain as a
serial run (emcee uses ``pool.map`` in order; pyfw's ordered map keeps it).

The run is a subprocess with a hard timeout (it spawns MPI workers). emcee comes with the
``dev`` extra; without it the test skips and says why.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = r'''
import json, sys
import numpy as np
import emcee
from pyfw.futures import MPIPoolExecutor

def log_prob(x, ivar):
    return -0.5 * np.sum(ivar * x ** 2)

def run(pool):
    ndim, nwalkers = 5, 16
    rng = np.random.default_rng(42)
    ivar = 1.0 / rng.random(ndim)
    p0 = rng.standard_normal((nwalkers, ndim))
    sampler = emcee.EnsembleSampler(nwalkers, ndim, log_prob, args=[ivar], pool=pool)
    sampler.random_state = np.random.RandomState(7).get_state()   # emcee's seeded RNG
    sampler.run_mcmc(p0, 60)
    return sampler.get_chain().tolist(), sampler.get_log_prob().tolist()

if __name__ == "__main__":
    serial = run(None)
    with MPIPoolExecutor(2) as pool:
        pooled = run(pool)
    json.dump({"same": serial == pooled, "steps": len(serial[0])}, open(sys.argv[1], "w"))
'''


def test_emcee_chain_with_a_pyfw_pool_equals_the_serial_chain(tmp_path):
    pytest.importorskip("emcee", reason="emcee is not installed (pip install -e '.[dev]')")
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "o.json")], env=env,
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    out = json.loads((tmp_path / "o.json").read_text())
    assert out == {"same": True, "steps": 60}
