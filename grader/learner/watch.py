"""``grade exercise NN --watch``: regrade whenever one of the exercise's files is saved.

Polling (mtime and size, twice a second) rather than inotify: it works the same on every platform, in
containers and on network folders, and an exercise has a handful of files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

POLL_S = 0.5


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None  # deleted or being replaced: a change too
    return found.st_mtime_ns, found.st_size


def changes(
    paths: list[Path], *, interval: float = POLL_S, stop: Callable[[], bool] = lambda: False
) -> Iterator[list[Path]]:
    """Yield the ``paths`` that changed since the previous yield (or the call), until ``stop()`` is true.

    Editors often write a file in several steps; a change is reported once the stamps have been stable
    for one interval, so one save is one regrade.
    """
    seen = {p: _stamp(p) for p in paths}  # now, not at the first next(): saves before that count
    return _poll(paths, seen, interval, stop)


def _poll(
    paths: list[Path], seen: dict[Path, tuple[int, int] | None], interval: float, stop: Callable[[], bool]
) -> Iterator[list[Path]]:
    pending: set[Path] = set()
    while not stop():
        time.sleep(interval)
        now = {p: _stamp(p) for p in paths}
        moved = {p for p in paths if now[p] != seen[p]}
        seen = now
        if moved:
            pending |= moved
        elif pending:
            yield sorted(pending)
            pending = set()


def watch(
    paths: list[Path],
    grade: Callable[[list[Path]], None],
    *,
    interval: float = POLL_S,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Call ``grade(changed)`` after every save of one of ``paths``, until ``stop()`` or Ctrl-C."""
    try:
        for changed in changes(paths, interval=interval, stop=stop):
            grade(changed)
    except KeyboardInterrupt:
        return
