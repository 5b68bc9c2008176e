"""The student release: the course without solutions/ and hidden suites, and a scan that proves it.

The bundle holds exercises (stubs, public tests, rank programs, READMEs, hints), the self-check notebooks,
the grader, coursekit, course.yml and the set-up scripts. Without solutions/, ``grade exercise NN`` runs the
public checks and says that the hidden tests run at submission.
"""

from __future__ import annotations

import builtins
import keyword
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from grader.core.course import Course
from grader.core.errors import UsageError

SHIPPED = (
    "README.md",
    "course.yml",
    "pyproject.toml",
    "grader",
    "coursekit",
    "exercises",
    "notebooks",
    "scripts",
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".grade", "*.egg-info")
MIN_LEAK_CHARS = 30
"""A hidden-suite line shorter than this (``import torch``, ``assert out``) is not evidence of a leak."""
NOT_SCANNED = ("grader",)
"""Bundle folders the solution-line scan skips: the grader shares helpers with suites, and holds no answer."""
GENERIC_LINES: dict[str, str] = {
    # line (stripped) -> why it may appear in a reference body and in student-visible files alike
    "return out": "returning the result by its conventional name",
    "return results": "returning the result by its conventional name",
    "return schedule": "returning the result by its conventional name",
    "return table": "returning the result by its conventional name",
    "return buf": "returning the result by its conventional name",
    "return t": "returning the result by its conventional name",
    "return pieces": "returning the result by its conventional name",
    "out = []": "starting a result list",
    "out = {": "starting a result dict",
    "out.append(g)": "appending to the result list",
    "}  # fmt: skip": "a formatter directive closing a literal",
    ")  # fmt: skip": "a formatter directive closing a call",
    "hw = load()": "loading coursekit's hardware catalogue, as the README shows",
    "if causal:": "branching on the causal flag of the function's signature",
    "if rank == 0:": "branching on rank 0",
    "if missing:": "branching on an empty check",
    "while queue:": "the loop of any breadth-first search",
    "for r in range(p):": "looping over ranks",
    "req.wait()": "waiting on a torch.distributed request",
    "request.wait()": "waiting on a torch.distributed request",
    "p = dist.get_world_size()": "asking the world size",
    "t = dist.get_world_size(group)": "asking the group size",
    "p, r = dist.get_world_size(), dist.get_rank()": "asking the world size and rank",
    "t0 = time.perf_counter()": "starting a timer",
    "return max(times, default=0.0)": "the slowest of several times",
    "for i, p in enumerate(self.params):": "looping over a model's parameters",
    '"gpus": gpus,': "naming a field after its variable",
    "qp = ep.qp": "06's rank program reads the endpoint the student built",
    '"psn": ep.psn,': "06's rank program reports a field of the endpoint the student built",
}
"""Lines of reference bodies that are no answer: idioms any solution and any given code share."""


def build_release(course: Course, out: Path) -> list[str]:
    """Write the bundle to ``out`` (which must not exist); return the leaks found in it (none, or a bug)."""
    if out.exists():
        raise UsageError(f"{out} exists; give a new folder")
    for exercise in course.exercises:
        exercise.usable()  # the bundle ships every exercise
    for name in SHIPPED:
        source = course.root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORED)
        elif source.is_file():
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    return find_leaks(course, out)


def hidden_suite_lines(course: Course) -> dict[str, str]:
    """Distinctive lines that only hidden suites hold -> where they come from.

    A line that public course files hold too (an import, a helper a public test shares) proves nothing, so
    it is no secret.
    """
    secrets: dict[str, str] = {}
    for hidden in sorted((course.root / "solutions").glob("*/test_hidden.py")):
        for line in hidden.read_text().splitlines():
            text = line.strip()
            if len(text) >= MIN_LEAK_CHARS and not text.startswith("#"):
                secrets.setdefault(text, str(hidden.relative_to(course.root)))
    public = {line.strip() for path in _public_sources(course) for line in _lines(path)}
    public |= _given_lines(course)
    return {line: origin for line, origin in secrets.items() if line not in public}


def solution_lines(course: Course) -> dict[str, str]:
    """Every code line of every reference body -> where it comes from, but for what the student is given.

    Given means: the same line outside the solution regions of any reference file (08 hands out the
    hanging version of the code it asks to fix), a line of nothing but Python keywords, builtins and
    punctuation (``else:``, ``return None``), or an entry of ``GENERIC_LINES``. Everything else in a
    student-visible file is a leak, however short: ``sbh = s * b * h`` is part of an answer.
    """
    secrets: dict[str, str] = {}
    for origin, body, _ in _reference_regions(course):
        for text in (line.strip() for line in body):
            if text and not text.startswith("#") and not _generic(text):
                secrets.setdefault(text, origin)
    given = _given_lines(course)
    return {line: origin for line, origin in secrets.items() if line not in given}


def _given_lines(course: Course) -> set[str]:
    """Lines outside the solution regions of the reference files: what every stub hands out."""
    return {line.strip() for _, _, rest in _reference_regions(course) for line in rest}


def _reference_regions(course: Course) -> Iterator[tuple[str, list[str], list[str]]]:
    """(origin, lines inside the solution regions, lines outside) of every file a student edits."""
    for exercise in course.exercises:
        for name in exercise.files:
            body, rest = _split_regions((course.solution_dir(exercise) / name).read_text())
            yield f"solutions/{exercise.dirname}/{name}", body, rest


def _generic(line: str) -> bool:
    names = re.findall(r"[A-Za-z_]\w*", line.split("#", 1)[0])
    return line in GENERIC_LINES or all(name in _PYTHON_WORDS for name in names)


_PYTHON_WORDS = frozenset(keyword.kwlist) | frozenset(dir(builtins))


def _split_regions(source: str) -> tuple[list[str], list[str]]:
    """(lines inside BEGIN/END SOLUTION regions, lines outside them)."""
    inside = False
    body: list[str] = []
    rest: list[str] = []
    for line in source.splitlines():
        if "END SOLUTION" in line:
            inside = False
        (body if inside else rest).append(line)
        if "BEGIN SOLUTION" in line:
            inside = True
    return body, rest


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


def _public_sources(course: Course) -> list[Path]:
    stubs = {course.exercise_dir(e) / name for e in course.exercises for name in e.files}
    folders = [course.root / "grader", course.root / "coursekit", course.root / "exercises"]
    return [p for f in folders for p in f.rglob("*") if p.is_file() and p not in stubs and p.suffix != ".pyc"]


def find_leaks(course: Course, bundle: Path) -> list[str]:
    """'<bundle file>: a line from <origin>' for every hidden-suite line in any bundle file and every
    reference-body line in any bundle file outside ``NOT_SCANNED``."""
    hidden, bodies = hidden_suite_lines(course), solution_lines(course)
    leaks = []
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        where = path.relative_to(bundle)
        try:
            lines = {ln.strip() for ln in path.read_text().splitlines()}
        except UnicodeDecodeError:
            continue
        secrets = hidden if where.parts[0] in NOT_SCANNED else {**bodies, **hidden}
        leaks += [f"{where}: a line from {secrets[ln]}: {ln!r}" for ln in sorted(lines & secrets.keys())]
    if (bundle / "solutions").exists():
        leaks.append("solutions/ is in the bundle")
    return leaks
