"""The similarity report of a graded batch: clusters first, then pairs, the pair pages, the CSVs and
pseudonyms; `grade similarity` (with --against, on a batch already graded: nothing is regraded) and
`grade report`; the pages in a real browser."""

from __future__ import annotations

import csv
import html
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from similarity_cases import (
    CAROL_RING,
    DAVE_RING,
    ERIN_DOUBLING,
    HEAP_TREE,
    REFERENCE,
    disguise,
    fill,
    write_class,
)

from grader import cli
from grader.classroom.batch import BatchPlan, PendingGrade, invalid_result
from grader.classroom.outputs.class_report import pseudonyms, write_report
from grader.classroom.outputs.similarity import DEFAULT_THRESHOLD, Similarity
from grader.classroom.outputs.similarity_pair import MIN_SHARED, Pair
from grader.classroom.outputs.similarity_report import record_submissions, write_pages, write_similarity
from grader.classroom.state.records import Record, RecordStore
from grader.cli.parser import build_parser
from grader.core.course import Course
from grader.core.results import ExerciseResult, Status

PAIR = "similarity/alice--bob.html"
WITH_REFERENCE = "similarity/alice--solutions_02_ring_tree.html"


@pytest.fixture(scope="module")
def stub(course: Course) -> str:
    return (course.exercise_dir(course.find("02")) / "allreduce.py").read_text()


def copied_class(stub: str, folder: Path) -> dict[str, Path]:
    """alice hands in the reference; bob hands in alice's, disguised; carol, dave and erin wrote their own
    ring or recursive doubling; fay handed in the stub; gus wrote the heap tree only."""
    reference = REFERENCE.read_text()
    return write_class(
        folder,
        {
            "alice": reference,
            "bob": disguise(reference),
            "carol": fill(stub, "ring_allreduce", CAROL_RING),
            "dave": fill(stub, "ring_allreduce", DAVE_RING),
            "erin": fill(stub, "recursive_doubling_allreduce", ERIN_DOUBLING),
            "fay": stub,
            "gus": fill(stub, "binary_tree", HEAP_TREE),
        },
    )


def graded_batch(course: Course, subs: dict[str, Path], folder: Path) -> Path:
    """A batch's folder for ``subs`` as ``grade batch`` leaves it (no grading here): a record per student,
    and ivan's, whose upload was invalid."""
    exercise = course.find("02")
    store = RecordStore(folder / "records")
    for student in subs:
        result = ExerciseResult.for_every_part(
            exercise=exercise, status=Status.FAILED, reason="wrong", graded=student, device="cpu"
        )
        store.put(Record(student, "k", result, None, {"allreduce.py": "0" * 64}))
    store.put(Record("ivan", "k", invalid_result(exercise, "the archive is corrupt", "ivan", "cpu"), None))
    return folder


@pytest.fixture
def batch(course: Course, stub: str, tmp_path: Path) -> tuple[Path, Path]:
    subs = copied_class(stub, tmp_path / "subs")
    shutil.copytree(subs["alice"], tmp_path / "subs" / "ivan")  # recorded invalid: never compared
    (tmp_path / "subs" / "alice" / "allreduce.py").write_text(
        "# by alice\n" + (tmp_path / "subs" / "alice" / "allreduce.py").read_text()
    )
    grades = graded_batch(course, subs, tmp_path / "grades")
    record_submissions(grades, tmp_path / "subs")
    return grades, tmp_path / "subs"


def rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_the_report_clusters_first_its_pair_pages_and_csvs(
    course: Course, stub: str, batch: tuple[Path, Path]
) -> None:
    grades, subs = batch
    page = write_similarity(grades, course)  # the submissions folder the batch recorded
    assert page == grades / "report" / "similarity.html"
    text = page.read_text()
    assert "Similarity is a reason to look at two submissions, never a verdict." in text
    assert f"at least {DEFAULT_THRESHOLD:g} (<code>--threshold</code>" in text
    assert "<code>exercises/02_ring_tree/allreduce.py</code>" in text  # named as boilerplate
    assert (
        "known sources (<code>solutions/02_ring_tree</code>, the reference)" in text
        and "Nothing is ignored" in text
    )
    assert f'href="{PAIR}"' in text and "ivan" not in text  # invalid: not compared
    assert "<p>7 students' editable files (allreduce.py) were compared" in text
    assert text.index("<h2>Clusters (1)</h2>") < text.index("<h2>Pairs to look at (3)</h2>")
    assert 'solutions/02_ring_tree <span class="source">(the reference)</span>' in text

    [cluster] = rows(grades / "report" / "clusters.csv")
    assert (cluster["students"], cluster["sources"], cluster["reference"]) == (
        "alice; bob",
        "solutions/02_ring_tree",
        "yes",
    )
    assert (cluster["size"], cluster["pairs"], float(cluster["held_together"])) == ("3", "3", 1.0)
    pairs = rows(grades / "report" / "similarity.csv")
    assert [(r["student_a"], r["student_b"], r["source"], r["page"]) for r in pairs] == [
        ("alice", "bob", "", PAIR),
        ("alice", "solutions/02_ring_tree", "reference", WITH_REFERENCE),
        ("bob", "solutions/02_ring_tree", "reference", "similarity/bob--solutions_02_ring_tree.html"),
    ]
    assert all(float(r["score"]) > 0.9 and int(r["shared_tokens"]) >= MIN_SHARED for r in pairs)

    pair = (grades / "report" / PAIR).read_text()
    assert pair.count("<mark>") > 3 and "never a verdict" in pair
    assert "def ring_allreduce(tensor: torch.Tensor, group=None) -" in pair  # the code...
    assert "&gt; None:" in pair and "-> None" not in pair  # ...escaped
    marked = [html.unescape(m).strip() for m in re.findall(r"<mark>(.*?)</mark>", pair, re.DOTALL)]
    given = {line.strip() for line in stub.splitlines()}
    assert len(marked) > 50 and not given & set(marked)  # a match over the stub's lines leaves them unmarked

    # The copies gone: no pair, no cluster, and no page left from the run before.
    for student in ("alice", "bob"):
        (subs / student / "allreduce.py").write_text(stub)
    write_similarity(grades, course)
    assert rows(grades / "report" / "similarity.csv") == rows(grades / "report" / "clusters.csv") == []
    assert list((grades / "report" / "similarity").iterdir()) == []
    assert "No pair reaches the threshold." in page.read_text()


def test_anonymized_report_uses_the_class_reports_pseudonyms(
    course: Course, batch: tuple[Path, Path]
) -> None:
    grades, _ = batch
    write_similarity(grades, course, anonymize=True)
    index = write_report(grades, anonymize=True)
    name = pseudonyms(grades, ["alice", "bob"])
    assert (
        f'href="similarity/{name["alice"]}--{name["bob"]}.html"'
        in (grades / "report" / "similarity.html").read_text()
    )
    assert 'href="similarity.html"' in index.read_text()  # the class page links to it
    for path in (grades / "report").rglob("*"):
        if path.suffix in (".html", ".csv"):
            text = path.read_text()
            assert not re.search(r"\b(alice|bob|carol|dave|erin|fay|gus|ivan)\b", text), path
    pair = (grades / "report" / "similarity" / f"{name['alice']}--{name['bob']}.html").read_text()
    assert f"# by {name['alice']}" in pair  # an id in the code is replaced too


def test_grade_similarity_against_known_sources_on_a_graded_batch_and_grade_report(
    course: Course, stub: str, batch: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grades, subs = batch
    write_class(tmp_path / "2024", {"zed": disguise(fill(stub, "ring_allreduce", CAROL_RING)), "yan": stub})
    leak = tmp_path / "forum" / "leak.py"
    leak.parent.mkdir()
    leak.write_text(disguise(fill(stub, "ring_allreduce", DAVE_RING), seed=3))
    argv = ["--course", str(course.root / "course.yml")]
    options = ["--against", str(tmp_path / "2024"), "--against", str(leak), "--html", str(tmp_path / "o")]
    assert cli.main([*argv, "similarity", str(grades), *options]) == 0
    said = capsys.readouterr().out
    assert "3 cluster(s), 5 pair(s) to look at (a reason to look, never a verdict)" in said
    found = {(r["student_a"], r["student_b"], r["source"]) for r in rows(tmp_path / "o" / "similarity.csv")}
    assert {("carol", "2024/zed", "against-student"), ("dave", "forum/leak.py", "against")} <= found
    assert (
        "2 from <code>2024/</code>; 1 from <code>forum/</code>"
        in (tmp_path / "o" / "similarity.html").read_text()
    )
    assert "2024/yan" not in {
        r["student_b"] for r in rows(tmp_path / "o" / "similarity.csv")
    }  # a stub: no match
    assert all(
        r.result.verdict is Status.FAILED
        for r in RecordStore(grades / "records").all()
        if r.student != "ivan"
    )

    # `grade report --anonymize` compares again with the same sources, the old ids by pseudonym too...
    assert cli.main([*argv, "report", str(grades), "--html", str(tmp_path / "o"), "--anonymize"]) == 0
    text = (tmp_path / "o" / "similarity.csv").read_text()
    assert f"2024/{pseudonyms(grades, ['zed'])['zed']}" in text and "zed" not in text and "carol" not in text
    assert "forum/leak.py" in text  # not a student's id
    # ...or, the submissions gone, removes it rather than leave other names linked from the class page.
    subs.rename(tmp_path / "moved")
    assert cli.main([*argv, "report", str(grades)]) == 0
    assert not (grades / "report" / "similarity.html").exists()
    assert 'href="similarity.html"' not in (grades / "report" / "index.html").read_text()
    assert cli.main([*argv, "similarity", str(grades)]) == 2
    assert "no such folder of submissions" in capsys.readouterr().out
    assert cli.main([*argv, "similarity", str(grades), "--against", str(tmp_path / "nowhere")]) == 2
    moved = ["--submissions", str(tmp_path / "moved"), "--common-min", "10"]
    assert cli.main([*argv, "similarity", str(grades), *moved]) == 0
    assert "code more than 10 students share ignored" in capsys.readouterr().out
    assert "<strong>Common code is on</strong>" in (grades / "report" / "similarity.html").read_text()


def test_the_defaults_are_the_ones_the_help_names() -> None:
    similarity = build_parser()._subparsers._group_actions[0].choices["similarity"]  # type: ignore[union-attr,index]
    assert f"(default {DEFAULT_THRESHOLD:g})" in similarity.format_help()
    assert "--against PATH" in similarity.format_help() and "--common-min N" in similarity.format_help()


def test_anonymizing_replaces_every_id_of_the_class_whole(course: Course, batch: tuple[Path, Path]) -> None:
    grades, subs = batch
    exercise = course.find("02")
    for student in ("bob-jr", "o.k."):  # ids that end at, or hold, a character that is not a word's
        invalid = invalid_result(exercise, "the archive is corrupt", student, "cpu")
        RecordStore(grades / "records").put(Record(student, "k", invalid, None))
    code = subs / "alice" / "allreduce.py"
    code.write_text("# with carol, bob-jr and o.k.\n" + code.read_text())  # not the pair's ids
    write_similarity(grades, course, anonymize=True)
    name = pseudonyms(grades, ["alice", "bob", "carol", "bob-jr", "o.k."])
    pair = (grades / "report" / "similarity" / f"{name['alice']}--{name['bob']}.html").read_text()
    assert f"# with {name['carol']}, {name['bob-jr']} and {name['o.k.']}\n" in pair


def test_a_student_id_cannot_run_as_a_formula_in_the_csvs(course: Course, tmp_path: Path) -> None:
    evil = '=HYPERLINK("http://evil.example","open")'
    pair = Pair((evil, "bob"), score=1.0, shares=(1.0, 1.0), shared=10 * MIN_SHARED, files=())
    found = Similarity(course.find("02"), (evil, "bob"), (pair,), DEFAULT_THRESHOLD, ())
    write_pages(found, tmp_path, {evil: evil, "bob": "bob"})
    [row] = rows(tmp_path / "similarity.csv")
    assert (row["student_a"], row["student_b"], row["score"]) == (f"'{evil}", "bob", "1.000")


def test_grade_report_keeps_the_settings_grade_similarity_used(
    course: Course, batch: tuple[Path, Path], tmp_path: Path
) -> None:
    grades, subs = batch
    elsewhere = shutil.copytree(subs, tmp_path / "elsewhere")
    argv = ["--course", str(course.root / "course.yml")]
    options = ["--threshold", "0.95", "--submissions", str(elsewhere), "--common-min", "5"]
    assert cli.main([*argv, "similarity", str(grades), *options]) == 0
    subs.rename(tmp_path / "moved")  # the folder the batch graded is gone; the one compared is not
    assert cli.main([*argv, "report", str(grades), "--anonymize"]) == 0
    page = (grades / "report" / "similarity.html").read_text()
    assert "at least 0.95 (<code>--threshold</code>" in page and "alice" not in page
    assert "<code>--common-min 5</code>" in page


class InstantPool:
    """Grades without running anything: the reference passes, every student fails."""

    def reference(self, plan: BatchPlan) -> ExerciseResult:
        return ExerciseResult.for_every_part(
            exercise=plan.exercise, status=Status.PASSED, reason="ok", graded="reference", device="cpu"
        )

    def grade(
        self,
        plan: BatchPlan,
        todo: list[PendingGrade],
        store: RecordStore,
        on_result: Callable[[str, ExerciseResult], None],
    ) -> None:
        for pending in todo:
            student = pending.submission.student
            result = ExerciseResult.for_every_part(
                exercise=plan.exercise, status=Status.FAILED, reason="wrong", graded=student, device="cpu"
            )
            store.put(Record(student, pending.key, result, pending.submitted, pending.files))
            on_result(student, result)


def test_a_similarity_failure_leaves_the_class_report_and_one_warning(
    course: Course,
    stub: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the lexer could not\ntokenize allreduce.py")

    monkeypatch.setattr("grader.classroom.grade.LocalPool", InstantPool)
    monkeypatch.setattr("grader.classroom.outputs.similarity_report.compare_class", broken)
    copied_class(stub, tmp_path / "subs")
    out = tmp_path / "out"
    (out / "report").mkdir(parents=True)
    (out / "report" / "similarity.html").write_text("a report of an earlier run")
    argv = ["--course", str(course.root / "course.yml"), "batch", str(tmp_path / "subs"), "--exercise", "02"]
    options = ["--out", str(out), "--device", "cpu", "--gradebook", f"sqlite:///{tmp_path / 'gb.db'}"]
    assert cli.main([*argv, *options, "--allow-unsandboxed"]) == 0
    said = capsys.readouterr().out
    warning = (
        "warning: no similarity report (RuntimeError: the lexer could not tokenize allreduce.py); "
        f"retry with `grade similarity {out}`"
    )
    assert warning in said and "Traceback" not in said
    assert (out / "report" / "index.html").is_file() and not (out / "report" / "similarity.html").exists()


@pytest.mark.slow  # a real browser
def test_a_real_browser_renders_the_report_and_a_pair(
    course: Course, batch: tuple[Path, Path], tmp_path: Path
) -> None:
    import matplotlib.image
    from test_class_report import chromium

    grades, _ = batch
    page = write_similarity(grades, course)
    dom = chromium("--dump-dom", page.as_uri()).stdout
    assert "never a verdict" in dom and "side by side" in dom and "alice" in dom
    assert dom.index("Clusters (1)") < dom.index("Pairs to look at (3)") and "(the reference)" in dom
    pair = chromium("--dump-dom", (page.parent / PAIR).as_uri()).stdout
    assert pair.count("<mark>") > 3
    shot = tmp_path / "pair.png"
    chromium(f"--screenshot={shot}", (page.parent / PAIR).as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] >= 1000 and pixels.std() > 0.05, "a blank screenshot"
