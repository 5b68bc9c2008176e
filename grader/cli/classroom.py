"""An instructor's subcommands: ``batch`` and ``export`` (``report`` and ``similarity``: ``class_reports``).

Each ``add_*`` declares one subcommand's options; its ``cmd_*`` handler checks them and calls
``grader.classroom``, then prints the outcome (``grader.cli.views`` while a batch grades). The handlers import
the classroom package themselves: a student's ``grade exercise`` never loads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from grader.cli.common import (
    EXAMPLES,
    Subcommands,
    add_run_options,
    add_wait_option,
    iso_moment,
    labelled,
    locked_folder,
)
from grader.core.course import Course, Exercise
from grader.core.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from grader.classroom.batch import BatchPlan
    from grader.classroom.intake.platforms import Intake
    from grader.classroom.outputs.lms import Grades
    from grader.classroom.slurm.driver import SlurmPool


def add_batch(commands: Subcommands) -> None:
    batch = commands.add_parser(
        "batch",
        help="grade a folder of submissions (resumable)",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    batch.add_argument(
        "submissions",
        type=Path,
        help="a folder of uploads named by student id, or a platform's download: Canvas's, Moodle's or "
        "Gradescope's zip (or its folder, unzipped), or the folder `gh classroom clone student-repos` makes",
    )
    batch.add_argument("--exercise", required=True, help="number or slug")
    _add_intake_options(batch)
    batch.add_argument("--workers", type=int, help="gradings at a time (default: from cores and GPUs)")
    batch.add_argument("--out", type=Path, help="where records and reports go (default: grades/NN_slug)")
    batch.add_argument("--regrade", action="append", default=[], metavar="STUDENT", help="grade again")
    batch.add_argument(
        "--late",
        action="store_true",
        help="record submission times (timestamp.txt, else file time) against the deadline",
    )
    batch.add_argument(
        "--shuffle",
        type=int,
        metavar="SEED",
        help="grade the submissions in an order shuffled by SEED (default: by name); grades must not change",
    )
    batch.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite:///<course>/gradebook.db)")
    batch.add_argument("--no-diagram", action="store_true", help="no space-time diagrams in the report")
    add_wait_option(batch, "start")
    batch.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="grade as root even where bubblewrap cannot sandbox the ranks (prefer --backend docker)",
    )
    add_run_options(batch, backends=("local", "docker", "slurm"))
    _add_slurm_options(batch)
    batch.set_defaults(handler=cmd_batch)


def _add_slurm_options(batch: argparse.ArgumentParser) -> None:
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


def _add_intake_options(batch: argparse.ArgumentParser) -> None:
    """``--from`` and ``--due``: how a platform's download is read (``grader.classroom.intake``)."""
    batch.add_argument(
        "--from",
        dest="platform",
        choices=("canvas", "moodle", "gradescope", "classroom", "folders"),
        help="whose download SUBMISSIONS is (default: detected, and said in the first line)",
    )
    batch.add_argument(
        "--due",
        type=iso_moment,
        metavar="ISO-8601",
        help="Gradescope: the deadline its submission times are compared with for the late flag",
    )


def cmd_batch(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.batch import check_request, how_code_runs, make_plan
    from grader.classroom.intake.platforms import platform_of
    from grader.runners.devices import local_device

    exercise = course.find(args.exercise)
    out = args.out or Path("grades") / exercise.dirname
    plain = platform_of(args.submissions, args.platform) == "folders"  # else read into OUT, under its lock
    check_request(args.submissions if plain else None, workers=args.workers, regrade=args.regrade)
    if args.backend == "slurm":
        return _batch_on_slurm(args, course, exercise, out, console)
    given = [f for f in ("partition", "account", "qos", "sbatch_arg", "dry_run") if getattr(args, f)]
    if given:
        raise UsageError(f"--{given[0].replace('_', '-')} needs --backend slurm")
    console.print(
        how_code_runs(args.backend, allow_unsandboxed=args.allow_unsandboxed), markup=False, soft_wrap=True
    )
    device, gpus = local_device(args.device)
    plan = make_plan(
        course=course, exercise=exercise, backend=args.backend, device=device, workers=args.workers, gpus=gpus
    )
    _grade_batch(args, course, plan, out, console)
    return ExitCode.OK


def _intake(args: argparse.Namespace, course: Course, exercise: Exercise, out: Path) -> Intake:
    """The uploads to grade as the platform handed them over, in OUT/.intake for a platform's download;
    called under OUT's batch lock, and the request checked again against them (``--regrade``'s names)."""
    from grader.classroom.batch import check_request
    from grader.classroom.intake.platforms import read_submissions

    intake = read_submissions(
        args.submissions, course=course, exercise=exercise, out=out, platform=args.platform, due=args.due
    )
    check_request(intake.folder, workers=args.workers, regrade=args.regrade)
    return intake


def _batch_on_slurm(
    args: argparse.Namespace, course: Course, exercise: Exercise, out: Path, console: Console
) -> int:
    """The same batch, its gradings run as Slurm jobs (``grader.classroom.slurm.driver``), or printed with
    --dry-run."""
    from grader.classroom.slurm.batch import slurm_dry_run, slurm_plan

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
        with locked_folder(args, out, console):
            intake = _intake(args, course, exercise, out)
            script = slurm_dry_run(
                plan=plan, pool=pool, submissions=intake.folder, regrade=args.regrade, late=args.late
            )
        console.print(script, markup=False, highlight=False, soft_wrap=True)
        return ExitCode.OK
    console.print(f"student code runs on the cluster's nodes ({pool.settings.runner} runner)", soft_wrap=True)
    _grade_batch(args, course, plan, out, console, pool)
    return ExitCode.OK


def _grade_batch(
    args: argparse.Namespace,
    course: Course,
    plan: BatchPlan,
    out: Path,
    console: Console,
    pool: SlurmPool | None = None,
) -> None:
    """``batch_grade`` under a progress bar (which also shows the Slurm queue), holding ``out``'s batch lock
    from the intake of the submissions on, then the batch's report, what of the submissions is in no upload,
    and its warning, if any."""
    from grader.classroom.grade import batch_grade
    from grader.classroom.state.gradebook import default_url
    from grader.cli.views import BatchProgressView, batch_report, intake_report

    progress = BatchProgressView(console)
    if pool is not None:
        pool.on_queue = progress.note
    with locked_folder(args, out, console):
        intake = _intake(args, course, plan.exercise, out)
        console.print(intake.detected, markup=False, highlight=False, soft_wrap=True)
        with progress:
            outcome = batch_grade(
                plan=plan,
                submissions=intake.folder,
                out=out,
                regrade=args.regrade,
                gradebook_url=args.gradebook or default_url(course),
                late=args.late,
                on_start=progress.start,
                on_result=progress.advance,
                pool=pool,
                shuffle=args.shuffle,
                diagrams=not args.no_diagram,
            )
    batch_report(outcome, console)
    intake_report(intake, out, console)
    if outcome.warning:
        console.print(outcome.warning, style="bold yellow", markup=False, highlight=False, soft_wrap=True)


def add_export(commands: Subcommands) -> None:
    export = commands.add_parser(
        "export",
        help="the gradebook as nbgrader's CSV, or as Canvas's or Moodle's import file",
        epilog=EXPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("--csv", type=Path, help="write nbgrader's CSV here")
    lms = export.add_mutually_exclusive_group()
    lms.add_argument("--canvas", type=Path, help="write Canvas's grade import here (--roster: its export)")
    lms.add_argument("--moodle", type=Path, help="write the assignment's grading worksheet back here")
    lms.add_argument("--moodle-gradebook", type=Path, help="write Moodle's CSV grade import (percent) here")
    export.add_argument("--roster", type=Path, help="the file downloaded from the LMS (examples below)")
    export.add_argument("--exercise", help="one exercise (default: each, into OUT-NN.csv)")
    export.add_argument(
        "--match",
        choices=MATCH_CHOICES,
        help="the roster column holding the submission folders' names (default: the one matching most)",
    )
    export.add_argument(
        "--missing",
        choices=("leave", "zero"),
        default="leave",
        help="a student without a submission: left out of the file (default) or given 0",
    )
    export.add_argument("--column", help="Canvas: the assignment's column in the export, 'Title (id)'")
    export.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite:///<course>/gradebook.db)")
    export.set_defaults(handler=cmd_export)


LMS_ARGS = {"canvas": "canvas", "moodle": "moodle", "moodle-gradebook": "moodle_gradebook"}
"""``lms_files.LMS_FILES``'s keys -> the argument naming the file written."""
MATCH_CHOICES = ("login", "sis", "email", "canvas-id", "moodle-participant", "github")
EXPORT_EXAMPLES = """\
examples:
  grade export --csv grades.csv                                   as `nbgrader export` writes it
  grade export --canvas canvas.csv --roster Grades-Course.csv     Canvas: Grades > Export, then Import
  grade export --moodle 03.csv --roster worksheet.csv --exercise 03
                                      Moodle: the assignment's grading worksheet, then Upload it back
  grade export --moodle-gradebook m.csv --roster worksheet.csv    Moodle: Grade administration > Import

Each file holds one exercise (without --exercise: OUT-NN.csv per exercise) and a row only for a student
with a grade in it: an importer reads a blank cell as "remove the grade". Students left out are printed
with why; exit status 1 when a graded student is not in the roster (their grade is in no file).
"""


def cmd_export(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.export import read_gradebook
    from grader.classroom.state.gradebook import default_url
    from grader.core.atomic import write_atomic

    lms = args.canvas or args.moodle or args.moodle_gradebook
    if not (args.csv or lms):
        raise UsageError("give --csv, --canvas, --moodle or --moodle-gradebook")
    if lms and not args.roster:
        raise UsageError("--canvas and --moodle need --roster: the file downloaded from the LMS")
    if lms and not args.roster.is_file():
        raise UsageError(f"--roster {args.roster}: no such file")
    if args.moodle and not args.exercise:
        raise UsageError("--moodle needs --exercise: a grading worksheet is one assignment's")
    if args.column and not (args.canvas and args.exercise):
        raise UsageError("--column names the Canvas column of one exercise: give --canvas and --exercise")
    url = args.gradebook or default_url(course)
    contents = read_gradebook(url, course, nbgrader_csv=bool(args.csv), grades=bool(lms))
    if contents.nbgrader_csv is not None:
        write_atomic(args.csv, contents.nbgrader_csv)
        console.print(f"wrote {args.csv}", markup=False, highlight=False)
    if contents.grades is None:
        return ExitCode.OK
    return _export_lms(args, course, contents.grades, console)


def _export_lms(args: argparse.Namespace, course: Course, grades: Grades, console: Console) -> int:
    from grader.classroom.outputs.lms_files import export_to

    exercises = [course.find(args.exercise)] if args.exercise else grades.exercises
    lms, out = next((k, v) for k, v in LMS_ARGS.items() if getattr(args, v) is not None)
    done = export_to(
        grades,
        exercises,
        lms=lms,
        out=getattr(args, out),
        roster=args.roster,
        match=args.match,
        missing=args.missing,
        column=args.column,
    )
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    how = "the column matching the most" if done.match.chosen else "--match"
    say(f"students found by the roster's {done.match.column!r} column ({how}: {len(done.match.rows)})")
    for file in done.files:
        column = f"{file.rows} students in {file.column!r}"
        say(f"wrote {file.path}: exercise {file.exercise.key}, {column}, {file.note}")
        for why, names in file.left_out.items():
            say(f"  left out, {why}: {', '.join(names)}")
    if done.unmatched:
        missing = ", ".join(done.unmatched)
        console.print(
            labelled("graded but not in the roster, so in no file:", "bold yellow", missing), soft_wrap=True
        )
    return ExitCode.NOT_FULL_MARKS if done.unmatched else ExitCode.OK
