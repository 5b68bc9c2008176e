"""A learner's space-time diagrams: the pages of a grading in the state folder, and a compact text one.

``grade exercise NN`` writes one HTML page per failing multi-rank test into
``<state folder>/diagrams/NN_slug/`` (``--trace``: every multi-rank test, and each one's Chrome trace JSON
for Perfetto) and prints the first failing test's diagram in a few lines when its world has at most
``TEXT_MAX_RANKS`` ranks.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from grader.core.course import Exercise
from grader.core.diagrams.files import Written, write_diagrams
from grader.core.diagrams.matching import blocked, deadlock
from grader.core.results import ExerciseResult
from grader.core.timeline import Call, Timeline
from grader.learner.progress import state_dir

TEXT_MAX_RANKS = 8
TEXT_MAX_LINES = 20
ARROWS = {"send": "->", "recv": "<-"}


def diagrams_folder(exercise: Exercise) -> Path:
    return state_dir() / "diagrams" / exercise.dirname


def save_diagrams(exercise: Exercise, result: ExerciseResult, *, trace: bool) -> Written:
    """Write ``result``'s diagrams (Chrome traces too with ``trace``) into ``diagrams_folder``, replacing
    the last grading's."""
    return write_diagrams(result.timelines, diagrams_folder(exercise), traces=trace)


def show_diagrams(result: ExerciseResult, written: Written, console: Console) -> None:
    """The first failing test's diagram as text (small worlds only), then where the pages are."""
    failing = [t for t in result.timelines if t.status != "passed"]
    if failing and failing[0].world_size <= TEXT_MAX_RANKS:
        for line in text_diagram(failing[0], console.width):
            console.print(line, soft_wrap=True, highlight=False)
    if written.pages:
        folder = written.pages[0].parent
        what = f"{len(written.pages)} space-time diagram(s)" + (
            " and Chrome traces" if written.traces else ""
        )
        console.print(
            f"{what} in {escape(str(folder))}; first: {escape(written.pages[0].name)}", highlight=False
        )
    if written.left_out:
        console.print(f"[dim]{len(written.left_out)} more not written (1 MB for all of them)[/]")


def text_diagram(timeline: Timeline, width: int = 100) -> list[str]:
    """At most ``TEXT_MAX_LINES`` lines of rich markup: a title, a lane per rank listing its calls in order
    (``->1`` sent to rank 1, ``<-2`` received from rank 2, ``w->1`` waited for an isend to rank 1, a
    collective by name; red: never returned), then the departure and where each stuck rank waits."""
    how = "each rank's calls in order; [red]red[/]: never returned"
    lines = [f"[bold]space-time: {escape(timeline.test)}[/] ({how})"]
    by_index = {(c.rank, c.index): c for c in timeline.calls}
    for rank in range(timeline.world_size):
        cells = [_cell(c, by_index, timeline) for c in timeline.calls if c.rank == rank]
        lines.append(f"  rank {rank} | " + _fit(cells, width - 12))
    if timeline.departure:
        lines.append(f"[yellow]departs from {escape(timeline.expected)}[/]: {escape(timeline.departure)}")
    stuck = blocked(timeline)
    cycle = deadlock(stuck)
    if cycle:
        lines.append("[red]deadlock[/]: " + " -> ".join(f"rank {r}" for r in [*cycle, cycle[0]]))
    lines += [f"  [red]rank {b.rank}[/] {escape(b.text)}" for b in stuck]
    if len(lines) > TEXT_MAX_LINES:
        lines = [*lines[: TEXT_MAX_LINES - 1], f"  ... {len(lines) - TEXT_MAX_LINES + 1} more line(s)"]
    return lines


def _cell(call: Call, by_index: dict[tuple[int, int], Call], timeline: Timeline) -> str:
    target = by_index.get((call.rank, call.of), call) if call.of is not None else call
    peer = "?" if target.peer is None else str(target.peer)
    text = ARROWS[target.kind] + peer if target.kind in ARROWS else target.op
    text = ("w" + text) if call.kind == "wait" else text
    if call.end is None:
        return f"[red]{escape(text)}[/]"
    if timeline.departure_at == (call.rank, call.index):
        return f"[yellow underline]{escape(text)}[/]"
    return escape(text)


def _fit(cells: list[str], width: int) -> str:
    """The cells, space-separated, cut with '...+N' where they pass ``width`` visible characters."""
    out: list[str] = []
    used = 0
    for i, cell in enumerate(cells):
        visible = len(Text.from_markup(cell).plain)
        if used + visible + 1 > width - 8:
            return " ".join(out) + f" ...+{len(cells) - i}"
        out.append(cell)
        used += visible + 1
    return " ".join(out)
