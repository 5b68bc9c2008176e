"""`pytest exercises/NN_slug`: the public tests in a student's own pytest (the ``pytest11`` plugin,
grader/learner/pytest_plugin.py), each run as a student would, in a pytest process of its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.core.course import Course

REPO = Path(__file__).parent.parent
SETTINGS = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")


def student_pytest(cwd: Path, *args: str, stdin: str = "") -> tuple[int, str]:
    """(exit status, output) of ``pytest ARGS`` in ``cwd``, with none of this session's pytest settings."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "--distgpu-device", "cpu"],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def summary(output: str) -> dict[str, int]:
    """``{'failed': 32}`` from pytest's last line, '== 32 failed in 30.1s =='."""
    last = output.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last) if word != "in"}


def test_the_stub_fails_every_public_test_and_errs_on_none() -> None:
    """Not "fixture 'world' not found" (7 errors before): every test runs on each of its world sizes and
    fails on the stub's NotImplementedError, as a failure of the test, not an error."""
    code, output = student_pytest(REPO, "exercises/01_comm_primitives", "-q")
    assert code == 1, output[-3000:]
    assert summary(output) == {"failed": 32}, output[-3000:]
    assert "test_broadcast_from_rank_0[2ranks]" in output
    assert "NotImplementedError: TODO(01.broadcast): not implemented yet" in output


def test_the_reference_in_a_students_copy_passes(course: Course, tmp_path: Path) -> None:
    """A student's copy of the course (no solutions/) with exercise 01 done: every public test passes."""
    shutil.copy(REPO / "course.yml", tmp_path / "course.yml")
    shutil.copytree(REPO / "exercises", tmp_path / "exercises")
    exercise = course.find("01")
    for name in exercise.files:
        shutil.copy(course.solution_dir(exercise) / name, tmp_path / "exercises" / exercise.dirname / name)
    code, output = student_pytest(tmp_path, "exercises/01_comm_primitives", "-q")
    assert code == 0, output[-3000:]
    assert summary(output) == {"passed": 32}, output[-3000:]


def test_pdb_stops_in_the_test_of_a_single_rank_part() -> None:
    """``--pdb`` on a failing one-rank test opens the debugger on the test's own line, in this process.
    Two exercise folders are collected: their two test_public.py do not collide as one module."""
    code, output = student_pytest(
        REPO,
        "exercises/02_ring_tree",
        "exercises/03_cost_analysis",
        "-x",
        "--pdb",
        "-k",
        "test_one_mebibyte_on_8_ranks",
        stdin="p world.size * 42\nq\n",
    )
    assert code == pytest.ExitCode.INTERRUPTED, output[-3000:]  # `q` quits the debugger, and pytest
    assert "test_one_mebibyte_on_8_ranks[1ranks]" in output
    assert re.search(r"> .*exercises/03_cost_analysis/test_public\.py\(\d+\)", output), output[-3000:]
    assert "(Pdb) 42" in output, output[-3000:]
    assert "ERROR" not in output and "error during collection" not in output, output[-3000:]
