"""Grade one submission in a process of its own and write the result as JSON (for ``grade batch``).

    python -m grader.gradeone --course course.yml --exercise 02 --submission alice.zip --backend docker \\
        --out result.json [--gpus 0,1] [--solution]

A batch runs one of these per submission, so a grading that wedges or dies costs that submission alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grader.course import load_course
from grader.runners import GradeJob, SuiteError, make_runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.gradeone")
    for flag in ("--course", "--exercise", "--backend", "--device", "--out", "--label"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--submission", type=Path)
    parser.add_argument("--gpus", help="comma-separated GPU ids this grading may use")
    args = parser.parse_args(argv)
    if args.gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    course = load_course(Path(args.course))
    exercise = course.find(args.exercise)
    source = args.submission or course.solution_dir(exercise)
    job = GradeJob(course=course, exercise=exercise, source=source, label=args.label, device=args.device)
    try:
        payload = {"result": make_runner(args.backend).run(job).to_dict()}
    except SuiteError as exc:
        payload = {"suite_error": str(exc)}
    tmp = Path(args.out + ".tmp")
    tmp.write_text(json.dumps(payload))
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
