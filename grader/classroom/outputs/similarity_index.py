"""Fingerprints of a file's tokens, and the index that finds which files share any.

Winnowing (Schleimer, Wilkerson and Aiken, "Winnowing: local algorithms for document fingerprinting",
SIGMOD 2003, section 3): hash every run of ``K`` consecutive tokens (a k-gram) of a unit; in every window
of ``WINDOW`` consecutive k-grams keep the smallest hash, the rightmost when tied (their definition 1).
Two guarantees follow (their section 3.1): a match shorter than ``K`` tokens is never found
(the noise threshold), and one of at least ``GUARANTEE`` = ``K + WINDOW - 1`` tokens always is.
k-grams never span two units, so the order of the functions does not matter.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from grader.classroom.outputs.similarity_lexer import Tokens, Unit

K = 17
"""Tokens per k-gram: the noise threshold (Dolos's default, measured on tests/test_similarity.py: see
docs/instructors.md)."""
WINDOW = 12
"""k-grams per window (Dolos's default): about one fingerprint in every (WINDOW + 1) / 2 = 9 k-grams."""
GUARANTEE = K + WINDOW - 1
"""A match at least this many tokens long is always found."""
_BASE = np.uint64(0x100000001B3)


@dataclass(frozen=True)
class Print:
    """A file's fingerprints: each kept hash, with the token positions of its k-gram's first token."""

    hashes: dict[int, tuple[int, ...]]
    lines: tuple[int, ...]
    """The source line of each token, by position (the units one after the other)."""
    parsed: bool

    @cached_property
    def masks(self) -> dict[int, int]:
        """For each hash, the tokens its k-grams cover, as the bits of an integer (bit i: token i)."""
        run = (1 << K) - 1
        masks = {}
        for h, positions in self.hashes.items():
            mask = 0
            for position in positions:
                mask |= run << position
            masks[h] = mask
        return masks

    @cached_property
    def own(self) -> int:
        """Tokens covered by the fingerprints: the file's code that counts."""
        return self.covered_by(self.hashes)

    def covered_by(self, hashes: Iterable[int]) -> int:
        """Tokens covered by those of the fingerprints whose hash is in ``hashes`` (each one of them)."""
        return self.coverage(hashes).bit_count()

    def coverage(self, hashes: Iterable[int]) -> int:
        """The tokens covered by the fingerprints of ``hashes`` (each one of them), as ``masks`` has them."""
        mask, masks = 0, self.masks
        for h in hashes:
            mask |= masks[h]
        return mask

    def without(self, hashes: set[int] | frozenset[int]) -> Print:
        kept = {h: positions for h, positions in self.hashes.items() if h not in hashes}
        return Print(kept, self.lines, self.parsed)


def fingerprint(tokens: Tokens) -> Print:
    """The winnowed fingerprints of every unit of ``tokens``."""
    hashes: dict[int, list[int]] = defaultdict(list)
    start = 0
    for unit in tokens.units:
        grams = _kgram_hashes(unit)
        for position in _winnowed(grams):
            hashes[int(grams[position])].append(start + int(position))
        start += len(unit.tokens)
    lines = tuple(line for unit in tokens.units for line in unit.lines)
    return Print({h: tuple(p) for h, p in hashes.items()}, lines, tokens.parsed)


def every_kgram(tokens: Tokens) -> set[int]:
    """Every k-gram hash of ``tokens``, not only the winnowed ones: what boilerplate takes out."""
    return {int(h) for unit in tokens.units for h in _kgram_hashes(unit)}


def covered_lines(print_: Print, hashes: Iterable[int]) -> set[int]:
    """The source lines of the tokens the k-grams of ``hashes`` (each one of ``print_``'s) cover."""
    bits = f"{print_.coverage(hashes):b}"[::-1]  # bits[i] == "1": token i is covered
    lines: set[int] = set()
    for run in re.finditer("1+", bits):
        lines.update(print_.lines[run.start() : run.end()])
    return lines


def pairs_sharing(prints: dict[str, dict[str, Print]]) -> set[tuple[str, str]]:
    """Every two holders that share at least one fingerprint of a file of the same name, in name order:
    the index (fingerprint -> holders) gives them without comparing every holder with every other."""
    holders: dict[tuple[str, int], list[str]] = defaultdict(list)
    for holder in sorted(prints):
        for name, print_ in prints[holder].items():
            for h in print_.hashes:
                holders[name, h].append(holder)
    pairs: set[tuple[str, str]] = set()
    for group in holders.values():
        if len(group) > 1:
            pairs.update(itertools.combinations(group, 2))
    return pairs


# ---------------------------------------------------------------------------------------------------------
# hashing and winnowing


def _kgram_hashes(unit: Unit) -> npt.NDArray[np.uint64]:
    """The hash of each k-gram of ``unit`` (none when it has fewer than ``K`` tokens): a polynomial over
    the tokens' own 64-bit hashes, then a 64-bit finalizer so that the smallest hashes are spread evenly."""
    count = len(unit.tokens) - K + 1
    if count < 1:
        return np.zeros(0, dtype=np.uint64)
    each = np.fromiter((_token_hash(t) for t in unit.tokens), dtype=np.uint64, count=len(unit.tokens))
    grams = np.zeros(count, dtype=np.uint64)
    for offset in range(K):
        grams = grams * _BASE + each[offset : offset + count]
    return _mix(grams)


def _mix(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finalizer (Steele, Lea and Flood, OOPSLA 2014)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: npt.NDArray[np.uint64] = h ^ (h >> np.uint64(31))
    return mixed


_TOKEN_HASHES: dict[str, int] = {}


def _token_hash(token: str) -> int:
    """A token's 64-bit hash, the same in every process (Python's ``hash`` of a string is not)."""
    found = _TOKEN_HASHES.get(token)
    if found is None:
        found = _TOKEN_HASHES[token] = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest())
    return found


def _winnowed(grams: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """The positions robust winnowing keeps: in each window of ``WINDOW`` hashes, the rightmost smallest."""
    if len(grams) == 0:
        return np.zeros(0, dtype=np.int64)
    width = min(WINDOW, len(grams))
    windows = np.lib.stride_tricks.sliding_window_view(grams, width)
    rightmost = width - 1 - np.argmin(windows[:, ::-1], axis=1)
    return np.unique(np.arange(len(windows)) + rightmost)
