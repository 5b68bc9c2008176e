"""hints.md: a strict format, every shipped file valid, and `grade hint` revealing one at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.course import Course
from grader.hints import HintsError, hints_for, load_hints
from grader.progress import ProgressStore

GOOD = "# Hints: toy\n\n## Hint 1: first\nLook at rank 0.\n\n## Hint 2: second\nThen rank 1.\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("## Hint 1: no title\ntext\n", r"hints.md:1: expected a '# ' title line first"),
        ("# T\nstray text\n## Hint 1: a\nx\n", r"hints.md:2: text before '## Hint 1'"),
        ("# T\n## Hint 1: a\nx\n## Hint 3: c\ny\n", r"hints.md:4: hint 3 where hint 2 was expected"),
        ("# T\n## Hint 1: a\nx\n## Tip 2: b\ny\n", r"hints.md:4: expected '## Hint N: title'"),
        ("# T\n## Hint 1: a\n\n## Hint 2: b\ny\n", r"hints.md:2: hint 1 has no text"),
        ("# T\n", r"no '## Hint 1: ...' heading"),
    ],
)
def test_format_errors_name_file_and_line(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "hints.md").write_text(text)
    with pytest.raises(HintsError, match=error):
        load_hints(tmp_path / "hints.md")


def test_every_hints_file_in_the_course_is_valid(course: Course) -> None:
    with_hints = {e.key: len(hints_for(course, e)) for e in course.exercises if hints_for(course, e)}
    assert {"01", "02", "03", "22"} <= set(with_hints)
    assert all(count >= 3 for count in with_hints.values()), with_hints


def test_grade_hint_reveals_one_at_a_time_and_counts(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    course = edited_course("title: Toy all-reduce", "title: Toy all-reduce")
    (course.exercise_dir(course.find("toy")) / "hints.md").write_text(GOOD)
    path = str(course.root / "course.yml")

    assert cli.main(["--course", path, "hint", "toy"]) == 0
    out = capsys.readouterr().out
    assert "Hint 1 of 2: first" in out and "Look at rank 0." in out and "Then rank 1." not in out
    assert ProgressStore().hints_revealed(course.title, "01") == 1

    for _ in range(2):  # the second call shows hint 2; a third stays on the last one
        assert cli.main(["--course", path, "hint", "01"]) == 0
    out = capsys.readouterr().out
    assert "hint 1: first (seen)" in out and "Then rank 1." in out and "that was the last hint" in out
    assert ProgressStore().hints_revealed(course.title, "01") == 2

    assert cli.main(["--course", path, "progress"]) == 0
    assert "2 used" in capsys.readouterr().out


def test_exercise_without_hints_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = str(Path(__file__).parent / "fixtures" / "course" / "course.yml")
    assert cli.main(["--course", fixture, "hint", "toy"]) == 0
    assert "exercise 01 has no hints yet" in capsys.readouterr().out
