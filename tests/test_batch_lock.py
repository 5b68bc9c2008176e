"""One batch at a time per --out: a second run stops at once naming the first (pid, host, start time), or
waits with --wait; a holder killed with -9 leaves no lock behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from grader.classroom.state.lock import LOCK_FILE, BatchBusy, batch_lock

HOLDER = """
import sys
from pathlib import Path
from grader.classroom.state.lock import batch_lock

with batch_lock(Path(sys.argv[1]), wait=False, on_wait=print):
    print("holding", flush=True)
    sys.stdin.read()  # until the test closes it
"""


def hold(out: Path) -> subprocess.Popen[str]:
    """Another process holding ``out``'s lock until its stdin is closed (or it is killed)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
    return holder


def test_a_second_batch_stops_at_once_and_names_the_first(tmp_path: Path) -> None:
    holder = hold(tmp_path / "out")
    try:
        with pytest.raises(BatchBusy) as busy, batch_lock(tmp_path / "out", wait=False, on_wait=print):
            pytest.fail("the lock was taken twice")
        said = str(busy.value)
        assert said.startswith(
            f"{tmp_path / 'out'}: another batch is grading into this folder (pid {holder.pid} "
        )
        assert f"on {socket.gethostname()}, started 20" in said and "--wait" in said and "\n" not in said
    finally:
        holder.communicate("")
    with batch_lock(tmp_path / "out", wait=False, on_wait=print):
        pass  # free once the holder ended


def test_wait_queues_behind_the_holder(tmp_path: Path) -> None:
    holder = hold(tmp_path / "out")
    waiting: list[str] = []
    entered = threading.Event()

    def second() -> None:
        with batch_lock(tmp_path / "out", wait=True, on_wait=waiting.append):
            entered.set()

    thread = threading.Thread(target=second)
    thread.start()
    try:
        while not waiting and thread.is_alive():  # it says whom it waits for, then blocks in flock
            thread.join(0.05)
        [said] = waiting
        assert said.startswith(f"waiting for the batch that holds {tmp_path / 'out'} (pid {holder.pid} on ")
        assert not entered.is_set()
    finally:
        holder.communicate("")
    thread.join()
    assert entered.is_set()
    assert f'"pid": {os.getpid()}' in (tmp_path / "out" / LOCK_FILE).read_text()


def test_a_holder_killed_with_sigkill_leaves_no_lock(tmp_path: Path) -> None:
    holder = hold(tmp_path / "out")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with batch_lock(tmp_path / "out", wait=False, on_wait=print):
        pass
