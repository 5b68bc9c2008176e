"""The class report: one static HTML page for the class and one per student, plots embedded as PNG.

    grade report grades/02_ring_tree [--html OUT_DIR] [--anonymize]

No server, no framework: plain HTML, one inline stylesheet, and a short inline script that sorts any table
by the column clicked. Student ids appear only in the class's student table and the student pages; with
``--anonymize`` they are replaced everywhere (outputs too) by stable pseudonyms, keyed by a secret salt kept
in the grades folder, so that the same student keeps the same pseudonym from one report to the next.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import io
import secrets
import shutil
from collections.abc import Callable
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from grader.classroom.outputs.item_analysis import ClassAnalysis, analyze
from grader.classroom.state.class_state import ClassState
from grader.classroom.state.records import Record, RecordStore
from grader.core.atomic import atomic_path, write_atomic
from grader.core.diagrams.files import write_diagrams
from grader.core.errors import UsageError
from grader.core.results import Status

SALT_FILE = ".pseudonym-salt"
REPORT_DIR = "report"
SIMILARITY_PAGE = "similarity.html"
"""Written beside index.html by ``grader.classroom.outputs.similarity_report``; the class page links to it."""
STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left}
th{background:#f0f0f0;cursor:pointer}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#a00;font-weight:600}pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;max-width:70em}
"""
SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach((th, col) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0], rows = Array.from(body.rows);
  const key = r => { const t = r.cells[col].textContent.trim();
                     const n = parseFloat(t); return isNaN(n) ? t : n; };
  const dir = th.dataset.dir === "asc" ? -1 : 1; th.dataset.dir = dir === 1 ? "asc" : "desc";
  rows.sort((a, b) => { const x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * dir; });
  rows.forEach(r => body.appendChild(r));
}));
"""


def write_report(
    grades: Path,
    out: Path | None = None,
    *,
    deadline: datetime | None = None,
    anonymize: bool = False,
    diagrams: bool = True,
) -> Path:
    """Read ``grades`` (a batch's folder: records/, reference/), write the report into ``out`` (default
    ``grades/report``); return the class page's path. ``deadline``: what makes a submission late. (The
    records as the last batch left them: a student it set aside is no longer in records/.) ``diagrams``:
    each student's space-time diagrams in ``students/<student>/diagrams/``, linked from their page (off:
    none, and none left from an earlier report)."""
    records = RecordStore(grades / "records", sweep=False).all()
    out = out or grades / REPORT_DIR
    return _write(records, grades, out, deadline=deadline, anonymize=anonymize, diagrams=diagrams)


def write_class_report(klass: ClassState, grades: Path, *, deadline: datetime | None, diagrams: bool) -> Path:
    """The report of a batch's class (``grades/report``), its records as the batch read them."""
    out = grades / REPORT_DIR
    return _write(klass.records, grades, out, deadline=deadline, anonymize=False, diagrams=diagrams)


def _write(
    records: list[Record],
    grades: Path,
    out: Path,
    *,
    deadline: datetime | None,
    anonymize: bool,
    diagrams: bool,
) -> Path:
    """The class page and one page per student of ``records`` (a page of anyone else is removed)."""
    if not records:
        raise UsageError(f"{grades}/records holds no graded submission: nothing to report")
    reference = RecordStore(grades / "reference", sweep=False).get("reference")
    analysis = analyze(records, reference.result if reference else None, deadline)
    name = (
        pseudonyms(grades, [r.student for r in records])
        if anonymize
        else {r.student: r.student for r in records}
    )
    (out / "students").mkdir(parents=True, exist_ok=True)
    pages = {f"{slug(name[record.student])}.html": record for record in analysis.records}
    for page_name, record in pages.items():
        links = _diagrams(record, out / "students", name[record.student], on=diagrams)
        write_atomic(out / "students" / page_name, _student_page(record, analysis, name, links))
    for stale in (out / "students").iterdir():
        if stale.name not in pages and f"{stale.name}.html" not in pages:
            # a student no longer in the class, or last shown under another name (their diagrams too)
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
    index = out / "index.html"
    write_atomic(index, _class_page(analysis, name, similarity=(out / SIMILARITY_PAGE).is_file()))
    return index


def pseudonyms(grades: Path, students: list[str]) -> dict[str, str]:
    """Each student's stable pseudonym, keyed by the grades folder's secret salt (made on first use)."""
    salt_path = grades / SALT_FILE
    if not salt_path.exists():
        with atomic_path(salt_path) as tmp:
            tmp.chmod(0o600)  # before the secret is in it
            tmp.write_text(secrets.token_hex(16))
    salt = salt_path.read_bytes()
    return {s: "student-" + hmac.new(salt, s.encode(), hashlib.sha256).hexdigest()[:8] for s in students}


# ---------------------------------------------------------------------------------------------------------
# the class page


def _class_page(a: ClassAnalysis, name: dict[str, str], *, similarity: bool) -> str:
    summary = a.summary()
    sections = [
        f"<h1>Exercise {escape(a.exercise)}: {escape(a.title)}</h1>",
        f"<p>{len(a.records)} submissions, {len(a.scores)} graded, out of {a.max_score:g} points. "
        "Click a column heading to sort.</p>",
        f'<p><a href="{SIMILARITY_PAGE}">Similarity across the class</a>: pairs to look at.</p>'
        if similarity
        else "",
        "<h2>Score distribution</h2>",
        _histogram(a, summary),
        _table(
            ["students", "mean", "median", "Q1", "Q3", "min", "max"], [[_num(v) for v in summary.values()]]
        ),
        "<h2>Concepts, most missed first</h2>",
        _concept_chart(a),
        _concepts_table(a),
        "<h2>Verdicts</h2>",
        _verdicts(a),
        "<h2>Where runs hung</h2>",
        _hangs(a, name),
        "<h2>Tests: item analysis</h2>",
        "<p>Pass rate over the graded students. Discrimination: the point-biserial correlation between "
        "passing the test and the student's total without the test's own points (the corrected item-total "
        "correlation); near 0 or negative means the test does not separate stronger from weaker work.</p>",
        _items_table(a),
        "<h2>Late submissions</h2>",
        _late(a, name),
        "<h2>Students</h2>",
        _students_table(a, name),
    ]
    return page(f"Exercise {a.exercise}: class report", sections)


def _histogram(a: ClassAnalysis, summary: dict[str, float]) -> str:
    from grader.classroom.outputs.batch_files import histogram_figure

    alt = "no graded submission"
    if summary:
        alt = (
            f"Histogram of {len(a.scores)} scores out of {a.max_score:g}: mean {summary['mean']:.2f}, "
            f"median {summary['median']:.2f}, quartiles {summary['q1']:.2f} and {summary['q3']:.2f}."
        )
    return _figure(lambda: histogram_figure(list(a.scores), a.max_score), alt)


def _concept_chart(a: ClassAnalysis) -> str:
    def chart() -> Any:
        import matplotlib.pyplot as plt

        shown = a.concepts[:15]
        figure, axes = plt.subplots(figsize=(7, 0.35 * len(shown) + 1))
        axes.barh([f"{c.part} {c.name}" for c in shown][::-1], [100 * c.share for c in shown][::-1])
        axes.set_xlim(0, 100)
        axes.set_xlabel("students who earned the concept (%)")
        figure.tight_layout()
        return figure

    alt = "Share of students who earned each concept, most missed first: " + "; ".join(
        f"{c.part} {c.name} {100 * c.share:.0f}%" for c in a.concepts[:15]
    )
    return _figure(chart, alt) if a.concepts else "<p>No concepts recorded.</p>"


def _concepts_table(a: ClassAnalysis) -> str:
    rows = [
        [c.part, c.name, _num(c.points), _pct(c.share, f"{c.earned} of {c.graded}"), c.idea]
        for c in a.concepts
    ]
    return _table(["part", "concept", "points", "earned by", "idea"], rows)


def _verdicts(a: ClassAnalysis) -> str:
    students = _table(
        ["verdict of the whole run", "students"], [[v, str(n)] for v, n in sorted(a.verdicts.items())]
    )
    tests = _table(["test status", "tests"], [[s, str(n)] for s, n in sorted(a.test_statuses.items())])
    return students + tests


def _hangs(a: ClassAnalysis, name: dict[str, str]) -> str:
    if not a.hangs:
        return "<p>No test timed out.</p>"
    top = a.hangs[0]
    lead = (
        f"<p>Most common stuck location: <strong>{escape(top.place)}</strong> "
        f"({len(top.students)} student{'s' if len(top.students) != 1 else ''}).</p>"
    )
    rows = [[h.place, str(len(h.students)), _links(h.students, name, "students/")] for h in a.hangs]
    return lead + _table(["function: collective", "students", "who"], rows, raw=(2,))


def _items_table(a: ClassAnalysis) -> str:
    rows = [
        [
            i.part,
            i.name,
            i.concept,
            _pct(i.pass_rate, f"{i.passed} of {i.takers}"),
            "-" if i.discrimination is None else f"{i.discrimination:+.2f}",
            i.reference,
            " ".join(f'<span class="flag">{escape(f)}</span>' for f in i.flags),
        ]
        for i in a.items
    ]
    return _table(
        ["part", "test", "concept", "pass rate", "discrimination", "reference", "flags"], rows, raw=(6,)
    )


def _late(a: ClassAnalysis, name: dict[str, str]) -> str:
    if not a.late:
        return "<p>None recorded (run <code>grade batch --late</code> with a deadline in course.yml).</p>"
    rows = [[_links([x.student], name, "students/"), x.submitted, f"{x.hours:.1f}"] for x in a.late]
    return _table(["student", "submitted", "hours late"], rows, raw=(0,))


def _students_table(a: ClassAnalysis, name: dict[str, str]) -> str:
    late = {x.student for x in a.late}
    rows = [
        [
            _links([r.student], name, "students/"),
            _num(r.result.score),
            str(r.result.verdict),
            ", ".join(f"{c.part} {c.name}" for c in r.result.concepts if not c.earned),
            "late" if r.student in late else "",
        ]
        for r in a.records
    ]
    return _table(["student", "score", "verdict", "concepts lost", "late"], rows, raw=(0,))


# ---------------------------------------------------------------------------------------------------------
# a student's page


def _diagrams(record: Record, students: Path, who: str, *, on: bool) -> list[str]:
    """Write the student's diagram pages into ``students/<who>/diagrams/`` (none when not ``on``); their
    paths relative to the student's page. Their id becomes ``who`` in what the pages quote."""
    timelines = record.result.timelines if on else ()
    if who != record.student:
        timelines = tuple(
            dataclasses.replace(t, verdict=t.verdict.replace(record.student, who)) for t in timelines
        )
    written = write_diagrams(timelines, students / slug(who) / "diagrams")
    return [f"{slug(who)}/diagrams/{page.name}" for page in written.pages]


def _student_page(record: Record, a: ClassAnalysis, name: dict[str, str], diagrams: list[str]) -> str:
    result, who = record.result, name[record.student]

    def hide(text: str) -> str:
        return text.replace(record.student, who) if who != record.student else text

    concepts = [
        [c.part, c.name, _num(c.score), _num(c.max_score), f"{c.passed} of {c.tests}", c.idea]
        for c in result.concepts
    ]
    tests = [
        [t.part, t.name, t.concept, str(t.status), _num(t.score), _num(t.max_score)] for t in result.tests
    ]
    failures = [
        f"<h3>{escape(t.name)} <small>({escape(t.part)}, concept {escape(t.concept)}, {t.status})"
        f"</small></h3><pre>{escape(hide(t.output))}</pre>"
        for t in result.tests
        if t.status is not Status.PASSED and t.output
    ]
    files = [[file, digest] for file, digest in sorted(record.files.items())]
    sections = [
        '<p><a href="../index.html">&larr; class report</a></p>',
        f"<h1>{escape(who)}: exercise {escape(result.exercise)}</h1>",
        f"<p>Score {_num(result.score)} of {_num(result.max_score)}; verdict {result.verdict}"
        + (f"; submitted {escape(record.submitted)}" if record.submitted else "")
        + "</p>",
        *(f"<p>{escape(hide(note))}</p>" for note in result.notes),
        "<h2>Concepts</h2>",
        _table(["part", "concept", "score", "of", "tests passed", "idea"], concepts),
        "<h2>Tests</h2>",
        _table(["part", "test", "concept", "status", "score", "of"], tests),
        "<h2>Failures</h2>",
        *(failures or ["<p>None.</p>"]),
        "<h2>Space-time diagrams</h2>",
        _diagram_links(diagrams),
        "<h2>Files graded</h2>",
        _table(["file", "sha256"], files) if files else "<p>Not recorded for this submission.</p>",
    ]
    return page(f"{who}: exercise {result.exercise}", sections)


def _diagram_links(pages: list[str]) -> str:
    """Links to the student's diagram pages (relative to their page), or why there are none."""
    if not pages:
        return "<p>None: no multi-rank test failed after its ranks ran, or diagrams are off.</p>"
    items = "".join(f'<li><a href="{escape(p)}">{escape(Path(p).stem)}</a></li>' for p in pages)
    lead = "<p>What each rank sent, received and waited for in a failing test (diagnostics).</p>"
    return f"{lead}<ul>{items}</ul>"


# ---------------------------------------------------------------------------------------------------------
# HTML pieces


def page(title: str, sections: list[str], extra_style: str = "") -> str:
    """A whole report page: the sections, the report's style (plus ``extra_style``) and its table sorter."""
    body = "\n".join(sections)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}{extra_style}</style></head>\n<body>\n{body}\n<script>{SORT_SCRIPT}</script>\n"
        "</body></html>\n"
    )


def _table(headings: list[str], rows: list[list[str]], raw: tuple[int, ...] = ()) -> str:
    """A sortable table; cells are escaped unless their column is in ``raw`` (HTML we built)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headings)
    body = "".join(
        "<tr>" + "".join(_cell(cell, i in raw) for i, cell in enumerate(row)) + "</tr>\n" for row in rows
    )
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>'


def _cell(cell: str, raw: bool) -> str:
    numeric = cell.replace(".", "", 1).lstrip("+-").isdigit()
    return f'<td class="num">{cell}</td>' if numeric else f"<td>{cell if raw else escape(cell)}</td>"


def _pct(share: float, detail: str) -> str:
    return f"{100 * share:.0f}% ({detail})"  # sorts by its leading number


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def _links(students: tuple[str, ...] | list[str], name: dict[str, str], prefix: str) -> str:
    return ", ".join(f'<a href="{prefix}{slug(name[s])}.html">{escape(name[s])}</a>' for s in students)


def slug(student: str) -> str:
    """A student's name (or pseudonym) as a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in student)


def _figure(make: Callable[[], Any], alt: str) -> str:
    """A matplotlib figure as an embedded PNG with its text alternative; the text alone without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"<p>{escape(alt)}</p>"
    figure = make()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    data = base64.b64encode(buffer.getvalue()).decode()
    image = f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'
    return f"<figure>{image}<figcaption>{escape(alt)}</figcaption></figure>"
