"""Similarity across a class: which students' editable files share code that neither the stub nor the given
code explains.

Built on copydetect (MIT; https://github.com/blingenf/copydetect): each file is tokenized with Pygments and
normalized (every variable name becomes ``V``, every function name ``F``, every string ``S``; comments and
whitespace go), then fingerprinted by winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003) over k-grams
of ``NOISE`` normalized characters. Renaming and reformatting therefore change nothing.

What never counts:
- the boilerplate: every k-gram of the exercise's stubs and of the other Python files the exercise folder
  hands out (rank programs, public tests), so the shared starting point is no match;
- common code: a k-gram that more than half of the class holds (and at least ``COMMON_MIN`` students) is
  what the task makes everyone write, as Moss's ``-m`` option treats it.

A pair's score is the share of the two students' own code (what is left after the boilerplate), taken
together, that the other one also has: JPlag's average similarity, so that a short piece of a prescribed
algorithm found in a long file scores low. Each student's share is reported beside it. A pair is flagged
when the score reaches the threshold and the shared code is at least ``MIN_SHARED`` normalized characters:
two short functions alike by necessity are no evidence. Similarity is a reason to look at two
submissions, never a verdict.
"""

from __future__ import annotations

import io
import itertools
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.course import Course, Exercise
from grader.core.errors import UsageError
from grader.core.submission import stage

NOISE = 25
"""k: the shortest run of normalized characters that can match (copydetect's default noise threshold)."""
DEFAULT_THRESHOLD = 0.5
"""Flag a pair when half of the two students' own code is in common (``--threshold`` changes it)."""
MIN_SHARED = 100
"""Normalized characters two files must share before a pair can be flagged: about a dozen lines of code."""
COMMON_MIN = 3
"""Fewer students than this never make a k-gram common, however small the class."""


@dataclass(frozen=True)
class FileMatch:
    """One editable file of a pair, both students' texts and where they match."""

    name: str
    texts: tuple[str, str]
    regions: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
    """For each side, the (start, end) character offsets in its text of the code the other side also has."""


@dataclass(frozen=True)
class Pair:
    students: tuple[str, str]
    score: float
    """The share of the two students' own code, together, that the other one also has (JPlag's average
    similarity): 1 for a copy, low when one short piece of one is in the other."""
    shares: tuple[float, float]
    """For each student, the share of their own code (boilerplate and common code left out) found in the
    other's: a part copied into a larger whole shows here first."""
    shared: int
    """Normalized characters in common (the larger side's count)."""
    files: tuple[FileMatch, ...]


@dataclass(frozen=True)
class Similarity:
    """Every pair with any code in common, most similar first, and what the comparison was."""

    exercise: Exercise
    students: tuple[str, ...]
    """Everyone compared: the students with at least one of the exercise's files."""
    pairs: tuple[Pair, ...]
    threshold: float
    boilerplate: tuple[str, ...]
    """The course files whose code never counts, relative to the course root."""
    given_lines: frozenset[str] = frozenset()
    """Their lines, stripped: a match runs over them where it starts or ends inside given code, and the
    report does not mark them."""

    def flagged(self) -> list[Pair]:
        """The pairs to look at: score at least the threshold and at least ``MIN_SHARED`` in common."""
        return [p for p in self.pairs if p.score >= self.threshold and p.shared >= MIN_SHARED]


def compare_class(
    course: Course,
    exercise: Exercise,
    texts: dict[str, dict[str, str]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> Similarity:
    """Compare every student's editable files with every other student's; ``texts`` maps a student to the
    text of each of their staged files, by name (a batch's ``Member.texts``, or ``read_submissions``)."""
    if not 0 < threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {threshold:g}")
    given = sorted(course.exercise_dir(exercise).glob("*.py"))
    boilerplate = _hashes(given)
    texts = {student: files for student, files in sorted(texts.items()) if files}
    prints = {
        student: {name: _fingerprint(name, text, boilerplate) for name, text in files.items()}
        for student, files in texts.items()
    }
    _drop_common(prints)
    pairs = [
        pair
        for a, b in itertools.combinations(sorted(prints), 2)
        if (pair := _compare(a, b, prints[a], prints[b])) is not None
    ]
    pairs.sort(key=lambda p: (-p.score, -p.shared, p.students))
    return Similarity(
        exercise=exercise,
        students=tuple(sorted(prints)),
        pairs=tuple(pairs),
        threshold=threshold,
        boilerplate=tuple(str(p.relative_to(course.root)) for p in given),
        given_lines=frozenset(line.strip() for p in given for line in p.read_text().splitlines()),
    )


def read_submissions(exercise: Exercise, submissions: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Each student's files as grading reads them (staged: only the exercise's files, no link followed), by
    student and name; those missing or refused are left out. For ``grade similarity`` outside a batch: a
    batch compares the files it staged already."""
    texts = {}
    with tempfile.TemporaryDirectory(prefix="distgpu-similarity-") as folder:
        for student, source in submissions.items():
            staged = stage(source, exercise.files, Path(folder) / student)
            texts[student] = {
                name: (Path(folder) / student / name).read_text(errors="replace") for name in staged.taken
            }
    return texts


# ---------------------------------------------------------------------------------------------------------
# fingerprints: copydetect's, with the boilerplate and the common code taken out afterwards


def _fingerprint(name: str, text: str, boilerplate: set[int]) -> Any:
    """copydetect's fingerprint of ``text`` (named ``name`` for its lexer), boilerplate k-grams removed.

    copydetect can remove boilerplate itself, but through ``np.intersect1d(assume_unique=True)`` on hashes
    that repeat within a file, which also drops every k-gram a file holds twice; hence the removal here."""
    from copydetect import CodeFingerprint

    fingerprint = CodeFingerprint(name, NOISE, 1, fp=io.StringIO(text))
    _remove(fingerprint, boilerplate)
    return fingerprint


def _hashes(paths: list[Path]) -> set[int]:
    from copydetect import CodeFingerprint

    found: set[int] = set()
    for path in paths:
        found |= set(CodeFingerprint(path.name, NOISE, 1, fp=io.StringIO(path.read_text())).hashes)
    return found


def _remove(fingerprint: Any, hashes: set[int]) -> None:
    from copydetect.utils import get_token_coverage

    fingerprint.hashes = fingerprint.hashes - hashes
    fingerprint.hash_idx = {h: i for h, i in fingerprint.hash_idx.items() if h not in hashes}
    fingerprint.token_coverage = get_token_coverage(
        fingerprint.hash_idx, NOISE, len(fingerprint.filtered_code)
    )


def _drop_common(prints: dict[str, dict[str, Any]]) -> None:
    """Remove, file by file, the k-grams more than half of the class holds (and ``COMMON_MIN`` at least)."""
    holders: dict[tuple[str, int], int] = defaultdict(int)
    for files in prints.values():
        for name, fingerprint in files.items():
            for h in fingerprint.hashes:
                holders[name, h] += 1
    floor = max(COMMON_MIN, len(prints) // 2 + 1)
    common: dict[str, set[int]] = defaultdict(set)
    for (name, h), count in holders.items():
        if count >= floor:
            common[name].add(h)
    for files in prints.values():
        for name, fingerprint in files.items():
            _remove(fingerprint, common[name])


# ---------------------------------------------------------------------------------------------------------
# a pair


def _compare(a: str, b: str, files_a: dict[str, Any], files_b: dict[str, Any]) -> Pair | None:
    """The pair's shares over the files both have; None when they share no code at all."""
    from copydetect import compare_files

    overlap = [0.0, 0.0]
    coverage = [0.0, 0.0]
    matches = []
    for name in sorted(files_a.keys() & files_b.keys()):
        first, second = files_a[name], files_b[name]
        coverage[0] += first.token_coverage
        coverage[1] += second.token_coverage
        tokens, (share_a, share_b), (slices_a, slices_b) = compare_files(first, second)
        if not tokens:
            continue
        overlap[0] += share_a * first.token_coverage
        overlap[1] += share_b * second.token_coverage
        matches.append(
            FileMatch(name, (first.raw_code, second.raw_code), (_regions(slices_a), _regions(slices_b)))
        )
    if not matches:
        return None
    score = float(sum(overlap) / sum(coverage))
    shares = (float(overlap[0] / coverage[0]), float(overlap[1] / coverage[1]))
    return Pair((a, b), score, shares, int(max(overlap)), tuple(matches))


def _regions(slices: Any) -> tuple[tuple[int, int], ...]:
    return tuple((int(start), int(end)) for start, end in zip(slices[0], slices[1], strict=True))
