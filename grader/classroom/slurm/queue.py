"""Asking Slurm how a batch's job fares: ``squeue`` while its tasks are queued, ``scontrol`` once they
have left the queue (clusters without accounting storage have no ``sacct``)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class TaskEnd:
    state: str
    """scontrol's JobState (COMPLETED, FAILED, NODE_FAIL, ...), or UNKNOWN once Slurm has forgotten it."""
    stopped_by_user: bool
    """Cancelled while still pending: a person cancelled the batch, no failure did."""


def squeue(job: str) -> dict[int, tuple[str, str]]:
    """The tasks of ``job`` still queued: array index (0 for a plain job) -> (state, reason)."""
    done = subprocess.run(
        ["squeue", "-h", "-r", "-j", job, "-o", "%K %T %r"], capture_output=True, text=True, check=False
    )
    live = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        index, state, reason = [*line.split(maxsplit=2), "", ""][:3]
        live[int(index) if index.isdigit() else 0] = (state, reason)
    return live


def task_ends(job: str, seen: dict[int, str]) -> dict[int, TaskEnd]:
    """How each task of ``job`` ended, from ``scontrol show job`` (kept MinJobAge seconds after the end)."""
    done = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, check=False)
    ends = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        state = fields.get("JobState", "UNKNOWN")
        for index in _indices(fields.get("ArrayTaskId", "0")):
            never_ran = seen.get(index, "PENDING") == "PENDING"  # as last seen in squeue
            ends[index] = TaskEnd(state, state == "CANCELLED" and never_ran)
    return ends


def _indices(spec: str) -> list[int]:
    """'3' -> [3]; '5-9%2' -> [5..9]; '1,4-5' -> [1, 4, 5]: an array's pending tasks share one record."""
    found: list[int] = []
    for piece in spec.split("%")[0].split(","):
        low, _, high = piece.partition("-")
        if low.isdigit():
            found += range(int(low), int(high or low) + 1)
    return found


def queue_summary(live: dict[int, tuple[str, str]]) -> str:
    """'2 running, 6 pending (Resources)': what the queue holds, for the progress line."""
    counts: dict[str, int] = {}
    reasons: set[str] = set()
    for state, reason in live.values():
        counts[state.lower()] = counts.get(state.lower(), 0) + 1
        if state == "PENDING" and reason not in ("", "None"):
            reasons.add(reason)
    text = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    return text + (f" ({', '.join(sorted(reasons))})" if reasons else "")
