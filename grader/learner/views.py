"""What a learner sees on the terminal: a bar while grading, an exercise's result, progress tables, a
checkpoint's verdict."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from grader.core.formats import STYLES
from grader.core.results import ConceptScore, ExerciseResult, Status, TestResult

if TYPE_CHECKING:
    from grader.learner.checkpoint import CheckpointOutcome
    from grader.learner.progress import ExerciseProgress, SectionProgress


def animates(console: Console) -> bool:
    """Whether a live display (a bar, a spinner) may redraw: only when the console writes to a terminal.
    Not ``console.is_terminal``: rich takes ``FORCE_COLOR``, which many Actions workflows and GitHub
    Classroom's command grader set, for a terminal, and a bar redrawn into a log is kilobytes of cursor
    movement and carriage returns. Colour stays: it is harmless in a log."""
    isatty = getattr(console.file, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed file
        return False


class ProgressBar:
    """A transient bar of tests done, on a terminal only: logs and pipes get the report alone."""

    def __init__(self, console: Console, label: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.enabled = animates(console)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task(label, total=None)

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def describe(self, label: str) -> None:
        self.progress.update(self.task, description=label, completed=0, total=None)

    def update(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)


def to_terminal(result: ExerciseResult, console: Console, *, readme: str = "") -> None:
    """A table per part, then each distinct failure message once, what each lost concept teaches, and the
    score. A part not started yet (``ExerciseResult.not_started``) is one line instead of its table, its
    failures and its concepts, with the ``grade hint`` that helps with it; then, once, where the tasks are
    described (``readme``, e.g. 'exercises/06_rdma_concepts/README.md, section "What to implement"')."""
    graded = escape(f"({result.graded}; {result.device})")
    console.print(f"[bold]Exercise {result.exercise}: {escape(result.title)}[/]  {graded}")
    idle = result.not_started()
    for part in dict.fromkeys(t.part for t in result.tests):
        if part in idle:
            console.print(_not_started(result, part), soft_wrap=True)
        else:
            console.print(_part_table(part, [t for t in result.tests if t.part == part]))
    if idle:
        console.print(f"Start at {readme or 'the README'}.", soft_wrap=True, markup=False)
    for tests in grouped_failures(tuple(t for t in result.tests if t.part not in idle)).values():
        console.print(Text(tests[0].output), soft_wrap=True)
        if len(tests) > 1:
            console.print(f"  [dim]the same {escape(_where(tests))}[/]")
    for concept in result.concepts:
        if not concept.earned and concept.max_score and concept.part not in idle:
            _concept_loss(result, concept, console)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    style = "bold green" if result.all_graded_passed else "bold"
    console.print(
        f"[{style}]Score: {result.score:g} / {result.max_score:g}[/]  in {result.execution_time:.1f} s"
    )


def _not_started(result: ExerciseResult, part: str) -> str:
    points = sum(t.max_score for t in result.tests if t.part == part)
    number, name = part.split(".", 1)
    return f"[bold]{part}[/]: [yellow]not started[/] (0 / {points:.3g}); stuck? `grade hint {number} {name}`"


def _concept_loss(result: ExerciseResult, concept: ConceptScore, console: Console) -> None:
    """One line on a concept not earned: lost, with the idea it teaches, or not graded here (blocked)."""
    failed = concept.tests - concept.passed
    own = [t for t in result.tests if (t.part, t.concept) == (concept.part, concept.name)]
    points = f"{concept.max_score:.3g} point{'' if concept.max_score == 1 else 's'}"
    if all(t.status in (Status.PASSED, Status.BLOCKED) for t in own):
        console.print(
            f"[yellow]not graded here[/]: {points} of [bold]{concept.part}: {concept.name}[/] "
            f"({failed} of {concept.tests} tests blocked: {escape(_first_output(own))})",
            soft_wrap=True,
        )
        return
    idea = f"\n  {escape(concept.idea)}" if concept.idea else ""
    console.print(
        f"[red]lost {points}[/] on [bold]{concept.part}: {concept.name}[/]"
        f" ({failed} of {concept.tests} tests not passed)" + idea,
        soft_wrap=True,
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
            Text(t.name),
            t.suite,
            str(t.world_size or ""),
            Text(str(t.status), style=STYLES[t.status]),
            f"{t.score:.3g}/{t.max_score:.3g}",
        )
    return table


def progress_tables(sections: list[SectionProgress], console: Console) -> None:
    """One table per section (its checkpoint in the title), then a line of totals. Every status is a word,
    so the tables read the same without colour."""
    for section in sections:
        table = Table(title=_section_title(section), title_justify="left")
        for column in ("#", "exercise", "best", "last attempt", "done", "hints"):
            table.add_column(column)
        for e in section.exercises:
            done = "[green]done[/]" if e.done else ""
            table.add_row(e.key, Text(e.title), _best(e), _last(e), done, _hints(e))
        console.print(table)
    exercises = [e for s in sections for e in s.exercises]
    passed = sum(s.checkpoint == "passed" for s in sections)
    with_checkpoint = sum(s.checkpoint != "none" for s in sections)
    console.print(
        f"{sum(e.done for e in exercises)} of {len(exercises)} exercises done, "
        f"{passed} of {with_checkpoint} checkpoints passed"
    )


def _section_title(section: SectionProgress) -> str:
    head = f"{section.number}. {escape(section.title)}"
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
        figures = f"{result.score:g} / {result.max_score:g}"
        console.print(f"  {result.exercise} {escape(result.title)}: {figures}  {mark}")
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
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(f"record (with the hashes of your files): {outcome.record_path}", markup=False)
