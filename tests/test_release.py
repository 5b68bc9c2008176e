"""`grade release`: the student bundle holds no reference body and no hidden test, and still grades."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import cli
from grader.authoring.release import GENERIC_LINES, MIN_LEAK_CHARS, build_release, find_leaks, solution_lines
from grader.core.course import Course, load_course


@pytest.fixture(scope="module")
def bundle(course: Course, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "distgpu-student"
    assert build_release(course, out) == []
    return out


def test_no_solutions_and_no_hidden_suites(bundle: Path) -> None:
    assert not (bundle / "solutions").exists()
    assert list(bundle.rglob("test_hidden.py")) == []
    assert (bundle / "exercises" / "02_ring_tree" / "test_public.py").is_file()


def test_the_scan_catches_a_planted_hidden_test_and_a_stale_stub(
    course: Course, bundle: Path, tmp_path: Path
) -> None:
    planted = tmp_path / "planted"
    shutil.copytree(bundle, planted)
    shutil.copyfile(
        course.solution_dir(course.find("02")) / "test_hidden.py", planted / "exercises" / "notes.py"
    )
    stub = planted / "exercises" / "02_ring_tree" / "allreduce.py"
    stub.write_text((course.solution_dir(course.find("02")) / "allreduce.py").read_text())
    leaks = find_leaks(course, planted)
    assert any(
        leak.startswith("exercises/notes.py: a line from solutions/02_ring_tree/test_hidden.py")
        for leak in leaks
    )
    assert any(
        leak.startswith(
            "exercises/02_ring_tree/allreduce.py: a line from solutions/02_ring_tree/allreduce.py"
        )
        for leak in leaks
    )


def test_the_scan_catches_a_short_reference_line_anywhere_but_the_grader(
    course: Course, bundle: Path, tmp_path: Path
) -> None:
    line, origin = next(
        (ln, o) for ln, o in sorted(solution_lines(course).items()) if len(ln) < MIN_LEAK_CHARS
    )
    planted = tmp_path / "planted"
    shutil.copytree(bundle, planted)
    (planted / "coursekit" / "notes.py").write_text(f"    {line}\n    {next(iter(GENERIC_LINES))}\n")
    (planted / "grader" / "notes.py").write_text(f"{line}\n")
    assert find_leaks(course, planted) == [f"coursekit/notes.py: a line from {origin}: {line!r}"]


def test_in_the_bundle_grading_says_hidden_tests_run_at_submission(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_course(bundle / "course.yml").find("01").parts
    code = cli.main(["--course", str(bundle / "course.yml"), "exercise", "01", "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 1 and "public checks only: the hidden tests run when you submit" in out
    assert "hidden" not in {line.split("│")[3].strip() for line in out.splitlines() if line.count("│") > 6}
