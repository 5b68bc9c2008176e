"""Per-result formats: pure functions from an ``ExerciseResult`` to Gradescope JSON, PrairieLearn JSON, JUnit
XML and plain-text concept lines, and the colour of each verdict on a terminal."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import asdict
from typing import Any, TypeAlias

from grader.core.results import ExerciseResult, Status, TestResult

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""A value ``json.dumps`` writes and ``json.loads`` gives back; its readers narrow it with ``isinstance``."""
JSON: TypeAlias = "dict[str, JSONValue]"
"""A JSON object."""

STYLES = {
    Status.PASSED: "green",
    Status.FAILED: "red",
    Status.TIMEOUT: "magenta",
    Status.CRASHED: "red",
    Status.OOM: "red",
    Status.BLOCKED: "yellow",
    Status.ERROR: "bold red",
    Status.INVALID: "bold yellow",
}


def to_gradescope(result: ExerciseResult) -> JSON:
    """Gradescope's results.json, plus ``verdict`` per test and the exercise's identity. A blocked test (a
    GPU part: autograder platforms have no GPUs) is worth 0 there, so it is neither won nor lost."""
    return {
        "score": result.score,
        "max_score": round(sum(t.max_score for t in result.tests if t.status is not Status.BLOCKED), 6),
        "execution_time": result.execution_time,
        "output": "\n".join([*concept_lines(result), *result.notes]),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [_gradescope_test(t) for t in result.tests],
        "extra_data": {
            "exercise": result.exercise,
            "title": result.title,
            "graded": result.graded,
            "device": result.device,
            "concepts": [asdict(c) for c in result.concepts],
        },
    }


def concept_lines(result: ExerciseResult) -> list[str]:
    """'part: concept  earned/points' per concept, for reports that are plain text."""
    return [
        f"{c.part}: {c.name}  {c.score:.3g}/{c.max_score:.3g}"
        + ("" if c.earned else f" (lost: {c.tests - c.passed} of {c.tests} tests not passed)")
        for c in result.concepts
    ]


def _gradescope_test(test: TestResult) -> JSON:
    tags: list[JSONValue] = [test.part, test.suite]
    if test.world_size:
        tags.append(f"ranks:{test.world_size}")
    return {
        "name": test.name,
        "number": test.number,
        "score": test.score,
        "max_score": 0.0 if test.status is Status.BLOCKED else test.max_score,
        "status": "passed" if test.status is Status.PASSED else "failed",
        "verdict": str(test.status),
        "output": test.output,
        "visibility": test.visibility,
        "tags": tags,
        "extra_data": {"world_size": test.world_size, "seconds": round(test.seconds, 4)},
    }


# Any: Gradescope's results.json (to_gradescope's, or one read back from a file), its fields read by name
def to_prairielearn(gradescope: dict[str, Any]) -> JSON:
    """PrairieLearn's results.json from our Gradescope results.json (score as a fraction). An upload that
    was not graded is ``gradable: false``: PrairieLearn then charges the student no attempt."""
    if gradescope.get("extra_data", {}).get("invalid"):
        return {"gradable": False, "score": 0.0, "message": gradescope.get("output", ""), "tests": []}
    total = gradescope["max_score"] or 1.0
    return {
        "gradable": True,
        "score": gradescope["score"] / total,
        "message": gradescope.get("output", ""),
        "tests": [
            {
                "name": t["name"],
                "points": t["score"],
                "max_points": t["max_score"],
                "output": t["output"],
                "message": t["verdict"],
            }
            for t in gradescope["tests"]
        ],
    }


def to_junit(result: ExerciseResult) -> str:
    """One <testsuite> per exercise; failures, timeouts and crashes are <failure>, blocked is <skipped>."""
    failing = [t for t in result.tests if t.status not in (Status.PASSED, Status.BLOCKED)]
    suite = ET.Element(
        "testsuite",
        name=f"distgpu.{result.exercise}",
        tests=str(len(result.tests)),
        failures=str(len(failing)),
        skipped=str(sum(t.status is Status.BLOCKED for t in result.tests)),
        time=f"{result.execution_time:.3f}",
    )
    if result.concepts:
        properties = ET.SubElement(suite, "properties")
        for c in result.concepts:
            ET.SubElement(
                properties,
                "property",
                name=f"concept:{c.part}:{c.name}",
                value=f"{c.score:g}/{c.max_score:g}",
            )
    for test in result.tests:
        case = ET.SubElement(
            suite, "testcase", classname=test.part, name=test.name, time=f"{test.seconds:.3f}"
        )
        if test.status is Status.BLOCKED:
            ET.SubElement(case, "skipped", message=test.output)
        elif test.status is not Status.PASSED:
            failure = ET.SubElement(
                case, "failure", type=str(test.status), message=test.output.splitlines()[0]
            )
            failure.text = test.output
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
