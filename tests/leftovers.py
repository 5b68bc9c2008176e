"""Processes a grading should not have left behind, found through /proc and killed on the spot."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def kill_processes_with(marker: str, *, or_in_environment: str | None = None) -> list[str]:
    """Kill every process (but this one) whose command line holds ``marker``, or whose environment holds
    ``or_in_environment``; return them as 'pid: command' lines. A grader that contains its gradings leaves
    none."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes() if or_in_environment else b""
        except OSError:
            continue
        if marker.encode() in cmdline or (or_in_environment and or_in_environment.encode() in environ):
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
            found.append(f"{entry.name}: {command}")
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass
    return found
