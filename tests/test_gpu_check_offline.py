"""scripts/gpu-check on the GPU machine it was written for: torch, pytest, pyyaml, rich; no nbgrader, docker.

Issue 31: the GPU machine has no nbgrader and nothing can be installed there, so any path of gpu-check that
imports ``nbformat`` or ``nbgrader`` dies there. Here a child interpreter is started with a ``sitecustomize``
that makes both unimportable (as on that machine), and runs gpu-check's stub and bug steps on CPU: on a CPU
part they must reach a verdict (the committed stub scores zero, the bugs are caught), on a GPU part they
report ``blocked``. ``scripts/gpu-check`` itself must reach its "no GPU" exit there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).parent.parent

BLOCKER = '''
"""Makes what the GPU machine lacks unimportable here and in children (PYTHONPATH carries it)."""
import importlib.abc
import sys

BLOCKED = ("nbformat", "nbgrader", "docker")


class NoNbgrader(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (the GPU machine has none)", name=name)
        return None


sys.meta_path.insert(0, NoNbgrader())
'''

STEPS = """
import json, sys
from grader import SOURCE_ROOT
from grader.authoring.gpucheck import bug_checks, stub_check
from grader.core.course import load_course
from grader.runners.local import LocalRunner

try:
    import nbformat  # noqa: F401
    blocker = "nbformat imported"
except ModuleNotFoundError:
    blocker = "blocked"
course = load_course(SOURCE_ROOT / "course.yml")
exercise = course.find("03")
runner = LocalRunner(keep_factory=True)
args = (runner, course, exercise)
try:
    steps = {
        part: [stub_check(*args, part, "cpu"), *bug_checks(*args, part, "cpu")]
        for part in ("03.copy_model", "03.device_copies")
    }
finally:
    runner.close()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("nbformat", "nbgrader", "docker"))
print(json.dumps({
    "blocker": blocker,
    "loaded": loaded,
    "steps": {part: [[c.what, c.ok, c.detail] for c in checks] for part, checks in steps.items()},
}))
"""


@pytest.fixture(scope="module")
def without_nbgrader(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a child interpreter in which ``import nbformat`` and ``import nbgrader`` fail."""
    folder = tmp_path_factory.mktemp("no-nbgrader")
    (folder / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER))
    path = os.pathsep.join(p for p in (str(folder), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.mark.slow  # about 10 gradings of one part each: skipped by the fast tier
def test_stub_and_bug_steps_run_without_nbgrader(without_nbgrader: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STEPS],
        env=without_nbgrader,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["blocker"] == "blocked", "the stand-in environment still imports nbformat"
    assert report["loaded"] == []
    cpu_part, gpu_part = report["steps"]["03.copy_model"], report["steps"]["03.device_copies"]
    # a CPU part reaches its verdicts: the committed stub scores zero, every bug of the part is caught
    assert cpu_part[0] == ["stub zero: copy_model", True, "0 points"], cpu_part[0]
    assert len(cpu_part) > 2 and all(ok for _, ok, _ in cpu_part), cpu_part
    # a GPU part on CPU: the stub's tests are blocked (no points either way), its bugs reported blocked
    assert gpu_part[0][:2] == ["stub zero: device_copies", True], gpu_part[0]
    bugs = gpu_part[1:]
    assert len(bugs) >= 5 and all(detail == "blocked" and not ok for _, ok, detail in bugs), bugs


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: scripts/gpu-check runs for real")
def test_gpu_check_reaches_its_no_gpu_exit_without_nbgrader(without_nbgrader: dict[str, str]) -> None:
    done = subprocess.run(
        [str(REPO / "scripts" / "gpu-check")],
        env={**without_nbgrader, "COLUMNS": "300"},  # doctor's table cells on one line each
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no GPU: nothing to verify here" in done.stdout
    assert "ModuleNotFoundError" not in done.stderr, done.stderr[-3000:]
    # its first step, grade doctor, says what is missing in words, not as an exception's name
    assert "the docker package is not installed" in done.stdout
    assert "ModuleNotFoundError" not in done.stdout, done.stdout[-3000:]
