"""Shared fixtures for the grader's own tests."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.core.course import Course, load_course
from grader.runners.local import LocalRunner

TESTS = Path(__file__).parent
REPO = TESTS.parent
FIXTURE_COURSE = TESTS / "fixtures" / "course" / "course.yml"


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test keeps its learner progress in a folder of its own, never in the user's real one."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("DISTGPU_STATE_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def runner() -> LocalRunner:
    """One runner for the session: its forkserver (torch already imported) serves every grading run."""
    return LocalRunner()


@pytest.fixture(scope="session")
def toy_course() -> Course:
    return load_course(FIXTURE_COURSE)


@pytest.fixture(scope="session")
def course() -> Course:
    return load_course(REPO / "course.yml")


@pytest.fixture
def edited_course(tmp_path: Path) -> Callable[[str, str], Course]:
    """A copy of the fixture course with one text edit in its course.yml."""

    def edit(old: str, new: str) -> Course:
        root = tmp_path / "course"
        shutil.copytree(FIXTURE_COURSE.parent, root)
        text = (root / "course.yml").read_text()
        assert text.count(old) == 1, old
        (root / "course.yml").write_text(text.replace(old, new))
        return load_course(root / "course.yml")

    return edit
