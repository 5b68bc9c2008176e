"""Grade submissions in a process of their own and write each result as JSON (for ``grade batch``).

    python -m grader.gradeone --course course.yml --exercise 02 --submission alice.zip --backend docker \\
        --out result.json [--gpus 0,1]
    python -m grader.gradeone --course course.yml --exercise 02 --backend local --serve FD

The first form grades one submission. With ``--serve``, the process grades job after job, one JSON line
each on stdin (``{"submission": path or null, "label": ..., "out": ...}``, and ``"notes"``, what staging
said of the upload, when the submission is the batch's staged copy of it), and writes one line to file
descriptor FD when a job's result is in place: a batch slot keeps one such process, so torch and the grader
are imported once per slot rather than once per submission. Either way a grading that wedges or dies costs
only what that process held, and the batch driver replaces it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise, load_course
from grader.runners import GradeJob, Runner, graded_envelope, make_runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.gradeone")
    for flag in ("--course", "--exercise", "--backend", "--device"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--out")
    parser.add_argument("--label")
    parser.add_argument("--submission", type=Path)
    parser.add_argument("--gpus", help="comma-separated GPU ids this grading may use")
    parser.add_argument("--serve", type=int, metavar="FD", help="grade jobs from stdin; report on FD")
    parser.add_argument("--prewarm", action="store_true", help="Docker: start the next container early")
    args = parser.parse_args(argv)
    if args.gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    course = load_course(Path(args.course))
    exercise = course.find(args.exercise)
    runner = make_runner(args.backend, prewarm=args.prewarm)
    try:
        if args.serve is None:
            grade_one(course, exercise, runner, args.device, args.submission, args.label, Path(args.out))
            return 0
        with open(args.serve, "w", buffering=1) as replies:
            for line in sys.stdin:
                job = json.loads(line)
                source = Path(job["submission"]) if job["submission"] else None
                notes = tuple(job["notes"]) if "notes" in job else None
                grade_one(
                    course, exercise, runner, args.device, source, job["label"], Path(job["out"]), notes
                )
                replies.write(json.dumps({"out": job["out"]}) + "\n")
    finally:
        runner.close()  # a Docker spare and removals under way; a killed server's are swept by the batch
    return 0


def grade_one(
    course: Course,
    exercise: Exercise,
    runner: Runner,
    device: str,
    source: Path | None,
    label: str,
    out: Path,
    notes: tuple[str, ...] | None = None,
) -> None:
    """Grade ``source`` (None: the reference); write its envelope (``graded_envelope``) to ``out``.
    ``notes``: ``GradeJob.staging_notes``."""
    job = GradeJob(
        course=course,
        exercise=exercise,
        source=source or course.solution_dir(exercise),
        label=label,
        device=device,
        staging_notes=notes,
    )
    write_atomic(out, json.dumps(graded_envelope(runner, job)))
