"""The installed footprint: a non-editable install puts pyfw (with the apps as ``pyfw.apps``)
into site-packages and no generic top-level ``apps``; the checkout keeps ``python -m apps.*``."""
import configparser
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _packages_on_disk():
    out = set()
    for top, name in (("pyfw", "pyfw"), ("apps", "pyfw.apps")):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(d, os.path.join(ROOT, top))
                out.add(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    return out


def test_setup_cfg_lists_every_package():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    listed = set(cfg["options"]["packages"].split())
    assert listed == _packages_on_disk()
    assert "pyfw.apps = apps" in cfg["options"]["package_dir"]


def test_non_editable_install_has_no_top_level_apps(tmp_path):
    src, target = tmp_path / "src", tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for d in ("pyfw", "apps"):
        shutil.copytree(os.path.join(ROOT, d), src / d, ignore=ignore)
    for f in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, f), src / f)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(src)], check=True, timeout=300)
    assert sorted(p for p in os.listdir(target) if not p.endswith(".dist-info")) == \
        ["bin", "pyfw"]
    assert (target / "pyfw" / "apps" / "rubik" / "__main__.py").exists()
    env = dict(os.environ, PYTHONPATH=str(target))
    for app in ("rubik", "knee"):   # from outside the checkout: the installed spelling
        out = subprocess.run([sys.executable, "-m", f"pyfw.apps.{app}", "--help"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "usage:" in out.stdout, out.stderr
    script = (target / "bin" / "pyfw-rubik").read_text()
    assert "from pyfw.apps.rubik.cli import main" in script


def test_apps_run_from_the_checkout():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "apps.rubik", "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "usage:" in out.stdout, out.stderr


def test_checkout_name_is_the_installed_module_so_numba_caches_load_anywhere(tmp_path):
    """In an editable install ``apps.X`` and ``pyfw.apps.X`` are one file. Numba caches a
    kernel beside its file under the name of the module that compiled it, so a checkout run
    that compiled as ``apps.*`` left entries a run from elsewhere could not load ("No module
    named 'apps'"). ``apps.X`` must be the module ``pyfw.apps.X`` itself, whichever name a
    process imports first."""
    where = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('pyfw.apps').origin)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    origin = where.stdout.strip()
    if where.returncode or os.path.dirname(os.path.realpath(origin)) != os.path.join(
            os.path.realpath(ROOT), "apps"):
        pytest.skip(f"pyfw.apps is not an editable install of this checkout ({origin or where.stderr[-200:]})")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env.pop("PYTHONPATH", None)
    checkout = ("import apps, pyfw.apps, apps.rubik.coords as a, pyfw.apps.rubik.coords as b\n"
                "assert apps is pyfw.apps and a is b and a.__spec__.name == b.__name__\n"
                "assert a._slice_rank.__module__ == 'pyfw.apps.rubik.coords'")
    out = subprocess.run([sys.executable, "-c", checkout], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert list((tmp_path / "numba").rglob("*.nbi")), "the checkout run cached no kernel"
    # from elsewhere, importing pyfw.apps first: the checkout's name resolves to it too (so
    # entries an older version cached under "apps.*" load)
    elsewhere = ("import pyfw.apps.rubik.coords as b, apps.rubik.coords as a, apps, pyfw.apps\n"
                 "assert a is b and apps is pyfw.apps")
    out = subprocess.run([sys.executable, "-c", elsewhere],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
