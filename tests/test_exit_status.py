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
