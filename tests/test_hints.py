"""hints.md: a strict format, a ladder of three or more per part in the course, and `grade hint` revealing
one rung at a time per part."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.core.course import Course
from grader.learner.hints import HintsError, hints_for, load_hints
from grader.learner.progress import ProgressStore

GOOD = (
    "# Hints: toy\n\n"
    "## Part allreduce\n\n### Hint 1: first\nLook at rank 0.\n\n### Hint 2: second\nThen rank 1.\n\n"
    "## Part square\n\n### Hint 1: only\nMultiply.\n"
)
MIN_RUNGS = 3


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("## Part a\n", r"hints.md:1: expected a '# ' title line first"),
        ("# T\nstray text\n## Part a\n### Hint 1: a\nx\n", r"hints.md:2: text outside a hint"),
        ("# T\n## Part a\nx\n", r"hints.md:3: text outside a hint"),
        ("# T\n### Hint 1: a\nx\n", r"hints.md:2: a hint before the first '## Part NAME'"),
        (
            "# T\n## Part a\n### Hint 1: a\nx\n### Hint 3: c\ny\n",
            r"hints.md:5: hint 3 where hint 2 was expected",
        ),
        ("# T\n## Part a\n### Hint 1: a\nx\n## Tip 2: b\ny\n", r"hints.md:5: expected '## Part NAME' or"),
        ("# T\n## Part a\n### Hint 1: a\n## Fact\nx\n", r"hints.md:4: expected '## Part NAME' or"),
        ("# T\n## Part a\n### Hint 1: a\n\n### Hint 2: b\ny\n", r"hints.md:3: hint 1 of 'a' has no text"),
        ("# T\n## Part a\n\n## Part b\n### Hint 1: a\nx\n", r"hints.md:2: part 'a' has no '### Hint 1"),
        ("# T\n## Part a\n### Hint 1: a\nx\n## Part a\n", r"hints.md:5: a second ladder for part 'a'"),
        ("# T\n## Part nope\n### Hint 1: a\nx\n", r"hints.md:2: no part 'nope' in this exercise"),
        ("# T\n", r"no '## Part NAME' heading"),
    ],
)
def test_format_errors_name_file_and_line(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "hints.md").write_text(text)
    with pytest.raises(HintsError, match=error):
        load_hints(tmp_path / "hints.md", ["a", "b"])


def test_every_part_of_the_course_has_a_ladder_of_three(course: Course) -> None:
    short = [
        f"{part.id}: {len(hints_for(course, exercise).get(part.name, []))} hints"
        for exercise in course.exercises
        for part in exercise.parts
        if len(hints_for(course, exercise).get(part.name, [])) < MIN_RUNGS
    ]
    assert not short, f"every part needs {MIN_RUNGS}+ hints (exercises/NN_slug/hints.md):\n" + "\n".join(
        short
    )


def _toy_with_hints(edited_course: Callable[[str, str], Course]) -> tuple[Course, str]:
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    (course.exercise_dir(course.find("toy")) / "hints.md").write_text(GOOD)
    return course, str(course.root / "course.yml")


def test_grade_hint_reveals_one_rung_at_a_time_per_part_and_counts(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    course, path = _toy_with_hints(edited_course)

    assert cli.main(["--course", path, "hint", "toy", "allreduce"]) == 0
    out = capsys.readouterr().out
    assert (
        "01.allreduce, hint 1 of 2: first" in out and "Look at rank 0." in out and "Then rank 1." not in out
    )
    assert ProgressStore().hints_revealed(course.title, "01.allreduce") == 1

    for _ in range(2):  # the second call shows hint 2; a third stays on the last one
        assert cli.main(["--course", path, "hint", "01", "01.allreduce"]) == 0
    out = capsys.readouterr().out
    assert "hint 1: first (seen)" in out and "Then rank 1." in out and "that was the last hint" in out
    assert ProgressStore().hints_revealed(course.title, "01.allreduce") == 2
    assert ProgressStore().hints_revealed(course.title, "01.square") == 0  # ladders are counted apart

    assert cli.main(["--course", path, "hint", "01", "square"]) == 0
    assert "Multiply." in capsys.readouterr().out
    assert cli.main(["--course", path, "progress"]) == 0
    assert "3 used" in capsys.readouterr().out


def test_grade_hint_without_a_part_lists_the_ladders_and_reveals_nothing(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    course, path = _toy_with_hints(edited_course)
    assert cli.main(["--course", path, "hint", "toy", "allreduce"]) == 0
    capsys.readouterr()

    assert cli.main(["--course", path, "hint", "toy"]) == 0
    out = capsys.readouterr().out
    assert "grade hint 01 allreduce" in out and "1 of 2 seen" in out and "0 of 1 seen" in out
    assert "Look at rank 0." not in out
    assert ProgressStore().hints_revealed(course.title, "01.allreduce") == 1


def test_an_unknown_part_is_a_usage_error(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _toy_with_hints(edited_course)
    assert cli.main(["--course", path, "hint", "toy", "allreduse"]) == 2
    assert "no hints for part 'allreduse'; it has: allreduce, square" in capsys.readouterr().out


def test_exercise_without_hints_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = str(Path(__file__).parent / "fixtures" / "course" / "course.yml")
    assert cli.main(["--course", fixture, "hint", "toy"]) == 0
    assert "exercise 01 has no hints yet" in capsys.readouterr().out
