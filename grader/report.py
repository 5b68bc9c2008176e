"""Reporters: pure functions from an ``ExerciseResult`` to terminal output, Gradescope JSON or JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.results import ExerciseResult, Status, TestResult

STYLES = {
    Status.PASSED: "green",
    Status.FAILED: "red",
    Status.TIMEOUT: "magenta",
    Status.CRASHED: "red",
    Status.OOM: "red",
    Status.BLOCKED: "yellow",
    Status.ERROR: "bold red",
}


# ---------------------------------------------------------------------------------------------------------
# terminal


def to_terminal(result: ExerciseResult, console: Console) -> None:
    """A table per part, then each distinct failure message once, then the score."""
    console.print(f"[bold]Exercise {result.exercise}: {result.title}[/]  ({result.graded}; {result.device})")
    for part in dict.fromkeys(t.part for t in result.tests):
        console.print(_part_table(part, [t for t in result.tests if t.part == part]))
    failures = Counter(t.output for t in result.tests if t.status is not Status.PASSED)
    for message, count in failures.items():
        times = f" [dim](x{count})[/]" if count > 1 else ""
        console.print(Text(message), end="", soft_wrap=True)
        console.print(times)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    style = "bold green" if result.full_marks else "bold"
    console.print(
        f"[{style}]Score: {result.score:g} / {result.max_score:g}[/]  in {result.execution_time:.1f} s"
    )


def _part_table(part: str, tests: list[TestResult]) -> Table:
    earned, total = sum(t.score for t in tests), sum(t.max_score for t in tests)
    table = Table(title=f"{part}: {earned:.3g} / {total:.3g}", title_justify="left", expand=False)
    for column in ("#", "test", "suite", "ranks", "result", "points"):
        table.add_column(column)
    for t in tests:
        table.add_row(
            t.number,
            t.name,
            t.suite,
            str(t.world_size or ""),
            Text(str(t.status), style=STYLES[t.status]),
            f"{t.score:.3g}/{t.max_score:.3g}",
        )
    return table


# ---------------------------------------------------------------------------------------------------------
# Gradescope results.json


def to_gradescope(result: ExerciseResult) -> dict[str, Any]:
    """Gradescope's results.json, plus ``verdict`` per test and the exercise's identity."""
    return {
        "score": result.score,
        "max_score": result.max_score,
        "execution_time": result.execution_time,
        "output": "\n".join(result.notes),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [_gradescope_test(t) for t in result.tests],
        "extra_data": {
            "exercise": result.exercise,
            "title": result.title,
            "graded": result.graded,
            "device": result.device,
        },
    }


def _gradescope_test(test: TestResult) -> dict[str, Any]:
    tags = [test.part, test.suite] + ([f"ranks:{test.world_size}"] if test.world_size else [])
    return {
        "name": test.name,
        "number": test.number,
        "score": test.score,
        "max_score": test.max_score,
        "status": "passed" if test.status is Status.PASSED else "failed",
        "verdict": str(test.status),
        "output": test.output,
        "visibility": test.visibility,
        "tags": tags,
        "extra_data": {"world_size": test.world_size, "seconds": round(test.seconds, 4)},
    }


# ---------------------------------------------------------------------------------------------------------
# JUnit XML


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
