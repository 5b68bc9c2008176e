"""The local sandbox, seen from inside a rank: what a submission can reach, and what it leaves behind."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from leftovers import kill_processes_with

from grader.core import rank_uids, sandbox
from grader.core.course import Course
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob
from grader.runners.local import LocalRunner

SECRET = "distgpu-canary-7f3a9c"

PROBE = """
import json, os, socket
from pathlib import Path

def _probe():
    seen = {"uid": os.getuid(), "env": sorted(os.environ)}
    seen["pids"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
    try:
        seen["pid1_environ"] = Path("/proc/1/environ").read_bytes().decode(errors="replace")
    except OSError as exc:
        seen["pid1_environ"] = type(exc).__name__
    try:
        Path(SOLUTIONS, "toy.py").read_text()
        seen["solutions"] = "readable"
    except OSError as exc:
        seen["solutions"] = type(exc).__name__
    try:
        Path(__file__).with_name("written.txt").write_text("x")
        seen["submission"] = "writable"
    except OSError as exc:
        seen["submission"] = type(exc).__name__
    try:
        import tempfile
        with tempfile.NamedTemporaryFile():
            seen["tmp"] = "writable"
    except OSError as exc:
        seen["tmp"] = type(exc).__name__
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2)
        seen["network"] = "open"
    except OSError as exc:
        seen["network"] = type(exc).__name__
    return seen

def allreduce(tensor, group=None):
    raise RuntimeError("PROBE" + json.dumps(_probe()) + "PROBE")

def square(x):
    return allreduce(None)
"""

DAEMON = """
import os, time

def allreduce(tensor, group=None):
    if os.fork() == 0:  # a grandchild in its own session: outside every process group the judge knows
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "1000", MARKER])
        os._exit(0)
    time.sleep(0.5)
    raise RuntimeError("left a daemon behind")

def square(x):
    return allreduce(None)
"""

MEMORY_BOMB = """
def allreduce(tensor, group=None):
    hog = []
    while True:
        hog.append(bytearray(1 << 28))  # 256 MiB, every byte written

def square(x):
    return allreduce(None)
"""


def grade(course: Course, source: Path, limits: sandbox.RankLimits | None = None) -> ExerciseResult:
    exercise = course.find("toy")
    job = GradeJob(course=course, exercise=exercise, source=source, label="probe", device="cpu")
    return LocalRunner(sandbox_mode="bwrap", limits=limits).run(job)


def probed(result: ExerciseResult) -> dict:
    output = next(t.output for t in result.tests if "PROBE" in t.output)
    return json.loads(output.split("PROBE")[1])


def test_a_rank_sees_none_of_the_judges_secrets_files_or_network(
    toy_course: Course, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTGPU_GRADER_SECRET", SECRET)
    solutions = toy_course.solution_dir(toy_course.find("toy"))
    (tmp_path / "toy.py").write_text(f"SOLUTIONS = {str(solutions)!r}\n" + PROBE)
    result = grade(toy_course, tmp_path)
    seen = probed(result)
    assert result.score == 0
    assert seen["solutions"] == "FileNotFoundError"  # not mounted at all
    assert seen["submission"] == "OSError"  # read-only
    assert seen["network"] == "OSError"  # no route: only loopback exists
    assert seen["tmp"] == "writable"  # a private tmpfs, as honest code expects
    assert "DISTGPU_GRADER_SECRET" not in seen["env"] and SECRET not in seen["pid1_environ"]
    assert len(seen["pids"]) < 20  # its own pid namespace: bwrap's init, the factory, the ranks
    if os.geteuid() == 0:
        assert seen["uid"] in rank_uids.pool()  # leased for this grading alone
    assert all(SECRET not in t.output for t in result.tests)


def test_a_daemon_a_rank_leaves_behind_ends_with_the_grading(toy_course: Course, tmp_path: Path) -> None:
    marker = f"distgpu-daemon-{os.getpid()}-{time.monotonic_ns()}"
    (tmp_path / "toy.py").write_text(f"MARKER = {marker!r}\n" + DAEMON)
    result = grade(toy_course, tmp_path)
    assert {t.status for t in result.tests} == {Status.FAILED}
    assert kill_processes_with(marker) == []


def test_a_memory_bomb_is_stopped_by_the_rank_limit(toy_course: Course, tmp_path: Path) -> None:
    (tmp_path / "toy.py").write_text(MEMORY_BOMB)
    # 512 MiB: little to write before the limit, so the bomb ends well inside the 4 s part timeout under load
    result = grade(toy_course, tmp_path, sandbox.RankLimits(world_memory_bytes=1 << 29))
    assert result.score == 0
    assert {t.status for t in result.tests} == {Status.OOM}
    assert all("out of memory" in t.output for t in result.tests)
