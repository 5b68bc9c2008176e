"""`grade report`: the class page's numbers recomputed independently, its pages in a real browser, and a real
batch whose report names the most-missed concept, a planted broken test, a hang, a crash and late work."""

from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
import subprocess
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader import cli
from grader.classroom.outputs.class_report import write_report
from grader.classroom.outputs.item_analysis import analyze
from grader.classroom.state.records import Record, RecordStore
from grader.core.course import Course
from grader.core.results import ConceptScore, ExerciseResult, Status, TestResult

STUDENTS = 32
DEADLINE = datetime(2026, 12, 1, 12, tzinfo=UTC)
STUCK = (
    "[01.ring rank 1/4] timed out after 10 s: rank(s) 1-3 still running\n"
    "  ranks 1-3 blocked in dist.recv at ring.py:42 in ring_allreduce: dist.recv(buf, left)"
)
# test -> (concept, who passes it, by ability in [0, 1])
ITEMS = {
    "test_easy": ("basics", lambda a: True),
    "test_broken": ("planted", lambda a: False),
    "test_sum[2ranks]": ("ring_sum", lambda a: a > 0.2),
    "test_sum[5ranks]": ("ring_sum", lambda a: a > 0.4),
    "test_steps": ("ring_steps", lambda a: a > 0.6),
    "test_contrary": ("contrary", lambda a: a < 0.5),
}
POINTS = {"basics": 2.0, "planted": 1.0, "ring_sum": 4.0, "ring_steps": 2.0, "contrary": 1.0}


def synthetic(student: int, *, status: Status | None = None, stuck: bool = False) -> ExerciseResult:
    """Student ``student``'s result: ability student / (STUDENTS - 1) decides tests; concepts all or none."""
    ability = student / (STUDENTS - 1)
    passed = {name: rule(ability) for name, (_, rule) in ITEMS.items()}
    if stuck:
        passed["test_steps"] = False
    per_concept = {c: [n for n, (k, _) in ITEMS.items() if k == c] for c in POINTS}
    earned = {c: all(passed[n] for n in names) for c, names in per_concept.items()}
    tests = tuple(
        TestResult(
            name=name,
            number=f"1.{i}",
            part="01.ring",
            score=POINTS[concept] / len(per_concept[concept]) if earned[concept] else 0.0,
            max_score=POINTS[concept] / len(per_concept[concept]),
            status=Status.PASSED if passed[name] else (status or _failed(name, stuck)),
            output="" if passed[name] else (STUCK if stuck and name == "test_steps" else "wrong tensor"),
            concept=concept,
        )
        for i, (name, (concept, _)) in enumerate(ITEMS.items(), start=1)
    )
    concepts = tuple(
        ConceptScore(
            part="01.ring",
            name=c,
            idea=f"the idea of {c}",
            score=POINTS[c] if earned[c] else 0.0,
            max_score=POINTS[c],
            passed=sum(passed[n] for n in names),
            tests=len(names),
        )
        for c, names in per_concept.items()
    )
    return ExerciseResult(
        exercise="01",
        title="Toy ring",
        graded=f"s_{student:02d}",
        device="cpu",
        tests=tests,
        concepts=concepts,
    )


def _failed(name: str, stuck: bool) -> Status:
    return Status.TIMEOUT if stuck and name == "test_steps" else Status.FAILED


@pytest.fixture
def grades(tmp_path: Path) -> Path:
    """A batch folder: 32 graded students (3 hung, 2 late), one invalid upload, and the reference."""
    folder = tmp_path / "grades"
    store = RecordStore(folder / "records")
    for i in range(STUDENTS):
        late = DEADLINE + timedelta(hours=i - 29) if i >= 30 else DEADLINE - timedelta(days=1)
        files = {"ring.py": f"{i:064x}"}
        store.put(Record(f"s_{i:02d}", "k", synthetic(i, stuck=i in (25, 26, 27)), late.isoformat(), files))
    invalid = ExerciseResult.from_dict(synthetic(0).to_dict() | {"tests": [], "concepts": []})
    store.put(Record("zz_invalid", "k", _as_invalid(invalid), None))
    RecordStore(folder / "reference").put(
        Record("reference", "k", _all_passed(synthetic(STUDENTS - 1)), None)
    )
    return folder


def _as_invalid(result: ExerciseResult) -> ExerciseResult:
    test = TestResult(
        name="01.ring (all tests)", number="1.1", part="01.ring", score=0, max_score=10, status=Status.INVALID
    )
    return ExerciseResult.from_dict(result.to_dict() | {"tests": [_test_dict(test)]})


def _test_dict(test: TestResult) -> dict[str, object]:
    return ExerciseResult(exercise="", title="", graded="", device="", tests=(test,)).to_dict()["tests"][0]


def _all_passed(result: ExerciseResult) -> ExerciseResult:
    data = result.to_dict()
    for test in data["tests"]:
        test["status"], test["score"] = "passed", test["max_score"]
    for concept in data["concepts"]:
        concept["score"], concept["passed"] = concept["max_score"], concept["tests"]
    return ExerciseResult.from_dict(data)


def test_the_numbers_match_an_independent_computation(grades: Path) -> None:
    records = RecordStore(grades / "records").all()
    reference = RecordStore(grades / "reference").get("reference")
    assert reference is not None
    analysis = analyze(records, reference.result, DEADLINE)
    graded = [r for r in records if r.result.verdict is not Status.INVALID]
    assert len(graded) == STUDENTS and analysis.verdicts["invalid"] == 1

    totals = [r.result.score for r in graded]
    summary = analysis.summary()
    assert summary["mean"] == pytest.approx(statistics.fmean(totals))
    assert summary["median"] == pytest.approx(statistics.median(totals))
    for item in analysis.items:
        passing = [any(t.name == item.name and t.status == "passed" for t in r.result.tests) for r in graded]
        assert item.pass_rate == pytest.approx(sum(passing) / STUDENTS), item.name
        rest = [r.result.score - (item.points if p else 0) for r, p in zip(graded, passing, strict=True)]
        if 0 < sum(passing) < STUDENTS:
            assert item.discrimination == pytest.approx(
                statistics.correlation([float(p) for p in passing], rest)
            )
        else:
            assert item.discrimination is None
    flags = {i.name: i.flags for i in analysis.items}
    assert flags["test_easy"] == ("everyone passes",) and flags["test_broken"] == ("nobody passes",)
    assert flags["test_contrary"] == ("negative discrimination",)
    assert flags["test_steps"] == () and flags["test_sum[5ranks]"] == ()

    assert [c.name for c in analysis.concepts][:2] == ["planted", "ring_steps"]  # most missed first
    assert analysis.concepts[0].share == 0 and analysis.concepts[-1].name == "basics"
    assert [(h.place, h.students) for h in analysis.hangs] == [
        ("ring_allreduce: dist.recv", ("s_25", "s_26", "s_27"))
    ]
    assert [(x.student, x.hours) for x in analysis.late] == [("s_30", 1.0), ("s_31", 2.0)]


class _Tables(HTMLParser):
    """Every table of a page as rows of cell texts, and every link."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self.links.append(dict(attrs)["href"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(page: Path) -> _Tables:
    parser = _Tables()
    parser.feed(page.read_text())
    return parser


def test_the_class_page_and_student_pages(grades: Path) -> None:
    index = write_report(grades, deadline=DEADLINE)
    page = index.read_text()
    assert index == grades / "report" / "index.html"
    assert page.count('src="data:image/png;base64,') == 2 and 'alt="Histogram of 32 scores' in page
    assert "Most common stuck location: <strong>ring_allreduce: dist.recv</strong> (3 students)" in page
    parsed = tables(index)
    concepts = next(t for t in parsed.tables if t[0][:2] == ["part", "concept"])
    assert concepts[1][1] == "planted" and concepts[1][3].startswith("0% (0 of 32)")
    items = next(t for t in parsed.tables if t[0][1] == "test")
    broken = next(row for row in items if row[1] == "test_broken")
    assert broken[5] == "passed" and "nobody passes" in broken[6]  # the reference passes what nobody does
    assert any("invalid" in row for t in parsed.tables for row in t)
    assert "students/s_25.html" in parsed.links

    student = tables(grades / "report" / "students" / "s_25.html")
    assert "../index.html" in student.links
    assert ["ring.py", f"{25:064x}"] in next(t for t in student.tables if t[0] == ["file", "sha256"])
    assert "blocked in dist.recv at ring.py:42" in (grades / "report" / "students" / "s_25.html").read_text()


def test_anonymized_pages_hold_no_student_id_and_pseudonyms_are_stable(grades: Path, tmp_path: Path) -> None:
    first = write_report(grades, tmp_path / "a", anonymize=True).parent
    again = write_report(grades, tmp_path / "b", anonymize=True).parent
    for path in first.rglob("*.html"):
        text = path.read_text()
        assert not any(f"s_{i:02d}" in text for i in range(STUDENTS)), path
    assert sorted(p.name for p in first.rglob("*.html")) == sorted(p.name for p in again.rglob("*.html"))
    assert len(list((first / "students").glob("student-*.html"))) == STUDENTS + 1


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "the browser tests need Chromium: apt-get install chromium (.ci/run installs it)"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1800"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.slow  # a real browser
def test_a_real_browser_renders_the_class_page_and_a_student_page(grades: Path, tmp_path: Path) -> None:
    import matplotlib.image

    index = write_report(grades, deadline=DEADLINE)
    dom = chromium("--dump-dom", index.as_uri()).stdout
    assert "<th>concept</th>" in dom and "planted" in dom and "nobody passes" in dom
    student = chromium("--dump-dom", (index.parent / "students" / "s_25.html").as_uri()).stdout
    assert "sha256" in student and "ring_allreduce" in student

    shot = tmp_path / "class-report.png"
    chromium(f"--screenshot={shot}", index.as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] >= 1000 and pixels.std() > 0.05, "a blank screenshot"
    if os.environ.get("DISTGPU_SCREENSHOT"):  # how docs/images/class-report.png is made
        shutil.copyfile(shot, os.environ["DISTGPU_SCREENSHOT"])


@pytest.mark.slow  # a whole batch
def test_a_batch_report_names_the_missed_concept_the_planted_test_a_hang_a_crash_and_late_work(
    edited_course, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    course: Course = edited_course(
        "timeout: 60\n", "timeout: 60\n        deadline: 2026-12-01T12:00:00+00:00\n"
    )
    _plant_a_test_of_the_references_choice(course)
    subs = _class(tmp_path / "subs")
    out = tmp_path / "out"
    argv = ["--course", str(course.root / "course.yml"), "batch", str(subs), "--exercise", "toy"]
    assert cli.main([*argv, "--device", "cpu", "--out", str(out), "--late"]) == 0
    assert f"what the class missed: {out / 'report' / 'index.html'}" in capsys.readouterr().out

    page = (out / "report" / "index.html").read_text()
    parsed = tables(out / "report" / "index.html")
    concepts = next(t for t in parsed.tables if t[0][:2] == ["part", "concept"])
    assert concepts[1][:2] == ["01.allreduce", "first_isend"]  # the most-missed concept, named first
    items = next(t for t in parsed.tables if t[0][1] == "test")
    planted = [row for row in items if row[1].startswith("test_planted_first_call_is_isend")]
    assert planted and all(row[5] == "passed" and "nobody passes" in row[6] for row in planted)
    assert "Most common stuck location: <strong>allreduce: dist.send</strong>" in page
    verdicts = next(t for t in parsed.tables if t[0][0] == "verdict of the whole run")
    assert ["crashed", "1"] in verdicts and ["timeout", "1"] in verdicts
    late = next(t for t in parsed.tables if t[0] == ["student", "submitted", "hours late"])
    assert [row[0] for row in late[1:]] == ["latecomer"]
    # ada and latecomer handed in the same code: the similarity report beside it lists that pair alone
    assert (
        'href="similarity.html"' in page and (out / "report" / "similarity" / "ada--latecomer.html").is_file()
    )
    similar = (out / "report" / "similarity.csv").read_text().splitlines()
    assert [line.split(",")[:2] for line in similar[1:]] == [["ada", "latecomer"]]
    # hana's hang as space-time diagrams beside her page, linked from it, within the budget
    diagrams = sorted((out / "report" / "students" / "hana" / "diagrams").glob("*.html"))
    assert diagrams and 'href="hana/diagrams/' in (out / "report" / "students" / "hana.html").read_text()
    assert "blocked in send to rank" in diagrams[0].read_text()
    assert sum(p.stat().st_size for p in diagrams) < 1_000_000


PLANTED_IDEA = "Planted for the report test: it grades the reference choice of an isend first."


def _plant_a_test_of_the_references_choice(course: Course) -> None:
    """A broken test: it grades the reference's choice (its first call is an isend), not a property."""
    exercise = course.find("toy")
    hidden = course.solution_dir(exercise) / "test_hidden.py"
    hidden.write_text(
        hidden.read_text()
        + """

@pytest.mark.part("01.allreduce")
@pytest.mark.concept("first_isend")
def test_planted_first_call_is_isend(world: World) -> None:
    for res in world.call("toy", "allreduce", args=[(torch.ones(3),)] * world.size):
        assert res.comm.events[0].op == "isend", "planted: the reference's choice, not a property"
"""
    )
    concepts = course.exercise_dir(exercise) / "concepts.yml"
    concepts.write_text(
        concepts.read_text().replace(
            "allreduce:\n", f"allreduce:\n  first_isend: {{weight: 1, idea: '{PLANTED_IDEA}'}}\n", 1
        )
    )


RECV_FIRST = """import torch
import torch.distributed as dist


def allreduce(tensor, group=None):
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    total, outgoing, incoming = tensor.clone(), tensor.clone(), torch.empty_like(tensor)
    for _ in range(size - 1):
        request = dist.irecv(incoming, (rank - 1) % size, group)
        dist.send(outgoing, (rank + 1) % size, group)
        request.wait()
        total += incoming
        outgoing = incoming.clone()
    tensor.copy_(total)


def square(x):
    return x * x
"""


def _class(folder: Path) -> Path:
    """Two correct students who post their receive first, one late; a hang; a crash."""
    fixtures = Path(__file__).parent / "fixtures" / "submissions"
    for student in ("ada", "latecomer"):
        (folder / student).mkdir(parents=True)
        (folder / student / "toy.py").write_text(RECV_FIRST)
    (folder / "latecomer" / "timestamp.txt").write_text("2026-12-01T15:00:00+00:00\n")
    (folder / "ada" / "timestamp.txt").write_text("2026-12-01T09:00:00+00:00\n")
    shutil.copytree(fixtures / "hang", folder / "hana")
    shutil.copytree(fixtures / "crash", folder / "cyrus")
    for student in ("hana", "cyrus"):
        (folder / student / "timestamp.txt").write_text("2026-12-01T11:00:00+00:00\n")
    return folder


def test_a_students_diagrams_sit_beside_their_page_under_their_pseudonym_and_go_when_switched_off(
    grades: Path, tmp_path: Path
) -> None:
    from grader.core.timeline import Call, Group, Timeline

    store = RecordStore(grades / "records")
    record = store.get("s_25")
    assert record is not None
    calls = tuple(Call(r, 0, "recv", 1 - r, None, 16, 0, "0", 0.001 * r, None) for r in (0, 1))
    hang = Timeline(
        test="test_steps[2ranks]", number="1.2", part="01.ring", concept="steps", world_size=2,
        status="timeout", verdict="timed out: s_25's ranks", calls=calls, groups=(Group("0", (0, 1)),),
        stuck=((0, "blocked in dist.recv"), (1, "blocked in dist.recv")),
    )  # fmt: skip
    store.put(dataclasses.replace(record, result=dataclasses.replace(record.result, timelines=(hang,))))
    plain = write_report(grades, tmp_path / "plain").parent / "students"
    [page] = (plain / "s_25" / "diagrams").glob("*.html")
    assert 'href="s_25/diagrams/1.2-test_steps-2ranks.html"' in (plain / "s_25.html").read_text()
    assert "rank 0 waits for rank 1, which waits for rank 0" in page.read_text()
    hidden = write_report(grades, tmp_path / "anon", anonymize=True).parent / "students"
    [anonymous] = [p for p in hidden.iterdir() if p.is_dir()]
    assert "s_25" not in anonymous.name and "s_25" not in next(anonymous.glob("diagrams/*.html")).read_text()
    write_report(grades, tmp_path / "plain", diagrams=False)
    assert not list((plain / "s_25" / "diagrams").glob("*.html"))
    assert "diagrams are off" in (plain / "s_25.html").read_text()
