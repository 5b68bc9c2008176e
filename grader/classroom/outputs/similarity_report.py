"""The similarity report of a batch: ``report/similarity.html`` beside the class report, one side-by-side
page per flagged pair (``report/similarity/A--B.html``, matching code marked) and ``report/similarity.csv``.

    grade similarity grades/02_ring_tree [--submissions DIR] [--threshold 0.5] [--anonymize]

``grade batch`` writes it too, and records where its submissions were (``SUBMISSIONS_FILE``) so that
``grade similarity`` and ``grade report`` can compare them again later. Each report saves beside it the
submissions folder and the threshold it was made with (``SETTINGS``): ``grade report`` rewrites it with
those. ``--anonymize`` uses the class report's pseudonyms (the same salt), in the pages, the CSV and the
code shown.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from html import escape
from pathlib import Path

from grader.classroom.intake.discovery import discover
from grader.classroom.outputs.class_report import REPORT_DIR, SIMILARITY_PAGE, page, pseudonyms, slug
from grader.classroom.outputs.similarity import (
    COMMON_MIN,
    DEFAULT_THRESHOLD,
    MIN_SHARED,
    NOISE,
    FileMatch,
    Pair,
    Similarity,
    compare_class,
    read_submissions,
)
from grader.classroom.outputs.spreadsheet import text_cell
from grader.classroom.state.class_state import ClassState
from grader.classroom.state.records import RecordStore
from grader.core.atomic import write_atomic
from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.results import Status

SUBMISSIONS_FILE = "submissions-folder"
"""In a batch's folder: the absolute path of the folder of submissions it graded, one line."""
CSV = "similarity.csv"
SETTINGS = "similarity.json"
"""Beside the report: ``{"submissions": absolute path, "threshold": number}``, what it was made with."""
PAIRS_DIR = "similarity"
CLOSEST_SHOWN = 10
"""Pairs below the threshold listed for context (no page of their own)."""
CAUTION = (
    "Similarity is a reason to look at two submissions, never a verdict. Students who discuss an approach, "
    "follow the same hint or the same paper write alike, and short code has few ways to be written. Read "
    "the pair side by side, ask the students how they worked, and follow your institution's process "
    "before you conclude anything."
)
MARK_STYLE = """
.caution{border-left:4px solid #c90;background:#fff8e6;padding:.5em 1em}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:1em}.sides pre{font-size:13px;overflow-x:auto}
mark{background:#ffd86b}
"""


def write_similarity(
    grades: Path,
    course: Course,
    *,
    submissions: Path | None = None,
    out: Path | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    anonymize: bool = False,
) -> Path:
    """Compare the graded submissions of the batch in ``grades`` (invalid uploads left out) and write the
    report into ``out`` (default ``grades/report``); return its page. ``submissions``: where they are
    (default: the folder the batch recorded)."""
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
    similarity = compare_class(course, exercise, read_submissions(exercise, found), threshold=threshold)
    students = sorted(r.student for r in records)
    name = pseudonyms(grades, students) if anonymize else {s: s for s in students}
    return _write(similarity, folder, out or grades / REPORT_DIR, name, threshold)


def write_class_similarity(klass: ClassState, grades: Path, course: Course) -> Path:
    """The similarity report of a batch's class (``grades/report``, the default threshold): the graded
    members' files as the batch staged them, compared (no upload is staged again)."""
    graded = [m for m in klass.members if m.record and m.record.result.verdict is not Status.INVALID]
    texts = {m.student: m.texts() for m in graded}
    similarity = compare_class(course, klass.exercise, texts, threshold=DEFAULT_THRESHOLD)
    name = {s: s for s in klass.students}
    return _write(similarity, klass.submissions, grades / REPORT_DIR, name, DEFAULT_THRESHOLD)


def _write(
    similarity: Similarity, folder: Path, target: Path, name: dict[str, str], threshold: float
) -> Path:
    """The report's pages in ``target``, and beside them the submissions folder and threshold it was made
    with (``SETTINGS``)."""
    written = write_pages(similarity, target, name)
    settings = {"submissions": str(folder.resolve()), "threshold": threshold}
    write_atomic(target / SETTINGS, json.dumps(settings, indent=2) + "\n")
    return written


def refresh_similarity(grades: Path, course: Course, *, out: Path | None, anonymize: bool) -> Path | None:
    """Rewrite the similarity report in ``out`` (default ``grades/report``) with the names a class report
    about to be written there uses, over the submissions and at the threshold it was made with
    (``SETTINGS``; without them, the batch's recorded folder and the default threshold); when those
    submissions are gone, remove it instead (a page with other names than the class page's must not stay
    linked from it). Its page, or None."""
    target = out or grades / REPORT_DIR
    folder, threshold = _settings(target) or (recorded_submissions(grades), DEFAULT_THRESHOLD)
    if folder is not None and folder.is_dir():
        return write_similarity(
            grades, course, submissions=folder, out=out, threshold=threshold, anonymize=anonymize
        )
    remove_similarity(target)
    return None


def remove_similarity(out: Path) -> None:
    """Remove the similarity report in ``out``, if any: its page, CSV, settings and pair pages."""
    for stale in (out / SIMILARITY_PAGE, out / CSV, out / SETTINGS, *(out / PAIRS_DIR).glob("*.html")):
        stale.unlink(missing_ok=True)


def _settings(out: Path) -> tuple[Path, float] | None:
    """The submissions folder and threshold the report in ``out`` was made with; None without ``SETTINGS``."""
    path = out / SETTINGS
    if not path.is_file():
        return None
    settings = json.loads(path.read_text())
    return Path(settings["submissions"]), float(settings["threshold"])


def record_submissions(grades: Path, submissions: Path) -> None:
    """Remember, in the batch's folder, where its submissions are."""
    write_atomic(grades / SUBMISSIONS_FILE, f"{submissions.resolve()}\n")


def recorded_submissions(grades: Path) -> Path | None:
    path = grades / SUBMISSIONS_FILE
    return Path(path.read_text().strip()) if path.is_file() else None


def write_pages(similarity: Similarity, out: Path, name: dict[str, str]) -> Path:
    """similarity.html, similarity.csv and one page per flagged pair in ``out``; student ids shown as
    ``name`` maps them."""
    flagged = similarity.flagged()
    (out / PAIRS_DIR).mkdir(parents=True, exist_ok=True)
    for old in (out / PAIRS_DIR).glob("*.html"):
        old.unlink()  # a pair flagged last time but not now must not keep its page
    for pair in flagged:
        write_atomic(out / PAIRS_DIR / _pair_page_name(pair, name), _pair_page(pair, similarity, name))
    write_atomic(out / CSV, _csv(flagged, name))
    written = out / SIMILARITY_PAGE
    write_atomic(written, _class_page(similarity, name))
    return written


def _pair_page_name(pair: Pair, name: dict[str, str]) -> str:
    return f"{slug(name[pair.students[0]])}--{slug(name[pair.students[1]])}.html"


def _csv(flagged: list[Pair], name: dict[str, str]) -> str:
    """One row per flagged pair; the students' names as ``text_cell`` makes them (a folder's name can start
    like a formula)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "score", "share_a", "share_b", "shared_chars", "page"])
    for pair in flagged:
        a, b = (name[s] for s in pair.students)
        shares = (f"{share:.3f}" for share in pair.shares)
        page = f"{PAIRS_DIR}/{_pair_page_name(pair, name)}"
        writer.writerow([text_cell(a), text_cell(b), f"{pair.score:.3f}", *shares, pair.shared, page])
    return text.getvalue()


# ---------------------------------------------------------------------------------------------------------
# the class's page


def _class_page(similarity: Similarity, name: dict[str, str]) -> str:
    flagged = similarity.flagged()
    closest = [p for p in similarity.pairs if p not in flagged][:CLOSEST_SHOWN]
    rows = [_row(p, name, link=True) for p in flagged]
    sections = [
        '<p><a href="index.html">&larr; class report</a></p>',
        f"<h1>Exercise {escape(similarity.exercise.key)}: similarity</h1>",
        f'<p class="caution"><strong>{escape(CAUTION)}</strong></p>',
        _method(similarity),
        f"<h2>Pairs to look at ({len(flagged)})</h2>",
        _table(rows) if rows else "<p>No pair reaches the threshold.</p>",
        "<h2>The closest pairs below the threshold</h2>",
        _table([_row(p, name, link=False) for p in closest]) if closest else "<p>None.</p>",
    ]
    return page(f"Exercise {similarity.exercise.key}: similarity", sections, MARK_STYLE)


def _method(similarity: Similarity) -> str:
    boilerplate = ", ".join(f"<code>{escape(b)}</code>" for b in similarity.boilerplate)
    return (
        f"<p>{len(similarity.students)} students' editable files "
        f"({escape(', '.join(similarity.exercise.files))}) were compared pairwise, file by file, with "
        "copydetect: code is tokenized and normalized (names, strings, comments and layout do not count), "
        f"then fingerprinted by winnowing over runs of {NOISE} normalized characters. What the course hands "
        f"out never counts ({boilerplate}), nor what more than half of the class (at least {COMMON_MIN} "
        "students) wrote alike. A pair's score is the share of the two students' own code, taken together, "
        "that the other one also has; each student's share of their own code found in the other's is "
        "beside it. A pair is listed when its score is at least "
        f"{similarity.threshold:g} (<code>--threshold</code>; default {DEFAULT_THRESHOLD:g}) and it shares "
        f"at least {MIN_SHARED} normalized characters, about a dozen lines.</p>"
    )


def _row(pair: Pair, name: dict[str, str], *, link: bool) -> list[str]:
    a, b = (escape(name[s]) for s in pair.students)
    page = f'<a href="{PAIRS_DIR}/{_pair_page_name(pair, name)}">side by side</a>' if link else ""
    shares = (f"{100 * share:.0f}%" for share in pair.shares)
    return [a, b, f"{100 * pair.score:.0f}%", *shares, str(pair.shared), page]


def _table(rows: list[list[str]]) -> str:
    headings = ["student A", "student B", "score", "A's code in B", "B's code in A", "shared chars", ""]
    head = "".join(f"<th>{escape(h)}</th>" for h in headings)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>\n" for row in rows)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>'


# ---------------------------------------------------------------------------------------------------------
# a pair's page: each file side by side, matching code marked


def _pair_page(pair: Pair, similarity: Similarity, name: dict[str, str]) -> str:
    a, b = (name[s] for s in pair.students)
    sections = [
        f'<p><a href="../{SIMILARITY_PAGE}">&larr; similarity</a></p>',
        f"<h1>{escape(a)} and {escape(b)}: exercise {escape(similarity.exercise.key)}</h1>",
        f'<p class="caution"><strong>{escape(CAUTION)}</strong></p>',
        f"<p>Score {100 * pair.score:.0f}% of their own code in common: {100 * pair.shares[0]:.0f}% of "
        f"{escape(a)}'s is found in {escape(b)}'s, {100 * pair.shares[1]:.0f}% of {escape(b)}'s in "
        f"{escape(a)}'s. Marked: the code both have, once the course's own code and what most of the class "
        "wrote alike are left out.</p>",
    ]
    shown = _shown(name)
    for match in pair.files:
        sections.append(f"<h2>{escape(match.name)}</h2>")
        code = [_marked(match, side, similarity, shown) for side in (0, 1)]
        columns = "".join(
            f"<div><h3>{escape(who)}</h3><pre>{text}</pre></div>"
            for who, text in zip((a, b), code, strict=True)
        )
        sections.append(f'<div class="sides">{columns}</div>')
    return page(f"{a} and {b}: exercise {similarity.exercise.key}", sections, MARK_STYLE)


def _marked(match: FileMatch, side: int, similarity: Similarity, shown: Callable[[str], str]) -> str:
    """One side's text, as ``shown`` makes it, the code it shares with the other side in <mark> (not the
    given lines a match runs over)."""
    text, cursor, pieces = match.texts[side], 0, []
    for start, end in _spans(text, match.regions[side], similarity.given_lines):
        pieces.append(shown(text[cursor:start]))
        pieces.append(f"<mark>{shown(text[start:end])}</mark>")
        cursor = end
    pieces.append(shown(text[cursor:]))
    return "".join(pieces)


def _spans(text: str, regions: tuple[tuple[int, int], ...], given: frozenset[str]) -> list[tuple[int, int]]:
    """The parts of ``regions`` to mark, line by line, in order: not blank lines, not given lines."""
    spans: list[tuple[int, int]] = []
    start_of_line = 0
    for line in text.splitlines(keepends=True):
        end_of_line = start_of_line + len(line.rstrip("\r\n"))
        if line.strip() and line.strip() not in given:
            for start, end in regions:
                first, last = max(start, start_of_line), min(end, end_of_line)
                if first < last and (not spans or first >= spans[-1][1]):
                    spans.append((first, last))
        start_of_line += len(line)
    return spans


def _shown(name: dict[str, str]) -> Callable[[str], str]:
    """What shows a text on a pair's page: HTML-escaped, every id of the class in it (a comment may hold
    any) replaced as ``name`` says, whole, wherever no word character is on either side of it; in one
    pass, the longest first (so that ``ann`` takes nothing of ``ann-marie``)."""
    renamed = sorted((s for s in name if name[s] != s), key=len, reverse=True)
    if not renamed:
        return escape
    ids = re.compile(rf"(?<!\w)(?:{'|'.join(map(re.escape, renamed))})(?!\w)")
    return lambda text: escape(ids.sub(lambda found: name[found[0]], text))
