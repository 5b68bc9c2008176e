"""The ``grade`` command: parse the command line, load the course, run the subcommand's handler.

Each audience's subcommands are declared, with their thin handlers, in ``learner``, ``authoring`` and
``classroom``; ``parser`` assembles them. A handler checks its arguments and calls one function of the
audience's package.
"""

from __future__ import annotations

from rich.console import Console

from grader.authoring.stubs import StubError
from grader.cli.common import Handler, find_course
from grader.cli.parser import build_parser
from grader.core.course import CourseConfigError, load_course
from grader.runners import SuiteError


def main(argv: list[str] | None = None) -> int:
    """Run ``grade`` with ``argv`` (default: the command line); the exit status: 0 full marks (or check
    passed), 1 not full marks, 2 usage or configuration error (printed as one ``error:`` line)."""
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
