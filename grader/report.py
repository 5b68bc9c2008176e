"""Reporters: pure functions from an ``ExerciseResult`` to terminal output, Gradescope JSON or JUnit XML."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict
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
    Status.INVALID: "bold yellow",
}


# ---------------------------------------------------------------------------------------------------------
# terminal


def to_terminal(result: ExerciseResult, console: Console) -> None:
    """A table per part, then each distinct failure message once, then the score."""
    console.print(f"[bold]Exercise {result.exercise}: {result.title}[/]  ({result.graded}; {result.device})")
    for part in dict.fromkeys(t.part for t in result.tests):
        console.print(_part_table(part, [t for t in result.tests if t.part == part]))
    for tests in grouped_failures(result.tests).values():
        console.print(Text(tests[0].output), soft_wrap=True)
        if len(tests) > 1:
            console.print(f"  [dim]the same {_where(tests)}[/]")
    for concept in result.concepts:
        if not concept.earned and concept.max_score:
            failed = concept.tests - concept.passed
            blocked = [t for t in result.tests if (t.part, t.concept) == (concept.part, concept.name)]
            if all(t.status in (Status.PASSED, Status.BLOCKED) for t in blocked):
                console.print(
                    f"[yellow]not graded here[/]: {concept.max_score:.3g} point"
                    f"{'' if concept.max_score == 1 else 's'} of [bold]{concept.part}: {concept.name}[/] "
                    f"({failed} of {concept.tests} tests blocked: {_first_output(blocked)})",
                    soft_wrap=True,
                )
                continue
            console.print(
                f"[red]lost {concept.max_score:.3g} point{'' if concept.max_score == 1 else 's'}[/] on "
                f"[bold]{concept.part}: {concept.name}[/]"
                f" ({failed} of {concept.tests} tests not passed)"
                + (f"\n  {concept.idea}" if concept.idea else ""),
                soft_wrap=True,
            )
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    style = "bold green" if result.all_graded_passed else "bold"
    console.print(
        f"[{style}]Score: {result.score:g} / {result.max_score:g}[/]  in {result.execution_time:.1f} s"
    )


def _first_output(tests: list[TestResult]) -> str:
    return next((t.output for t in tests if t.status is Status.BLOCKED), "")


_WHERE = re.compile(r"^\[(\S+)(?: rank \d+/\d+)?\] ")
_ALSO_FAILED = re.compile(r"; rank\(s\) [\d, ]+ failed too")


def grouped_failures(tests: tuple[TestResult, ...]) -> dict[str, list[TestResult]]:
    """Failures by message, where messages equal but for the rank and world size they name are one; the
    first test of each group is the one to show."""
    groups: dict[str, list[TestResult]] = {}
    for test in tests:
        if test.status is not Status.PASSED and test.output:
            text = _ALSO_FAILED.sub("", _WHERE.sub(r"[\1] ", test.output, count=1), count=1)
            groups.setdefault(text, []).append(test)
    return groups


def _where(tests: list[TestResult]) -> str:
    sizes = sorted({t.world_size for t in tests if t.world_size})
    ranks = f" at {', '.join(map(str, sizes))} ranks" if sizes else ""
    names = sorted({t.name.split("[")[0] for t in tests})
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"in {len(tests)} tests{ranks}: {shown}"


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


def _gradescope_test(test: TestResult) -> dict[str, Any]:
    tags = [test.part, test.suite] + ([f"ranks:{test.world_size}"] if test.world_size else [])
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


# ---------------------------------------------------------------------------------------------------------
# batch outputs


def batch_csv(rows: list[tuple[str, ExerciseResult, str | None]]) -> str:
    """student,score,max_score,verdict,submitted,tests_passed,tests,reason: one line per student, for an
    LMS; ``reason`` says why an invalid upload was not graded."""

    lines = ["student,score,max_score,verdict,submitted,tests_passed,tests,reason"]
    for student, result, submitted in sorted(rows, key=lambda row: row[0]):
        passed = sum(t.status is Status.PASSED for t in result.tests)
        invalid = result.verdict is Status.INVALID
        fields = [
            student,
            f"{result.score:g}",
            f"{result.max_score:g}",
            str(result.verdict),
            submitted or "",
            str(passed),
            "0" if invalid else str(len(result.tests)),
            result.notes[0] if invalid and result.notes else "",
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
    figure = histogram_figure(scores, max_score)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def histogram_figure(scores: list[float], max_score: float) -> Any:
    """The histogram as a matplotlib figure: whole students on the y axis."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.hist(scores, bins=min(20, max(5, len(set(scores)))), range=(0, max_score or 1), color="#4C72B0")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(f"score (out of {max_score:g})")
    axes.set_ylabel("students")
    axes.set_title(f"{len(scores)} graded submissions, mean {sum(scores) / max(1, len(scores)):.2f}")
    figure.tight_layout()
    return figure


def write_batch_outputs(records: list[Any], out: Path, max_score: float) -> None:
    """grades.csv, results/<student>.json (Gradescope schema) and histogram.png in ``out``. Invalid uploads
    are in the CSV and have a results.json, but stay out of the histogram."""

    rows = [(r.student, r.result, r.submitted) for r in records]
    (out / "grades.csv").write_text(batch_csv(rows))
    (out / "results").mkdir(exist_ok=True)
    for student, result, _ in rows:
        (out / "results" / f"{student}.json").write_text(json.dumps(to_gradescope(result), indent=1))
    graded = [r.score for _, r, _ in rows if r.verdict is not Status.INVALID]
    histogram_png(graded, max_score, out / "histogram.png")


def batch_summary(records: list[Any], console: Console) -> None:
    """A table of verdicts and mean scores, the mean of the graded ones, then each invalid upload by name
    with its reason: an instructor must not give a zero for a corrupted upload without noticing."""

    results = {r.student: r.result for r in records}
    verdicts = {student: result.verdict for student, result in results.items()}
    graded = [results[s].score for s, v in verdicts.items() if v is not Status.INVALID]
    mean = f"mean {sum(graded) / len(graded):.2f} over {len(graded)} graded" if graded else "none graded"
    table = Table(title=f"{len(results)} submissions ({mean})", title_justify="left")
    for column in ("verdict", "students", "mean score"):
        table.add_column(column)
    for name, count in sorted(Counter(str(v) for v in verdicts.values()).items()):
        scores = [results[s].score for s, v in verdicts.items() if str(v) == name]
        shown = "-" if name == Status.INVALID else f"{sum(scores) / len(scores):.2f}"
        table.add_row(Text(name, style=STYLES[Status(name)]), str(count), shown)
    console.print(table)
    invalid = sorted(s for s, v in verdicts.items() if v is Status.INVALID)
    if invalid:
        console.print(
            f"[bold yellow]{len(invalid)} invalid, not graded[/] (0 in the gradebook, the reason as comment; "
            "ask for a new upload):"
        )
    for student in invalid:
        reason = results[student].notes[0] if results[student].notes else "invalid upload"
        console.print(f"  {student}: {reason}", markup=False, highlight=False, soft_wrap=True)


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
        blocked = sum(t.max_score for t in result.tests if t.status is Status.BLOCKED)
        mark = "[green]full marks[/]" if result.all_graded_passed else "[yellow]not yet[/]"
        mark += f" ({blocked:g} not graded here)" if blocked else ""
        console.print(f"  {result.exercise} {result.title}: {result.score:g} / {result.max_score:g}  {mark}")
    share = outcome.score / outcome.max_score if outcome.max_score else 0.0
    figures = (
        f"{outcome.score:g} / {outcome.max_score:g} ({share:.0%}; needs {section.checkpoint.threshold:.0%})"
    )
    if outcome.not_graded:
        points = f"{outcome.not_graded:g} point{'' if outcome.not_graded == 1 else 's'}"
        figures += f"; {points} not graded here: their parts need a GPU"
    if outcome.passed:
        console.print(f"[bold green]Checkpoint {section.number} passed:[/] {figures}")
        console.print(f"What you can do now: {section.checkpoint.summary}", markup=False)
    else:
        console.print(f"[bold]Checkpoint {section.number} not passed yet:[/] {figures}")
        if outcome.missed:
            console.print(
                "Every concept of the section must be earned; these are not yet (each one alone keeps the "
                "checkpoint from passing):",
                markup=False,
            )
            for concept in outcome.missed:
                console.print(f"  - {concept}", markup=False)
        todo = [r.exercise for r in outcome.results if not r.all_graded_passed]
        console.print("Work on " + ", ".join(f"`grade exercise {key}`" for key in todo))
    public_only = [r.exercise for r in outcome.results if all(t.suite == "public" for t in r.tests)]
    if public_only:
        which = ", ".join(public_only)
        console.print(f"[yellow]note:[/] {which}: public checks only (the hidden tests run when you submit)")
    for note in outcome.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"record (with the hashes of your files): {outcome.record_path}", markup=False)
