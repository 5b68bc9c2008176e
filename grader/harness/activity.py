"""Whether a world's ranks are doing anything at all: the evidence that a hang is a deadlock.

The rank factory reads it, in the ranks' own pid namespace (``zygote``: the ``activity`` request); the judge
decides (``world.Stillness``). A rank's process group is every process it started (``worker_main`` calls
``setsid``). Linux's proc(5): ``/proc/PID/stat`` field 5 is a process's group; each thread's
``/proc/PID/task/TID/stat`` field 3 its state (R running or runnable, D waiting on the disk, S sleeping, ...)
and the first field of its ``schedstat`` the nanoseconds it has run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
BUSY_STATES = frozenset("RD")
"""A thread that runs or can run (R), or waits on the disk (D): it will make progress without any peer."""


@dataclass(frozen=True)
class Activity:
    """One rank's process group as it stands."""

    cpu_ns: int
    """Nanoseconds its live threads have run."""
    threads: int
    busy: bool
    """Some thread is running, runnable or waiting on the disk."""

    def to_json(self) -> list[object]:
        return [self.cpu_ns, self.threads, self.busy]

    @classmethod
    def from_json(cls, fields: list[object]) -> Activity:
        cpu_ns, threads, busy = fields
        return cls(int(str(cpu_ns)), int(str(threads)), bool(busy))


def group_activity(groups: list[int], proc: Path = PROC) -> dict[int, Activity] | None:
    """Each process group in ``groups`` that still has a process; None where ``proc`` cannot say (no
    scheduler statistics in this kernel). A process or thread that ends while it is read is skipped."""
    found: dict[int, Activity] = {}
    wanted = set(groups)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry / "stat")
        if fields is None or (group := int(fields[2])) not in wanted:
            continue
        threads = _threads(entry)
        if threads is None:
            return None
        before = found.get(group, Activity(0, 0, False))
        found[group] = Activity(
            before.cpu_ns + sum(ns for ns, _ in threads),
            before.threads + len(threads),
            before.busy or any(state in BUSY_STATES for _, state in threads),
        )
    return found


def _threads(process: Path) -> list[tuple[int, str]] | None:
    """(nanoseconds run, state) of each thread of ``process``; None without scheduler statistics."""
    threads = []
    try:
        tasks = list((process / "task").iterdir())
    except OSError:
        return []
    for task in tasks:
        fields = _stat_fields(task / "stat")
        try:
            ran = int((task / "schedstat").read_text().split()[0])
        except FileNotFoundError:
            if fields is not None:  # the thread is there, its statistics are not: the kernel keeps none
                return None
            continue
        except (OSError, ValueError, IndexError):
            continue
        if fields is not None:
            threads.append((ran, fields[0]))
    return threads


def _stat_fields(path: Path) -> list[str] | None:
    """The fields of a stat file after the command name (which may hold spaces and parentheses): state
    first, then ppid, pgrp, ...; None when the process is gone."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()
