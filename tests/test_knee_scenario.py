"""``apps.knee.run_scenario``: one knee scenario on a given communicator (issue 38, the knee
as an ensemble task).

Serial: it returns the CLI's ``summary.json`` (read back), prints and writes nothing unless
asked, refuses bad input clearly. Under MPI (4 ranks): two groups of 2 from
``COMM_WORLD.Split`` run different scenarios at the same time and each gets, bitwise, what
the same scenario gives alone on a 2-rank communicator and serially (fields from the
checkpoint, the summary but its timings); the balancer works inside a group; an error in
one group is raised on both of its ranks while the other group finishes unaffected; a
domain on a sub-communicator does not publish to the job's dashboard/report.
"""
import json
import os
import shutil
import tempfile

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from apps.knee import Params, run_scenario
from apps.knee.solver import UnstableTimeStep
from mpi_util import agree, everywhere
from pyfw.errors import ConfigurationError

W = MPI.COMM_WORLD
BASE = dict(shape=(36, 36, 34), length_mm=16.0, thickness_mm=4.0, steady_tol=1e-9)
#: two different scenarios: an ice pack on a healthy knee, and a cryo-cuff after an
#: arthroscopy that comes off after 12 s (dt ~1 s: mid-run, a change of tissue ids)
SCENARIOS = [dict(BASE),
             dict(BASE, device="cuff", thickness_mm=3.0, arthroscopy_min=0.2, bandage_mm=1.0,
                  device_off_min=0.2)]
RUN = dict(steps=24, history_every=3.0)


def reproducible(doc):
    """The summary without its timings (``perf``: wall time, final cuts, moves)."""
    return {k: v for k, v in doc.items() if k != "perf"}


def fields(out):
    """The final fields of a run with ``out``, from its checkpoint."""
    with h5py.File(os.path.join(out, "ckpt.h5"), "r") as f:
        return {k: f[k][...] for k in ("T", "tid", "P")}


# ------------------------------------------------------------------------------ serial
def test_summary_is_what_the_cli_writes_and_nothing_else_happens(tmp_path, monkeypatch,
                                                                 capsys):
    """The returned dict is the CLI's summary.json read back (perf apart: wall times), for
    params given as a Params or as a plain dict; no file, no output, no argv."""
    from apps.knee.cli import main
    out = str(tmp_path / "cli")
    assert main(["--shape", "36", "36", "34", "--length", "16", "--thickness", "4",
                 "--steady-tol", "1e-9", "--steps", "24", "--history-every", "3",
                 "--quiet", "--no-plots", "--snapshot-every", "0", "--out", out]) == 0
    with open(os.path.join(out, "summary.json")) as fh:
        cli = json.load(fh)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr("sys.argv", ["not-the-knee", "--shape", "1", "1", "1"])
    capsys.readouterr()
    got = run_scenario(Params(**BASE), MPI.COMM_SELF, **RUN)
    as_dict = run_scenario(dict(BASE, shape=list(BASE["shape"])), MPI.COMM_SELF, **RUN)
    assert capsys.readouterr() == ("", "")
    assert os.listdir(work) == []
    assert reproducible(got) == reproducible(cli) == reproducible(as_dict)
    assert set(got["perf"]) == set(cli["perf"]) and got["perf"]["steps"] == 24
    assert got["summary"]["drop"], got["summary"]      # string keys, as in the JSON
    assert all(isinstance(k, str) for k in got["summary"]["drop"])


def test_out_gets_the_summary_checkpoint_and_snapshots(tmp_path):
    out = str(tmp_path / "a" / "b")
    lines = []
    doc = run_scenario(BASE, MPI.COMM_SELF, minutes=0.25, out=out, snapshot_every=0.1,
                       log=lines.append)
    with open(os.path.join(out, "summary.json")) as fh:
        assert json.load(fh) == doc
    T = fields(out)["T"]
    assert T.shape == BASE["shape"] and np.isfinite(T).all()
    with h5py.File(os.path.join(out, "knee.h5"), "r") as f:
        assert len(f["T"]) == 3      # t = 0, 0.1 and 0.2 min
    assert os.path.exists(os.path.join(out, "knee.xmf"))
    assert any("grid (36, 36, 34) on 1 rank(s)" in x for x in lines)


def test_bad_input_is_refused_clearly(tmp_path):
    with pytest.raises(ConfigurationError, match="unexpected keyword argument 'thicknes'"):
        run_scenario(dict(BASE, thicknes=3.0), MPI.COMM_SELF, steps=2)
    with pytest.raises(ConfigurationError, match="minutes must be"):
        run_scenario(BASE, MPI.COMM_SELF, minutes=0)
    with pytest.raises(UnstableTimeStep, match="above the stability limit"):
        run_scenario(dict(BASE, dt=5.0), MPI.COMM_SELF, steps=2)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigurationError, match="cannot create the output directory"):
        run_scenario(BASE, MPI.COMM_SELF, steps=2, out=str(blocker / "out"))


# ------------------------------------------------------------------------------ MPI
def _groups():
    """World ranks 0-1 and 2-3 as two groups of 2 (ranks beyond 4 stay out); the group
    index (None outside) and the group communicator (COMM_NULL outside)."""
    g = W.rank // 2 if W.rank < 4 else None
    comm = W.Split(MPI.UNDEFINED if g is None else g, W.rank)
    return g, comm


def _shared_tmpdir():
    path = tempfile.mkdtemp(prefix="knee-scenario-") if W.rank == 0 else None
    return W.bcast(path, root=0)


def _alone(scenario, out, **kw):
    """``scenario`` alone on a 2-rank communicator made for it (world ranks 0-1; the others
    wait at the split)."""
    sub = W.Split(0 if W.rank < 2 else MPI.UNDEFINED, W.rank)
    doc = None
    if sub != MPI.COMM_NULL:
        doc = run_scenario(scenario, sub, out=out, **dict(RUN, **kw))
        sub.Free()
    return doc


@pytest.mark.mpi(min_size=4)
def test_two_groups_at_once_are_bitwise_the_runs_alone_and_serial():
    tmp = _shared_tmpdir()
    g, group = _groups()
    docs = {}

    def concurrent():
        if g is not None:
            docs["group"] = run_scenario(SCENARIOS[g], group,
                                         out=os.path.join(tmp, f"group{g}"), **RUN)
            same = group.allgather(docs["group"])       # every rank of the group holds it
            assert all(d == docs["group"] for d in same)
            assert docs["group"]["perf"]["ranks"] == 2
    everywhere(concurrent)

    def alone():
        for i, sc in enumerate(SCENARIOS):
            docs[f"alone{i}"] = _alone(sc, os.path.join(tmp, f"alone{i}"))
            if W.rank == 0:
                docs[f"serial{i}"] = run_scenario(sc, MPI.COMM_SELF,
                                                  out=os.path.join(tmp, f"serial{i}"), **RUN)
    everywhere(alone)

    def compare():
        group_docs = W.allgather(docs.get("group"))
        if W.rank != 0:
            return
        for i in range(2):
            mine = reproducible(group_docs[2 * i])
            assert mine == reproducible(group_docs[2 * i + 1])
            assert mine == reproducible(docs[f"alone{i}"]), f"scenario {i}: group vs alone"
            assert mine == reproducible(docs[f"serial{i}"]), f"scenario {i}: group vs serial"
            f_group, f_alone, f_serial = (fields(os.path.join(tmp, f"{w}{i}"))
                                          for w in ("group", "alone", "serial"))
            for name in f_group:
                assert np.array_equal(f_group[name], f_alone[name]), (i, name)
                assert np.array_equal(f_group[name], f_serial[name]), (i, name)
        # the two scenarios really differ (else the comparison above proves little)
        assert reproducible(group_docs[0]) != reproducible(group_docs[2])
        assert not np.array_equal(fields(os.path.join(tmp, "group0"))["T"],
                                  fields(os.path.join(tmp, "group1"))["T"])
    everywhere(compare)
    if group != MPI.COMM_NULL:
        group.Free()
    W.Barrier()
    if W.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.mpi(min_size=4)
def test_balancer_moves_cuts_inside_each_group_and_the_fields_stay_bitwise():
    """Both groups at once, each with its rank 1 emulated 3x slower: each group's balancer
    gives its slow rank fewer planes, and each field is the serial one."""
    tmp = _shared_tmpdir()
    g, group = _groups()
    kw = dict(steps=150, history_every=6.0)
    docs = {}

    def body():
        if g is not None:
            docs["group"] = run_scenario(SCENARIOS[g], group, balance=True, balance_every=5,
                                         slowdown={1: 3.0}, out=os.path.join(tmp, f"g{g}"),
                                         **kw)
            perf = docs["group"]["perf"]
            sizes = np.diff(perf["cuts"])
            assert perf["moves"] >= 1 and sizes[1] < sizes[0], perf
    everywhere(body)

    def serial():
        if W.rank == 0:
            for i, sc in enumerate(SCENARIOS):
                docs[i] = run_scenario(sc, MPI.COMM_SELF, balance=False,
                                       out=os.path.join(tmp, f"s{i}"), **kw)
    everywhere(serial)

    def compare():
        group_docs = W.allgather(docs.get("group"))
        if W.rank == 0:
            for i in range(2):
                assert reproducible(group_docs[2 * i]) == reproducible(docs[i]), i
                a, b = fields(os.path.join(tmp, f"g{i}")), fields(os.path.join(tmp, f"s{i}"))
                assert all(np.array_equal(a[k], b[k]) for k in a), i
    everywhere(compare)
    if group != MPI.COMM_NULL:
        group.Free()
    W.Barrier()
    if W.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.mpi(min_size=4)
def test_an_error_in_one_group_is_raised_on_its_ranks_and_the_other_group_finishes():
    """Group 0 asks for an unstable time step (refused on both its ranks, the same
    message), then for an output directory that rank 0 cannot create, then for snapshots
    whose XDMF file rank 0 cannot write (the other rank raises too, no hang). Group 1, meanwhile, fails mid-run (its checkpoint cannot be written: a directory
    stands where the file's temporary goes; the balancer has exchanges in flight) on both
    ranks, then runs its scenario on the same communicator and gets the serial result."""
    tmp = _shared_tmpdir()
    g, group = _groups()
    verdict, got = (True, ""), {}
    if g == 0:
        try:
            run_scenario(dict(SCENARIOS[0], dt=5.0), group, **RUN)
            verdict = (False, "an unstable dt was accepted")
        except UnstableTimeStep as e:
            got["dt"] = str(e)
        try:
            run_scenario(SCENARIOS[0], group, out="/proc/no/such/dir", **RUN)
            verdict = (False, "an unwritable out was accepted")
        except ConfigurationError as e:
            got["out"] = str(e)
        xmf = os.path.join(tmp, "xmf")          # the XDMF file's temporary is a directory
        if group.rank == 0:
            os.makedirs(os.path.join(xmf, "knee.xmf.tmp"))
        try:
            run_scenario(SCENARIOS[0], group, out=xmf, snapshot_every=0.05, **RUN)
            verdict = (False, "an XDMF file that cannot be written was accepted")
        except ConfigurationError as e:
            got["xmf"] = str(e)
        msgs = group.allgather(got)
        if verdict[0] and msgs[0]["dt"] != msgs[1]["dt"]:
            verdict = (False, f"different messages: {msgs}")
        if verdict[0] and not ("cannot create the output directory" in msgs[0]["out"]
                               and "rank 0" in msgs[1]["out"]
                               and "knee.xmf" in msgs[0]["xmf"] and "rank 0" in msgs[1]["xmf"]):
            verdict = (False, f"unclear messages: {msgs}")
    elif g == 1:
        out = os.path.join(tmp, "blocked")
        if group.rank == 0:
            os.makedirs(os.path.join(out, "ckpt.h5.tmp"))
        try:
            run_scenario(SCENARIOS[1], group, out=out, checkpoint_every=0.1, balance_every=3,
                         **RUN)
            verdict = (False, "a checkpoint that cannot be written was accepted")
        except ConfigurationError as e:
            if "checkpoint" not in str(e):
                verdict = (False, f"unclear message: {e}")
        got["doc"] = run_scenario(SCENARIOS[1], group, balance_every=3, **RUN)
    agree(*verdict)
    docs = W.allgather(got.get("doc"))
    ref = run_scenario(SCENARIOS[1], MPI.COMM_SELF, **RUN) if W.rank == 0 else None
    agree(W.rank != 0 or reproducible(docs[2]) == reproducible(ref), "group 1 differs")
    if group != MPI.COMM_NULL:
        group.Free()
    W.Barrier()
    if W.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.mpi(min_size=4)
def test_a_domain_on_a_sub_communicator_does_not_publish_as_the_job(tmp_path_factory,
                                                                    monkeypatch):
    """With the job's report asked for ($PYFW_REPORT, as pyfw-run --report sets it), a
    domain over every rank publishes (from rank 0); one over a group does not."""
    from pyfw.dashboard.hub import Dashboard
    from pyfw.domain import SlabDomain
    report = W.bcast(str(tmp_path_factory.mktemp("report") / "r.html") if W.rank == 0
                     else None, root=0)
    monkeypatch.setenv("PYFW_REPORT", report)
    monkeypatch.delenv("PYFW_DASHBOARD", raising=False)
    g, group = _groups()
    shared = dict(Dashboard._shared)
    try:
        def body():
            if group != MPI.COMM_NULL:
                part = SlabDomain(group, (8, 4, 4))
                assert part._ticker is None
                part.close()
            whole = SlabDomain(W, (8, 4, 4))
            assert (whole._ticker is not None) == (W.rank == 0)
            whole.close()
            if W.rank == 0:
                assert os.path.exists(report)
        everywhere(body)
    finally:
        Dashboard._shared.clear()
        Dashboard._shared.update(shared)
        if group != MPI.COMM_NULL:
            group.Free()
