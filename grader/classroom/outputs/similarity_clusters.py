"""Clusters: who shares code with whom, as one group rather than every pair of it (Dolos's view).

A cluster is a connected component of the graph whose edges are the flagged pairs: three students who
hand in one file are one cluster of three, with three pairs; 21 students who copied one leaked solution
are one cluster of 21, and the reference is in it when that solution was the reference.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from grader.classroom.outputs.similarity_index import Print
from grader.classroom.outputs.similarity_pair import Pair


@dataclass(frozen=True)
class Cluster:
    students: tuple[str, ...]
    sources: tuple[str, ...]
    """The known sources in it (the reference, ``--against``), by label."""
    strongest: Pair
    """Its pair with the highest score."""
    pairs: int
    """Flagged pairs within it."""
    together: float
    """The share of its students' own code that another member of the cluster also has."""

    @property
    def members(self) -> tuple[str, ...]:
        return self.students + self.sources


def find_clusters(
    flagged: list[Pair],
    prints: Callable[[set[str]], dict[str, dict[str, Print]]],
    sources: set[str],
) -> tuple[Cluster, ...]:
    """The clusters of the ``flagged`` pairs, largest first (then the strongest); ``prints`` gives the
    members' fingerprints, file by file."""
    parent: dict[str, str] = {}

    def root(who: str) -> str:
        while parent.setdefault(who, who) != who:
            parent[who] = parent[parent[who]]
            who = parent[who]
        return who

    for pair in flagged:
        parent[root(pair.students[0])] = root(pair.students[1])
    groups: dict[str, set[str]] = {}
    for who in parent:
        groups.setdefault(root(who), set()).add(who)
    clusters = [_cluster(members, flagged, prints(members), sources) for members in groups.values()]
    return tuple(sorted(clusters, key=lambda c: (-len(c.members), -c.strongest.score, c.members)))


def _cluster(
    members: set[str], flagged: list[Pair], prints: dict[str, dict[str, Print]], sources: set[str]
) -> Cluster:
    inside = [p for p in flagged if p.students[0] in members]
    students = sorted(members - sources)
    return Cluster(
        students=tuple(students),
        sources=tuple(sorted(members & sources)),
        strongest=max(inside, key=lambda p: (p.score, p.shared)),
        pairs=len(inside),
        together=_together(students, prints),
    )


def _together(students: list[str], prints: dict[str, dict[str, Print]]) -> float:
    """The share of the students' own code, file by file, whose fingerprints another member also holds."""
    holders: Counter[tuple[str, int]] = Counter(
        (name, h) for files in prints.values() for name, p in files.items() for h in p.hashes
    )
    shared = own = 0
    for student in students:
        for name, p in prints[student].items():
            own += p.own
            shared += p.covered_by(h for h in p.hashes if holders[name, h] > 1)
    return shared / own if own else 0.0
