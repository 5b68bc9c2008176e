"""Reporters: pure functions from an ``ExerciseResult`` to terminal output, Gradescope JSON or JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.results import ExerciseResult, Status, TestResult

if TYPE_CHECKING:
    from grader.checkpoint import CheckpointOutcome
    from grader.progress import ExerciseProgress, SectionProgress

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


# ---------------------------------------------------------------------------------------------------------
# batch outputs


def batch_csv(rows: list[tuple[str, ExerciseResult, str | None]]) -> str:
    """student,score,max_score,verdict,submitted,tests_passed,tests: one line per student, for an LMS."""
    lines = ["student,score,max_score,verdict,submitted,tests_passed,tests"]
    for student, result, submitted in sorted(rows, key=lambda row: row[0]):
        passed = sum(t.status is Status.PASSED for t in result.tests)
        fields = [
            student,
            f"{result.score:g}",
            f"{result.max_score:g}",
            str(result.verdict),
            submitted or "",
            str(passed),
            str(len(result.tests)),
        ]
        lines.append(",".join(_csv_field(f) for f in fields))
    return "\n".join(lines) + "\n"


def _csv_field(value: str) -> str:
    return f'"{value.replace(chr(34), chr(34) * 2)}"' if any(c in value for c in ',"\n') else value


def histogram_png(scores: list[float], max_score: float, path: Path) -> bool:
    """A histogram of scores as PNG; False (and no file) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.hist(scores, bins=min(20, max(5, len(set(scores)))), range=(0, max_score or 1), color="#4C72B0")
    axes.set_xlabel(f"score (out of {max_score:g})")
    axes.set_ylabel("students")
    axes.set_title(f"{len(scores)} submissions, mean {sum(scores) / max(1, len(scores)):.2f}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def write_batch_outputs(records: list[Any], out: Path, max_score: float) -> None:
    """grades.csv, results/<student>.json (Gradescope schema) and histogram.png in ``out``."""
    rows = [(r.student, r.result, r.submitted) for r in records]
    (out / "grades.csv").write_text(batch_csv(rows))
    (out / "results").mkdir(exist_ok=True)
    for student, result, _ in rows:
        (out / "results" / f"{student}.json").write_text(json.dumps(to_gradescope(result), indent=1))
    histogram_png([r.score for _, r, _ in rows], max_score, out / "histogram.png")


def batch_summary(records: list[Any], console: Console) -> None:
    """A table of verdicts and score statistics for a batch."""
    results = [r.result for r in records]
    table = Table(title=f"{len(results)} submissions", title_justify="left")
    for column in ("verdict", "students", "mean score"):
        table.add_column(column)
    for verdict, count in sorted(Counter(str(r.verdict) for r in results).items()):
        scores = [r.score for r in results if str(r.verdict) == verdict]
        table.add_row(
            Text(verdict, style=STYLES[Status(verdict)]), str(count), f"{sum(scores) / len(scores):.2f}"
        )
    console.print(table)


# ---------------------------------------------------------------------------------------------------------
# self-study: progress and checkpoints


def progress_tables(sections: list[SectionProgress], console: Console) -> None:
    """One table per section (its checkpoint in the title), then a line of totals. Every status is a word,
    so the tables read the same without colour."""
    for section in sections:
        table = Table(title=_section_title(section), title_justify="left")
        for column in ("#", "exercise", "best", "last attempt", "done", "hints"):
            table.add_column(column)
        for e in section.exercises:
            table.add_row(e.key, e.title, _best(e), _last(e), "[green]done[/]" if e.done else "", _hints(e))
        console.print(table)
    exercises = [e for s in sections for e in s.exercises]
    passed = sum(s.checkpoint == "passed" for s in sections)
    with_checkpoint = sum(s.checkpoint != "none" for s in sections)
    console.print(
        f"{sum(e.done for e in exercises)} of {len(exercises)} exercises done, "
        f"{passed} of {with_checkpoint} checkpoints passed"
    )


def _section_title(section: SectionProgress) -> str:
    head = f"{section.number}. {section.title}"
    if section.threshold is None:
        return head
    needs = f"needs {section.threshold:.0%}"
    if section.checkpoint == "passed":
        return f"{head}  [bold green]checkpoint passed[/] {section.checkpoint_time} ({needs})"
    if section.checkpoint == "not passed":
        return f"{head}  [yellow]checkpoint not passed yet[/] ({needs}; `grade checkpoint {section.number}`)"
    return f"{head}  checkpoint not attempted ({needs}; `grade checkpoint {section.number}`)"


def _best(e: ExerciseProgress) -> str:
    if not e.gradable:
        return "[dim]coming soon[/]"
    return "-" if e.best is None else f"{e.best:g} / {e.max_score:g}"


def _last(e: ExerciseProgress) -> str:
    if e.last is None:
        return "-"
    when = e.last.time.replace("T", " ")[:16]
    part = f" ({e.last.part.split('.', 1)[1]} only)" if e.last.part else ""
    return f"{e.last.score:g} / {e.last.max_score:g}{part}, {when} UTC"


def _hints(e: ExerciseProgress) -> str:
    return f"{e.hints_used} used" if e.hints_used else ""


def checkpoint_summary(outcome: CheckpointOutcome, console: Console) -> None:
    """Each exercise's score, the verdict against the threshold, what the learner can now do, the record."""
    section = outcome.section
    assert section.checkpoint is not None
    for result in outcome.results:
        mark = "[green]full marks[/]" if result.full_marks else "[yellow]not yet[/]"
        console.print(f"  {result.exercise} {result.title}: {result.score:g} / {result.max_score:g}  {mark}")
    share = outcome.score / outcome.max_score if outcome.max_score else 0.0
    figures = (
        f"{outcome.score:g} / {outcome.max_score:g} ({share:.0%}; needs {section.checkpoint.threshold:.0%})"
    )
    if outcome.passed:
        console.print(f"[bold green]Checkpoint {section.number} passed:[/] {figures}")
        console.print(f"What you can do now: {section.checkpoint.summary}", markup=False)
    else:
        console.print(f"[bold]Checkpoint {section.number} not passed yet:[/] {figures}")
        todo = [r.exercise for r in outcome.results if not r.full_marks]
        console.print("Work on " + ", ".join(f"`grade exercise {key}`" for key in todo))
    public_only = [r.exercise for r in outcome.results if all(t.suite == "public" for t in r.tests)]
    if public_only:
        which = ", ".join(public_only)
        console.print(f"[yellow]note:[/] {which}: public checks only (the hidden tests run when you submit)")
    for note in outcome.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"record (with the hashes of your files): {outcome.record_path}", markup=False)
