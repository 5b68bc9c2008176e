"""End to end on the fixture course: what each kind of submission earns, and what the student is told."""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.core.course import Course
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob
from grader.runners.local import LocalRunner

SUBMISSIONS = Path(__file__).parent / "fixtures" / "submissions"


def grade(runner: LocalRunner, course: Course, name: str | None) -> ExerciseResult:
    exercise = course.find("toy")
    source = course.solution_dir(exercise) if name is None else SUBMISSIONS / name
    return runner.run(
        GradeJob(course=course, exercise=exercise, source=source, label=str(name), device="cpu")
    )


def statuses(result: ExerciseResult, part: str) -> set[Status]:
    return {t.status for t in result.tests if t.part == part}


def test_reference_gets_full_marks(runner: LocalRunner, toy_course: Course) -> None:
    result = grade(runner, toy_course, None)
    assert result.full_marks and result.score == result.max_score == 5
    assert {t.suite for t in result.tests} == {"public", "hidden"}


def test_ranks_are_started_once_per_world_size(runner: LocalRunner, toy_course: Course) -> None:
    grade(runner, toy_course, None)
    assert runner.last_pools is not None
    assert sorted(size for size, _ in runner.last_pools.starts) == [1, 2, 3]


def test_ranks_that_leave_many_threads_running_are_replaced_for_the_next_test(
    runner: LocalRunner, toy_course: Course
) -> None:
    result = grade(runner, toy_course, "lingering")
    assert result.full_marks
    assert runner.last_pools is not None
    starts = sorted(size for size, _ in runner.last_pools.starts)
    allreduce_tests = {t.world_size for t in result.tests if t.part == "01.allreduce"}
    assert all(starts.count(size) >= 2 for size in allreduce_tests if size > 1), starts


def test_wrong_sum_loses_exactly_the_value_checks(runner: LocalRunner, toy_course: Course) -> None:
    result = grade(runner, toy_course, "wrong")
    failed = [t for t in result.tests if t.status is Status.FAILED]
    assert {t.name for t in failed} == {"test_two_ranks[2ranks]", "test_sum[2ranks]", "test_sum[3ranks]"}
    assert failed[0].output.startswith("[01.allreduce rank 0/2] wrong tensor at index 0: got 5, expected 4")
    assert result.score == 2  # the value concept (3 of 4 points) is lost; the message count is kept


def test_deadlock_is_a_timeout_that_names_rank_collective_and_line(
    runner: LocalRunner, toy_course: Course
) -> None:
    result = grade(runner, toy_course, "hang")
    assert statuses(result, "01.allreduce") == {Status.TIMEOUT}
    assert statuses(result, "01.square") == {Status.PASSED}
    hung = next(t for t in result.tests if "still running" in t.output and t.world_size == 2)
    # every rank sleeps in its send: a deadlock, reported as such before the part's 8 s are up
    assert hung.output.startswith("[01.allreduce] deadlocked (no rank used the CPU for 2 s: waiting out")
    assert "the 8 s limit would change nothing): rank(s) 0, 1 still running" in hung.output
    assert hung.seconds is not None and hung.seconds < 8
    where = "blocked in dist.send at toy.py:9 in allreduce: dist.send(tensor, (rank + 1) % size)"
    assert f"ranks 0, 1 (of 2) {where}" in hung.output
    # A hang costs its time once per concept and world size; a test of the same call that would only hang
    # again is not started (no wall-clock bound here: on a loaded machine that is a benchmark's business).
    hung_runs = [(t.concept, t.world_size) for t in result.tests if t.status is Status.TIMEOUT and t.ran]
    assert len(hung_runs) == len(set(hung_runs)), hung_runs
    assert any(not t.ran and "already hung at" in t.output for t in result.tests)


def test_a_rank_that_skips_the_collective_is_named(runner: LocalRunner, toy_course: Course) -> None:
    result = grade(runner, toy_course, "skip")
    hung = next(t for t in result.tests if "still running" in t.output and t.world_size == 2)
    assert "rank(s) 0 still running; rank(s) 1 finished" in hung.output
    assert "rank 0/2 blocked in dist.recv at toy.py:10 in allreduce: dist.recv(tensor, src=1)" in hung.output


def test_a_hang_caused_by_a_rank_that_raised_reports_that_error_first(
    runner: LocalRunner, toy_course: Course
) -> None:
    result = grade(runner, toy_course, "raise_one")
    hung = next(t for t in result.tests if "still running" in t.output and t.world_size == 2)
    assert "rank(s) 0 still running; rank(s) 1 finished" in hung.output
    cause = "first, rank 1/2 raised IndexError: chunk 2 is out of range (at toy.py:8 in allreduce)"
    assert cause in hung.output
    assert hung.output.index(cause) < hung.output.index("rank 0/2 blocked in dist.recv at toy.py:9")


def test_a_crashing_rank_is_reported_with_its_exit_code(runner: LocalRunner, toy_course: Course) -> None:
    result = grade(runner, toy_course, "crash")
    assert statuses(result, "01.allreduce") == {Status.CRASHED}
    assert "rank 1/2 exited with code 3" in result.tests[0].output
    assert statuses(result, "01.square") == {Status.PASSED}


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("exit_at_import", Status.CRASHED, "exited with code 0"),
        ("sys_exit", Status.FAILED, "SystemExit: called sys.exit(0)"),
        ("raise_at_import", Status.FAILED, "ModuleNotFoundError: No module named 'torch_but_misspelled'"),
        ("monkeypatch", Status.FAILED, ""),
        ("oom", Status.OOM, "out of memory: "),
        ("cuda_error", Status.CRASHED, "CUDA error, the rank's GPU context is lost: AcceleratorError: "),
    ],
)
def test_submissions_that_try_to_end_or_fool_the_run_earn_nothing(
    runner: LocalRunner, toy_course: Course, name: str, status: Status, message: str
) -> None:
    result = grade(runner, toy_course, name)
    assert result.score == 0
    assert {t.status for t in result.tests} == {status}
    assert all(message in t.output for t in result.tests)


def test_a_cuda_error_replaces_the_world_for_the_next_test(runner: LocalRunner, toy_course: Course) -> None:
    """A CUDA error leaves the rank's GPU context unusable: no later test may run on those ranks."""
    result = grade(runner, toy_course, "cuda_error")
    assert runner.last_pools is not None
    starts = sorted(size for size, _ in runner.last_pools.starts)
    ran = [t.world_size for t in result.tests if t.world_size]
    assert all(starts.count(size) == ran.count(size) for size in set(ran)), (starts, ran)


def test_the_judge_never_imports_the_submission(runner: LocalRunner, toy_course: Course) -> None:
    import sys

    import torch

    original_equal = torch.equal
    grade(runner, toy_course, "monkeypatch")
    assert "toy" not in sys.modules
    assert torch.equal is original_equal and not torch.equal(torch.zeros(1), torch.ones(1))


def test_forbidden_collective_fails_with_its_name(runner: LocalRunner, toy_course: Course) -> None:
    result = grade(runner, toy_course, "forbidden")
    hidden = [t for t in result.tests if t.suite == "hidden" and t.part == "01.allreduce"]
    assert {t.status for t in hidden} == {Status.FAILED}
    assert all("dist.all_reduce is not allowed here" in t.output for t in hidden)


def test_missing_file_is_a_verdict_not_an_error(
    runner: LocalRunner, toy_course: Course, tmp_path: Path
) -> None:
    exercise = toy_course.find("toy")
    result = runner.run(
        GradeJob(course=toy_course, exercise=exercise, source=tmp_path, label="empty", device="cpu")
    )
    assert result.score == 0
    assert "the submission has no toy.py" in result.notes
    assert all("ModuleNotFoundError: the submission has no toy.py" in t.output for t in result.tests)


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ("", "blocked: needs 2 GPUs; this run uses the CPU"),
        (", gpus: 1", "blocked: needs 1 GPU; this run uses the CPU"),
    ],
)
def test_gpu_part_is_blocked_on_cpu_not_skipped(
    runner: LocalRunner, edited_course: Callable[..., Course], placement: str, message: str
) -> None:
    course = edited_course(
        "{name: square, points: 1, world_sizes: [1], timeout: 4}",
        f"{{name: square, points: 1, world_sizes: [2], timeout: 4, device: gpu{placement}}}",
    )
    result = grade(runner, course, None)
    square = [t for t in result.tests if t.part == "01.square"]
    assert [(t.status, t.output, t.score) for t in square] == [(Status.BLOCKED, message, 0)]
    assert not result.full_marks


def test_exercise_time_budget_stops_starting_tests(
    runner: LocalRunner, edited_course: Callable[..., Course]
) -> None:
    course = edited_course("timeout: 60", "timeout: 2")
    result = grade(runner, course, "hang")
    assert "not run: the exercise's time budget of 2 s is used up" in result.tests[-1].output
    assert {t.status for t in result.tests} == {Status.TIMEOUT}


def test_the_callers_pytest_options_do_not_reach_the_judges_run(
    runner: LocalRunner, toy_course: Course, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test session or shell with PYTEST_ADDOPTS (here an outer --basetemp, which pytest wipes at start)
    must neither change the grade nor touch that folder."""
    outer = tmp_path / "outer-basetemp"
    outer.mkdir()
    (outer / "keep.txt").write_text("the caller's")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--basetemp={outer} -x")
    result = grade(runner, toy_course, "wrong")
    assert (outer / "keep.txt").read_text() == "the caller's"
    assert result.score == 2 and len(result.tests) > 3  # -x would have stopped at the first failure
    assert os.environ["PYTEST_ADDOPTS"] == f"--basetemp={outer} -x"


INSTALLED_PLUGIN = """
def pytest_collection_modifyitems(config, items):
    del items[1:]  # a plugin the instructor happens to have installed, changing what runs
"""


def test_a_pytest_plugin_installed_beside_the_grader_does_not_reach_the_judges_run(
    runner: LocalRunner, toy_course: Course, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest loads every installed package's ``pytest11`` entry point; the judge's run loads none."""
    (tmp_path / "installed_plugin.py").write_text(INSTALLED_PLUGIN)
    info = tmp_path / "installed_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: installed-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\ninstalled = installed_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert any(e.name == "installed" for e in importlib.metadata.entry_points(group="pytest11"))
    result = grade(runner, toy_course, "wrong")
    assert result.score == 2 and len(result.tests) > 3  # the plugin would have left one test
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ


def test_a_kept_factory_serves_every_run_of_an_exercise_and_grades_alike(
    runner: LocalRunner, toy_course: Course
) -> None:
    """`grade validate` and `grade check` keep one factory per exercise between runs (torch imported once):
    the same verdicts as a factory per run, whatever the run before left behind; ``close`` ends it."""
    kept = LocalRunner(keep_factory=True)
    names = [None, "crash", "wrong", "lingering", None]
    try:
        results = [grade(kept, toy_course, name) for name in names]
        assert kept._kept is not None and kept._kept.factory is not None
        process, scratch = kept._kept.factory._process, kept._kept.scratch
        assert process is not None and process.poll() is None
        assert grade(kept, toy_course, None).full_marks
        assert kept._kept.factory._process is process  # the same factory served the next run too
    finally:
        kept.close()
    assert process.poll() is not None and not scratch.exists()
    for name, result in zip(names, results, strict=True):
        alone = grade(runner, toy_course, name)
        assert [(t.name, t.status) for t in result.tests] == [(t.name, t.status) for t in alone.tests], name
