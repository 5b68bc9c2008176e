"""Grade one submission with the judge as root and the ranks as nobody: inside a container or autograder.

    python -m grader.container --exercise 02                           # the Docker runner's layout
    python -m grader.container --exercise 02 --course /autograder/source/course.yml \\
        --programs-root /autograder/public/exercises --submission /autograder/submission \\
        --format gradescope --out /autograder/results/results.json     # a Gradescope autograder

The Docker runner's layout: the course, hidden suites included, at /srv/judge/course (a folder only root may
enter); exercises/, grader/ and coursekit/ at /opt/distgpu (readable by the ranks); the submission at
/handoff/submission, written by the host once the container is warm (``--wait-for /handoff/go``). With
``--format token`` (the default) the result is one stdout line: the token from DISTGPU_RESULT_TOKEN (the
ranks, another uid, cannot read this process's environment), then the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grader.core.atomic import write_atomic
from grader.core.course import load_course
from grader.core.formats import to_gradescope, to_prairielearn
from grader.core.submission import why_invalid
from grader.harness.factory import RankFactory
from grader.runners.job import GradeJob, SuiteError, graded_envelope, opened_envelope

RANK_UID = 65534
"""nobody: owns no file in the image, and cannot enter the judge's folder."""
IDLE_TIMEOUT_S = 600.0
"""How long a warm container waits for its submission before it ends on its own."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The rank factory starts first and imports torch while this process reads the course and imports torch
    # itself (LocalRunner, below): the two imports overlap instead of following each other. It is this
    # grading's one factory.
    factory_dir = tempfile.mkdtemp(prefix="distgpu-factory-")
    factory = None
    try:
        if args.preload is not None:
            factory = _launched(factory_dir, tuple(m for m in args.preload.split(",") if m))
        course = load_course(args.course)
        exercise = course.find(args.exercise)
        if args.format != "token":  # the host checked an upload before it started this container
            refusal = why_invalid(args.submission, exercise.files)
            if refusal is not None:
                return _write_invalid(refusal.text, args.format, args.out)
        if factory is None:
            factory = _launched(factory_dir, exercise.preload)
        from grader.runners.local import LocalRunner  # torch: not needed to turn an invalid upload away

        if args.wait_for is not None and not _arrived(args.wait_for, args.idle_timeout):
            return 0  # a spare nobody needed: the runner that started it is gone or closed

        runner = LocalRunner(
            sandbox_mode="none", run_as_uid=RANK_UID, programs_root=args.programs_root, factory=factory
        )
        job = GradeJob(
            course=course, exercise=exercise, source=args.submission, label=args.label, device=args.device
        )
        payload = graded_envelope(runner, job)
    finally:
        if factory is not None:
            factory.close()  # the run closed it already, unless it failed before its first world
        shutil.rmtree(factory_dir, ignore_errors=True)
    if args.format == "token":
        sys.stdout.write(os.environ.pop("DISTGPU_RESULT_TOKEN") + json.dumps(payload) + "\n")
        sys.stdout.flush()
        return 0
    return _write_platform_results(payload, args.format, args.out)


def _parser() -> argparse.ArgumentParser:
    """The entry point's options; their defaults are the Docker runner's layout."""
    parser = argparse.ArgumentParser(prog="python -m grader.container")
    parser.add_argument("--exercise", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--label", default="submission")
    parser.add_argument("--course", type=Path, default=Path("/srv/judge/course/course.yml"))
    parser.add_argument("--programs-root", type=Path, default=Path("/opt/distgpu/exercises"))
    parser.add_argument("--submission", type=Path, default=Path("/handoff/submission"))
    parser.add_argument("--format", choices=("token", "gradescope", "prairielearn"), default="token")
    parser.add_argument("--out", type=Path, help="results file for --format gradescope or prairielearn")
    parser.add_argument(
        "--wait-for",
        type=Path,
        help="start warm: import torch and start the rank factory, then wait until this file exists before "
        "reading the submission (the Docker runner's spare container)",
    )
    parser.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT_S)
    parser.add_argument(
        "--preload",
        help="the exercise's course.yml preload, comma-separated (the Docker runner passes it, so that the "
        "rank factory starts before this process reads the course)",
    )
    return parser


def _arrived(signal: Path, timeout_s: float) -> bool:
    """Wait until ``signal`` exists (True) or ``timeout_s`` passes (False); polled, as the file comes from
    the host through a bind mount."""
    deadline = time.monotonic() + timeout_s
    while not signal.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _launched(folder: str, preload: tuple[str, ...]) -> RankFactory:
    factory = RankFactory(None, Path(folder) / "factory.log", preload)
    factory.launch()
    return factory


def _write_platform_results(payload: dict[str, Any], platform: str, out: Path) -> int:
    try:
        result = opened_envelope(payload)
    except SuiteError as exc:
        print(exc, file=sys.stderr)
        return 2
    assert result is not None  # graded_envelope made it
    gradescope = to_gradescope(result)
    data = gradescope if platform == "gradescope" else to_prairielearn(gradescope)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(data))
    return 0


def _write_invalid(reason: str, platform: str, out: Path) -> int:
    """An upload that cannot be graded: 0 on Gradescope with the reason; not gradable on PrairieLearn."""
    gradescope = {
        "score": 0.0,
        "max_score": 0.0,
        "output": f"Your upload was not graded: {reason}. Please upload the exercise's files again.",
        "visibility": "visible",
        "tests": [],
        "extra_data": {"invalid": True},
    }
    data = gradescope if platform == "gradescope" else to_prairielearn(gradescope)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(data))
    return 0
