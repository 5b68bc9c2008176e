"""What every audience's subcommands share: the examples epilog, the run options, finding course.yml."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeAlias

from rich.console import Console
from rich.text import Text

from grader import SOURCE_ROOT
from grader.core.course import Course
from grader.core.errors import ExitCode, UsageError
from grader.runners.devices import DEVICES

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns: each audience module adds its subcommands to it."""

Handler: TypeAlias = Callable[[argparse.Namespace, Course, Console], int]
"""A subcommand's handler: its parsed arguments, the loaded course and the console in, the exit status out."""

EXIT_STATUSES = "exit status, for every command:\n" + "".join(f"  {c.value}  {c.meaning}\n" for c in ExitCode)

EXAMPLES = (
    """\
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
  grade similarity grades/10_tensor_parallel    which submissions share code: a reason to look, not a verdict
  grade export --csv grades.csv                 the gradebook as `nbgrader export` writes it
  grade export --canvas c.csv --roster Grades.csv   Canvas's import file, from its gradebook export
  grade release ../distgpu-student             the student bundle (no solutions/, no hidden tests; scanned)
  grade gradescope 02 ex02-autograder.zip      a Gradescope autograder for one exercise (CPU only there)
  grade classroom 02 ex02-starter/             a GitHub Classroom starter repository (public checks only)
  grade image build                            build the CPU grading image for --backend docker
  grade exercise 02 --backend docker           grade inside a container (no network, limits, ranks as nobody)

"""
    + EXIT_STATUSES
)


def add_run_options(parser: argparse.ArgumentParser, backends: tuple[str, ...] = ("local", "docker")) -> None:
    """``--device`` and ``--backend`` (one of ``backends``), for every subcommand that grades."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
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


def add_wait_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--wait``: queue behind the batch that holds the folder's lock instead of stopping."""
    parser.add_argument(
        "--wait",
        action="store_true",
        help=f"when a batch is grading into the same folder, {what} when it has finished (default: stop)",
    )


def locked_folder(args: argparse.Namespace, out: Path, console: Console) -> AbstractContextManager[None]:
    """``out``'s batch lock, held by a batch and by what reads or rewrites its folder (``report``,
    ``similarity``); ``--wait``: queue behind the run that holds it, saying whom for."""
    from grader.classroom.state.lock import batch_lock

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    return batch_lock(out, wait=args.wait, on_wait=say)


def labelled(label: str, style: str, text: str) -> Text:
    """``label`` in ``style``, then ``text`` as it is: never read as markup, since it may carry user input
    (a path, a student id, a YAML error's "expected ',' or ']'")."""
    return Text.assemble((label, style), " ", text)


def find_course() -> Path:
    """The nearest course.yml: in the working folder or a parent, else in the grader's own repository;
    ``UsageError`` when there is none."""
    for folder in (Path.cwd(), *Path.cwd().parents, SOURCE_ROOT):
        if (folder / "course.yml").is_file():
            return folder / "course.yml"
    raise UsageError("no course.yml here or in any parent folder; pass --course")


def iso_moment(text: str) -> dt.datetime:
    """An ISO 8601 time from the command line (``--due``); without a zone, UTC."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        example = "2026-03-01T23:59-08:00"
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. {example})") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
