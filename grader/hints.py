"""Hints, revealed one at a time: ``exercises/NN_slug/hints.md``, in the order the exercise defines.

The format is strict so that a typo cannot hide or reorder a hint::

    # Hints: exercise 02, ring and tree algorithms

    ## Hint 1: the title says what the hint is about
    Markdown text, at least one line.

    ## Hint 2: ...

Only the ``# `` title line and blank lines may come before ``## Hint 1``; hints are numbered 1, 2, 3...
with no gap; every other ``## `` heading is an error. Errors are ``HintsError`` naming file:line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.course import Course, Exercise

HINTS_FILE = "hints.md"
_HEADING = re.compile(r"^## Hint (\d+): (\S.*)$")


class HintsError(ValueError):
    """A hints.md that does not follow the format; the message names file:line."""


@dataclass(frozen=True)
class Hint:
    number: int
    title: str
    text: str


def load_hints(path: Path) -> list[Hint]:
    """Parse and validate ``path``; an exercise without the file has no hints (``[]``)."""
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    where = f"{path.parent.name}/{path.name}"
    if not lines or not lines[0].startswith("# "):
        raise HintsError(f"{where}:1: expected a '# ' title line first")
    hints: list[tuple[int, int, str, list[str]]] = []  # (line, number, title, body lines)
    for i, line in enumerate(lines[1:], start=2):
        if line.startswith("## "):
            match = _HEADING.match(line)
            if not match:
                raise HintsError(f"{where}:{i}: expected '## Hint N: title', got {line!r}")
            number = int(match[1])
            if number != len(hints) + 1:
                raise HintsError(f"{where}:{i}: hint {number} where hint {len(hints) + 1} was expected")
            hints.append((i, number, match[2].strip(), []))
        elif line.startswith("# "):
            raise HintsError(f"{where}:{i}: a second '# ' title")
        elif hints:
            hints[-1][3].append(line)
        elif line.strip():
            raise HintsError(f"{where}:{i}: text before '## Hint 1'")
    if not hints:
        raise HintsError(f"{where}: no '## Hint 1: ...' heading")
    for line_no, number, _, body in hints:
        if not "\n".join(body).strip():
            raise HintsError(f"{where}:{line_no}: hint {number} has no text")
    return [Hint(number, title, "\n".join(body).strip()) for _, number, title, body in hints]


def hints_for(course: Course, exercise: Exercise) -> list[Hint]:
    """The exercise's hints, in order; ``[]`` when it has none."""
    return load_hints(course.exercise_dir(exercise) / HINTS_FILE)
