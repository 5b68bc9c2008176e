"""Hardening must not change an honest grade: the same submission scores the same with the sandbox on and off.

Honest here means correct or partly correct: references, and bug-corpus mutants that keep some parts (not
those that hang: see ``_honest_submissions``). The
whole corpus runs sandboxed in tests/test_bug_corpus.py (its expectations were written unsandboxed); this
file compares every test's verdict and score both ways on a sample: every ``STRIDE``-th partly-correct mutant
of every corpus, plus three references. ``DISTGPU_INVARIANCE_STRIDE=1`` compares them all (about an hour).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.core.course import Course
from grader.core.results import ExerciseResult
from grader.runners import GradeJob
from grader.runners.local import LocalRunner

pytestmark = pytest.mark.slow  # end to end: skipped by the fast tier, scripts/test -m 'not slow'

CORPUS = Path(__file__).parent / "corpus"
STRIDE = int(os.environ.get("DISTGPU_INVARIANCE_STRIDE", "40"))
REFERENCES = ["02_ring_tree", "10_tensor_parallel", "22_memory_budget"]


def _honest_submissions() -> list[Any]:
    partly_correct = [
        (path.stem, bug) for path in sorted(CORPUS.glob("*.yml")) for bug in yaml.safe_load(path.read_text())
    ]
    # a hang would spend its timeouts twice here; the bug corpus grades every hang sandboxed against the
    # verdicts its entries were written with unsandboxed
    partly_correct = [
        (d, bug) for d, bug in partly_correct if bug.get("keeps") and bug.get("verdict") != "timeout"
    ]
    params = [pytest.param(d, bug, id=f"{d[:2]}-{bug['name']}") for d, bug in partly_correct[::STRIDE]]
    return params + [pytest.param(d, None, id=f"{d[:2]}-reference") for d in REFERENCES]


def verdicts(result: ExerciseResult) -> list[tuple[str, str, float]]:
    return [(t.name, str(t.status), t.score) for t in result.tests]


@pytest.mark.parametrize(("dirname", "bug"), _honest_submissions())
def test_sandbox_on_and_off_grade_alike(
    course: Course, tmp_path: Path, dirname: str, bug: dict[str, Any] | None
) -> None:
    exercise = course.find(dirname.split("_", 1)[1])
    shutil.copytree(course.solution_dir(exercise), tmp_path, dirs_exist_ok=True)
    if bug is not None:
        target = tmp_path / bug["file"]
        target.write_text(target.read_text().replace(bug["replace"], bug["with"]))
    job = GradeJob(course=course, exercise=exercise, source=tmp_path, label=dirname, device="cpu")

    hardened = LocalRunner(sandbox_mode="bwrap").run(job)
    plain = LocalRunner(sandbox_mode="none").run(job)

    assert verdicts(hardened) == verdicts(plain)
    assert hardened.score == plain.score
    if bug is None:
        assert hardened.full_marks
    else:
        assert 0 < hardened.score < hardened.max_score
