"""An instructor's subcommands that read a graded batch: ``report`` (what the class missed) and
``similarity`` (who shares code). The handlers import the classroom package themselves."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from grader.cli.common import Subcommands, add_wait_option, locked_folder
from grader.core.course import Course
from grader.core.errors import ExitCode, UsageError


def add_report(commands: Subcommands) -> None:
    class_report = commands.add_parser("report", help="a batch's class report: what the class missed")
    class_report.add_argument("grades", type=Path, help="a batch's folder (grades/NN_slug)")
    class_report.add_argument("--html", type=Path, help="where to write it (default: GRADES/report)")
    class_report.add_argument("--anonymize", action="store_true", help="stable pseudonyms for student ids")
    class_report.add_argument("--no-diagram", action="store_true", help="no space-time diagrams")
    add_wait_option(class_report, "write the report")
    class_report.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace, course: Course, console: Console) -> int:
    """The class report, and the similarity report beside it (rewritten with the same names, over the
    submissions and at the threshold it was made with, or removed when those submissions are gone)."""
    from grader.classroom.grade import batch_deadline
    from grader.classroom.outputs.class_report import write_report
    from grader.classroom.outputs.similarity_report import refresh_similarity

    _check_batch_folder(args.grades)
    with locked_folder(args, args.grades, console):  # not a class half way through a batch
        deadline = batch_deadline(course, args.grades)
        refresh_similarity(args.grades, course, out=args.html, anonymize=args.anonymize)
        index = write_report(
            args.grades, args.html, deadline=deadline, anonymize=args.anonymize, diagrams=not args.no_diagram
        )
    console.print(f"wrote {index}", markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def _check_batch_folder(grades: Path) -> None:
    if not (grades / "records").is_dir():
        raise UsageError(f"{grades} is not a batch's folder (it has no records/); give grades/NN_slug")


def add_similarity(commands: Subcommands) -> None:
    similarity = commands.add_parser(
        "similarity",
        help="which submissions of a graded batch share code: a reason to look, never a verdict",
    )
    similarity.add_argument("grades", type=Path, help="a batch's folder (grades/NN_slug)")
    similarity.add_argument(
        "--submissions", type=Path, help="the folder of submissions (default: the one the batch graded)"
    )
    similarity.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="also compare every student with these: a folder of submissions (a prior year), one submission "
        "(folder or zip) or one file (a leaked solution); repeatable. The reference is always compared",
    )
    similarity.add_argument(
        "--threshold",
        type=float,
        help="flag a pair when this share of both students' own code, together, is common (default 0.5)",
    )
    similarity.add_argument(
        "--common-min",
        type=int,
        metavar="N",
        help="ignore code more than N students share, as Moss's -m N (default: off, nothing is ignored "
        "for being popular)",
    )
    similarity.add_argument("--html", type=Path, help="where to write it (default: GRADES/report)")
    similarity.add_argument("--anonymize", action="store_true", help="the class report's pseudonyms")
    add_wait_option(similarity, "compare")
    similarity.set_defaults(handler=cmd_similarity)


def cmd_similarity(args: argparse.Namespace, course: Course, console: Console) -> int:
    from grader.classroom.outputs.similarity import DEFAULT_THRESHOLD
    from grader.classroom.outputs.similarity_report import CLUSTERS_CSV, write_similarity

    _check_batch_folder(args.grades)
    with locked_folder(args, args.grades, console):  # not a class half way through a batch
        page = write_similarity(
            args.grades,
            course,
            submissions=args.submissions,
            out=args.html,
            threshold=DEFAULT_THRESHOLD if args.threshold is None else args.threshold,
            anonymize=args.anonymize,
            against=args.against,
            common_min=args.common_min,
        )
    flagged = len(page.with_suffix(".csv").read_text().splitlines()) - 1
    clusters = len((page.parent / CLUSTERS_CSV).read_text().splitlines()) - 1
    common = "" if args.common_min is None else f"; code more than {args.common_min} students share ignored"
    console.print(
        f"wrote {page}: {clusters} cluster(s), {flagged} pair(s) to look at{common} "
        "(a reason to look, never a verdict)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return ExitCode.OK
