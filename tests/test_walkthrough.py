"""A learner's first section, typed into a real terminal (tmux send-keys) and read back off the screen
(tmux capture-pane): the student bundle, stubs that fail, a ring that passes under --watch, checkpoint 1,
and `grade progress` showing it.

The learner here has already solved 01 and 03 (their references are copied in) and writes exercise 02's
ring while `grade exercise 02 --watch` runs. The bundle has no hidden suites, so every grade is public
checks only, as on a learner's own machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import cli

REPO = Path(__file__).parent.parent
TMUX = shutil.which("tmux")
SECTION_1 = ("01_comm_primitives", "02_ring_tree", "03_cost_analysis")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        TMUX is None and not os.environ.get("CI"),
        reason="tmux is not installed (CI installs it: scripts/test)",
    ),
]


class Terminal:
    """One tmux pane on a private server: type lines, wait for text on the screen."""

    def __init__(self, socket: str, cwd: Path, env: dict[str, str]) -> None:
        assert TMUX is not None, "tmux is not installed (apt-get install tmux)"
        self.base = [TMUX, "-L", socket]
        exports = [f"{key}={value}" for key, value in env.items()]
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "learner", "-x", "160", "-y", "50")
        self._tmux("set-option", "-g", "history-limit", "20000")
        # waited for, so that the screen is settled before any offset is taken (a `clear` still pending here
        # once shrank the screen under an offset taken just before it)
        self.run(f"cd {cwd} && export {' '.join(exports)}")

    def _tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], check=True, capture_output=True, text=True).stdout

    def type(self, line: str) -> None:
        self._tmux("send-keys", "-t", "learner", "-l", line)
        self._tmux("send-keys", "-t", "learner", "Enter")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "learner", *keys)

    def screen(self) -> str:
        """Everything the pane has shown (scrollback included), as plain text."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "learner")

    def end(self) -> int:
        """Where the next output starts: the end of the screen's text, not of the blank rows below it, which
        new lines overwrite (an offset past them would skip the first lines printed)."""
        return len(self.screen().rstrip())

    def wait_for(self, text: str, *, after: int = 0, timeout: float = 240) -> str:
        """The screen from character ``after`` on, once ``text`` is on it; fail with the screen otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen[after:]:
                return screen[after:]
            time.sleep(0.2)
        pytest.fail(f"{text!r} did not appear within {timeout:g} s; the screen:\n{self.screen()[after:]}")

    def run(self, command: str, timeout: float = 240) -> str:
        """Type ``command``, wait for it to finish, return what it printed."""
        start = self.end()
        marker = f"__done_{time.monotonic_ns()}__"
        self.type(f'{command}; echo "{marker[:6]}""{marker[6:]}"')  # the typed line must not hold the marker
        return self.wait_for(f"{marker}\n", after=start, timeout=timeout)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


@pytest.fixture
def learner_home() -> Iterator[Path]:
    """A folder outside /tmp, where a learner keeps the course (the rank sandbox mounts its own /tmp)."""
    folder = Path(tempfile.mkdtemp(prefix="distgpu-walkthrough-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def terminal(tmp_path: Path, learner_home: Path) -> Iterator[tuple[Terminal, Path]]:
    bundle = learner_home / "distgpu-student"
    assert cli.main(["--course", str(REPO / "course.yml"), "release", str(bundle)]) == 0
    bin_dir = tmp_path / "bin"  # `grade` as the learner types it, running this checkout's grader
    bin_dir.mkdir()
    (bin_dir / "grade").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m grader.cli "$@"\n')
    (bin_dir / "grade").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "DISTGPU_STATE_DIR": str(tmp_path / "state"),
        "NO_COLOR": "1",
    }
    term = Terminal(f"distgpu-walk-{os.getpid()}", bundle, env)
    try:
        yield term, bundle
    finally:
        term.close()


def test_section_1_from_stubs_to_checkpoint(terminal: tuple[Terminal, Path]) -> None:
    term, bundle = terminal
    for name in ("01_comm_primitives", "03_cost_analysis"):  # solved earlier
        for source in (REPO / "solutions" / name).glob("*.py"):
            if source.name != "test_hidden.py":
                shutil.copyfile(source, bundle / "exercises" / name / source.name)

    # The stubs are not started yet, and say so in one line per part.
    start = term.end()
    term.type("grade exercise 02 --watch")
    out = term.wait_for("watching allreduce.py: save to regrade", after=start)
    assert out.count(": not started (0 / ") == 5 and "`grade hint 02 ring_allreduce`" in out
    assert "Score: 0 / 10" in out and "public checks only" in out

    # A correct ring (and tree) is saved; --watch regrades on its own.
    shutil.copyfile(
        REPO / "solutions" / "02_ring_tree" / "allreduce.py",
        bundle / "exercises" / "02_ring_tree" / "allreduce.py",
    )
    out = term.wait_for("Score: 10 / 10", after=start + len(out))
    assert "changed: allreduce.py" in out
    term.keys("C-c")

    # The checkpoint passes and says what the learner can now do.
    out = term.run("grade checkpoint 1")
    assert re.search(r"Checkpoint 1 passed: ([\d.]+) / \1 \(100%; needs 80%\)", out), out
    assert "What you can do now: You can build broadcast, reduce" in out
    assert "record (with the hashes of your files):" in out
    assert (bundle / ".grade" / "checkpoints" / "section-1.json").is_file()

    # `grade progress` shows it.
    out = term.run("grade progress")
    assert "1. Collective communication  checkpoint passed" in out
    for title in ("Communication primitives", "Ring and tree algorithms", "Communication cost analysis"):
        row = next(line for line in out.splitlines() if title in line)
        assert "done" in row, row
    assert "3 of 25 exercises done, 1 of 5 checkpoints passed" in out
    assert "\x1b[" not in out
