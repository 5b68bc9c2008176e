"""Live displays (the grading bar, the batch's bar, the validation status) redraw only on a terminal: with
FORCE_COLOR, which many Actions workflows and GitHub Classroom's command grader set, rich believes any
file is one, and a bar redrawn into a log is kilobytes of cursor movement. Colour stays."""

from __future__ import annotations

import io
import os
import re

import pytest
from rich.console import Console

from grader.cli.views import BatchProgressView
from grader.learner.views import ProgressBar, animates

REDRAWS = re.compile(r"\r|\x1b\[(\d*[ABCDEFGHJKST]|\?25[lh])")
"""A carriage return, or ANSI cursor movement, line erasing and cursor hiding."""


def shown(console: Console) -> None:
    with ProgressBar(console, "grading 14") as bar:
        for done in range(1, 21):
            bar.update(done, 20)
    with BatchProgressView(console) as view:
        view.start(3)
        view.note("2 pending")
    console.print("[bold green]Score: 10 / 10[/]")


def test_a_pipe_gets_colour_and_no_redraws_whatever_force_color_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "true")
    out = io.StringIO()
    console = Console(file=out, highlight=False)  # as grader.cli makes it
    assert console.is_terminal and not animates(console)  # rich's belief, and ours
    shown(console)
    text = out.getvalue()
    assert "\x1b[1;32mScore: 10 / 10\x1b[0m" in text and not REDRAWS.search(text), repr(text[:300])


def test_a_terminal_gets_the_live_bar() -> None:
    """The same displays on a pseudo-terminal do redraw: the check above is one that can fail."""
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        console = Console(file=terminal, force_terminal=True, width=80)
        assert animates(console)
        shown(console)
        terminal.flush()
    text = os.read(leader, 1 << 16).decode(errors="replace")
    os.close(leader)
    assert REDRAWS.search(text)
