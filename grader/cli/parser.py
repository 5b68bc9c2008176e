"""The ``grade`` command line: its own options, then each audience's subcommands in the order ``grade
--help`` lists them (a student's, an author's checks, an instructor's batch, then an author's exports)."""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grader.cli import authoring, class_reports, classroom, learner
from grader.cli.common import EXAMPLES, Subcommands, find_course
from grader.core.course import load_course
from grader.core.errors import UsageError

SUBCOMMANDS: tuple[Callable[[Subcommands], None], ...] = (
    learner.add_list,
    learner.add_exercise,
    learner.add_progress,
    learner.add_checkpoint,
    learner.add_hint,
    authoring.add_check,
    authoring.add_validate,
    authoring.add_stubs,
    classroom.add_batch,
    classroom.add_export,
    class_reports.add_report,
    class_reports.add_similarity,
    authoring.add_release,
    authoring.add_gradescope,
    authoring.add_prairielearn,
    authoring.add_classroom,
    authoring.add_doctor,
    authoring.add_image,
)
"""Each adds one subcommand, its options and its handler (``set_defaults(handler=...)``)."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``grade``: ``--course``, then one subparser per subcommand, each with its handler."""
    parser = argparse.ArgumentParser(
        prog="grade",
        description="Grade distgpu exercises.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--course", type=Path, help="course.yml to use (default: the nearest one upwards)")
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the grader's version and the course's, then exit"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for add_subcommand in SUBCOMMANDS:
        add_subcommand(commands)
    return parser


class _Version(argparse.Action):
    """``grade --version``: the grader's version, then the course's (from course.yml, found as every
    subcommand finds it; ``--course`` before ``--version`` names another)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        try:
            grader = importlib.metadata.version("distgpu")
        except importlib.metadata.PackageNotFoundError:
            grader = "unknown (distgpu is not installed: pip install -e .)"
        lines = [f"grade (distgpu) {grader}"]
        try:
            path = namespace.course or find_course()
            course = load_course(path, check_stubs=False)
            lines.append(f"course: {course.title}, version {course.version or 'not given'} ({path})")
        except UsageError as exc:  # no course.yml found, or one that does not load (CourseConfigError)
            lines.append(f"course: none ({exc})")
        print("\n".join(lines))
        parser.exit(0)
