"""The student release: the course without solutions/ and hidden suites, and a scan that proves it.

The bundle holds exercises (stubs, public tests, rank programs, READMEs, hints), the self-check notebooks,
the grader, coursekit, course.yml and the set-up scripts. Without solutions/, ``grade exercise NN`` runs the
public checks and says that the hidden tests run at submission.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from grader.course import Course

SHIPPED = (
    "README.md",
    "course.yml",
    "pyproject.toml",
    "grader",
    "coursekit",
    "exercises",
    "notebooks",
    "scripts",
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".grade", "*.egg-info")
MIN_LEAK_CHARS = 30
"""A shared line shorter than this (``return out``, ``import torch``) is not evidence of a leak."""


def build_release(course: Course, out: Path) -> list[str]:
    """Write the bundle to ``out`` (which must not exist); return the leaks found in it (none, or a bug)."""
    if out.exists():
        raise ValueError(f"{out} exists; give a new folder")
    for name in SHIPPED:
        source = course.root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORED)
        elif source.is_file():
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    return find_leaks(course, out)


def secret_lines(course: Course) -> dict[str, str]:
    """Distinctive lines that only solution bodies and hidden suites hold -> where they come from.

    A line that public course files hold too (an import, a helper a public test shares) proves nothing, so
    it is no secret. Generated stubs do not count as public: a stale stub that kept a body is caught.
    """
    secrets: dict[str, str] = {}
    public: set[str] = set()
    for hidden in sorted((course.root / "solutions").glob("*/test_hidden.py")):
        _add(secrets, hidden.read_text().splitlines(), str(hidden.relative_to(course.root)))
    for exercise in course.exercises:
        for name in exercise.files:
            body, rest = _split_regions((course.solution_dir(exercise) / name).read_text())
            _add(secrets, body, f"solutions/{exercise.dirname}/{name}")
            public.update(line.strip() for line in rest)
    for path in _public_sources(course):
        public.update(line.strip() for line in path.read_text(errors="replace").splitlines())
    return {line: origin for line, origin in secrets.items() if line not in public}


def _split_regions(source: str) -> tuple[list[str], list[str]]:
    """(lines inside BEGIN/END SOLUTION regions, lines outside them)."""
    inside, body, rest = False, [], []
    for line in source.splitlines():
        if "END SOLUTION" in line:
            inside = False
        (body if inside else rest).append(line)
        if "BEGIN SOLUTION" in line:
            inside = True
    return body, rest


def _public_sources(course: Course) -> list[Path]:
    stubs = {course.exercise_dir(e) / name for e in course.exercises for name in e.files}
    folders = [course.root / "grader", course.root / "coursekit", course.root / "exercises"]
    return [p for f in folders for p in f.rglob("*") if p.is_file() and p not in stubs and p.suffix != ".pyc"]


def _add(secrets: dict[str, str], lines: list[str], origin: str) -> None:
    for line in lines:
        text = line.strip()
        if len(text) >= MIN_LEAK_CHARS and not text.startswith("#"):
            secrets.setdefault(text, origin)


def find_leaks(course: Course, bundle: Path) -> list[str]:
    """'<bundle file>: line from <origin>' for every secret line found in any bundle file."""
    secrets = secret_lines(course)
    leaks = []
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        try:
            lines = {ln.strip() for ln in path.read_text().splitlines()}
        except UnicodeDecodeError:
            continue
        leaks += [
            f"{path.relative_to(bundle)}: a line from {secrets[ln]}" for ln in sorted(lines & secrets.keys())
        ]
    if (bundle / "solutions").exists():
        leaks.append("solutions/ is in the bundle")
    return leaks
