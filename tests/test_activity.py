"""What the deadlock check reads (grader/harness/activity.py): a process group's threads, their states and the
CPU they ran, from the real /proc of this machine."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from grader.harness.activity import Activity, group_activity

SLEEPER = "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); time.sleep(60)"
SPINNER = "while True: pass"


@pytest.fixture
def group() -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def start(code: str) -> int:
        process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        started.append(process)
        time.sleep(0.5)  # the interpreter is up and in its loop (or its sleep)
        return process.pid

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_a_sleeping_group_is_idle_and_uses_no_cpu(group) -> None:  # type: ignore[no-untyped-def]
    pid = group(SLEEPER)
    first = group_activity([pid])
    time.sleep(0.5)
    second = group_activity([pid])
    assert first is not None and second is not None, "this kernel keeps no scheduler statistics"
    assert not first[pid].busy and first[pid].threads == 2
    assert second[pid].cpu_ns - first[pid].cpu_ns < 5_000_000  # under 5 ms in half a second


def test_a_spinning_group_is_busy_and_its_cpu_grows(group) -> None:  # type: ignore[no-untyped-def]
    pid = group(SPINNER)
    first = group_activity([pid])
    time.sleep(0.5)
    second = group_activity([pid])
    assert first is not None and second is not None
    assert first[pid].busy and second[pid].busy
    assert second[pid].cpu_ns - first[pid].cpu_ns > 50_000_000


def test_only_the_groups_asked_for_and_gone_ones_are_absent(group) -> None:  # type: ignore[no-untyped-def]
    pid = group(SLEEPER)
    assert set(group_activity([pid, 999_999_999]) or {}) == {pid}


def test_activity_travels_as_json() -> None:
    activity = Activity(cpu_ns=123, threads=4, busy=True)
    assert Activity.from_json(activity.to_json()) == activity
