"""Entry point inside a grading container: run the judge as root, ranks as nobody, print the result as JSON.

    python -m grader.container --exercise 02 --device cpu

Layout (made by ``grader.runners.docker``): the course, hidden suites included, at /srv/judge/course (a
folder only root may enter); exercises/, grader/ and coursekit/ also at /opt/distgpu (readable by the ranks);
the submission at /submission. The result is one stdout line: the token from DISTGPU_RESULT_TOKEN (which the
ranks, another uid, cannot read from this process's environment) followed by the result JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grader.course import load_course
from grader.runners import GradeJob, SuiteError
from grader.runners.local import LocalRunner

COURSE = Path("/srv/judge/course/course.yml")
PROGRAMS_ROOT = Path("/opt/distgpu/exercises")
SUBMISSION = Path("/submission")
RANK_UID = 65534
"""nobody: owns no file in the image, and cannot enter /srv/judge."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.container")
    parser.add_argument("--exercise", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--label", default="submission")
    args = parser.parse_args(argv)
    token = os.environ.pop("DISTGPU_RESULT_TOKEN")
    course = load_course(COURSE)
    runner = LocalRunner(run_as_uid=RANK_UID, programs_root=PROGRAMS_ROOT)
    job = GradeJob(
        course=course,
        exercise=course.find(args.exercise),
        source=SUBMISSION,
        label=args.label,
        device=args.device,
    )
    try:
        payload = {"result": runner.run(job).to_dict()}
    except SuiteError as exc:
        payload = {"suite_error": str(exc)}
    sys.stdout.write(token + json.dumps(payload) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
