"""A student's subcommands: ``list``, ``exercise``, ``progress``, ``checkpoint`` and ``hint``.

Each ``add_*`` declares one subcommand's options; its ``cmd_*`` handler checks them and calls
``grader.learner``, then shows the outcome with ``grader.learner.views``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from grader.cli.common import EXAMPLES, Subcommands, add_run_options
from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise
from grader.core.errors import ExitCode, UsageError
from grader.core.formats import to_gradescope, to_junit
from grader.learner.diagrams import save_diagrams, show_diagrams
from grader.learner.grade import grade_exercise, last_result, task_section
from grader.learner.views import ProgressBar, checkpoint_summary, progress_tables, to_terminal
from grader.runners import make_runner

if TYPE_CHECKING:
    from grader.learner.hints import Hint


def add_list(commands: Subcommands) -> None:
    listing = commands.add_parser("list", help="sections and exercises, with your status")
    listing.set_defaults(handler=cmd_list)


def cmd_list(args: argparse.Namespace, course: Course, console: Console) -> int:
    for section in course.sections:
        table = Table(title=f"{section.number}. {section.title}", title_justify="left")
        for column in ("#", "exercise", "slug", "points", "your status"):
            table.add_column(column)
        for exercise in section.exercises:
            status = _status(course, exercise)
            table.add_row(exercise.key, Text(exercise.title), exercise.slug, f"{exercise.points:g}", status)
        console.print(table)
    return ExitCode.OK


def _status(course: Course, exercise: Exercise) -> str:
    if exercise.problem:
        return "[red]cannot be used[/] (the warning below says why)"
    if not exercise.parts:
        return "[dim]coming soon[/]"
    last = last_result(course, exercise)
    if last is None:
        return "not graded yet"
    style = "green" if last.all_graded_passed else "yellow"
    return f"[{style}]{last.score:g} / {last.max_score:g}[/]"


def add_exercise(commands: Subcommands) -> None:
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
    exercise.add_argument("--concept", help="grade one concept only (ring_sum); exit status 0 when earned")
    exercise.add_argument("--watch", action="store_true", help="regrade after every save (Ctrl-C stops)")
    exercise.add_argument(
        "--trace", action="store_true", help="diagrams of passing tests too, and Chrome trace JSON (Perfetto)"
    )
    exercise.add_argument("--no-diagram", action="store_true", help="no space-time diagrams of failing tests")
    add_run_options(exercise)
    exercise.set_defaults(handler=cmd_exercise)


def cmd_exercise(args: argparse.Namespace, course: Course, console: Console) -> int:
    if args.solution and args.submission:
        raise UsageError("--solution and --submission exclude each other")
    if (args.part or args.concept) and args.backend != "local":
        raise UsageError("-k and --concept work with --backend local only")
    if args.trace and (args.backend != "local" or args.no_diagram):
        raise UsageError("--trace works with --backend local only, and not with --no-diagram")
    if args.watch and (args.solution or args.submission):
        raise UsageError("--watch watches your own exercise folder: not with --solution or --submission")
    exercise = course.find(args.id)
    if args.submission is not None:
        from grader.core.submission import why_invalid

        refusal = why_invalid(args.submission, exercise.files)
        if refusal is not None:
            raise UsageError(f"--submission {args.submission} cannot be graded: {refusal.text}")
    code = _grade_and_report(args, course, exercise, console)
    if args.watch:
        from grader.learner.watch import watch

        paths = [course.exercise_dir(exercise) / name for name in exercise.files]
        console.print(f"watching {', '.join(exercise.files)}: save to regrade, Ctrl-C to stop", markup=False)

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
            concept=args.concept,
            on_progress=bar.update,
            trace=args.trace,
        )
    to_terminal(result, console, readme=task_section(course, exercise))
    if not args.no_diagram:
        show_diagrams(result, save_diagrams(exercise, result, trace=args.trace), console)
    if args.json:
        write_atomic(args.json, json.dumps(to_gradescope(result), indent=2))
    if args.junit:
        write_atomic(args.junit, to_junit(result))
    return ExitCode.OK if result.all_graded_passed else ExitCode.NOT_FULL_MARKS


def add_progress(commands: Subcommands) -> None:
    progress = commands.add_parser("progress", help="where you stand: scores, hints, checkpoints")
    progress.add_argument("--json", action="store_true", help="print the same data as JSON")
    progress.set_defaults(handler=cmd_progress)


def cmd_progress(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.learner.progress import ProgressStore, course_progress, progress_json

    store = ProgressStore()
    sections = course_progress(course, store)
    if args.json:
        print(json.dumps(progress_json(sections), indent=1))
        return ExitCode.OK
    progress_tables(sections, console)
    console.print(f"[dim]progress is kept in {escape(str(store.path))}[/]", soft_wrap=True)
    return ExitCode.OK


def add_checkpoint(commands: Subcommands) -> None:
    checkpoint = commands.add_parser("checkpoint", help="grade a whole section against its checkpoint")
    checkpoint.add_argument("section", help="section number (1-5)")
    add_run_options(checkpoint)
    checkpoint.set_defaults(handler=cmd_checkpoint)


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
    return ExitCode.OK if outcome.passed else ExitCode.NOT_FULL_MARKS


def add_hint(commands: Subcommands) -> None:
    hint = commands.add_parser("hint", help="reveal the next hint for a part of an exercise")
    hint.add_argument("id", help="number or slug")
    hint.add_argument("part", nargs="?", help="part name ('ring_allreduce' or '02.ring_allreduce')")
    hint.set_defaults(handler=cmd_hint)


def cmd_hint(args: argparse.Namespace, course: Course, console: Console) -> int:
    from rich.markdown import Markdown

    from grader.learner.hints import hinted_part, hints_for, reveal_next
    from grader.learner.progress import ProgressStore

    exercise = course.find(args.id)
    ladders = hints_for(course, exercise)
    if not ladders:
        console.print(f"exercise {exercise.key} has no hints yet; its README.md explains the background")
        return ExitCode.OK
    store = ProgressStore()
    part = hinted_part(args.part, exercise, list(ladders))
    if part is None:
        _hint_menu(exercise.key, ladders, store.all_hints_revealed(course.title), console)
        return ExitCode.OK
    hints = ladders[part]
    shown = reveal_next(store, course, exercise, part, hints)
    for hint in hints[: shown - 1]:
        console.print(f"[dim]hint {hint.number}: {escape(hint.title)} (seen)[/]")
    hint = hints[shown - 1]
    console.print(f"[bold]{exercise.key}.{part}, hint {hint.number} of {len(hints)}: {escape(hint.title)}[/]")
    console.print(Markdown(hint.text))  # reflowed to the terminal's width
    more = len(hints) - shown
    again = f"grade hint {exercise.key} {part}"
    console.print(f"[dim]{f'{more} more: run `{again}` again' if more else 'that was the last hint'}[/]")
    return ExitCode.OK


def _hint_menu(key: str, ladders: dict[str, list[Hint]], seen: dict[str, int], console: Console) -> None:
    console.print(f"exercise {key} has a ladder of hints per part; each call reveals one more:")
    for part, hints in ladders.items():
        console.print(f"  grade hint {key} {part:<28} {seen.get(f'{key}.{part}', 0)} of {len(hints)} seen")
