"""One of each: the envelope a grading hands back, and what ``--device`` resolves to."""

from __future__ import annotations

from dataclasses import replace

import pytest

from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob, SuiteError, graded_envelope, opened_envelope
from grader.runners.devices import resolve_device


class _Answers:
    """A runner whose answer is given: the envelope's two cases without a grading."""

    def __init__(self, answer: ExerciseResult | SuiteError) -> None:
        self.answer = answer

    def run(self, job: GradeJob) -> ExerciseResult:
        if isinstance(self.answer, SuiteError):
            raise self.answer
        return self.answer

    def close(self) -> None:
        pass


def _job(course: Course) -> GradeJob:
    exercise = course.find("toy")
    return GradeJob(course=course, exercise=exercise, source=course.solution_dir(exercise), label="ref")


def test_a_result_comes_back_whole(toy_course: Course) -> None:
    exercise = toy_course.find("toy")
    result = ExerciseResult.for_every_part(
        exercise=exercise, status=Status.FAILED, reason="wrong [sum]", graded="ref", device="cpu"
    )
    envelope = graded_envelope(_Answers(result), _job(toy_course))
    assert set(envelope) == {"result"}
    assert opened_envelope(envelope) == result


def test_a_broken_suite_comes_back_as_a_suite_error(toy_course: Course) -> None:
    envelope = graded_envelope(_Answers(SuiteError("test_hidden.py does not import")), _job(toy_course))
    assert envelope == {"suite_error": "test_hidden.py does not import"}
    with pytest.raises(SuiteError, match="does not import"):
        opened_envelope(envelope)


@pytest.mark.parametrize("payload", [None, [], {}, {"score": 3}])
def test_anything_else_is_no_envelope(payload: object) -> None:
    assert opened_envelope(payload) is None


@pytest.mark.parametrize(
    ("asked", "gpus", "device"),
    [
        ("auto", 2, "cuda"),  # this machine's grading: CPU parts run on GPUs too (NCCL)
        ("auto", 0, "cpu"),
        ("cpu", 2, "cpu"),
        ("cuda", 1, "cuda"),
        ("cuda", None, "cuda"),  # a cluster job asks the scheduler
    ],
)
def test_device_on_this_machine(asked: str, gpus: int | None, device: str) -> None:
    assert resolve_device(asked, gpus=gpus) == device


def test_auto_holds_gpus_for_a_whole_grading_only_when_a_part_needs_one(toy_course: Course) -> None:
    """A container or a cluster job holds its GPUs from start to end: ``auto`` asks for them only for an
    exercise with a GPU part (the toy exercise has none)."""
    toy = toy_course.find("toy")
    on_gpu = replace(toy, parts=(replace(toy.parts[0], device="gpu"), *toy.parts[1:]))
    assert resolve_device("auto", gpus=1, exercise=toy) == "cpu"
    assert resolve_device("auto", gpus=None, exercise=toy) == "cpu"
    assert resolve_device("cuda", gpus=None, exercise=toy) == "cuda"
    assert resolve_device("auto", gpus=1, exercise=on_gpu) == "cuda"
    assert resolve_device("auto", gpus=None, exercise=on_gpu) == "cuda"
    assert resolve_device("auto", gpus=0, exercise=on_gpu) == "cpu"  # its GPU part is blocked, not failed


def test_cuda_without_a_gpu_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--device cuda: no GPU is visible here"):
        resolve_device("cuda", gpus=0)
    with pytest.raises(UsageError, match="expected one of auto, cpu, cuda"):
        resolve_device("gpu", gpus=1)


def test_a_runner_for_scores_only_records_no_calls_for_diagrams() -> None:
    """`grade check` and `grade validate` read scores only: their ranks time no call (a failing mutant's
    diagrams cost about a tenth of its grading, docs/benchmarks.md), while a student's grading does."""
    from grader.runners import make_runner
    from grader.runners.local import LocalRunner

    scores_only = make_runner("local", one_author=True, diagrams=False)
    student = make_runner("local")
    assert isinstance(scores_only, LocalRunner) and isinstance(student, LocalRunner)
    assert (scores_only.timelines, scores_only.keep_factory) == (False, True)
    assert (student.timelines, student.keep_factory) == (True, False)
