"""The catalog loader: strict, and every error names the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.core.course import Course, CourseConfigError, load_course
from grader.core.errors import UsageError

GOOD = """\
course: Tiny
sections:
  - number: 1
    title: One
    exercises:
      - number: 1
        slug: toy
        title: Toy
        files: [toy.py]
        parts:
          - {name: allreduce, points: 4, world_sizes: [2, 3], timeout: 4}
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "exercises" / "01_toy").mkdir(parents=True)
    (tmp_path / "exercises" / "01_toy" / "toy.py").write_text("")
    path = tmp_path / "course.yml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    """The error of course.yml itself, or else of its exercise 01 (which stands alone)."""
    with pytest.raises(CourseConfigError) as info:
        load_course(write(tmp_path, text)).find("01")
    return str(info.value)


def test_good_course_loads(tmp_path: Path) -> None:
    course = load_course(write(tmp_path, GOOD))
    (part,) = course.find("toy").parts
    assert (part.id, part.world_sizes, part.timeout, part.device) == ("01.allreduce", (2, 3), 4.0, "cpu")


def test_gpu_part_may_share_gpus(tmp_path: Path) -> None:
    shared = GOOD.replace("timeout: 4}", "timeout: 4, device: gpu, gpus: 1}")
    (part,) = load_course(write(tmp_path, shared)).find("toy").parts
    assert (part.gpus, part.gpus_needed(3), part.gpus_needed(1)) == (1, 1, 1)
    (one_each,) = load_course(write(tmp_path / "b", GOOD)).find("toy").parts
    assert one_each.gpus_needed(3) == 3


def test_only_gpu_parts_share_gpus(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("timeout: 4}", "timeout: 4, gpus: 1}"))
    assert message.endswith("parts[0].gpus: only a part with 'device: gpu' shares GPUs")


def test_unknown_key_names_line_and_suggests(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("timeout: 4", "timout: 4"))
    assert message == (
        "course.yml:11: sections[0].exercises[0].parts[0].timout: unknown key; did you mean 'timeout'?"
    )


def test_wrong_type(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("world_sizes: [2, 3]", "world_sizes: [2, four]"))
    assert message.startswith(
        "course.yml:11: sections[0].exercises[0].parts[0].world_sizes: expected an integer"
    )


def test_missing_required_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("        title: Toy\n", ""))
    assert message == "course.yml:6: sections[0].exercises[0]: missing required key 'title'"


def test_duplicate_number(tmp_path: Path) -> None:
    twice = GOOD + "      - {number: 1, slug: other, title: Other}\n"
    assert "exercises[1].number: duplicate number 1" in error_of(tmp_path, twice)


def test_missing_file(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("files: [toy.py]", "files: [toy.py, ring.py]"))
    assert message.endswith("files[1]: exercises/01_toy/ring.py does not exist (run `grade stubs`)")


def test_not_yaml(tmp_path: Path) -> None:
    assert error_of(tmp_path, "course: [unclosed") == (
        "course.yml:1: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow "
        "sequence at line 1)"
    )


@pytest.mark.parametrize("ref", ["2", "02", "ring_tree"])
def test_exercise_resolves_by_number_or_slug(course: Course, ref: str) -> None:
    assert course.find(ref).dirname == "02_ring_tree"


def test_unknown_exercise_suggests_slug(course: Course) -> None:
    with pytest.raises(UsageError, match="did you mean 'ring_tree'"):
        course.find("ring_trees")


def test_course_has_all_25_exercises_numbered_in_order(course: Course) -> None:
    assert [e.number for e in course.exercises] == list(range(1, 26))
    assert [s.number for s in course.sections] == [1, 2, 3, 4, 5]


def test_every_exercise_of_the_course_is_whole(course: Course) -> None:
    """A broken exercise stands alone (the loader keeps its problem for the commands that need it), so the
    course's own exercises are checked here."""
    assert {e.key: e.problem for e in course.broken} == {}
