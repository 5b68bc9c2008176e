"""One batch at a time per output folder: ``grade batch`` holds ``<out>/batch.lock`` while it runs.

The lock is the kernel's (``fcntl.flock`` on the open file, which NFS maps to a lock on the server): a run
killed with -9 releases it with its last file descriptor, so no lock outlives its run and none is ever
broken by hand. The file names the holder (pid, host, start time, command line), written in place once the
lock is taken (a rename would swap the locked file for an unlocked one), so that a second run can say whom
it waits for; what the file says is shown, never used to decide.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shlex
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.core.errors import EnvironmentFailure

LOCK_FILE = "batch.lock"


class BatchBusy(EnvironmentFailure):
    """Another batch holds the output folder (the same command will run once it is done); the message
    names that batch and the ways on."""


@contextmanager
def batch_lock(out: Path, *, wait: bool, on_wait: Callable[[str], None]) -> Iterator[None]:
    """Hold ``out``'s batch lock for the block. When another run holds it: ``BatchBusy`` at once, or, with
    ``wait``, tell ``on_wait`` whom this run waits for (one line) and wait until it is free."""
    path = out / LOCK_FILE
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = holder_of(path)
            if not wait:
                raise BatchBusy(
                    f"{out}: another batch is grading into this folder ({holder}); let it finish, or "
                    "rerun with --wait to start when it has"
                ) from None
            on_wait(f"waiting for the batch that holds {out} ({holder})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        _write_holder(fd)
        yield
    finally:
        os.close(fd)  # releases the lock


def holder_of(path: Path) -> str:
    """Who the lock file at ``path`` says holds it, in words."""
    try:
        holder = json.loads(path.read_text())
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started']}: {holder['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a run that has not yet written its name"


def _write_holder(fd: int) -> None:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join(["grade", *sys.argv[1:]]),
    }
    data = json.dumps(holder).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
