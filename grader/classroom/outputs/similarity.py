"""Similarity across a class: which students' editable files share code that neither the stub nor the given
code explains, with whom, and whether a known source (the course's reference, ``--against``) is among them.

How a file is read (``similarity_tokens``): tokens from its syntax tree, names replaced by their role,
docstrings and comments gone, each function on its own; a file that does not parse falls back to the lexer
(and is then compared by the lexer's tokens with everyone). How it is fingerprinted (``similarity_index``):
winnowing, ``K`` tokens a k-gram and ``WINDOW`` k-grams a window. Pairs to compare come from an index of
fingerprints, not from every student against every other.

What never counts: the boilerplate, every k-gram of the exercise's stubs and of the other Python files its
folder hands out (rank programs, public tests), as JPlag's base code. Nothing is dropped for being popular
unless ``common_min`` is given: then a fingerprint more than ``common_min`` students hold is ignored, as
Moss's ``-m``, except where the reference has it too (a match with the reference is never common code).

A pair's score is the share of the two sides' own code (what is left after the boilerplate), taken
together, that the other side also has: JPlag's average similarity, so that a short piece of a prescribed
algorithm found in a long file scores low. A pair is flagged when the score reaches the threshold and the
shared code is at least ``MIN_SHARED`` tokens long: short idioms alike by necessity are no evidence.
Flagged pairs form clusters (``similarity_clusters``). Similarity is a reason to look at two submissions,
never a verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from grader.classroom.outputs.similarity_clusters import Cluster, find_clusters
from grader.classroom.outputs.similarity_index import (
    Print,
    covered_lines,
    every_kgram,
    fingerprint,
    pairs_sharing,
)
from grader.classroom.outputs.similarity_lexer import Tokens, lexed
from grader.classroom.outputs.similarity_pair import FileMatch, Pair, flags
from grader.classroom.outputs.similarity_sources import SourceKind, known_sources
from grader.classroom.outputs.similarity_tokens import tokenize
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError

DEFAULT_THRESHOLD = 0.5
"""Flag a pair when half of the two sides' own code is in common (``--threshold`` changes it)."""


@dataclass(frozen=True)
class Similarity:
    """Every pair with any fingerprint in common, most similar first, and what the comparison was."""

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
    sources: Mapping[str, SourceKind] = field(default_factory=dict)
    """The known sources compared with every student, by label."""
    common_min: int | None = None
    """A fingerprint more than this many students hold was ignored (Moss's ``-m``); None: none was."""
    clusters: tuple[Cluster, ...] = ()
    unparsed: tuple[str, ...] = ()
    """``who/file`` of the files that do not parse, compared by the lexer's tokens instead."""

    def flagged(self) -> list[Pair]:
        """The pairs to look at: score at least the threshold and at least ``MIN_SHARED`` in common."""
        return [p for p in self.pairs if flags(p, self.threshold)]

    def reference(self) -> str | None:
        """The course reference's label, when it was compared."""
        return next((s for s, kind in self.sources.items() if kind is SourceKind.REFERENCE), None)


def compare_class(
    course: Course,
    exercise: Exercise,
    texts: dict[str, dict[str, str]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    against: Sequence[Path] = (),
    common_min: int | None = None,
) -> Similarity:
    """Compare every student's editable files with every other student's and with every known source (the
    reference, each submission in the ``against`` paths); ``texts`` maps a student to the text of each of
    their staged files, by name (a batch's ``Member.texts``, or ``read_submissions``)."""
    if not 0 < threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {threshold:g}")
    if common_min is not None and common_min < 1:
        raise UsageError(f"--common-min must be at least 1, got {common_min}")
    sources = known_sources(course, exercise, against)
    texts = {student: files for student, files in sorted(texts.items()) if files}
    texts |= {source.label: source.files for source in sources}
    given = sorted(course.exercise_dir(exercise).glob("*.py"))
    kinds = {source.label: source.kind for source in sources}
    prints = _Prints(texts, given, kinds, common_min)
    pairs = sorted(
        (p for a, b in prints.candidates() if (p := prints.pair(a, b, threshold)) is not None),
        key=lambda p: (-p.score, -p.shared, p.students),
    )
    flagged = [p for p in pairs if flags(p, threshold)]
    return Similarity(
        exercise=exercise,
        students=tuple(sorted(set(texts) - set(kinds))),
        pairs=tuple(pairs),
        threshold=threshold,
        boilerplate=tuple(str(p.relative_to(course.root)) for p in given),
        given_lines=frozenset(line.strip() for p in given for line in p.read_text().splitlines()),
        sources=kinds,
        common_min=common_min,
        clusters=find_clusters(flagged, prints.in_cluster, set(kinds)),
        unparsed=prints.unparsed,
    )


# ---------------------------------------------------------------------------------------------------------
# everyone's fingerprints


class _Prints:
    """Everyone's fingerprints, file by file, boilerplate (and common code) taken out. ``trees``: from
    the syntax tree, or the lexer's for a file that does not parse; ``lexed``: the lexer's for every file,
    made only when a file does not parse (a pair where one side does not parse is compared by these)."""

    def __init__(
        self,
        texts: dict[str, dict[str, str]],
        given: list[Path],
        sources: dict[str, SourceKind],
        common: int | None,
    ) -> None:
        self.texts, self.sources = texts, sources
        tokens = {
            who: {name: tokenize(text, name) for name, text in files.items()} for who, files in texts.items()
        }
        self.unparsed = tuple(
            f"{who}/{name}"
            for who, files in sorted(tokens.items())
            for name, t in files.items()
            if not t.parsed
        )
        self.trees = self._from(tokens, [tokenize(p.read_text(), p.name) for p in given], common)
        self.lexed: dict[str, dict[str, Print]] = {}
        if self.unparsed:
            lexer = {
                who: {name: lexed(text, name) for name, text in files.items()} for who, files in texts.items()
            }
            self.lexed = self._from(lexer, [lexed(p.read_text(), p.name) for p in given], common)

    def _from(
        self, tokens: dict[str, dict[str, Tokens]], given: list[Tokens], common: int | None
    ) -> dict[str, dict[str, Print]]:
        boilerplate = set().union(*(every_kgram(t) for t in given))
        prints = {
            who: {name: fingerprint(t).without(boilerplate) for name, t in files.items()}
            for who, files in tokens.items()
        }
        if common is None:
            return prints
        dropped = self._common(prints, common)
        return {
            who: {name: p.without(dropped[name]) for name, p in files.items()}
            for who, files in prints.items()
        }

    def _common(self, prints: dict[str, dict[str, Print]], most: int) -> dict[str, set[int]]:
        """By file name, the fingerprints more than ``most`` students hold and the reference does not."""
        holders: Counter[tuple[str, int]] = Counter(
            (name, h)
            for who, files in prints.items()
            if who not in self.sources
            for name, p in files.items()
            for h in p.hashes
        )
        reference = {who for who, kind in self.sources.items() if kind is SourceKind.REFERENCE}
        kept = {(name, h) for who in reference for name, p in prints[who].items() for h in p.hashes}
        dropped: dict[str, set[int]] = {name: set() for files in prints.values() for name in files}
        for (name, h), count in holders.items():
            if count > most and (name, h) not in kept:
                dropped[name].add(h)
        return dropped

    def of(self, who: str, name: str, *, lexer: bool) -> Print:
        return (self.lexed if lexer else self.trees)[who][name]

    def candidates(self) -> list[tuple[str, str]]:
        """The pairs sharing any fingerprint, a student first; never two sources."""
        found = pairs_sharing(self._parsed())
        if self.lexed:
            unparsed = {who for who, files in self.trees.items() if not all(p.parsed for p in files.values())}
            found |= {pair for pair in pairs_sharing(self.lexed) if unparsed & set(pair)}
        pairs = {(b, a) if a in self.sources else (a, b) for a, b in found}
        return sorted((a, b) for a, b in pairs if a not in self.sources)

    def _parsed(self) -> dict[str, dict[str, Print]]:
        return {who: {name: p for name, p in files.items() if p.parsed} for who, files in self.trees.items()}

    def in_cluster(self, members: set[str]) -> dict[str, dict[str, Print]]:
        """The members' prints, by the lexer for every file of a name that one of them does not parse."""
        names = {name for who in members for name in self.trees[who]}
        by_lexer = {name for name in names if any(not p.parsed for p in self._named(members, name).values())}
        return {
            who: {name: self.of(who, name, lexer=name in by_lexer) for name in self.trees[who]}
            for who in members
        }

    def _named(self, members: set[str], name: str) -> dict[str, Print]:
        return {who: self.trees[who][name] for who in members if name in self.trees[who]}

    def pair(self, a: str, b: str, threshold: float) -> Pair | None:
        """The pair's shares over the files both have; None when they share no code at all."""
        overlap, own, lexer, common = [0, 0], [0, 0], False, {}
        for name in sorted(self.trees[a].keys() & self.trees[b].keys()):
            by_lexer = not (self.trees[a][name].parsed and self.trees[b][name].parsed)
            first, second = self.of(a, name, lexer=by_lexer), self.of(b, name, lexer=by_lexer)
            common[name] = shared = first.hashes.keys() & second.hashes.keys()
            overlap = [overlap[0] + first.covered_by(shared), overlap[1] + second.covered_by(shared)]
            own = [own[0] + first.own, own[1] + second.own]
            lexer = lexer or by_lexer
        if not sum(overlap):
            return None
        shares = (overlap[0] / own[0], overlap[1] / own[1])
        pair = Pair((a, b), sum(overlap) / sum(own), shares, max(overlap), (), lexer)
        if not flags(pair, threshold):
            return pair
        files = tuple(self._match(a, b, name, shared) for name, shared in common.items() if shared)
        return Pair(pair.students, pair.score, pair.shares, pair.shared, files, lexer)

    def _match(self, a: str, b: str, name: str, shared: set[int]) -> FileMatch:
        by_lexer = not (self.trees[a][name].parsed and self.trees[b][name].parsed)
        texts = (self.texts[a][name], self.texts[b][name])
        regions = tuple(
            _regions(text, covered_lines(self.of(who, name, lexer=by_lexer), shared))
            for who, text in zip((a, b), texts, strict=True)
        )
        return FileMatch(name, texts, (regions[0], regions[1]))


def _regions(text: str, lines: set[int]) -> tuple[tuple[int, int], ...]:
    """Each of ``lines`` (1-based) as (start, end) character offsets in ``text``, indentation left out."""
    spans = _line_spans(text)
    return tuple(spans[number - 1] for number in sorted(lines) if number <= len(spans))


@lru_cache(maxsize=256)
def _line_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Each line's (start, end) character offsets in ``text``, without its indentation and line break."""
    spans, start = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        spans.append((start + len(body) - len(body.lstrip()), start + len(body)))
        start += len(line)
    return tuple(spans)
