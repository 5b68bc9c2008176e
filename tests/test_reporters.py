"""Reporters: Gradescope JSON, JUnit XML and the terminal, from one hand-made result."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace

from rich.console import Console

from grader.core.formats import to_gradescope, to_junit
from grader.core.results import ExerciseResult, Status, TestResult
from grader.learner.views import to_terminal

RESULT = ExerciseResult(
    exercise="02",
    title="Ring and tree algorithms",
    graded="submission alice.zip",
    device="cpu",
    execution_time=3.5,
    tests=(
        TestResult(
            name="test_sum[4ranks]",
            number="1.1",
            part="02.ring_allreduce",
            score=1.5,
            max_score=1.5,
            status=Status.PASSED,
            suite="hidden",
            world_size=4,
        ),
        TestResult(
            name="test_uneven[4ranks]",
            number="1.2",
            part="02.ring_allreduce",
            score=0,
            max_score=1.5,
            status=Status.TIMEOUT,
            output="[02.ring_allreduce] timed out after 10 s\n  rank 1/4 blocked",
            suite="hidden",
            world_size=4,
        ),
        TestResult(
            name="test_gpu[8ranks]",
            number="2.1",
            part="02.tree_allreduce",
            score=0,
            max_score=1,
            status=Status.BLOCKED,
            output="blocked: needs 8 GPUs",
            suite="public",
            world_size=8,
        ),
    ),
)


def test_gradescope_json_has_the_spec_fields_and_our_verdicts() -> None:
    data = json.loads(json.dumps(to_gradescope(RESULT)))
    assert (data["score"], data["max_score"], data["execution_time"]) == (1.5, 3.0, 3.5)  # blocked: worth 0
    first, second, third = data["tests"]
    assert first["status"] == "passed" and second["status"] == "failed" and second["verdict"] == "timeout"
    assert (second["number"], second["max_score"], second["visibility"]) == ("1.2", 1.5, "after_published")
    assert third["visibility"] == "visible" and third["tags"] == ["02.tree_allreduce", "public", "ranks:8"]
    assert (third["max_score"], third["verdict"], third["output"]) == (
        0.0,
        "blocked",
        "blocked: needs 8 GPUs",
    )


def test_junit_counts_failures_and_skips() -> None:
    suite = ET.fromstring(to_junit(RESULT).split("?>", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    failure = suite.find("testcase[@name='test_uneven[4ranks]']/failure")
    assert failure is not None and failure.get("type") == "timeout"
    assert failure.get("message") == "[02.ring_allreduce] timed out after 10 s"


def test_terminal_shows_each_failure_and_the_score() -> None:
    out = io.StringIO()
    to_terminal(RESULT, Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert "[02.ring_allreduce] timed out after 10 s" in text
    assert "blocked: needs 8 GPUs" in text
    assert "Score: 1.5 / 4" in text


def test_result_json_round_trip() -> None:
    assert ExerciseResult.from_dict(json.loads(json.dumps(RESULT.to_dict()))) == RESULT


def test_terminal_says_a_blocked_concept_is_not_graded_here_and_a_failed_one_is_lost() -> None:
    from grader.core.course import Exercise, Part
    from grader.core.scoring import score_by_concept

    exercise = Exercise(
        number=2,
        slug="ring_tree",
        title="",
        section=1,
        parts=(
            Part(id="02.ring_allreduce", points=3, world_sizes=(4,)),
            Part(id="02.tree_allreduce", points=1, world_sizes=(8,)),
        ),
    )
    tests = tuple(replace(t, concept=t.part.split(".")[1]) for t in RESULT.tests)
    _, concepts = score_by_concept(tests, exercise)
    out = io.StringIO()
    to_terminal(
        replace(RESULT, tests=tests, concepts=concepts), Console(file=out, width=200, color_system=None)
    )
    text = out.getvalue()
    assert "lost 3 points on 02.ring_allreduce: ring_allreduce" in text
    blocked = "(1 of 1 tests blocked: blocked: needs 8 GPUs)"
    assert f"not graded here: 1 point of 02.tree_allreduce: tree_allreduce {blocked}" in text
    assert "lost 1 point on 02.tree_allreduce" not in text
