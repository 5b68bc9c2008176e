"""The ``grade`` command: parse the command line, load the course, run the subcommand's handler, and turn
what escapes it into an exit status (``grader.core.errors.ExitCode``).

Each audience's subcommands are declared, with their thin handlers, in ``learner``, ``authoring`` and
``classroom``; ``parser`` assembles them. A handler checks its arguments, calls its audience's package and
shows the outcome (docs/architecture.md names what else a handler holds, and why).
"""

from __future__ import annotations

import argparse
import traceback

from rich.console import Console

from grader.cli.common import Handler, find_course, labelled
from grader.cli.parser import build_parser
from grader.core.course import load_course
from grader.core.errors import EnvironmentFailure, ExitCode, UsageError, environment_message

REPORT_BUGS = (
    "this is a bug in the grader, not a mistake of yours: please report it, with the traceback above, on the "
    "issue tracker of the repository this course came from"
)


def main(argv: list[str] | None = None) -> int:
    """Run ``grade`` with ``argv`` (default: the command line); the exit status is an ``ExitCode``: 0 full
    marks (or check passed), 1 not full marks, 2 usage or configuration error and 3 environment failure
    (each one ``error:`` line), 4 a grader bug (the traceback, then where to report it)."""
    args = build_parser().parse_args(argv)
    console = Console(highlight=False)
    try:
        return _run(args, console)
    except UsageError as exc:
        return _error(console, ExitCode.USAGE_ERROR, str(exc))
    except EnvironmentFailure as exc:
        return _error(console, ExitCode.ENVIRONMENT_FAILURE, str(exc))
    except OSError as exc:
        return _error(console, ExitCode.ENVIRONMENT_FAILURE, environment_message(exc))
    except Exception:
        console.print(traceback.format_exc().rstrip(), markup=False, highlight=False, soft_wrap=True)
        return _error(console, ExitCode.INTERNAL_ERROR, REPORT_BUGS)


def _run(args: argparse.Namespace, console: Console) -> int:
    """The handler's status; then, on stderr, a warning for each exercise that cannot be used (a command that
    needs one stops at it with its ``error:`` line instead)."""
    course = load_course(args.course or find_course(), check_stubs=args.command != "stubs")
    handler: Handler = args.handler
    code = handler(args, course, console)
    warnings = Console(stderr=True, highlight=False)
    for exercise in course.broken:
        said = f"exercise {exercise.key} ({exercise.slug}) cannot be used, so commands that need it stop: "
        warnings.print(labelled("warning:", "yellow", said + str(exercise.problem)), soft_wrap=True)
    return code


def _error(console: Console, code: ExitCode, message: str) -> ExitCode:
    """Print ``message`` as one ``error:`` line, as text: a ``[...]`` in it is kept, never read as markup."""
    console.print(labelled("error:", "bold red", message), highlight=False, soft_wrap=True)
    return code
