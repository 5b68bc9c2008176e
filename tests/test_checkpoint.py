"""`grade checkpoint N`: the threshold from course.yml, the summary, the shareable record, the progress."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.core.course import Course, CourseConfigError, load_course
from grader.core.submission import file_hashes
from grader.learner.checkpoint import record_digest

CHECKPOINT = (
    "    title: Toy collectives\n",
    "    title: Toy collectives\n    checkpoint:\n      threshold: 0.8\n"
    "      summary: You can sum tensors across ranks.\n",
)


def test_stubs_fail_the_checkpoint_and_the_reference_passes_it(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    course = edited_course(*CHECKPOINT)
    path = str(course.root / "course.yml")
    assert cli.main(["--course", path, "checkpoint", "1", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "Checkpoint 1 not passed yet: 0 / 5 (0%; needs 80%)" in out and "`grade exercise 01`" in out

    folder = course.exercise_dir(course.find("toy"))
    shutil.copyfile(course.solution_dir(course.find("toy")) / "toy.py", folder / "toy.py")
    assert cli.main(["--course", path, "checkpoint", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "Checkpoint 1 passed: 5 / 5 (100%; needs 80%)" in out
    assert "What you can do now: You can sum tensors across ranks." in out

    record = json.loads((course.root / ".grade" / "checkpoints" / "section-1.json").read_text())
    assert (record["passed"], record["score"], record["threshold"]) == (True, 5.0, 0.8)
    assert record["exercises"][0]["files"] == file_hashes(folder, ("toy.py",))
    assert record["exercises"][0]["suites"] == "public+hidden"
    assert record["digest"] == record_digest(record)
    assert record_digest(record | {"score": 6.0}) != record["digest"]  # an edited record stops matching

    assert cli.main(["--course", path, "progress", "--json"]) == 0
    [section] = json.loads(capsys.readouterr().out)["sections"]
    assert section["checkpoint"] == "passed" and section["exercises"][0]["done"]


def test_section_without_checkpoint_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = str(Path(__file__).parent / "fixtures" / "course" / "course.yml")
    assert cli.main(["--course", fixture, "checkpoint", "1"]) == 2
    assert "section 1 (Toy collectives) has no checkpoint in course.yml" in capsys.readouterr().out
    assert cli.main(["--course", fixture, "checkpoint", "7"]) == 2
    assert "no section '7'; the sections are 1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("checkpoint", "error"),
    [
        (
            "{threshold: 1.5, summary: x}",
            "course.yml:6: sections[0].checkpoint.threshold: expected a fraction",
        ),
        ("{threshold: 0.5}", "course.yml:6: sections[0].checkpoint: missing required key 'summary'"),
        (
            "{treshold: 0.5, summary: x}",
            "sections[0].checkpoint.treshold: unknown key; did you mean 'threshold'?",
        ),
    ],
)
def test_checkpoint_keys_are_strict(tmp_path: Path, checkpoint: str, error: str) -> None:
    fixture = Path(__file__).parent / "fixtures" / "course"
    shutil.copytree(fixture, tmp_path / "course")
    yml = tmp_path / "course" / "course.yml"
    yml.write_text(yml.read_text().replace(CHECKPOINT[0], f"{CHECKPOINT[0]}    checkpoint: {checkpoint}\n"))
    with pytest.raises(CourseConfigError, match=re.escape(error)):
        load_course(yml)


def test_the_course_has_a_checkpoint_per_section(course: Course) -> None:
    assert len(course.sections) == 5
    assert all(s.checkpoint is not None and 0 < s.checkpoint.threshold <= 1 for s in course.sections)


def test_a_gpu_part_without_a_gpu_is_left_out_of_the_checkpoint_not_lost(
    edited_course: Callable[[str, str], Course], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a GPU a learner is graded on the rest: blocked points count neither way, and the record says
    how many were not graded."""
    course = edited_course(*CHECKPOINT)
    path = course.root / "course.yml"
    square = "{name: square, points: 1, world_sizes: [1], timeout: 4}"
    path.write_text(path.read_text().replace(square, square[:-1] + ", device: gpu}"))
    folder = course.exercise_dir(course.find("toy"))
    shutil.copyfile(course.solution_dir(course.find("toy")) / "toy.py", folder / "toy.py")
    assert cli.main(["--course", str(path), "checkpoint", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "Checkpoint 1 passed: 4 / 4 (100%; needs 80%); 1 point not graded here" in out
    assert "01 Toy all-reduce: 4 / 5  full marks (1 not graded here)" in out
    record = json.loads((course.root / ".grade" / "checkpoints" / "section-1.json").read_text())
    assert (record["score"], record["max_score"], record["not_graded_here"]) == (4.0, 4.0, 1.0)
