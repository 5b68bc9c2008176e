"""What ``grade batch`` shows on the terminal: a progress bar while it grades, a summary when it is done.

The classroom functions report through callbacks (``batch_grade``'s ``on_start`` and ``on_result``, the
Slurm pool's ``on_queue``); the bar that listens to them is the command line's.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from rich.console import Console

from grader.classroom.grade import BatchOutcome
from grader.classroom.intake.discovery import hidden_entries
from grader.classroom.intake.platforms import LEFTOVERS, Intake
from grader.classroom.outputs.batch_files import batch_summary
from grader.classroom.state.class_state import SET_ASIDE_DIR
from grader.core.results import ExerciseResult, Status
from grader.learner.views import animates


class BatchProgressView:
    """A rich progress bar with ETA and a live count of verdicts, on a terminal only (``animates``)."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[counts]}"),
            TextColumn("[dim]{task.fields[queue]}"),
            console=console,
            disable=not animates(console),
        )
        self.counts: dict[str, int] = {}
        self.task = self.progress.add_task("grading", total=None, counts="", queue="")

    def __enter__(self) -> BatchProgressView:
        self.progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.progress.__exit__(kind, error, trace)

    def start(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def note(self, queue: str) -> None:
        """What the cluster's queue holds for this batch (``--backend slurm``)."""
        self.progress.update(self.task, queue=queue)

    def advance(self, student: str, result: ExerciseResult) -> None:

        self.counts[str(result.verdict)] = self.counts.get(str(result.verdict), 0) + 1
        counts = "  ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        self.progress.update(self.task, advance=1, counts=counts)


def batch_report(outcome: BatchOutcome, console: Console) -> None:
    """The batch's verdicts, how many of its submissions this run graded, and where its reports are."""
    for stray in outcome.strays:
        console.print(
            f"set aside records/{stray.name}: {stray.reason}; moved to {stray.moved_to}, graded again",
            style="bold yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    batch_summary(outcome.records, console)
    this_run = set(outcome.graded)
    invalid = sum(r.result.verdict is Status.INVALID for r in outcome.records if r.student in this_run)
    current = len(outcome.records) - len(this_run)
    said = [f"graded {len(this_run) - invalid} of {len(outcome.records)}"]
    said += [f"{invalid} invalid (not graded)"] if invalid else []
    said += [f"{current} unchanged since their last run (records kept)"] if current else []
    console.print(f"{', '.join(said)}; reports in {outcome.out}", soft_wrap=True, markup=False)
    plural = "" if outcome.staged == 1 else "s"
    console.print(f"staged {outcome.staged} submission{plural} once", markup=False, highlight=False)
    if outcome.set_aside:
        aside = outcome.out / SET_ASIDE_DIR
        line = f"set aside (no submission now; their records kept in {aside}): {', '.join(outcome.set_aside)}"
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    index = outcome.out / "report" / "index.html"
    if index.is_file():
        console.print(f"what the class missed: {index}", soft_wrap=True, markup=False, highlight=False)
    pairs = outcome.out / "report" / "similarity.csv"
    if pairs.is_file():
        flagged = len(pairs.read_text().splitlines()) - 1
        page = pairs.with_suffix(".html")
        line = f"similar pairs to look at (a reason to look, never a verdict): {flagged}, in {page}"
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def intake_report(intake: Intake, out: Path, console: Console) -> None:
    """What of the submissions is in no upload: a plain folder's hidden entries, a platform download's
    members that no upload took (each named, with why, in ``OUT/intake.txt``)."""
    said = []
    if intake.platform == "folders":
        hidden = hidden_entries(intake.folder)
        said += [f"hidden entries, no one's upload: {', '.join(hidden)}"] if hidden else []
    elif intake.leftovers:
        first = ", ".join(member for member, _ in intake.leftovers[:3])
        more = f" and {len(intake.leftovers) - 3} more" if len(intake.leftovers) > 3 else ""
        said.append(f"in no upload: {first}{more} (each with why in {out / LEFTOVERS})")
    for line in said:
        console.print(line, soft_wrap=True, markup=False, highlight=False)
