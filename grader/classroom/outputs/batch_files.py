"""A batch's outputs: grades.csv, one Gradescope results.json per student, the score histogram, and the
terminal summary of verdicts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.classroom.state.class_state import ClassState
from grader.core.atomic import atomic_path, write_atomic
from grader.core.formats import STYLES, to_gradescope
from grader.core.results import ExerciseResult, Status


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
    try:
        with atomic_path(path) as tmp:
            figure.savefig(tmp, dpi=100, format="png")
    finally:
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


def write_batch_outputs(klass: ClassState, out: Path) -> None:
    """grades.csv, results/<student>.json (Gradescope schema) and histogram.png in ``out``, for the students
    of ``klass`` with a record: a results.json of anyone else is removed. Invalid uploads are in the CSV and
    have a results.json, but stay out of the histogram."""

    rows = [(r.student, r.result, r.submitted) for r in klass.records]
    (out / "results").mkdir(exist_ok=True)
    for student, result, _ in rows:
        write_atomic(out / "results" / f"{student}.json", json.dumps(to_gradescope(result), indent=1))
    kept = {f"{student}.json" for student, _, _ in rows}
    for stale in (out / "results").glob("*.json"):
        if stale.name not in kept:
            stale.unlink()
    write_atomic(out / "grades.csv", batch_csv(rows))
    graded = [r.score for _, r, _ in rows if r.verdict is not Status.INVALID]
    histogram_png(graded, klass.exercise.points, out / "histogram.png")


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
