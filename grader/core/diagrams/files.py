"""Writing a result's diagrams into a folder: one HTML page per timeline, atomically, within a budget.

The folder holds one run's diagrams: pages (and traces) an earlier run left there are removed, so it never
shows a diagram of a test that passes now. Pages are written in test order until the next would pass
``budget`` bytes; the rest are listed as left out.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.diagrams.chrome import chrome_trace
from grader.core.diagrams.page import html_page
from grader.core.timeline import Timeline

BUDGET_BYTES = 1_000_000
"""What one student's diagrams may take together (pages only; ``--trace``'s JSON is the student's own ask)."""
TRACE_SUFFIX = ".trace.json"


@dataclass
class Written:
    pages: list[Path] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    """Tests whose page did not fit the budget."""


def file_stem(timeline: Timeline) -> str:
    """'2.3-test_ring_sum-4ranks': the test's number and name, safe as a file name."""
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in timeline.test).strip("-")
    return f"{timeline.number}-{name}"[:120]


def write_diagrams(
    timelines: tuple[Timeline, ...], folder: Path, *, budget: int = BUDGET_BYTES, traces: bool = False
) -> Written:
    """Write a page per timeline into ``folder`` (made when there is one), and with ``traces`` each one's
    Chrome trace JSON too; remove what an earlier run left there."""
    for old in [*folder.glob("*.html"), *folder.glob(f"*{TRACE_SUFFIX}")]:
        old.unlink(missing_ok=True)
    if timelines:
        folder.mkdir(parents=True, exist_ok=True)
    written, used = Written(), 0
    for timeline in timelines:
        page = html_page(timeline).encode()
        if used + len(page) > budget:
            written.left_out.append(timeline.test)
            continue
        used += len(page)
        written.pages.append(write_atomically(folder / f"{file_stem(timeline)}.html", page))
        if traces:
            data = json.dumps(chrome_trace(timeline)).encode()
            written.traces.append(write_atomically(folder / f"{file_stem(timeline)}{TRACE_SUFFIX}", data))
    return written


def write_atomically(path: Path, data: bytes) -> Path:
    """``data`` into ``path`` by way of a temporary file beside it: a crash leaves the old file or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
