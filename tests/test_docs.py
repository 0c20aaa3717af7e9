"""The README cannot rot: every fenced command in it runs, in order, as a reader would.

``python`` blocks whose first line names a file (``# tour_farm.py: ...``) are written to that
file in a scratch directory with ``apps/`` and ``jobs/`` linked in from the checkout; every
line of a ``bash`` block is then run there with a hard timeout and must exit 0. The few lines
that cannot run here are listed in :data:`NOT_RUN`, each with its reason; the test-bed lines
run on their own prefix (so a reader's ``pfw`` test bed is left alone) and skip, saying why,
where namespaces are unavailable. The generated references (docs/cli.md and
benchmarks/README.md) must match what their generators write now.
"""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PREFIX = "pfdoc"   # the test bed's prefix here, not the reader's default "pfw"

#: the start of a command that is shown but not run here -> why
NOT_RUN = {
    "python3 -m pip install": "the set-up itself: CI has just run it (the job after && runs)",
    "./run-tests": "the suite this test is part of",
    "sbatch ": "no Slurm here: the same script runs unchanged under pyfw-cluster job above",
}
TIMEOUT = 300


def blocks(text: str):
    """(language, body) of every fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def commands(text: str):
    """('file', name, body) for named python blocks and ('run', line) for bash lines."""
    out = []
    for lang, body in blocks(text):
        if lang == "python":
            m = re.match(r"# (\S+\.py)\b", body)
            if m:
                out.append(("file", m.group(1), body))
        elif lang == "bash":
            out += [("run", line.strip()) for line in body.splitlines()
                    if line.strip() and not line.strip().startswith("#")]
    return out


def _testbed_reason():
    from pyfw.testbed.netns import refuse_reason
    return refuse_reason()


def _localise(line: str) -> str:
    line = line.replace("pyfw-cluster ", f"pyfw-cluster --prefix {PREFIX} ")
    return line.replace("--testbed pfw ", f"--testbed {PREFIX} ")


def test_readme_is_a_short_guide():
    text = open(README).read()
    assert len(text.encode()) <= 10 * 1024, "README.md over 10 KB: move detail to docs/"
    for link in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", text):
        assert os.path.exists(os.path.join(ROOT, link)), f"README links to missing {link}"


def test_every_readme_command_runs(tmp_path):
    steps = commands(open(README).read())
    assert any(k == "run" for k, *_ in steps) and any(k == "file" for k, *_ in steps)
    for name in ("apps", "jobs"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    bed_reason = _testbed_reason()
    skipped, ran, testbed_up = [], 0, False
    if not bed_reason:   # between the README's commands too, another run's `up` is refused
        from pyfw.testbed import lease
        held = lease.hold(PREFIX)
    try:
        for kind, *rest in steps:
            if kind == "file":
                name, body = rest
                (tmp_path / name).write_text(body)
                continue
            line = rest[0]
            why = next((r for start, r in NOT_RUN.items() if line.startswith(start)), None)
            if line.startswith("python3 -m pip install") and "&&" in line:
                line, why = line.split("&&", 1)[1].strip(), None
            if why is None and bed_reason and ("pyfw-cluster" in line or "--testbed" in line):
                why = f"test bed unavailable: {bed_reason}"
            if why:
                skipped.append(f"{line}  ({why})")
                continue
            line = _localise(line)
            testbed_up = testbed_up or " up " in line and "pyfw-cluster" in line
            res = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, text=True,
                                 capture_output=True, timeout=TIMEOUT)
            assert res.returncode == 0, (f"README command failed ({res.returncode}): "
                                         f"{line}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
            if " down" in line and "pyfw-cluster" in line:
                testbed_up = False
            ran += 1
    finally:
        if testbed_up:
            subprocess.run([sys.executable, "-m", "pyfw.testbed.cli", "--prefix", PREFIX,
                            "down"], capture_output=True, timeout=60)
        if not bed_reason:
            lease.release(held)
    print(f"ran {ran} README commands; not run here:\n  " + "\n  ".join(skipped))
    assert ran >= 8
    for name in ("summary.json", "history.png", "sections.png"):   # what the README promises
        assert (tmp_path / "knee-out" / name).exists(), f"knee-out/{name} missing"


@pytest.mark.parametrize("script", ["docs/make_cli.py", "benchmarks/report.py"])
def test_generated_references_are_current(script):
    res = subprocess.run([sys.executable, os.path.join(ROOT, script), "--check"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    version = f"(Python {sys.version_info[0]}.{sys.version_info[1]})"
    if res.returncode != 0 and script.endswith("make_cli.py") and \
            version not in open(os.path.join(ROOT, "docs/cli.md")).read(400):
        pytest.skip(f"docs/cli.md was generated with another Python than this {version}: "
                    "argparse's layout differs between versions")
    assert res.returncode == 0, res.stderr
