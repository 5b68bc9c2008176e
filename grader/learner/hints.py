"""Hints, a ladder per part, revealed one at a time: ``exercises/NN_slug/hints.md``.

The format is strict so that a typo cannot hide or reorder a hint::

    # Hints: exercise 02, ring and tree algorithms

    ## Part ring_allreduce

    ### Hint 1: the concept, first
    Markdown text, at least one line.

    ### Hint 2: then the method
    ...

    ## Part tree_allreduce

    ### Hint 1: ...

Only the ``# `` title line and blank lines may come before the first ``## Part``; each part names a part of
the exercise in course.yml, at most once; its hints are numbered 1, 2, 3... with no gap. Every other ``#``
heading level is an error (a hint's text may not use headings). Errors are ``HintsError`` naming file:line.
A ladder goes from the idea to the method to something close to the code; the course requires three or more
rungs per part (tests/test_hints.py), the parser only one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.core.course import Course, Exercise
from grader.core.errors import EnvironmentFailure, UsageError
from grader.learner.progress import ProgressError, ProgressStore

HINTS_FILE = "hints.md"
_PART = re.compile(r"^## Part (\w+)\s*$")
_HINT = re.compile(r"^### Hint (\d+): (\S.*)$")


class HintsError(UsageError):
    """A hints.md that does not follow the format; the message names file:line."""


@dataclass(frozen=True)
class Hint:
    number: int
    title: str
    text: str


@dataclass
class _Ladder:
    part: str
    line: int
    hints: list[tuple[int, int, str, list[str]]]  # (line, number, title, body lines)


def load_hints(path: Path, parts: list[str] | None = None) -> dict[str, list[Hint]]:
    """Parse and validate ``path`` into {part name: ladder}, in file order; ``{}`` when there is no file.

    With ``parts`` (the exercise's part names), a ladder for any other name is an error."""
    if not path.is_file():
        return {}
    lines = path.read_text().splitlines()
    where = f"{path.parent.name}/{path.name}"
    if not lines or not lines[0].startswith("# "):
        raise HintsError(f"{where}:1: expected a '# ' title line first")
    ladders: list[_Ladder] = []
    for i, line in enumerate(lines[1:], start=2):
        if line.startswith("#"):
            ladders = _heading(line, f"{where}:{i}", i, ladders, parts)
        elif ladders and ladders[-1].hints:
            ladders[-1].hints[-1][3].append(line)
        elif line.strip():
            raise HintsError(f"{where}:{i}: text outside a hint (each needs its '### Hint N: title')")
    if not ladders:
        raise HintsError(f"{where}: no '## Part NAME' heading")
    return {ladder.part: _finished(ladder, where) for ladder in ladders}


def _heading(line: str, at: str, i: int, ladders: list[_Ladder], parts: list[str] | None) -> list[_Ladder]:
    if part := _PART.match(line):
        name = part[1]
        if parts is not None and name not in parts:
            raise HintsError(f"{at}: no part {name!r} in this exercise (it has {', '.join(parts)})")
        if any(ladder.part == name for ladder in ladders):
            raise HintsError(f"{at}: a second ladder for part {name!r}")
        return [*ladders, _Ladder(name, i, [])]
    if hint := _HINT.match(line):
        if not ladders:
            raise HintsError(f"{at}: a hint before the first '## Part NAME'")
        ladder, number = ladders[-1], int(hint[1])
        if number != len(ladder.hints) + 1:
            raise HintsError(f"{at}: hint {number} where hint {len(ladder.hints) + 1} was expected")
        ladder.hints.append((i, number, hint[2].strip(), []))
        return ladders
    raise HintsError(f"{at}: expected '## Part NAME' or '### Hint N: title', got {line!r}")


def _finished(ladder: _Ladder, where: str) -> list[Hint]:
    if not ladder.hints:
        raise HintsError(f"{where}:{ladder.line}: part {ladder.part!r} has no '### Hint 1: ...'")
    for line_no, number, _, body in ladder.hints:
        if not "\n".join(body).strip():
            raise HintsError(f"{where}:{line_no}: hint {number} of {ladder.part!r} has no text")
    return [Hint(number, title, "\n".join(body).strip()) for _, number, title, body in ladder.hints]


def hints_for(course: Course, exercise: Exercise) -> dict[str, list[Hint]]:
    """The exercise's ladders by part name, in course order; ``{}`` when it has no hints.md."""
    names = [part.name for part in exercise.parts]
    ladders = load_hints(course.exercise_dir(exercise) / HINTS_FILE, names)
    return {name: ladders[name] for name in names if name in ladders}


def hinted_part(asked: str | None, exercise: Exercise, parts: list[str]) -> str | None:
    """The part a ``grade hint`` call means among ``parts`` (those with hints): the one ``asked`` for
    ('ring_allreduce' or '02.ring_allreduce'), else the only one, else None (show the menu); ``UsageError``
    naming the parts for one without hints."""
    if asked is None:
        return parts[0] if len(parts) == 1 else None
    name = asked.removeprefix(f"{exercise.key}.")
    if name not in parts:
        raise UsageError(
            f"exercise {exercise.key} has no hints for part {asked!r}; it has: {', '.join(parts)}"
        )
    return name


def progress_key(exercise: Exercise, part: str) -> str:
    """How the progress store counts a ladder: by part id ('02.ring_allreduce')."""
    return f"{exercise.key}.{part}"


def reveal_next(
    store: ProgressStore, course: Course, exercise: Exercise, part: str, hints: list[Hint]
) -> int:
    """Count one more hint of ``part`` as revealed in ``store`` (never more than its ``hints``) and return how
    many are now revealed: the last of them is the one to show. ``EnvironmentFailure`` when the store cannot
    count them: then no hint may be shown."""
    key = progress_key(exercise, part)
    try:
        shown = min(store.hints_revealed(course.title, key) + 1, len(hints))
        store.set_hints_revealed(course.title, key, shown)
    except ProgressError as exc:
        raise EnvironmentFailure(f"cannot count your hints, so none is shown: {exc}") from None
    return shown
