"""The similarity report of a batch: ``report/similarity.html`` beside the class report (clusters first,
then pairs), one side-by-side page per flagged pair (``report/similarity/A--B.html``, matching code
marked), ``report/clusters.csv`` and ``report/similarity.csv``.

    grade similarity grades/02_ring_tree [--submissions DIR] [--against PATH]... [--threshold 0.5]
                     [--common-min N] [--anonymize]

``grade batch`` writes it too, and records where its submissions were (``SUBMISSIONS_FILE``) so that
``grade similarity`` and ``grade report`` can compare them again later, without grading anything. Each
report saves beside it what it was made with (``SETTINGS``): ``grade report`` rewrites it with those.
``--anonymize`` uses the class report's pseudonyms (the same salt), in the pages, the CSVs and the code
shown, and for the ids in the known sources' labels.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.classroom.intake.discovery import discover
from grader.classroom.outputs.class_report import REPORT_DIR, SIMILARITY_PAGE, pseudonyms
from grader.classroom.outputs.similarity import DEFAULT_THRESHOLD, Similarity, compare_class
from grader.classroom.outputs.similarity_clusters import Cluster
from grader.classroom.outputs.similarity_pages import (
    PAIRS_DIR,
    class_page,
    code_shown,
    pair_page,
    pair_page_name,
)
from grader.classroom.outputs.similarity_pair import Pair
from grader.classroom.outputs.similarity_sources import SourceKind, read_submissions
from grader.classroom.outputs.spreadsheet import text_cell, write_csv
from grader.classroom.state.class_state import ClassState
from grader.classroom.state.records import RecordStore
from grader.core.atomic import write_atomic
from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.results import Status

SUBMISSIONS_FILE = "submissions-folder"
"""In a batch's folder: the absolute path of the folder of submissions it graded, one line."""
CSV = "similarity.csv"
CLUSTERS_CSV = "clusters.csv"
SETTINGS = "similarity.json"
"""Beside the report: ``Settings`` as JSON, what it was made with."""


@dataclass(frozen=True)
class Settings:
    submissions: Path
    threshold: float = DEFAULT_THRESHOLD
    against: tuple[Path, ...] = ()
    common_min: int | None = None

    def to_json(self) -> str:
        fields = {
            "submissions": str(self.submissions.resolve()),
            "threshold": self.threshold,
            "against": [str(path.resolve()) for path in self.against],
            "common_min": self.common_min,
        }
        return json.dumps(fields, indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> Settings:
        fields = json.loads(text)
        return Settings(
            Path(fields["submissions"]),
            float(fields["threshold"]),
            tuple(Path(path) for path in fields.get("against", [])),
            fields.get("common_min"),
        )


def write_similarity(
    grades: Path,
    course: Course,
    *,
    submissions: Path | None = None,
    out: Path | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    anonymize: bool = False,
    against: Sequence[Path] = (),
    common_min: int | None = None,
) -> Path:
    """Compare the graded submissions of the batch in ``grades`` (invalid uploads left out) with each other,
    the course's reference and the ``against`` sources, and write the report into ``out`` (default
    ``grades/report``); return its page. ``submissions``: where they are (default: the folder the batch
    recorded). Nothing is graded: the batch's records say who was graded, and for which exercise."""
    folder = submissions or recorded_submissions(grades)
    if folder is None:
        raise UsageError(f"{grades} does not say where its submissions are; give --submissions DIR")
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder of submissions")
    records = RecordStore(grades / "records", sweep=False).all()
    if not records:
        raise UsageError(f"{grades}/records holds no graded submission: nothing to compare")
    exercise = course.find(records[0].result.exercise)
    graded = {r.student for r in records if r.result.verdict is not Status.INVALID}
    found = {s.student: s.path for s in discover(folder) if s.student in graded}
    texts = read_submissions(exercise, found)
    similarity = compare_class(
        course, exercise, texts, threshold=threshold, against=against, common_min=common_min
    )
    students = sorted(r.student for r in records)
    name = _names(grades, students, similarity, anonymize=anonymize)
    return _report(
        similarity, out or grades / REPORT_DIR, name, Settings(folder, threshold, tuple(against), common_min)
    )


def write_class_similarity(klass: ClassState, grades: Path, course: Course) -> Path:
    """The similarity report of a batch's class (``grades/report``, the default settings): the graded
    members' files as the batch staged them, compared (no upload is staged again)."""
    graded = [m for m in klass.members if m.record and m.record.result.verdict is not Status.INVALID]
    similarity = compare_class(course, klass.exercise, {m.student: m.texts() for m in graded})
    name = _names(grades, list(klass.students), similarity, anonymize=False)
    return _report(similarity, grades / REPORT_DIR, name, Settings(klass.submissions))


def _report(similarity: Similarity, target: Path, name: dict[str, str], settings: Settings) -> Path:
    """The report's pages in ``target``, and beside them what it was made with (``SETTINGS``)."""
    written = write_pages(similarity, target, name)
    write_atomic(target / SETTINGS, settings.to_json())
    return written


def _names(grades: Path, students: list[str], similarity: Similarity, *, anonymize: bool) -> dict[str, str]:
    """How each side is shown: students, and the students of an ``--against`` folder in their labels, by
    pseudonym under ``anonymize``; the other sources by their labels."""
    if not anonymize:
        return {who: who for who in [*students, *similarity.sources]}
    against = [label for label, kind in similarity.sources.items() if kind is SourceKind.AGAINST_STUDENT]
    ids = {label: label.rpartition("/")[2] for label in against}
    name = pseudonyms(grades, [*students, *ids.values()])
    shown = {label: f"{label.rpartition('/')[0]}/{name[ids[label]]}" for label in against}
    return {**{s: name[s] for s in students}, **shown, **{r: r for r in similarity.sources if r not in shown}}


def refresh_similarity(grades: Path, course: Course, *, out: Path | None, anonymize: bool) -> Path | None:
    """Rewrite the similarity report in ``out`` (default ``grades/report``) with the names a class report
    about to be written there uses, with the settings it was made with (``SETTINGS``; without them, the
    batch's recorded folder and the defaults); when those submissions are gone, remove it instead (a page
    with other names than the class page's must not stay linked from it). Its page, or None."""
    target = out or grades / REPORT_DIR
    settings = _settings(target)
    if settings is None:
        recorded = recorded_submissions(grades)
        settings = Settings(recorded) if recorded else None
    if settings is not None and settings.submissions.is_dir() and all(p.exists() for p in settings.against):
        return write_similarity(
            grades,
            course,
            submissions=settings.submissions,
            out=out,
            threshold=settings.threshold,
            anonymize=anonymize,
            against=settings.against,
            common_min=settings.common_min,
        )
    remove_similarity(target)
    return None


def remove_similarity(out: Path) -> None:
    """Remove the similarity report in ``out``, if any: its page, CSVs, settings and pair pages."""
    stale = (out / SIMILARITY_PAGE, out / CSV, out / CLUSTERS_CSV, out / SETTINGS)
    for path in (*stale, *(out / PAIRS_DIR).glob("*.html")):
        path.unlink(missing_ok=True)


def _settings(out: Path) -> Settings | None:
    """What the report in ``out`` was made with; None without ``SETTINGS``."""
    path = out / SETTINGS
    return Settings.from_json(path.read_text()) if path.is_file() else None


def record_submissions(grades: Path, submissions: Path) -> None:
    """Remember, in the batch's folder, where its submissions are."""
    write_atomic(grades / SUBMISSIONS_FILE, f"{submissions.resolve()}\n")


def recorded_submissions(grades: Path) -> Path | None:
    path = grades / SUBMISSIONS_FILE
    return Path(path.read_text().strip()) if path.is_file() else None


def write_pages(similarity: Similarity, out: Path, name: dict[str, str]) -> Path:
    """similarity.html, the CSVs and one page per flagged pair in ``out``; every side shown as ``name``
    maps it."""
    flagged = similarity.flagged()
    (out / PAIRS_DIR).mkdir(parents=True, exist_ok=True)
    for old in (out / PAIRS_DIR).glob("*.html"):
        old.unlink()  # a pair flagged last time but not now must not keep its page
    shown = code_shown(name)
    for pair in flagged:
        write_atomic(out / PAIRS_DIR / pair_page_name(pair, name), pair_page(pair, similarity, name, shown))
    write_csv(out / CSV, _pairs_csv(flagged, similarity, name))
    write_csv(out / CLUSTERS_CSV, _clusters_csv(similarity.clusters, similarity, name))
    written = out / SIMILARITY_PAGE
    write_atomic(written, class_page(similarity, name))
    return written


def _pairs_csv(flagged: list[Pair], similarity: Similarity, name: dict[str, str]) -> list[list[str]]:
    """One row per flagged pair; names as ``text_cell`` makes them (a folder's name can start like a
    formula); ``source``: what student B is when it is a known source."""
    rows = [["student_a", "student_b", "score", "share_a", "share_b", "shared_tokens", "source", "page"]]
    for pair in flagged:
        a, b = (text_cell(name[s]) for s in pair.students)
        shares = [f"{share:.3f}" for share in pair.shares]
        kind = similarity.sources.get(pair.students[1])
        page = f"{PAIRS_DIR}/{pair_page_name(pair, name)}"
        rows.append([a, b, f"{pair.score:.3f}", *shares, str(pair.shared), kind.value if kind else "", page])
    return rows


def _clusters_csv(
    clusters: tuple[Cluster, ...], similarity: Similarity, name: dict[str, str]
) -> list[list[str]]:
    """One row per cluster, largest first: its students and known sources (``; `` between them), its
    strongest pair, the share of code its students hold together, its flagged pairs."""
    rows = [["cluster", "size", "students", "sources", "reference", "strongest_a", "strongest_b"]]
    rows[0] += ["strongest_score", "held_together", "pairs"]
    for number, cluster in enumerate(clusters, start=1):
        students = text_cell("; ".join(name[s] for s in cluster.students))
        sources = text_cell("; ".join(name[s] for s in cluster.sources))
        reference = "yes" if similarity.reference() in cluster.sources else "no"
        a, b = (text_cell(name[s]) for s in cluster.strongest.students)
        strongest = f"{cluster.strongest.score:.3f}"
        rows.append([str(number), str(len(cluster.members)), students, sources, reference, a, b, strongest])
        rows[-1] += [f"{cluster.together:.3f}", str(cluster.pairs)]
    return rows
