"""Shared fixtures for the grader's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.course import Course, load_course
from grader.runners.local import LocalRunner

TESTS = Path(__file__).parent
REPO = TESTS.parent
FIXTURE_COURSE = TESTS / "fixtures" / "course" / "course.yml"


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
