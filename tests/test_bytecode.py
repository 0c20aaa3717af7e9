"""pyfw-run compiles pyfw's modules once before a job, so that its ranks do not each compile
them (pyfw.bytecode): missing and stale bytecode written, current bytecode left alone,
nothing done where the user said so or the package cannot be written."""
import importlib.util
import os
import subprocess
import sys

import pytest

from pyfw import bytecode, launch

pytestmark = pytest.mark.launch


def _package(tmp_path, text="VALUE = 1\n"):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text(text)
    return pkg


def _cached(path) -> str:
    return importlib.util.cache_from_source(str(path))


def test_missing_bytecode_is_written_for_every_module_of_the_package(tmp_path):
    pkg = _package(tmp_path)
    assert bytecode.ensure_compiled(str(pkg), env={})
    for src in (pkg / "__init__.py", pkg / "sub" / "__init__.py", pkg / "sub" / "mod.py"):
        assert os.path.exists(_cached(src)), src


def test_the_written_bytecode_is_what_an_import_uses_without_writing(tmp_path):
    """With PYTHONDONTWRITEBYTECODE (as some CI images set), a fresh interpreter imports the
    module from the launcher's bytecode: the source is replaced by one that would fail,
    with the same size and mtime, so only the bytecode can give the old value."""
    pkg = _package(tmp_path, "VALUE = 41\n")
    mod = pkg / "sub" / "mod.py"
    assert bytecode.ensure_compiled(str(pkg), env={})
    st = os.stat(mod)
    mod.write_text("VALUE = 1/0")            # the compiled source's length (11 bytes)
    os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import pkg.sub.mod as m; print(m.VALUE)"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "41"


def test_stale_bytecode_is_rewritten_and_current_bytecode_left_alone(tmp_path):
    pkg = _package(tmp_path)
    mod = pkg / "sub" / "mod.py"
    init_pyc = _cached(pkg / "__init__.py")
    assert bytecode.ensure_compiled(str(pkg), env={})
    before = os.stat(init_pyc).st_mtime_ns
    mod.write_text("VALUE = 2222\n")
    st = os.stat(mod)
    os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert bytecode.ensure_compiled(str(pkg), env={})
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import pkg.sub.mod as m; print(m.VALUE)"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "2222", out.stderr
    assert os.stat(init_pyc).st_mtime_ns == before      # not rewritten


def test_nothing_is_written_when_the_user_says_so(tmp_path):
    pkg = _package(tmp_path)
    assert not bytecode.ensure_compiled(str(pkg), env={bytecode.ENV: "0"})
    assert not os.path.exists(_cached(pkg / "sub" / "mod.py"))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into a read-only directory")
def test_a_read_only_package_is_left_alone(tmp_path):
    pkg = _package(tmp_path)
    os.chmod(pkg, 0o555)
    try:
        assert not bytecode.ensure_compiled(str(pkg), env={})
    finally:
        os.chmod(pkg, 0o755)


def test_a_launch_compiles_pyfw_before_its_ranks_start(monkeypatch):
    calls = []
    monkeypatch.setattr(bytecode, "ensure_compiled", lambda **kw: calls.append(kw))
    res = launch.run(1, [sys.executable, "-c", "pass"], timeout=120, capture=True)
    assert res.returncode == 0, res.stderr
    assert len(calls) == 1
