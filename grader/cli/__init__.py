"""The ``grade`` command: one small function per subcommand, each calling one function in ``grader``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from grader import SOURCE_ROOT
from grader.authoring.check import check_exercise
from grader.authoring.stubs import StubError, write_stubs
from grader.classroom.grade import BatchOutcome, batch_grade, batch_todo
from grader.classroom.outputs import batch_summary
from grader.core.course import Course, CourseConfigError, Exercise, load_course
from grader.core.formats import to_gradescope, to_junit
from grader.core.results import ExerciseResult
from grader.learner.grade import grade_exercise, last_result
from grader.learner.views import checkpoint_summary, progress_tables, to_terminal
from grader.runners import SuiteError, make_runner

EXAMPLES = """\
examples:
  grade list                                   where you stand in the course
  grade exercise 01                            grade your work in exercises/01_comm_primitives
  grade exercise ring_tree                     the same, by slug (02, 2 and ring_tree are one exercise)
  grade exercise 02 -k ring_allreduce          grade one part only
  grade exercise 02 --watch                    regrade every time you save (Ctrl-C stops)
  grade hint 02                                which parts of exercise 02 have hints, and how many you saw
  grade hint 02 ring_allreduce                 the next hint for that part (they are counted)
  grade checkpoint 1                           grade all of section 1; pass it at the threshold
  grade progress                               your best and last scores, hints and checkpoints
  grade exercise 02 --submission alice.zip     grade a student's submission (a folder or a zip)
  grade exercise 02 --json results.json        also write Gradescope's results.json
  grade exercise 02 --solution                 grade the reference: validates the course, not a student
  grade check                                  every reference scores 100 %, every stub 0 %, stubs in sync
  grade stubs                                  regenerate exercises/*/ stubs from solutions/
  grade batch subs/ --exercise 10 --backend docker   grade every student in subs/ (reruns resume)
  grade batch subs/ --exercise 10 --regrade alice     grade alice again (e.g. after fixing a test)
  grade batch subs/ --exercise 07 --backend slurm --dry-run   the sbatch scripts a cluster batch would submit
  grade report grades/10_tensor_parallel        what the class missed, as HTML (grade batch writes it too)
  grade report grades/10_tensor_parallel --anonymize   the same with pseudonyms, to share with TAs
  grade export --csv grades.csv                 the gradebook as `nbgrader export` writes it
  grade release ../distgpu-student             the student bundle (no solutions/, no hidden tests; scanned)
  grade gradescope 02 ex02-autograder.zip      a Gradescope autograder for one exercise (CPU only there)
  grade image build                            build the CPU grading image for --backend docker
  grade exercise 02 --backend docker           grade inside a container (no network, limits, ranks as nobody)

exit status: 0 full marks (or check passed), 1 not full marks, 2 usage or configuration error.
"""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    console = Console(highlight=False)
    try:
        course = load_course(args.course or _find_course(), check_stubs=args.command != "stubs")
        return args.handler(args, course, console)
    except (CourseConfigError, SuiteError, StubError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        console.print(f"[bold red]error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade",
        description="Grade distgpu exercises.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--course", type=Path, help="course.yml to use (default: the nearest one upwards)")
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("list", help="sections and exercises, with your status")
    listing.set_defaults(handler=cmd_list)

    exercise = commands.add_parser(
        "exercise",
        help="grade one exercise",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    exercise.add_argument("id", help="number (4, 04) or slug (nccl_internals)")
    exercise.add_argument("--submission", type=Path, help="a folder or .zip with the exercise's files")
    exercise.add_argument("--solution", action="store_true", help="grade the reference (instructors)")
    exercise.add_argument("--json", type=Path, help="write Gradescope results.json here")
    exercise.add_argument("--junit", type=Path, help="write JUnit XML here")
    exercise.add_argument("-k", dest="part", metavar="PART", help="grade one part only (ring_allreduce)")
    exercise.add_argument("--watch", action="store_true", help="regrade after every save (Ctrl-C stops)")
    _add_run_options(exercise)
    exercise.set_defaults(handler=cmd_exercise)

    progress = commands.add_parser("progress", help="where you stand: scores, hints, checkpoints")
    progress.add_argument("--json", action="store_true", help="print the same data as JSON")
    progress.set_defaults(handler=cmd_progress)

    checkpoint = commands.add_parser("checkpoint", help="grade a whole section against its checkpoint")
    checkpoint.add_argument("section", help="section number (1-5)")
    _add_run_options(checkpoint)
    checkpoint.set_defaults(handler=cmd_checkpoint)

    hint = commands.add_parser("hint", help="reveal the next hint for a part of an exercise")
    hint.add_argument("id", help="number or slug")
    hint.add_argument("part", nargs="?", help="part name ('ring_allreduce' or '02.ring_allreduce')")
    hint.set_defaults(handler=cmd_hint)

    check = commands.add_parser("check", help="validate the course: references 100 %%, stubs 0 %%, in sync")
    check.add_argument("ids", nargs="*", help="exercises to check (default: all with parts)")
    _add_run_options(check)
    check.set_defaults(handler=cmd_check)

    validate = commands.add_parser(
        "validate",
        help="is each suite fair? reference stable, stubs zero, alt-correct full, every bug caught",
    )
    validate.add_argument("ids", nargs="*", help="exercises to validate (default: all with parts)")
    validate.add_argument("--runs", type=int, default=3, help="gradings of the reference (default 3)")
    validate.add_argument("--json", type=Path, help="write the validity table here as JSON")
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
    _add_run_options(validate)
    validate.set_defaults(handler=cmd_validate)

    stubs = commands.add_parser("stubs", help="regenerate the stubs in exercises/ from solutions/")
    stubs.set_defaults(handler=cmd_stubs)

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
    _add_run_options(batch, backends=("local", "docker", "slurm"))
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

    export = commands.add_parser("export", help="export the gradebook as nbgrader's CSV")
    export.add_argument("--csv", type=Path, required=True, help="the file to write")
    export.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite:///<course>/gradebook.db)")
    export.set_defaults(handler=cmd_export)

    class_report = commands.add_parser("report", help="a batch's class report: what the class missed")
    class_report.add_argument("grades", type=Path, help="a batch's folder (grades/NN_slug)")
    class_report.add_argument("--html", type=Path, help="where to write it (default: GRADES/report)")
    class_report.add_argument("--anonymize", action="store_true", help="stable pseudonyms for student ids")
    class_report.set_defaults(handler=cmd_report)

    release = commands.add_parser("release", help="the student bundle: no solutions, no hidden suites")
    release.add_argument("out", type=Path, help="a new folder for the bundle")
    release.set_defaults(handler=cmd_release)

    gradescope = commands.add_parser("gradescope", help="an exercise's Gradescope autograder zip")
    gradescope.add_argument("id", help="number or slug")
    gradescope.add_argument("out", type=Path, help="the zip to write")
    gradescope.set_defaults(handler=cmd_gradescope)

    prairielearn = commands.add_parser("prairielearn", help="an exercise's PrairieLearn external grader")
    prairielearn.add_argument("id", help="number or slug")
    prairielearn.add_argument("out", type=Path, help="a folder for serverFilesCourse/ and info-snippet.json")
    prairielearn.set_defaults(handler=cmd_prairielearn)

    doctor = commands.add_parser(
        "doctor", help="what this machine offers: sandbox, Docker, GPUs, NCCL, Slurm"
    )
    doctor.set_defaults(handler=cmd_doctor)

    image = commands.add_parser("image", help="grading images for --backend docker")
    image_commands = image.add_subparsers(dest="image_command", required=True)
    build = image_commands.add_parser("build", help="build the CPU image (or --cuda) from containers/")
    build.add_argument(
        "--base", help="base image (default: distgpu-base:bookworm if present, else python:3.11-slim)"
    )
    build.add_argument("--cuda", action="store_true", help="build the CUDA image instead (needs network)")
    build.set_defaults(handler=cmd_image_build)
    return parser


def _add_run_options(
    parser: argparse.ArgumentParser, backends: tuple[str, ...] = ("local", "docker")
) -> None:
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="cpu: gloo; cuda: NCCL, one GPU per rank; auto: cuda when available",
    )
    parser.add_argument(
        "--backend",
        choices=backends,
        default="local",
        help="local: this machine; docker: one container per run (build it: grade image build)"
        + ("; slurm: a job array on the cluster (docs/slurm.md)" if "slurm" in backends else ""),
    )


def _find_course() -> Path:
    for folder in (Path.cwd(), *Path.cwd().parents, SOURCE_ROOT):
        if (folder / "course.yml").is_file():
            return folder / "course.yml"
    raise ValueError("no course.yml here or in any parent folder; pass --course")


# ---------------------------------------------------------------------------------------------------------
# subcommands


def cmd_list(args: argparse.Namespace, course: Course, console: Console) -> int:
    for section in course.sections:
        table = Table(title=f"{section.number}. {section.title}", title_justify="left")
        for column in ("#", "exercise", "slug", "points", "your status"):
            table.add_column(column)
        for exercise in section.exercises:
            table.add_row(
                exercise.key, exercise.title, exercise.slug, f"{exercise.points:g}", _status(course, exercise)
            )
        console.print(table)
    return 0


def _status(course: Course, exercise) -> str:  # type: ignore[no-untyped-def]
    if not exercise.parts:
        return "[dim]coming soon[/]"
    last = last_result(course, exercise)
    if last is None:
        return "not graded yet"
    style = "green" if last.all_graded_passed else "yellow"
    return f"[{style}]{last.score:g} / {last.max_score:g}[/]"


def cmd_exercise(args: argparse.Namespace, course: Course, console: Console) -> int:
    if args.solution and args.submission:
        raise ValueError("--solution and --submission exclude each other")
    if args.part and args.backend != "local":
        raise ValueError("-k works with --backend local only")
    if args.watch and (args.solution or args.submission):
        raise ValueError("--watch watches your own exercise folder: not with --solution or --submission")
    exercise = course.find(args.id)
    if args.submission is not None:
        from grader.core.submission import why_invalid

        reason = why_invalid(args.submission, exercise.files)
        if reason:
            raise ValueError(f"--submission {args.submission} cannot be graded: {reason}")
    code = _grade_and_report(args, course, exercise, console)
    if args.watch:
        from grader.learner.watch import watch

        paths = [course.exercise_dir(exercise) / name for name in exercise.files]
        console.print(f"watching {', '.join(exercise.files)}: save to regrade, Ctrl-C to stop")

        def regrade(changed: list[Path]) -> None:
            nonlocal code
            console.rule(f"changed: {', '.join(p.name for p in changed)}")
            code = _grade_and_report(args, course, exercise, console)
            console.print("watching: save to regrade, Ctrl-C to stop")

        watch(paths, regrade)
    return code


def _grade_and_report(args: argparse.Namespace, course: Course, exercise: Exercise, console: Console) -> int:
    with ProgressBar(console, f"grading {exercise.key}") as bar:
        result = grade_exercise(
            course=course,
            exercise=exercise,
            runner=make_runner(args.backend),
            submission=args.submission,
            solution=args.solution,
            device=args.device,
            part=args.part,
            on_progress=bar.update,
        )
    to_terminal(result, console)
    if args.json:
        args.json.write_text(json.dumps(to_gradescope(result), indent=2))
    if args.junit:
        args.junit.write_text(to_junit(result))
    return 0 if result.all_graded_passed else 1


class ProgressBar:
    """A transient bar of tests done, on a terminal only: logs and pipes get the report alone."""

    def __init__(self, console: Console, label: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.enabled = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task(label, total=None)

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def describe(self, label: str) -> None:
        self.progress.update(self.task, description=label, completed=0, total=None)

    def update(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)


def cmd_progress(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.learner.progress import ProgressStore, course_progress, progress_json

    store = ProgressStore()
    sections = course_progress(course, store)
    if args.json:
        print(json.dumps(progress_json(sections), indent=1))
        return 0
    progress_tables(sections, console)
    console.print(f"[dim]progress is kept in {store.path}[/]")
    return 0


def cmd_checkpoint(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.learner.checkpoint import run_checkpoint

    section = course.section(args.section)
    with ProgressBar(console, "grading") as bar:
        outcome = run_checkpoint(
            course=course,
            section=section,
            runner=make_runner(args.backend),
            device=args.device,
            on_exercise=lambda e: bar.describe(f"grading {e.key} {e.slug}"),
            on_progress=bar.update,
        )
    checkpoint_summary(outcome, console)
    return 0 if outcome.passed else 1


def cmd_hint(args: argparse.Namespace, course: Course, console: Console) -> int:
    from rich.markdown import Markdown

    from grader.learner.hints import hints_for, progress_key
    from grader.learner.progress import ProgressError, ProgressStore

    exercise = course.find(args.id)
    ladders = hints_for(course, exercise)
    if not ladders:
        console.print(f"exercise {exercise.key} has no hints yet; its README.md explains the background")
        return 0
    store = ProgressStore()
    part = _hint_part(args.part, exercise.key, list(ladders))
    if part is None:
        _hint_menu(exercise.key, ladders, store.all_hints_revealed(course.title), console)
        return 0
    hints, key = ladders[part], progress_key(exercise, part)
    try:
        shown = min(store.hints_revealed(course.title, key) + 1, len(hints))
        store.set_hints_revealed(course.title, key, shown)
    except ProgressError as exc:
        raise ValueError(f"cannot count your hints, so none is shown: {exc}") from None
    for hint in hints[: shown - 1]:
        console.print(f"[dim]hint {hint.number}: {hint.title} (seen)[/]")
    hint = hints[shown - 1]
    console.print(f"[bold]{exercise.key}.{part}, hint {hint.number} of {len(hints)}: {hint.title}[/]")
    console.print(Markdown(hint.text))  # reflowed to the terminal's width
    more = len(hints) - shown
    again = f"grade hint {exercise.key} {part}"
    console.print(f"[dim]{f'{more} more: run `{again}` again' if more else 'that was the last hint'}[/]")
    return 0


def _hint_part(asked: str | None, key: str, parts: list[str]) -> str | None:
    """The part a `grade hint` call means: the one named, the only one, or None (show the menu)."""
    if asked is None:
        return parts[0] if len(parts) == 1 else None
    name = asked.removeprefix(f"{key}.")
    if name not in parts:
        raise KeyError(f"exercise {key} has no hints for part {asked!r}; it has: {', '.join(parts)}")
    return name


def _hint_menu(key: str, ladders: dict[str, list], seen: dict[str, int], console: Console) -> None:
    console.print(f"exercise {key} has a ladder of hints per part; each call reveals one more:")
    for part, hints in ladders.items():
        console.print(f"  grade hint {key} {part:<28} {seen.get(f'{key}.{part}', 0)} of {len(hints)} seen")


def cmd_check(args: argparse.Namespace, course: Course, console: Console) -> int:
    exercises = [course.find(i) for i in args.ids] or [e for e in course.exercises if e.parts]
    failed = 0
    # One runner for the whole check: it keeps a rank factory per exercise, and closing ends the last one.
    with contextlib.closing(make_runner(args.backend, one_author=True)) as runner:
        for exercise in exercises:
            found = check_exercise(course=course, exercise=exercise, runner=runner, device=args.device)
            ref, stub = found.reference, found.stubs
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
    return 1 if failed else 0


def _claimed(share: Path, exercise: Exercise) -> bool:
    """Whether this process takes ``exercise``: the first to create its claim in ``share`` does."""
    share.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(share / exercise.key, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def cmd_validate(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.validate import CorpusError, validate_exercise

    if args.runs < 1:
        raise ValueError("--runs must be at least 1")
    exercises = [course.find(i) for i in args.ids] or [e for e in course.exercises if e.parts]
    rows: list[dict] = []
    table = Table(title="Validity", title_justify="left")
    for column in (
        "exercise",
        "reference stable",
        "stub zero",
        "alt-correct full",
        "bugs caught",
        "min loss",
    ):
        table.add_column(column)
    with contextlib.closing(make_runner(args.backend, one_author=True)) as runner:
        for exercise in exercises:
            if args.share and not _claimed(args.share, exercise):
                continue
            with console.status(f"validating {exercise.key} {exercise.slug}") as status:
                try:
                    found = validate_exercise(
                        course=course,
                        exercise=exercise,
                        runner=runner,
                        device=args.device,
                        corpus_root=args.corpus or course.root / "tests",
                        runs=args.runs,
                        on_step=lambda what, e=exercise: status.update(
                            f"validating {e.key} {e.slug}: {what}"
                        ),
                    )
                except CorpusError as exc:
                    console.print(f"{exercise.key} corpus: {exc}", soft_wrap=True, markup=False)
                    rows.append(
                        {"exercise": exercise.key, "slug": exercise.slug, "problems": [f"corpus: {exc}"]}
                    )
                    continue
            row = found.summary()
            rows.append(row)
            if args.results:
                found.write_results(args.results / exercise.dirname)
            loss = row["smallest_loss_per_concept"]
            table.add_row(
                f"{exercise.key} {exercise.slug}",
                row["reference_stable"],
                "yes" if row["stub_zero"] else "[red]no[/]",
                row["alt_full"],
                row["bugs_caught"],
                "-" if loss is None else f"{loss:.2f}x",
                style=None if found.ok else "red",
            )
            for problem in found.problems:
                console.print(f"[red]{exercise.key}[/] {problem}", soft_wrap=True, markup=False)
    console.print(table)
    bad = [r["exercise"] for r in rows if r["problems"]]
    console.print(
        f"{len(rows) - len(bad)} of {len(rows)} exercises valid: references stable, stubs zero, every "
        "alt-correct case full, every bug caught with its concept's share"
        + (f"; not: {', '.join(bad)}" if bad else "")
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if bad else 0


def cmd_stubs(args: argparse.Namespace, course: Course, console: Console) -> int:
    for exercise in (e for e in course.exercises if e.files):
        for path in write_stubs(course, exercise):
            console.print(f"wrote {path.relative_to(course.root)}")
    return 0


def cmd_batch(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.batch import check_request, how_code_runs, make_plan
    from grader.classroom.gradebook import default_url

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
    gpus = _gpu_count() if args.device != "cpu" else 0
    device = ("cuda" if gpus else "cpu") if args.device == "auto" else args.device
    plan = make_plan(
        course=course, exercise=exercise, backend=args.backend, device=device, workers=args.workers, gpus=gpus
    )
    progress = BatchProgressView(console)
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
        )
    _batch_report(outcome, console)
    return 0


def _batch_on_slurm(args: argparse.Namespace, course: Course, exercise, out: Path, console: Console) -> int:  # type: ignore[no-untyped-def]
    """The same batch, its gradings run as Slurm jobs (grader/slurm.py), or printed with --dry-run."""
    from grader.classroom import slurm
    from grader.classroom.batch import BatchPlan, discover
    from grader.classroom.gradebook import default_url
    from grader.classroom.records import RecordStore

    settings = slurm.merged_settings(
        course.slurm, partition=args.partition, account=args.account, qos=args.qos
    )
    gpu_parts = any(p.device == "gpu" for p in exercise.parts)  # the submit host's GPUs say nothing here
    device = ("cuda" if gpu_parts else "cpu") if args.device == "auto" else args.device
    plan = BatchPlan(course=course, exercise=exercise, backend=settings.runner, device=device, workers=1)
    pool = slurm.SlurmPool(settings, out, flags=args.sbatch_arg, throttle=args.workers)
    if args.dry_run:
        store = RecordStore(out / "records", sweep=False)
        todo = batch_todo(plan, discover(args.submissions), store, regrade=args.regrade, late=args.late)
        console.print(slurm.dry_run(plan, pool, todo), markup=False, highlight=False, soft_wrap=True)
        return 0
    console.print(f"student code runs on the cluster's nodes ({settings.runner} runner)", soft_wrap=True)
    progress = BatchProgressView(console)
    pool.on_queue = progress.note
    try:
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
    except slurm.SlurmStopped as exc:
        console.print(f"[bold yellow]stopped:[/] {exc}", markup=True, highlight=False)
        return 1
    _batch_report(outcome, console)
    return 0


def _batch_report(outcome: BatchOutcome, console: Console) -> None:
    from grader.core.results import Status

    batch_summary(outcome.records, console)
    this_run = set(outcome.graded)
    invalid = sum(r.result.verdict is Status.INVALID for r in outcome.records if r.student in this_run)
    current = len(outcome.records) - len(this_run)
    said = [f"graded {len(this_run) - invalid} of {len(outcome.records)}"]
    said += [f"{invalid} invalid (not graded)"] if invalid else []
    said += [f"{current} unchanged since their last run (records kept)"] if current else []
    console.print(f"{', '.join(said)}; reports in {outcome.out}", soft_wrap=True)
    index = outcome.out / "report" / "index.html"
    if index.is_file():
        console.print(f"what the class missed: {index}", soft_wrap=True, markup=False, highlight=False)


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class BatchProgressView:
    """A rich progress bar with ETA and a live count of verdicts."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[counts]}"),
            TextColumn("[dim]{task.fields[queue]}"),
            console=console,
        )
        self.counts: dict[str, int] = {}
        self.task = self.progress.add_task("grading", total=None, counts="", queue="")

    def __enter__(self) -> BatchProgressView:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def start(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def note(self, queue: str) -> None:
        """What the cluster's queue holds for this batch (``--backend slurm``)."""
        self.progress.update(self.task, queue=queue)

    def advance(self, student: str, result: ExerciseResult) -> None:

        self.counts[str(result.verdict)] = self.counts.get(str(result.verdict), 0) + 1
        counts = "  ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        self.progress.update(self.task, advance=1, counts=counts)


def cmd_export(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.gradebook import default_url, export_csv, open_gradebook

    with open_gradebook(args.gradebook or default_url(course), course_id=course.title) as gradebook:
        export_csv(gradebook, args.csv)
    console.print(f"wrote {args.csv}")
    return 0


def cmd_report(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.class_report import write_report
    from grader.classroom.records import RecordStore

    if not (args.grades / "records").is_dir():
        raise ValueError(f"{args.grades} is not a batch's folder (it has no records/); give grades/NN_slug")
    first = next(iter(RecordStore(args.grades / "records", sweep=False).all()), None)
    deadline = course.find(first.result.exercise).deadline if first else None
    index = write_report(args.grades, args.html, deadline=deadline, anonymize=args.anonymize)
    console.print(f"wrote {index}", markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_release(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.release import build_release

    leaks = build_release(course, args.out)
    for leak in leaks:
        console.print(f"[bold red]leak:[/] {leak}", markup=True, highlight=False)
    if leaks:
        return 1
    console.print(f"wrote the student release to {args.out}: no reference body or hidden test text in it")
    return 0


def cmd_gradescope(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.exports import gradescope_zip

    gradescope_zip(course, course.find(args.id), args.out)
    console.print(f"wrote {args.out}: upload it as the autograder (ranks run on CPU there: no GPUs)")
    return 0


def cmd_prairielearn(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.authoring.exports import prairielearn_folder

    prairielearn_folder(course, course.find(args.id), args.out)
    console.print(
        f"wrote {args.out}: copy serverFilesCourse/ into your course, info-snippet.json into the question"
    )
    return 0


def cmd_doctor(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.runners.doctor import examine

    table = Table("", "found", "what it means")
    for finding in examine():
        mark = "[green]ok[/]" if finding.ok else "[yellow]no[/]"
        table.add_row(f"{mark} {finding.name}", finding.detail, finding.meaning)
    console.print(table)
    return 0


def cmd_image_build(args: argparse.Namespace, course: Course, console: Console) -> int:
    import docker

    from grader.runners.images import build_image

    kind = "cuda" if args.cuda else "cpu"
    console.print(f"building the {kind} image (wheels are downloaded into the build context first)...")
    try:
        built = build_image(kind=kind, base=args.base)
    except docker.errors.DockerException as exc:
        first = (str(exc).splitlines() or ["?"])[0]
        raise ValueError(f"no Docker engine answers ({first}); start one: scripts/start-dockerd") from None
    console.print(f"built {built.tag} ({built.image_id[:19]}) on {built.base}")
    console.print(f"  {built.size_mb:g} MB, {built.seconds:g} s")
    return 0
