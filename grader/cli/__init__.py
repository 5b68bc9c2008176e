"""The ``grade`` command: parse the command line, load the course, run the subcommand's handler.

Each audience's subcommands are declared, with their thin handlers, in ``learner``, ``authoring`` and
``classroom``; ``parser`` assembles them. A handler checks its arguments and calls one function of the
audience's package.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from grader.authoring.stubs import StubError
from grader.cli.common import Handler, find_course
from grader.cli.parser import build_parser
from grader.core.course import CourseConfigError, load_course
from grader.core.errors import EnvironmentFailure, environment_failure
from grader.runners import SuiteError


def main(argv: list[str] | None = None) -> int:
    """Run ``grade`` with ``argv`` (default: the command line); the exit status: 0 full marks (or check
    passed), 1 not full marks, 2 usage or configuration error, 3 the machine failed (a full disk, a folder
    that cannot be written, a corrupt database); 2 and 3 print one ``error:`` line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(highlight=False)
    try:
        course = load_course(args.course or find_course(), check_stubs=args.command != "stubs")
        handler: Handler = args.handler
        return handler(args, course, console)
    except (CourseConfigError, SuiteError, StubError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        console.print(f"[bold red]error:[/] {message}", markup=True, highlight=False, soft_wrap=True)
        return 2
    except (EnvironmentFailure, OSError) as exc:
        failure = exc if isinstance(exc, EnvironmentFailure) else environment_failure(exc)
        if failure is None:
            raise
        console.print(Text.assemble(("error:", "bold red"), f" {failure}"), highlight=False, soft_wrap=True)
        return 3
