"""Phantom and model-level checks (serial)."""
import numpy as np
import pytest
from mpi4py import MPI

from apps.knee.model import KneeRun, Params
from apps.knee.phantom import Geometry, planes
from apps.knee.tissues import DEFAULT_TISSUES, ID, tissue_table
from pyfw.errors import ConfigurationError


def test_phantom_is_built_plane_by_plane_and_has_the_anatomy():
    geo = Geometry(shape=(60, 70, 66), thickness=8.0, length=40.0, bandage=1.0)
    geo.validate()
    whole = planes(geo, 0, 60)
    parts = np.concatenate([planes(geo, a, b) for a, b in ((0, 7), (7, 31), (31, 60))])
    assert np.array_equal(whole, parts)
    present = set(np.unique(whole).tolist())
    for name in ("air", "insulator", "skin", "fat", "muscle", "cortical_bone",
                 "cancellous_bone", "cartilage", "synovial_fluid", "bandage", "gel"):
        assert ID[name] in present, name
    pts = geo.points()
    assert whole[pts["joint_centre"]] == ID["synovial_fluid"]
    assert whole[pts["suprapatellar_pouch"]] == ID["synovial_fluid"]
    # no muscle at the joint line in front of the bones (fat pad, capsule, ligaments)
    zj, yj, xj = pts["joint_centre"]
    assert ID["muscle"] not in whole[zj, yj:, xj]
    assert whole[pts["skin_anterior"]] == ID["skin"]
    assert whole[pts["femur_marrow"]] == ID["cancellous_bone"]
    # the default grid is a 1 mm knee of ~39 cm circumference with a few million voxels
    big = Geometry()
    assert big.outer_radius() == 62.0 and np.prod(big.shape) > 5e6


@pytest.mark.parametrize("shape,device", [
    ((44, 44, 42), dict(device="cuff", length=20.0)), ((44, 40, 38), dict(device="none")),
    ((36, 36, 34), dict(device="none")), ((60, 70, 66), dict(thickness=8.0, length=40.0))])
def test_pouch_probe_is_in_the_pouch_on_small_grids(shape, device):
    """On legs too small for the unscaled 10 mm of skin and fat over the tendon the pouch
    stays on the femur, and the probe point in its fluid."""
    geo = Geometry(shape=shape, **device)
    geo.validate()
    p = geo.points()["suprapatellar_pouch"]
    assert planes(geo, 0, shape[0])[p] == ID["synovial_fluid"]


@pytest.mark.parametrize("depth", [2.0, 6.0, 10.0])
def test_pouch_holds_the_asked_depth_of_fluid_under_the_tendon(depth):
    """``pouch`` mm of fluid along the anterior midline at the probe's level (1 mm grid, a
    full-size leg), the probe in its middle, with the tendon in front of it."""
    geo = Geometry(shape=(140, 150, 150), device="none", pouch=depth)
    geo.validate()
    z, y, x = geo.points()["suprapatellar_pouch"]
    ray = planes(geo, z, z + 1)[0, :, x]
    fluid = np.flatnonzero(ray == ID["synovial_fluid"])
    assert len(fluid) == pytest.approx(depth, abs=1.0)
    assert fluid.min() <= y <= fluid.max()
    assert ray[fluid.max() + 1] == ID["tendon"]
    with pytest.raises(ConfigurationError, match="pouch"):
        Geometry(pouch=0.0).validate()


@pytest.mark.parametrize("subcutis", [2.0, 6.0, 14.0])
def test_muscle_probes_lie_the_asked_depth_under_the_fat_and_the_bag_over_them(subcutis):
    """The thigh and calf probes (Otte 2002, Myrer 2001) sit in muscle 10 and 30 mm under a
    subcutis (skin + fat) of the asked thickness; the device goes where ``device_at`` puts
    it. Counted voxel by voxel along the probe's ray to the air (depth shrinks by 1/1.05
    of a voxel per voxel along x: the leg's section is an ellipse)."""
    names = [t.name for t in DEFAULT_TISSUES]
    for at, probes in ((40.0, (("thigh_lateral_im1", 10.0),)),
                       (-40.0, (("calf_medial_im1", 10.0), ("calf_medial_im3", 30.0)))):
        side = "lateral" if at > 0 else "medial"
        geo = Geometry(subcutis=subcutis, sides=(side,), device_at=at)
        geo.validate()
        for name, below in probes:
            z, y, x = geo.points()[name]
            row = planes(geo, z, z + 1)[0, y]
            out = [names[i] for i in (row[x::-1] if side == "lateral" else row[x:])]
            assert out[0] == "muscle", (name, out[:3])
            n_muscle = out.index("fat") if "fat" in out else out.index("skin")
            n_sub = out.count("skin") + out.count("fat")
            assert abs(n_sub / 1.05 - subcutis) <= 1.0, (name, n_sub, subcutis)
            assert abs(n_muscle / 1.05 - below) <= 1.5, (name, n_muscle, below)
            assert "gel" in out, (name, "no bag over the probe")
        zc = geo.points()[probes[0][0]][0]
        far = planes(geo, geo.shape[0] - 1 - zc, geo.shape[0] - zc)[0]   # the other side of the joint
        assert ID["gel"] not in far
    with pytest.raises(ConfigurationError, match="subcutis"):
        Geometry(subcutis=1.0).validate()
    with pytest.raises(ConfigurationError, match="off the grid"):
        Geometry(device_at=150.0).validate()


def test_summary_reports_the_end_asked_for_unless_it_is_a_mark():
    p = Params(shape=(44, 44, 42), device="cuff", length_mm=20.0, steady_tol=1e-6)
    run = KneeRun(MPI.COMM_SELF, p, balance=False, log=lambda *a: None)
    run.steady_state()
    run.start_cooling()
    run.run(minutes=1.0, history_every=10)
    assert list(run.summary(marks=(1,))["drop"]) == [1]
    run.run(minutes=1.02, history_every=10)          # an end that is not a mark
    keys = list(run.summary(marks=(1,))["drop"])
    assert keys[0] == 1 and len(keys) == 2 and 1.0 < keys[1] < 1.2, keys
    with pytest.raises(ConfigurationError, match="perfusion_lag"):
        Params(perfusion_lag=-1.0).validate()
    with pytest.raises(ConfigurationError, match="perfusion_lag"):
        Params(perfusion_lag=float("inf")).validate()
    with pytest.raises(ConfigurationError, match="perfusion_recovery"):
        Params(perfusion_recovery=float("nan")).validate()
    Params(perfusion_recovery=float("inf")).validate()       # never: a persisting constriction


def test_suprapatellar_probe_lies_under_fat_and_the_quadriceps_tendon():
    """Above the patella the pouch's probe point sits under 2 mm of skin, 8 mm of fat and
    the 7.3 mm quadriceps tendon (MRI, pubmed 37388871), not under muscle; the fat pads lie
    between it and the femur."""
    geo = Geometry(device="none")
    z, y, x = geo.points()["suprapatellar_pouch"]
    col = planes(geo, z, z + 1)[0, :, x]
    assert col[y] == ID["synovial_fluid"]
    front = col[y:]
    skin_at = int(np.nonzero(front == ID["air"])[0][0])       # first air voxel in front
    names = [DEFAULT_TISSUES[i].name for i in front[:skin_at]]
    assert 18 <= skin_at <= 21, names                         # mm (1 mm voxels)
    assert "muscle" not in names and names.count("tendon") >= 6, names
    assert names[-2:] == ["skin", "skin"], names
    behind = [DEFAULT_TISSUES[i].name for i in col[:y][::-1]]
    first_bone = behind.index("cortical_bone")
    assert set(behind[:first_bone]) <= {"synovial_fluid", "fat"}, behind[:first_bone]


def test_property_overrides_and_errors():
    t = tissue_table({"muscle.k": 0.6, "air.h": 5})
    assert t[ID["muscle"]].k == 0.6 and t[ID["air"]].h == 5.0
    assert DEFAULT_TISSUES[ID["muscle"]].k == 0.49
    with pytest.raises(ConfigurationError, match="unknown tissue property"):
        tissue_table({"muscle.colour": 1})
    with pytest.raises(ConfigurationError, match="needs k, rho, c > 0"):
        tissue_table({"fat.k": -1})
    with pytest.raises(ConfigurationError, match="too small"):
        Geometry(shape=(5, 40, 40)).validate()
    # the grid must reach the top of the suprapatellar pouch (and its probe) along the leg
    with pytest.raises(ConfigurationError, match="too short for the knee.*at least 44 planes"):
        Geometry(shape=(40, 44, 42), device="none").validate()


def test_cuff_holds_its_temperature_and_cools_the_skin():
    p = Params(shape=(44, 44, 42), device="cuff", length_mm=20.0, cuff_temp=5.0,
               steady_tol=1e-7)
    run = KneeRun(MPI.COMM_SELF, p, balance=False, log=lambda *a: None)
    run.steady_state()
    run.start_cooling()
    T0 = run.probe()
    run.run(minutes=5, history_every=30)
    T1 = run.probe()
    cuff = run.dom.interior("tid") == ID["cuff"]
    assert cuff.any() and np.all(run.dom.interior("T")[cuff] == 5.0)
    assert T0["skin_anterior"] - T1["skin_anterior"] > 3.0
    assert T0["joint_centre"] - T1["joint_centre"] >= 0.0
    # steady state of the uncooled knee: skin cooler than the core, core near arterial
    assert T0["skin_anterior"] < T0["joint_centre"] < 37.5


def test_ice_pack_holds_near_zero_while_a_gel_pack_warms():
    out = {}
    for pack in ("ice", "gel"):
        p = Params(shape=(44, 44, 42), length_mm=20.0, thickness_mm=6.0, pack=pack,
                   pack_temp=-10.0, steady_tol=1e-6)
        run = KneeRun(MPI.COMM_SELF, p, balance=False, log=lambda *a: None)
        run.steady_state()
        run.start_cooling()
        run.run(minutes=20, history_every=60)
        m = run.dom.interior("tid") == ID[pack]
        out[pack] = (run.dom.interior("T")[m], run.probe())
    ice, gel = out["ice"][0], out["gel"][0]
    assert np.median(ice) > -1.0 - 1e-9 and np.median(ice) <= 0.0   # melting
    assert np.median(gel) > 5.0                                      # sensible heat only
    assert out["ice"][1]["skin_anterior"] < out["gel"][1]["skin_anterior"] - 3.0


def test_arterial_temperature_and_bad_pack():
    kw = dict(shape=(44, 44, 42), length_mm=20.0, device="none", steady_tol=1e-7)
    warm = KneeRun(MPI.COMM_SELF, Params(t_arterial=37.0, **kw), balance=False,
                   log=lambda *a: None)
    warm.steady_state()
    cool = KneeRun(MPI.COMM_SELF, Params(t_arterial=35.0, **kw), balance=False,
                   log=lambda *a: None)
    cool.steady_state()
    assert cool.probe()["joint_centre"] < warm.probe()["joint_centre"] - 1.0
    # the default is the limb's inflow temperature, not the core's
    assert Params().t_arterial == 34.5
    with pytest.raises(ConfigurationError, match="unknown pack"):
        Params(pack="slush").validate()


def test_default_couplings_are_the_validation_fit():
    """The defaults of the cold response and the pack contact are what
    the validation study fitted (``python -m apps.knee.studies validation --publish``; re-run
    it and update tissues.py together)."""
    import json
    import os

    from apps.knee.tissues import ICE_CONTACT, Q10_TISSUE
    path = os.path.join(os.path.dirname(__file__), "..", "apps", "knee", "studies", "results",
                        "validation.json")
    with open(path) as fh:
        fitted = json.load(fh)["fitted"]
    assert fitted["q10"] == Q10_TISSUE and fitted["ice_contact"] == ICE_CONTACT
    for name in ("skin", "fat", "muscle", "tendon"):
        assert DEFAULT_TISSUES[ID[name]].q10 == Q10_TISSUE
    assert DEFAULT_TISSUES[ID["ice"]].contact == ICE_CONTACT


def test_arthroscopy_cools_around_the_cavity_and_the_knee_rewarms_after_it():
    """The irrigated cavity sits at the saline's temperature; the tissues around it cool by
    conduction, never below the coldest boundary (saline or room air) nor above their
    uncooled state (a maximum principle of the heat equation), the joint more than the
    skin; after the operation, with no device, the pouch rewarms monotonically towards its
    uncooled state. The operation comes before the cooling."""
    kw = dict(shape=(44, 44, 42), length_mm=20.0, device="none", steady_tol=1e-8,
              irrigant_temp=24.5)
    runs = {}
    for minutes in (0.0, 10.0):
        run = KneeRun(MPI.COMM_SELF, Params(arthroscopy_min=minutes, **kw), balance=False,
                      log=lambda *a: None)
        run.steady_state()
        run.irrigate()
        runs[minutes] = run
    warm, irrigated = runs[0.0], runs[10.0]
    tid = irrigated.dom.interior("tid")
    T, T_steady = irrigated.dom.interior("T"), warm.dom.interior("T")
    tissue = np.isin(tid, [ID[n] for n in ("skin", "fat", "muscle", "tendon", "cartilage",
                                           "cortical_bone", "cancellous_bone")])
    assert np.all(T[tid == ID["synovial_fluid"]] == 24.5)
    assert np.all(T[tissue] <= T_steady[tissue] + 1e-9)
    assert np.all(T[tissue] >= min(24.5, irrigated.p.ambient) - 1e-9)
    before, after = warm.probe(), irrigated.probe()
    assert before["joint_anterior"] - after["joint_anterior"] > 1.0
    assert (before["skin_anterior"] - after["skin_anterior"]
            < before["joint_anterior"] - after["joint_anterior"])
    irrigated.start_cooling()
    assert irrigated.t0_values["suprapatellar_pouch"] == 24.5   # t = 0: the operation's end
    with pytest.raises(ConfigurationError, match="before start_cooling"):
        irrigated.irrigate()
    irrigated.run(minutes=10, history_every=30)
    rise = np.array(irrigated.history["suprapatellar_pouch"])
    assert np.all(np.diff(rise) >= -1e-9) and rise[-1] > 24.5 + 1.0
    assert rise[-1] < before["suprapatellar_pouch"]
    for bad in (dict(arthroscopy_min=-1.0), dict(arthroscopy_min=float("nan")),
                dict(irrigant_temp=float("inf"))):
        with pytest.raises(ConfigurationError, match="arthroscopy_min|irrigant_temp"):
            Params(**bad).validate()


def test_a_tourniquet_leaves_every_tissue_colder_and_the_joint_rewarms_from_colder():
    """Blood at 34.5 C only brings heat to a knee cooled below it, so with the leg's blood
    flow stopped during the operation no voxel ends it warmer than with the flow on (a
    comparison principle); after the release the physics is the same, so the pouch stays
    at or below the free-flowing knee's throughout its rewarming."""
    kw = dict(shape=(44, 44, 42), length_mm=20.0, device="none", steady_tol=1e-8,
              arthroscopy_min=10.0)
    runs = {}
    for tourniquet in (False, True):
        run = KneeRun(MPI.COMM_SELF, Params(tourniquet=tourniquet, **kw), balance=False,
                      log=lambda *a: None)
        run.steady_state()
        run.irrigate()
        runs[tourniquet] = run
    free, held = runs[False].dom.interior("T"), runs[True].dom.interior("T")
    assert np.all(held <= free + 1e-9)
    # the perfused muscle loses most: no warm blood reaches it while the saline cools the knee
    assert runs[False].probe()["muscle_medial"] - runs[True].probe()["muscle_medial"] > 0.5
    for run in runs.values():
        run.start_cooling()
        run.run(minutes=10, history_every=60)
    free, held = (np.array(runs[k].history["suprapatellar_pouch"]) for k in (False, True))
    assert np.all(held <= free + 1e-9) and held[-1] > held[0] + 1.0


def test_changing_the_pack_contact_during_a_run():
    """A change to the same value steps on bitwise as before; a better contact cools the
    skin faster from then on; a change the time step cannot carry, and a checkpoint of a
    changed run, are refused."""
    from apps.knee.solver import UnstableTimeStep

    def run(change=None):
        p = Params(shape=(44, 44, 42), length_mm=20.0, thickness_mm=6.0, steady_tol=1e-7,
                   overrides={"ice.contact": 0.1})
        r = KneeRun(MPI.COMM_SELF, p, balance=False, log=lambda *a: None)
        r.steady_state()
        r.start_cooling()
        r.run(minutes=2, history_every=30)
        if change is not None:
            r.change_tissues(change)
        r.run(minutes=4, history_every=30)
        return r

    plain, same, wet = run(), run({"ice.contact": 0.1}), run({"ice.contact": 0.0})
    assert np.array_equal(plain.dom.interior("T"), same.dom.interior("T"))
    assert wet.probe()["skin_anterior"] < plain.probe()["skin_anterior"] - 1.0
    n = len(plain.history["t"]) // 2      # the histories agree up to the change
    assert plain.history["skin_anterior"][:n] == wet.history["skin_anterior"][:n]
    with pytest.raises(ConfigurationError, match="checkpoint"):
        wet.save("/nonexistent/ckpt.h5")
    with pytest.raises(UnstableTimeStep, match="new tissue properties"):
        plain.change_tissues({"skin.k": 50.0})
    assert not plain.changed and plain.solver.tab is plain.tab      # nothing changed
    fresh = KneeRun(MPI.COMM_SELF, Params(shape=(44, 44, 42), length_mm=20.0,
                                          thickness_mm=6.0), balance=False, log=lambda *a: None)
    with pytest.raises(ConfigurationError, match="started run"):
        fresh.change_tissues({"ice.contact": 0.0})


def test_putting_the_device_on_later_and_taking_it_off_and_restarts_across_both(tmp_path):
    """Before the device goes on the knee stays at its steady state; it cools while the
    device is on; up to the removal a run is bitwise the run that keeps it on; then the
    pack's voxels are room air and the skin rewarms while the covered one keeps cooling. A
    restart from before, between or after the two continues bitwise."""
    kw = dict(shape=(44, 44, 42), length_mm=20.0, thickness_mm=6.0, steady_tol=1e-7)
    quiet = dict(balance=False, log=lambda *a: None)

    def started(**extra):
        r = KneeRun(MPI.COMM_SELF, Params(**kw, **extra), **quiet)
        r.steady_state()
        r.start_cooling()
        return r

    def skin_at(r, minutes):
        return np.interp(minutes * 60.0, r.history["t"], r.history["skin_anterior"])

    on, off = started(), started(device_off_min=2.0)
    for r in (on, off):
        r.run(minutes=5, history_every=30)
    (step, _), = off.device_events()
    n = int(np.searchsorted(off.history["t"], step * off.solver.dt))  # records before it
    assert n > 2 and on.history["skin_anterior"][:n] == off.history["skin_anterior"][:n]
    assert skin_at(off, 5) > skin_at(off, 2) + 2.0              # the open skin rewarms
    assert skin_at(on, 5) < skin_at(on, 2)
    tid, T = off.dom.interior("tid"), off.dom.interior("T")
    was_pack = on.dom.interior("tid") == ID["ice"]
    assert was_pack.any() and not (tid == ID["ice"]).any()
    assert np.all(tid[was_pack] == ID["air"]) and np.all(T[was_pack] == off.p.ambient)

    later = started(device_on_min=1.0, device_off_min=3.0)
    assert later.solver.dt == on.solver.dt          # the step of the device-on tissues
    later.run(minutes=5, history_every=30)
    t0 = later.t0_values["skin_anterior"]
    assert abs(skin_at(later, 0.99) - t0) < 0.01                # left alone: steady
    assert skin_at(later, 3) < t0 - 3.0 and skin_at(later, 5) > skin_at(later, 3) + 2.0
    for stop in (0.5, 2.0, 4.0):            # before, between and after on and off
        first = started(device_on_min=1.0, device_off_min=3.0)
        first.run(minutes=stop, history_every=30)
        path = str(tmp_path / f"ckpt{stop:g}.h5")
        first.save(path)
        again = KneeRun.restart(MPI.COMM_SELF, path, **quiet)
        again.run(minutes=5, history_every=30)
        assert np.array_equal(again.dom.interior("T"), later.dom.interior("T")), stop
    tiny = started(device_on_min=1e-12, device_off_min=2e-12)   # never at step 0, in order
    assert [k for k, _ in tiny.device_events()] == [1, 2]
    with pytest.raises(ConfigurationError, match="mask of shape"):
        tiny.solver.set_material(np.zeros((2, 2, 2), bool), ID["air"], 24.0)
    for bad in (dict(device_off_min=0.0), dict(device_off_min=float("inf")),
                dict(device_on_min=-1.0), dict(device_on_min=5.0, device_off_min=5.0)):
        with pytest.raises(ConfigurationError, match="device_o"):
            Params(**bad).validate()
    with pytest.raises(ConfigurationError, match="need a device"):
        Params(device="none", device_on_min=5.0).validate()


def test_knee_studies_keep_the_full_leg():
    """apps.knee.studies.common.keep_leg widens a grid too narrow for a device (the
    phantom would shrink the leg to make room, changing the anatomy with the device) to an
    even size, and leaves wide enough grids and device-less runs alone."""
    from apps.knee.studies import common as mod
    grid = ["--dx", "2", "--shape", "100", "80", "80"]
    for extra in ([], ["--thickness", "30"], ["--bandage", "2"], ["--thickness", "8"],
                  ["--device", "cuff"]):
        g = mod.keep_leg(grid, extra)
        shape = tuple(int(n) for n in g[3:6])
        kw = dict(thickness=float(extra[1])) if extra[:1] == ["--thickness"] else {}
        kw.update(bandage=float(extra[1]) if extra[:1] == ["--bandage"] else 0.0)
        if extra[:1] == ["--device"]:
            kw["device"] = "cuff"
        geo = Geometry(shape=shape, dx=2.0, length=120.0, **kw)
        assert geo.outer_radius() == geo.radius, (extra, shape)
        assert shape[1] % 2 == 0 and shape[1] >= 80 and shape[0] == 100
    assert mod.keep_leg(grid, ["--thickness", "8"]) == grid        # fits already
    assert mod.keep_leg(grid, ["--device", "none"]) == grid
