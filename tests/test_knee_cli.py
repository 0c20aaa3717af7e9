"""The knee CLI end to end: serial run with outputs readable without pyfw, restart on a
different rank count (bitwise), bad input under mpiexec (clear error on every rank, no hang)."""
import json
import os
import sys
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

from apps.knee.cli import main
from pyfw import launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["--shape", "44", "40", "38", "--length", "20", "--thickness", "5", "--quiet",
         "--steady-tol", "1e-8"]


def knee(n, args, timeout=240):
    return launch.run(n, [sys.executable, "-m", "apps.knee"] + args, timeout=timeout,
                      capture=True, cwd=ROOT)


def test_serial_run_writes_readable_outputs(tmp_path):
    out = str(tmp_path / "o")
    assert main(SMALL + ["--minutes", "2", "--snapshot-every", "1", "--out", out]) == 0
    with h5py.File(os.path.join(out, "knee.h5"), "r") as f:
        steps = sorted(f["T"])
        assert len(steps) == 3 and f["tid"].dtype == np.uint8
        T = f["T"][steps[-1]][...]
        assert T.shape == (44, 40, 38) and np.isfinite(T).all()
        assert f["T"][steps[-1]].attrs["time"] >= 120 - 1.0
    root = ET.parse(os.path.join(out, "knee.xmf")).getroot()
    grids = root.findall("./Domain/Grid/Grid")
    assert len(grids) == 3
    assert grids[0].find("Topology").get("Dimensions") == "44 40 38"
    assert grids[-1].find("Attribute/DataItem").text == f"knee.h5:/T/{steps[-1]}"
    s = json.load(open(os.path.join(out, "summary.json")))
    assert set(s["history"]) >= {"t", "joint_centre", "skin_anterior"}
    drop = s["summary"]["drop"]
    last = drop[max(drop, key=float)]
    assert last["skin_anterior"] > last["joint_centre"] > -1e-9  # cooled from outside in
    for png in ("history.png", "sections.png"):
        assert os.path.getsize(os.path.join(out, png)) > 1000


def test_snapshots_carry_the_tissue_ids_when_the_device_goes_on_and_off(tmp_path):
    """With --device-on/--device-off each snapshot holds the tissue ids of its step (no
    pack before 0.5 min, a pack between, none after 1 min), and summary.json stays strict
    JSON with a persisting vasoconstriction (inf)."""
    from apps.knee.tissues import ID
    out = str(tmp_path / "o")
    assert main(SMALL + ["--minutes", "1.5", "--device-on", "0.5", "--device-off", "1",
                         "--snapshot-every", "0.25", "--perfusion-recovery", "inf",
                         "--no-plots", "--out", out]) == 0
    with h5py.File(os.path.join(out, "knee.h5"), "r") as f:
        steps = sorted(f["T"])
        assert sorted(f["tid"]) == steps
        t = [f["T"][k].attrs["time"] / 60.0 for k in steps]
        pack = [int((f["tid"][k][...] == ID["ice"]).sum()) for k in steps]
    assert [n > 0 for n in pack] == [0.5 <= m < 1.0 for m in t], (t, pack)
    with open(os.path.join(out, "summary.json")) as fh:
        params = json.loads(fh.read(), parse_constant=lambda c: pytest.fail(c))["params"]
    assert params["perfusion_recovery"] == "inf" and params["device_on_min"] == 0.5
    root = ET.parse(os.path.join(out, "knee.xmf")).getroot()
    grid = root.findall("./Domain/Grid/Grid")[-1]
    assert {a.get("Name") for a in grid.findall("Attribute")} >= {"T", "tid"}


@pytest.mark.launch
def test_restart_on_a_different_rank_count_is_bitwise(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    common = SMALL + ["--no-plots", "--snapshot-every", "0"]
    assert main(common + ["--steps", "40", "--out", a]) == 0            # 1 rank straight
    r = knee(2, common + ["--steps", "20", "--out", b])                   # 2 ranks, half
    assert r.returncode == 0, r.stderr[-3000:]
    r = knee(3, common + ["--restart", os.path.join(b, "ckpt.h5"), "--steps", "40",
                          "--out", b, "--slowdown", "2=2", "--balance-every", "5"])
    assert r.returncode == 0, r.stderr[-3000:]
    with h5py.File(os.path.join(a, "ckpt.h5")) as fa, h5py.File(os.path.join(b, "ckpt.h5")) as fb:
        assert fa.attrs["step"] == fb.attrs["step"] == 40
        assert np.array_equal(fa["T"][...], fb["T"][...])
        ha, hb = json.loads(fa.attrs["history"]), json.loads(fb.attrs["history"])
        assert {k: v[-1] for k, v in ha.items()} == {k: v[-1] for k, v in hb.items()}


@pytest.mark.launch
@pytest.mark.parametrize("bad, message", [
    (["--set", "bone.k=1"], "unknown tissue 'bone'"),
    (["--sides", "anterior,front"], "unknown side"),
    (["--thickness", "60"], "does not fit"),
    (["--dt", "3"], "above the stability limit"),
    (["--restart", "/nonexistent/ckpt.h5"], "cannot read checkpoint"),
])
def test_bad_input_clear_error_on_every_rank(tmp_path, bad, message):
    r = knee(2, SMALL + ["--no-plots", "--steps", "2", "--out", str(tmp_path)] + bad,
             timeout=120)
    assert not r.timed_out
    assert r.returncode != 0
    for rank in (0, 1):
        assert f"knee: error (rank {rank}): " in r.stderr and message in r.stderr, r.stderr


def test_unstable_dt_refused_before_the_steady_state_and_finished_restart_says_so(
        tmp_path, capsys):
    loud = [a for a in SMALL if a != "--quiet"]
    assert main(loud + ["--dt", "500", "--no-plots", "--out", str(tmp_path / "a")]) == 2
    got = capsys.readouterr()
    assert "above the stability limit" in got.err
    assert "steady state" not in got.out            # refused before the steady-state solve
    out = str(tmp_path / "b")
    assert main(SMALL[:-1] + ["1e-5", "--no-plots", "--steps", "4", "--out", out]) == 0
    capsys.readouterr()
    assert main(loud + [
        "--no-plots", "--steps", "4", "--restart", os.path.join(out, "ckpt.h5"),
        "--out", str(tmp_path / "c")]) == 0
    assert "already at step 4" in capsys.readouterr().out


def test_default_scenario_reports_the_sensitivity_band():
    from apps.knee.cli import SENSITIVITY, sensitivity_band
    from apps.knee.model import Params
    with open(SENSITIVITY) as fh:
        study = json.load(fh)
    summ = {"drop": {30: {study["point"]: 2.0}, 60: {study["point"]: 4.0},
                     90: {study["point"]: 5.0}}}
    got = sensitivity_band(Params(shape=(100, 80, 80), dx_mm=2.0), summ)
    for m, (d, lo, hi) in got["drops"].items():
        assert lo <= d <= hi
        base = study["base"][m]
        assert abs(lo / d - study["band"][m][0] / base) < 1e-12   # the study's fractions
    assert sensitivity_band(Params(thickness_mm=8.0), summ) is None   # another scenario
