"""The ``grade`` command line: its own options, then each audience's subcommands in the order ``grade
--help`` lists them (a student's, an author's checks, an instructor's batch, then an author's exports)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from grader.cli import authoring, classroom, learner
from grader.cli.common import EXAMPLES, Subcommands

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
    classroom.add_report,
    classroom.add_similarity,
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
    commands = parser.add_subparsers(dest="command", required=True)
    for add_subcommand in SUBCOMMANDS:
        add_subcommand(commands)
    return parser
