"""A course author's subcommands: ``check``, ``validate`` and ``stubs`` on the course itself; ``release``,
``gradescope``, ``prairielearn`` and ``classroom`` (GitHub Classroom) to ship it; ``doctor`` and ``image
build`` to set up a grading machine.

Each ``add_*`` declares one subcommand's options; its ``cmd_*`` handler checks them and calls
``grader.authoring`` (or ``grader.runners`` for the machine), then prints the outcome.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from grader.authoring.check import check_exercise
from grader.authoring.stubs import write_stubs
from grader.cli.common import Subcommands, add_run_options, labelled
from grader.core.atomic import write_atomic
from grader.core.catalogue import CORE_SHARE_FLOOR
from grader.core.course import Course, Exercise
from grader.core.errors import ExitCode, UsageError
from grader.learner.views import ProgressBar
from grader.runners import Runner, make_runner


def add_check(commands: Subcommands) -> None:
    check = commands.add_parser("check", help="validate the course: references 100 %%, stubs 0 %%, in sync")
    check.add_argument("ids", nargs="*", help="exercises to check (default: all with parts)")
    add_run_options(check)
    check.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace, course: Course, console: Console) -> int:
    exercises = [course.find(i) for i in args.ids] or [e for e in course.exercises if e.parts]
    failed = 0
    # One runner for the whole check: it keeps a rank factory per exercise, and closing ends the last one.
    with contextlib.closing(make_runner(args.backend, one_author=True, diagrams=False)) as runner:
        for exercise in exercises:
            if exercise.problem:  # only where no ids were given: find() refuses a broken exercise
                console.print(labelled("FAIL", "red", f"{exercise.key} {exercise.slug}: {exercise.problem}"))
                failed += 1
                continue
            found = check_exercise(course=course, exercise=exercise, runner=runner, device=args.device)
            ref, stub = found.reference, found.stubs
            assert ref is not None and stub is not None  # check_exercise grades both, always
            figures = f"reference {ref.score:g}/{ref.max_score:g}, stubs {stub.score:g}/{stub.max_score:g}"
            timing = f"{ref.execution_time + stub.execution_time:.1f} s"
            mark = "[green]ok[/]" if found.ok else "[red]FAIL[/]"
            console.print(
                f"{mark} {exercise.key} {exercise.slug}: {figures} ({len(ref.tests)} tests, {timing})"
            )
            for problem in found.problems:
                console.print(f"    {problem}", markup=False)
            failed += not found.ok
    console.print(f"{len(exercises) - failed} of {len(exercises)} exercises pass the check")
    return ExitCode.NOT_FULL_MARKS if failed else ExitCode.OK


def add_validate(commands: Subcommands) -> None:
    validate = commands.add_parser(
        "validate",
        help="is each suite fair? reference stable, stubs zero, alt-correct full, every bug caught",
    )
    validate.add_argument("ids", nargs="*", help="exercises to validate (default: all with parts)")
    validate.add_argument("--runs", type=int, default=3, help="gradings of the reference (default 3)")
    validate.add_argument("--json", type=Path, help="write the validity table here as JSON")
    validate.add_argument(
        "--contracts",
        action="store_true",
        help="per concept: its share, core or minor, the bugs that break it alone, its generated tests",
    )
    validate.add_argument(
        "--results", type=Path, help="write every graded result here, as NN_slug/<case>.json (results.json)"
    )
    validate.add_argument(
        "--corpus",
        type=Path,
        help="folder with corpus/NN_slug.yml and validity/NN_slug/alt-*/ (default: <course>/tests)",
    )
    validate.add_argument(
        "--share",
        type=Path,
        metavar="DIR",
        help="processes started with the same DIR split the exercises: each takes the next one none took",
    )
    add_run_options(validate)
    validate.set_defaults(handler=cmd_validate)


def cmd_validate(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.share import claim

    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    exercises = [course.find(i) for i in args.ids] or [e for e in course.exercises if e.parts]
    rows: list[dict[str, Any]] = []
    table = _validity_table()
    with contextlib.closing(make_runner(args.backend, one_author=True, diagrams=False)) as runner:
        for exercise in exercises:
            if args.share and not claim(args.share, exercise):
                continue
            rows.append(_validate_one(args, course, exercise, runner, table, console))
    console.print(table)
    bad = [r["exercise"] for r in rows if r["problems"]]
    console.print(
        f"{len(rows) - len(bad)} of {len(rows)} exercises valid: references stable, stubs zero, every "
        "alt-correct case full, every bug caught with its concept's share"
        + (f"; not: {', '.join(bad)}" if bad else "")
    )
    if args.json:
        write_atomic(args.json, json.dumps(rows, indent=1) + "\n")
    return ExitCode.NOT_FULL_MARKS if bad else ExitCode.OK


def _validity_table() -> Table:
    table = Table(title="Validity", title_justify="left")
    for column in (
        "exercise",
        "reference stable",
        "stub zero",
        "alt-correct full",
        "bugs caught",
        "min loss",
        "min core",
    ):
        table.add_column(column)
    return table


def _validate_one(
    args: argparse.Namespace,
    course: Course,
    exercise: Exercise,
    runner: Runner,
    table: Table,
    console: Console,
) -> dict[str, Any]:
    """Validate ``exercise`` under a status line, add its row to ``table``, print its problems and (with
    ``--results``) write its graded results. Its row of the JSON table; a corpus entry that cannot be
    applied is printed and is that row's one problem."""
    from grader.authoring.contracts import contract_lines
    from grader.authoring.timeouts import timeout_problems
    from grader.authoring.validate import CorpusError, validate_exercise

    if exercise.problem:  # only where no ids were given: find() refuses a broken exercise
        console.print(labelled(exercise.key, "red", exercise.problem), soft_wrap=True)
        return {"exercise": exercise.key, "slug": exercise.slug, "problems": [exercise.problem]}
    label = f"validating {exercise.key} {exercise.slug}"
    with ProgressBar(console, label) as bar:
        try:
            found = validate_exercise(
                course=course,
                exercise=exercise,
                runner=runner,
                device=args.device,
                corpus_root=args.corpus or course.root / "tests",
                runs=args.runs,
                on_step=lambda what: bar.describe(f"{label}: {what}"),
            )
        except CorpusError as exc:
            console.print(f"{exercise.key} corpus: {exc}", soft_wrap=True, markup=False)
            return {"exercise": exercise.key, "slug": exercise.slug, "problems": [f"corpus: {exc}"]}
    row = found.summary()
    if args.results:
        found.write_results(args.results / exercise.dirname)
    _add_validity_row(table, exercise, row, ok=found.ok)
    _print_shares(console, exercise, row)
    if args.contracts:
        for line, short in contract_lines(f"{exercise.key} {exercise.slug}", row["concepts"]):
            console.print(line, soft_wrap=True, markup=False, highlight=False, style="red" if short else None)
    console.print(_timeouts_table(exercise, row))
    for problem in found.problems:
        console.print(labelled(exercise.key, "red", problem), soft_wrap=True)
    for warning in found.warnings:
        console.print(f"{exercise.key} warning: {warning}", soft_wrap=True, markup=False, style="yellow")
    for warning in timeout_problems(found.timeouts):  # a figure of this machine's load, not of the course
        console.print(f"{exercise.key} warning: {warning}", soft_wrap=True, markup=False, style="yellow")
    return row


def _add_validity_row(table: Table, exercise: Exercise, row: dict[str, Any], *, ok: bool) -> None:
    loss = row["smallest_loss_per_concept"]
    table.add_row(
        f"{exercise.key} {exercise.slug}",
        row["reference_stable"],
        "yes" if row["stub_zero"] else "[red]no[/]",
        row["alt_full"],
        row["bugs_caught"],
        "-" if loss is None else f"{loss:.2f}x",
        "-" if row["smallest_core_share"] is None else f"{row['smallest_core_share']:.1%}",
        style=None if ok else "red",
    )


def _print_shares(console: Console, exercise: Exercise, row: dict[str, Any]) -> None:
    """One line per concept: its share of the exercise and its core misconception (red under the floor);
    under it, each bug naming the concept with its loss, as a share of the exercise. Plain lines, not a
    table: bug names stay whole at any terminal width."""
    console.print(f"{exercise.key} {exercise.slug}: each concept's share of the exercise; bugs: their loss")
    for entry in row["concepts"]:
        core = entry["core"]
        summed = f"  core {core}" if core else ""
        if core and entry["share"] < CORE_SHARE_FLOOR - 1e-9:
            summed = f"[red]{summed}[/]"
        console.print(f"  {entry['part']} {entry['concept']} {entry['share']:.1%}{summed}", soft_wrap=True)
        for bug in (b for b in row["bugs"] if b["concept"] == entry["concept"]):
            console.print(f"      bug {bug['name']}: {_bug_loss(bug)}", soft_wrap=True, highlight=False)


def _timeouts_table(exercise: Exercise, row: dict[str, Any]) -> Table:
    """Each part's slowest reference test against the part's timeout, and the slowest whole run against the
    exercise's budget; headroom under ``HEADROOM`` in red (``grader.authoring.timeouts``)."""
    from grader.authoring.timeouts import HEADROOM

    table = Table(title=f"{exercise.key} {exercise.slug}: reference time vs timeout", title_justify="left")
    for column in ("part", "slowest reference test", "seconds", "timeout", "headroom"):
        table.add_column(column, overflow="fold")
    for t in row["timeouts"]:
        headroom = f"{t['headroom']:.1f}x"
        table.add_row(
            t["part"],
            t["test"],
            f"{t['seconds']:.2f}",
            f"{t['timeout']:g}",
            f"[red]{headroom}[/]" if t["headroom"] < HEADROOM else headroom,
        )
    return table


def _bug_loss(bug: dict[str, Any]) -> str:
    """'12.5%', 'blocked' or '[red]3.0% (missed)[/]'."""
    if bug["blocked"]:
        return "blocked"
    loss = f"{bug['loss_of_exercise']:.1%}"
    return loss if bug["caught"] else f"[red]{loss} (missed)[/]"


def add_stubs(commands: Subcommands) -> None:
    stubs = commands.add_parser("stubs", help="regenerate the stubs in exercises/ from solutions/")
    stubs.set_defaults(handler=cmd_stubs)


def cmd_stubs(args: argparse.Namespace, course: Course, console: Console) -> int:
    for exercise in (e for e in course.exercises if e.files and not e.problem):
        for path in write_stubs(course, exercise):
            console.print(f"wrote {path.relative_to(course.root)}", markup=False)
    return ExitCode.OK


def add_release(commands: Subcommands) -> None:
    release = commands.add_parser("release", help="the student bundle: no solutions, no hidden suites")
    release.add_argument("out", type=Path, help="a new folder for the bundle")
    release.set_defaults(handler=cmd_release)


def cmd_release(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.release import build_release

    leaks = build_release(course, args.out)
    for leak in leaks:
        console.print(labelled("leak:", "bold red", leak), highlight=False, soft_wrap=True)
    if leaks:
        return ExitCode.NOT_FULL_MARKS
    console.print(
        f"wrote the student release to {args.out}: no reference body or hidden test text in it", markup=False
    )
    return ExitCode.OK


def add_gradescope(commands: Subcommands) -> None:
    gradescope = commands.add_parser("gradescope", help="an exercise's Gradescope autograder zip")
    gradescope.add_argument("id", help="number or slug")
    gradescope.add_argument("out", type=Path, help="the zip to write")
    gradescope.set_defaults(handler=cmd_gradescope)


def cmd_gradescope(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.exports import gradescope_zip

    gradescope_zip(course, course.find(args.id), args.out)
    said = f"wrote {args.out}: upload it as the autograder (ranks run on CPU there: no GPUs)"
    console.print(said, markup=False)
    return ExitCode.OK


def add_prairielearn(commands: Subcommands) -> None:
    prairielearn = commands.add_parser("prairielearn", help="an exercise's PrairieLearn external grader")
    prairielearn.add_argument("id", help="number or slug")
    prairielearn.add_argument("out", type=Path, help="a folder for serverFilesCourse/ and info-snippet.json")
    prairielearn.set_defaults(handler=cmd_prairielearn)


def cmd_prairielearn(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.exports import prairielearn_folder

    prairielearn_folder(course, course.find(args.id), args.out)
    console.print(
        f"wrote {args.out}: copy serverFilesCourse/ into your course, info-snippet.json into the question"
    )
    return ExitCode.OK


def add_classroom(commands: Subcommands) -> None:
    classroom = commands.add_parser(
        "classroom", help="a GitHub Classroom starter repository for an exercise (public checks only)"
    )
    classroom.add_argument("id", help="number or slug")
    classroom.add_argument("out", type=Path, help="a new folder for the repository")
    classroom.set_defaults(handler=cmd_classroom)


def cmd_classroom(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.starter_repo import write_starter

    starter = write_starter(course, course.find(args.id), args.out)
    console.print(
        f"wrote {args.out}: one Classroom step per concept with public checks ({len(starter.steps)}, "
        f"{starter.timeout} min each); Classroom's points are the exercise's {starter.scale.said()}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for part, why in starter.left_out:
        console.print(
            f"  {part.id} is not graded there: {why}", markup=False, highlight=False, soft_wrap=True
        )
    console.print(
        "Classroom's score is the public checks; grade the hidden ones with `grade batch` over the cloned "
        "repositories (README, GitHub Classroom)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return ExitCode.OK


def add_doctor(commands: Subcommands) -> None:
    doctor = commands.add_parser(
        "doctor", help="what this machine offers: sandbox, Docker, GPUs, NCCL, Slurm"
    )
    doctor.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.runners.doctor import examine

    table = Table("", "found", "what it means")
    for finding in examine():
        mark = "[green]ok[/]" if finding.ok else "[yellow]no[/]"
        table.add_row(f"{mark} {finding.name}", finding.detail, finding.meaning)
    console.print(table)
    return ExitCode.OK


def add_image(commands: Subcommands) -> None:
    image = commands.add_parser("image", help="grading images for --backend docker")
    image_commands = image.add_subparsers(dest="image_command", required=True)
    build = image_commands.add_parser("build", help="build the CPU image (or --cuda) from containers/")
    build.add_argument(
        "--base", help="base image (default: distgpu-base:bookworm if present, else python:3.11-slim)"
    )
    build.add_argument("--cuda", action="store_true", help="build the CUDA image instead (needs network)")
    build.set_defaults(handler=cmd_image_build)


def cmd_image_build(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.runners.images import build_image

    kind = "cuda" if args.cuda else "cpu"
    console.print(f"building the {kind} image (wheels are downloaded into the build context first)...")
    built = build_image(kind=kind, base=args.base)
    console.print(f"built {built.tag} ({built.image_id[:19]}) on {built.base}")
    console.print(f"  {built.size_mb:g} MB, {built.seconds:g} s")
    return ExitCode.OK
