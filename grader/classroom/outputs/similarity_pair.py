"""A pair of sides compared (two students, or a student and a known source) and what they share."""

from __future__ import annotations

from dataclasses import dataclass

MIN_SHARED = 64
"""Tokens two files must share before a pair can be flagged: about eight lines of code (the reference of
exercise 02 holds 826 tokens in about 110 lines of code)."""


@dataclass(frozen=True)
class FileMatch:
    """One editable file of a pair, both sides' texts and where they match."""

    name: str
    texts: tuple[str, str]
    regions: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
    """For each side, the (start, end) character offsets in its text of the lines holding code the other
    side also has."""


@dataclass(frozen=True)
class Pair:
    students: tuple[str, str]
    """The two sides: two students, or a student and a source (second; its label holds a ``/``)."""
    score: float
    """The share of the two sides' own code, together, that the other one also has (JPlag's average
    similarity): 1 for a copy, low when one short piece of one is in the other."""
    shares: tuple[float, float]
    """For each side, the share of its own code found in the other's: a part copied into a larger whole
    shows here first."""
    shared: int
    """Tokens in common (the larger side's count)."""
    files: tuple[FileMatch, ...]
    """Both sides' files and the code they share: for a flagged pair only (the report shows no other)."""
    lexed: bool = False
    """Compared by the lexer's tokens: a file of one side does not parse."""


def flags(pair: Pair, threshold: float) -> bool:
    """Whether ``pair`` is one to look at: its score reaches ``threshold`` and it shares ``MIN_SHARED``."""
    return pair.score >= threshold and pair.shared >= MIN_SHARED
