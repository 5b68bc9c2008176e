"""An instructor's subcommands: ``batch``, ``export`` and ``report``.

Each ``add_*`` declares one subcommand's options; its ``cmd_*`` handler checks them and calls
``grader.classroom``, then prints the outcome (``grader.cli.views`` while a batch grades). The handlers import
the classroom package themselves: a student's ``grade exercise`` never loads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from grader.cli.common import EXAMPLES, Subcommands, add_run_options
from grader.core.course import Course, Exercise

if TYPE_CHECKING:
    from grader.classroom.batch import BatchPlan
    from grader.classroom.slurm import SlurmPool


def add_batch(commands: Subcommands) -> None:
    batch = commands.add_parser(
        "batch",
        help="grade a folder of submissions (resumable)",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    batch.add_argument("submissions", type=Path, help="a folder of per-student folders or zips, named by id")
    batch.add_argument("--exercise", required=True, help="number or slug")
    batch.add_argument("--workers", type=int, help="gradings at a time (default: from cores and GPUs)")
    batch.add_argument("--out", type=Path, help="where records and reports go (default: grades/NN_slug)")
    batch.add_argument("--regrade", action="append", default=[], metavar="STUDENT", help="grade again")
    batch.add_argument(
        "--late",
        action="store_true",
        help="record submission times (timestamp.txt, else file time) against the deadline",
    )
    batch.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite:///<course>/gradebook.db)")
    batch.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="grade as root even where bubblewrap cannot sandbox the ranks (prefer --backend docker)",
    )
    add_run_options(batch, backends=("local", "docker", "slurm"))
    batch.add_argument("--partition", help="slurm: the partition (default: course.yml slurm.partition)")
    batch.add_argument("--account", help="slurm: the account to charge (default: course.yml slurm.account)")
    batch.add_argument("--qos", help="slurm: the QoS (default: course.yml slurm.qos)")
    batch.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="OPTION",
        help="slurm: an extra sbatch option, e.g. --sbatch-arg=--constraint=a100 (repeatable)",
    )
    batch.add_argument(
        "--dry-run", action="store_true", help="slurm: print the sbatch scripts and commands; submit nothing"
    )
    batch.set_defaults(handler=cmd_batch)


def cmd_batch(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.batch import check_request, how_code_runs, make_plan
    from grader.runners.devices import local_device

    exercise = course.find(args.exercise)
    out = args.out or Path("grades") / exercise.dirname
    check_request(args.submissions, workers=args.workers, regrade=args.regrade)
    if args.backend == "slurm":
        return _batch_on_slurm(args, course, exercise, out, console)
    given = [f for f in ("partition", "account", "qos", "sbatch_arg", "dry_run") if getattr(args, f)]
    if given:
        raise ValueError(f"--{given[0].replace('_', '-')} needs --backend slurm")
    console.print(
        how_code_runs(args.backend, allow_unsandboxed=args.allow_unsandboxed), markup=False, soft_wrap=True
    )
    device, gpus = local_device(args.device)
    plan = make_plan(
        course=course, exercise=exercise, backend=args.backend, device=device, workers=args.workers, gpus=gpus
    )
    _grade_batch(args, course, plan, out, console)
    return 0


def _batch_on_slurm(
    args: argparse.Namespace, course: Course, exercise: Exercise, out: Path, console: Console
) -> int:
    """The same batch, its gradings run as Slurm jobs (``grader.classroom.slurm``), or printed with
    --dry-run."""
    from grader.classroom.slurm import SlurmStopped
    from grader.classroom.slurm_batch import slurm_dry_run, slurm_plan

    plan, pool = slurm_plan(
        course=course,
        exercise=exercise,
        out=out,
        device=args.device,
        partition=args.partition,
        account=args.account,
        qos=args.qos,
        sbatch_args=args.sbatch_arg,
        throttle=args.workers,
    )
    if args.dry_run:
        script = slurm_dry_run(
            plan=plan, pool=pool, submissions=args.submissions, regrade=args.regrade, late=args.late
        )
        console.print(script, markup=False, highlight=False, soft_wrap=True)
        return 0
    console.print(f"student code runs on the cluster's nodes ({pool.settings.runner} runner)", soft_wrap=True)
    try:
        _grade_batch(args, course, plan, out, console, pool)
    except SlurmStopped as exc:
        console.print(f"[bold yellow]stopped:[/] {exc}", markup=True, highlight=False)
        return 1
    return 0


def _grade_batch(
    args: argparse.Namespace,
    course: Course,
    plan: BatchPlan,
    out: Path,
    console: Console,
    pool: SlurmPool | None = None,
) -> None:
    """``batch_grade`` under a progress bar (which also shows the Slurm queue), then the batch's report."""
    from grader.classroom.grade import batch_grade
    from grader.classroom.gradebook import default_url
    from grader.cli.views import BatchProgressView, batch_report

    progress = BatchProgressView(console)
    if pool is not None:
        pool.on_queue = progress.note
    with progress:
        outcome = batch_grade(
            plan=plan,
            submissions=args.submissions,
            out=out,
            regrade=args.regrade,
            gradebook_url=args.gradebook or default_url(course),
            late=args.late,
            on_start=progress.start,
            on_result=progress.advance,
            pool=pool,
        )
    batch_report(outcome, console)


def add_export(commands: Subcommands) -> None:
    export = commands.add_parser("export", help="export the gradebook as nbgrader's CSV")
    export.add_argument("--csv", type=Path, required=True, help="the file to write")
    export.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite:///<course>/gradebook.db)")
    export.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.gradebook import default_url, export_csv, open_gradebook

    with open_gradebook(args.gradebook or default_url(course), course_id=course.title) as gradebook:
        export_csv(gradebook, args.csv)
    console.print(f"wrote {args.csv}")
    return 0


def add_report(commands: Subcommands) -> None:
    class_report = commands.add_parser("report", help="a batch's class report: what the class missed")
    class_report.add_argument("grades", type=Path, help="a batch's folder (grades/NN_slug)")
    class_report.add_argument("--html", type=Path, help="where to write it (default: GRADES/report)")
    class_report.add_argument("--anonymize", action="store_true", help="stable pseudonyms for student ids")
    class_report.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.class_report import write_report
    from grader.classroom.grade import batch_deadline

    if not (args.grades / "records").is_dir():
        raise ValueError(f"{args.grades} is not a batch's folder (it has no records/); give grades/NN_slug")
    deadline = batch_deadline(course, args.grades)
    index = write_report(args.grades, args.html, deadline=deadline, anonymize=args.anonymize)
    console.print(f"wrote {index}", markup=False, highlight=False, soft_wrap=True)
    return 0
