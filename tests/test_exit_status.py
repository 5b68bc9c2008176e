"""Whose fault an error is: the exit status and the one line of every command (``grader.core.errors``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import cli
from grader.core.errors import ExitCode, environment_message

FIXTURE = str(Path(__file__).parent / "fixtures" / "course" / "course.yml")


def grade(*argv: str) -> int:
    return cli.main(["--course", FIXTURE, *argv])


def test_a_bug_is_status_4_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A KeyError from inside the grader is not the user's mistake: no `error:` line blaming the input."""
    from grader.learner import progress

    def broken(*args: object) -> None:
        raise KeyError("sections")

    monkeypatch.setattr(progress, "course_progress", broken)
    assert grade("progress") == ExitCode.INTERNAL_ERROR == 4
    out = capsys.readouterr().out
    assert "Traceback (most recent call last)" in out and "KeyError: 'sections'" in out, out
    assert "in broken" in out  # the frame that raised
    assert out.strip().splitlines()[-1].startswith("error: this is a bug in the grader"), out
    assert "report it" in out


def test_an_unwritable_path_is_status_3_with_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    bundle = tmp_path / "a-file" / "bundle"
    assert grade("release", str(bundle)) == ExitCode.ENVIRONMENT_FAILURE == 3
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and out.startswith(f"error: {bundle}"), out
    assert "Not a directory; a part of the path is a file, not a folder" in out


def test_a_usage_error_is_status_2_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert grade("checkpoint", "9") == ExitCode.USAGE_ERROR == 2
    out = capsys.readouterr().out.strip()
    assert out == "error: no section '9'; the sections are 1", out


def test_a_full_disk_says_what_to_do() -> None:
    import errno

    full = OSError(errno.ENOSPC, "No space left on device", "/grades/results/s07.json")
    assert environment_message(full) == (
        "/grades/results/s07.json: No space left on device; free some space, or write somewhere else"
    )


def test_the_statuses_are_in_grade_help_and_the_readme(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = capsys.readouterr().out
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for code in ExitCode:
        assert f"  {code.value}  {code.meaning}" in shown
        assert f"| {code.value} |" in readme, f"README.md: no row for exit status {code.value}"


def test_error_text_is_printed_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Messages carry user input: rich markup would read '[red]' as a style and '[a, b ...]' as a tag."""
    assert grade("exercise", "[red]ring[/]") == ExitCode.USAGE_ERROR
    assert capsys.readouterr().out.strip() == "error: no exercise '[red]ring[/]'"


def test_a_result_shows_its_paths_and_notes_as_text() -> None:
    from rich.console import Console

    from grader.core.results import ExerciseResult
    from grader.learner.views import to_terminal

    result = ExerciseResult(
        exercise="01",
        title="Toy [draft]",
        graded="submission subs/[bold]alice[/].zip",
        device="cpu",
        notes=("your progress was not saved: /state/[red]x[/]/progress.sqlite: disk I/O error",),
    )
    console = Console(record=True, width=200)
    to_terminal(result, console)
    shown = console.export_text()
    assert "Exercise 01: Toy [draft]  (submission subs/[bold]alice[/].zip; cpu)" in shown, shown
    assert "note: your progress was not saved: /state/[red]x[/]/progress.sqlite" in shown, shown


def test_a_yaml_error_keeps_what_it_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "course.yml").write_text("course: x\nsections: [a, b\n")
    assert cli.main(["--course", str(tmp_path / "course.yml"), "list"]) == ExitCode.USAGE_ERROR
    assert capsys.readouterr().out.strip() == (
        "error: course.yml:3: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a "
        "flow sequence at line 2)"
    )


# ---------------------------------------------------------------------------------------------------------
# each exercise stands alone: a broken one stops only the commands that need it

GHOST = """\
      - number: 3
        slug: ghost
        title: An exercise whose folders are gone
        files: [ghost.py]
        parts:
          - {name: echo, points: 1, world_sizes: [1]}
"""


@pytest.fixture
def ghost_course(tmp_path: Path) -> Path:
    """The fixture course, with an exercise 03 in course.yml whose folders do not exist."""
    import shutil

    shutil.copytree(Path(FIXTURE).parent, tmp_path / "course")
    yml = tmp_path / "course" / "course.yml"
    yml.write_text(yml.read_text() + GHOST)
    return yml


def test_a_missing_exercise_folder_stops_only_that_exercise(
    ghost_course: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    course = ["--course", str(ghost_course)]
    assert cli.main([*course, "exercise", "toy", "--solution", "-k", "square", "--device", "cpu"]) == 0
    shown = capsys.readouterr()
    assert "Score: 1 / 1" in shown.out
    warning = "warning: exercise 03 (ghost) cannot be used, so commands that need it stop: course.yml:"
    assert shown.err.startswith(warning) and "exercises/03_ghost/ does not exist" in shown.err, shown.err
    assert cli.main([*course, "list"]) == 0
    assert "cannot be used" in capsys.readouterr().out
    assert cli.main([*course, "exercise", "ghost"]) == ExitCode.USAGE_ERROR
    shown = capsys.readouterr()
    assert shown.out.startswith("error: exercise 03 (ghost) cannot be used: course.yml:") and not shown.err
    assert len(shown.out.splitlines()) == 1 and "exercises/03_ghost/ does not exist" in shown.out


def test_a_malformed_concepts_yml_breaks_only_its_exercise(ghost_course: Path) -> None:
    from grader.core.catalogue import CourseConfigError
    from grader.core.course import load_course

    for folder in ("exercises", "solutions"):
        (ghost_course.parent / folder / "03_ghost").mkdir()
        (ghost_course.parent / folder / "03_ghost" / "ghost.py").write_text("")
    (ghost_course.parent / "exercises" / "03_ghost" / "concepts.yml").write_text("echo: [unclosed\n")
    course = load_course(ghost_course)
    assert [e.slug for e in course.broken] == ["ghost"]
    assert course.find("toy").parts[0].concepts, "the whole exercise keeps its concepts"
    with pytest.raises(CourseConfigError, match=r"03_ghost/concepts.yml:2: not valid YAML"):
        course.find("ghost")
