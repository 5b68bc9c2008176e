"""A grading whose ranks cannot read their own files stops with one clear error (issue 29), never a partial
score: checked as the ranks will read them, as their uid and inside their sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.core import rank_uids, sandbox
from grader.runners import preflight
from grader.runners.preflight import RanksCannotRead, check_ranks_can_read

REPO = Path(__file__).parent.parent
TOY = REPO / "tests" / "fixtures" / "course"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="ranks change uid only when the grader is root")


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder every user may enter (pytest's own temporary folder is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="distgpu-preflight-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def uid() -> Iterator[int]:
    lease = rank_uids.lease_rank_uid()
    yield lease.uid
    lease.release()


def _programs(root: Path) -> Path:
    programs = root / "programs"
    shutil.copytree(TOY / "exercises" / "01_toy", programs)
    for path in [programs, *programs.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return programs


def test_readable_files_pass_on_the_host_and_in_the_sandbox(public: Path, uid: int) -> None:
    programs = _programs(public)
    check_ranks_can_read([programs], uid, None)
    if sandbox.probe() is None:
        check_ranks_can_read([programs], uid, sandbox.for_grading_run(programs, programs, public))


def test_a_check_that_cannot_finish_is_one_clear_error(
    public: Path, uid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preflight, "PROBE_TIMEOUT_S", 0.001)  # a host too loaded to start python in time
    with pytest.raises(RanksCannotRead, match="could not check that ranks can read"):
        check_ranks_can_read([_programs(public)], uid, None)


def test_a_root_only_file_is_named(public: Path, uid: int) -> None:
    programs = _programs(public)
    (programs / "rank_programs.py").write_text("X = 1\n")
    (programs / "rank_programs.py").chmod(0o600)
    with pytest.raises(RanksCannotRead, match=r"cannot read .*rank_programs\.py \(Permission denied\)"):
        check_ranks_can_read([programs], uid, None)
    if sandbox.probe() is None:
        with pytest.raises(RanksCannotRead, match=r"rank_programs\.py"):
            check_ranks_can_read([programs], uid, sandbox.for_grading_run(programs, programs, public))


def test_a_root_only_folder_above_counts_on_the_host_but_not_in_the_sandbox(public: Path, uid: int) -> None:
    """Without a sandbox (a container, an autograder) the ranks walk the host's folders; the sandbox mounts
    the folder itself under folders anyone may enter."""
    shut, scratch = public / "shut", public / "scratch"
    shut.mkdir(mode=0o700)
    scratch.mkdir(mode=0o755)
    programs = _programs(shut)
    with pytest.raises(RanksCannotRead, match="Permission denied"):
        check_ranks_can_read([programs], uid, None)
    if sandbox.probe() is None:
        check_ranks_can_read([programs], uid, sandbox.for_grading_run(programs, programs, scratch))


def _gradescope_layout(root: Path, public_mode: int) -> subprocess.CompletedProcess[str]:
    """run_autograder's command: the judge as root, the course where only root may enter, the rank programs
    and the grader in a public copy (here with ``public_mode``), ranks as nobody, no sandbox."""
    source, public, submission = root / "source", root / "public", root / "submission"
    shutil.copytree(TOY, source)
    public.mkdir()
    shutil.copytree(TOY / "exercises", public / "exercises")
    for package in ("grader", "coursekit"):
        shutil.copytree(REPO / package, public / package, ignore=shutil.ignore_patterns("__pycache__"))
    submission.mkdir()
    shutil.copyfile(TOY / "solutions" / "01_toy" / "toy.py", submission / "toy.py")
    for path in [root, public, *public.rglob("*"), submission, *submission.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    source.chmod(0o700)
    public.chmod(public_mode)
    argv = [
        sys.executable,
        "-m",
        "grader.container",
        "--exercise",
        "01",
        "--course",
        str(source / "course.yml"),
    ]
    argv += ["--programs-root", str(public / "exercises"), "--submission", str(submission)]
    argv += ["--format", "gradescope", "--out", str(root / "results" / "results.json")]
    env = {**os.environ, "PYTHONPATH": str(public), "OMP_NUM_THREADS": "1"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd="/tmp")


@pytest.mark.slow
def test_gradescope_layout_from_a_root_only_folder_stops_with_one_clear_error(public: Path) -> None:
    done = _gradescope_layout(public, public_mode=0o700)
    assert done.returncode == 2, done.stderr[-2000:]
    assert not (public / "results" / "results.json").exists()  # no partial score for anyone
    message = done.stderr.strip().splitlines()
    assert len(message) == 1 and "cannot read" in message[0] and "Nothing was graded" in message[0], message


@pytest.mark.slow
def test_gradescope_layout_from_a_public_folder_grades(public: Path) -> None:
    done = _gradescope_layout(public, public_mode=0o755)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((public / "results" / "results.json").read_text())
    assert results["score"] == results["max_score"] > 0
