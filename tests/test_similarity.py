"""Similarity across a class: a renamed, reformatted copy is flagged, code that everyone (or two students)
write alike is not; the report's pages, CSV and pseudonyms; `grade similarity` and `grade report`; the
pages in a real browser."""

from __future__ import annotations

import csv
import html
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import cli
from grader.classroom.batch import BatchPlan, PendingGrade, invalid_result
from grader.classroom.outputs.class_report import pseudonyms, write_report
from grader.classroom.outputs.similarity import (
    DEFAULT_THRESHOLD,
    MIN_SHARED,
    Pair,
    Similarity,
    compare_class,
    read_submissions,
)
from grader.classroom.outputs.similarity_report import record_submissions, write_pages, write_similarity
from grader.classroom.state.records import Record, RecordStore
from grader.cli.parser import build_parser
from grader.core.course import Course
from grader.core.results import ExerciseResult, Status

# Two ring all-reduces and a recursive doubling written independently of the reference.
CAROL_RING = """\
size = dist.get_world_size(group)
me = dist.get_rank(group)
if size < 2:
    return
nxt = _global(group, (me + 1) % size)
prv = _global(group, (me + size - 1) % size)
pieces = list(torch.tensor_split(tensor.view(-1), size))
for phase in ("reduce", "gather"):
    for step in range(size - 1):
        if phase == "reduce":
            out_idx, in_idx = (me - step) % size, (me - step - 1) % size
        else:
            out_idx, in_idx = (me - step + 1) % size, (me - step) % size
        got = torch.empty_like(pieces[in_idx])
        handle = dist.isend(pieces[out_idx], nxt, group=group)
        dist.recv(got, prv, group=group)
        handle.wait()
        if phase == "reduce":
            pieces[in_idx].add_(got)
        else:
            pieces[in_idx].copy_(got)
"""
DAVE_RING = """\
world, rank = dist.get_world_size(group), dist.get_rank(group)
if world == 1:
    return
flat = tensor.view(-1)
bounds = [len(c) for c in torch.tensor_split(torch.arange(flat.numel()), world)]
starts = [sum(bounds[:i]) for i in range(world)]
def part(i):
    i %= world
    return flat[starts[i] : starts[i] + bounds[i]]
send_to, recv_from = _global(group, (rank - 1) % world), _global(group, (rank + 1) % world)
for k in range(2 * (world - 1)):
    outgoing = part(rank + k).clone()
    incoming = torch.zeros_like(part(rank + k + 1))
    ops = [dist.P2POp(dist.isend, outgoing, send_to, group)]
    ops.append(dist.P2POp(dist.irecv, incoming, recv_from, group))
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    if k < world - 1:
        part(rank + k + 1).add_(incoming)
    else:
        part(rank + k + 1).copy_(incoming)
"""
ERIN_DOUBLING = """\
n, me = dist.get_world_size(group), dist.get_rank(group)
core = 1
while core * 2 <= n:
    core *= 2
spare = torch.empty_like(tensor)
if me >= core:
    dist.send(tensor, _global(group, me - core), group=group)
    dist.recv(tensor, _global(group, me - core), group=group)
    return
if me + core < n:
    dist.recv(spare, _global(group, me + core), group=group)
    tensor.add_(spare)
bit = 1
while bit < core:
    other = _global(group, me ^ bit)
    if me & bit:
        dist.recv(spare, other, group=group)
        dist.send(tensor, other, group=group)
    else:
        dist.send(tensor, other, group=group)
        dist.recv(spare, other, group=group)
    tensor.add_(spare)
    bit <<= 1
if me + core < n:
    dist.send(tensor, _global(group, me + core), group=group)
"""
HEAP_TREE = "return [(r - 1) // 2 if r else -1 for r in range(p)]\n"
"""The binary tree everyone writes: a heap's parents."""


def fill(stub: str, function: str, body: str) -> str:
    """``stub`` with ``function``'s ``raise NotImplementedError`` replaced by ``body``."""
    head = stub.index(f"def {function}(")
    start = stub.index("    raise NotImplementedError", head)
    end = stub.index("\n", start) + 1
    return stub[:start] + "".join(f"    {line}\n" for line in body.splitlines()) + stub[end:]


def disguise(source: str) -> str:
    """The copy a student hands in: names changed, comments and blank lines gone, two-space indents."""
    renames = {"p": "world", "r": "me", "chunks": "parts", "buf": "scratch", "right": "nxt", "left": "prv"}
    renames |= {"incoming": "got", "req": "handle", "mask": "bit", "partner": "peer", "extra": "spare"}
    lines = []
    for line in source.splitlines():
        code = line.split("  #")[0].rstrip()
        if not code.strip() or code.lstrip().startswith("#"):
            continue
        indent = len(code) - len(code.lstrip())
        lines.append(" " * (indent // 2) + code.lstrip())
    text = "\n".join(lines) + "\n"
    for old, new in renames.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def write_class(folder: Path, files: dict[str, str]) -> dict[str, Path]:
    """One folder per student holding allreduce.py."""
    for student, text in files.items():
        (folder / student).mkdir(parents=True)
        (folder / student / "allreduce.py").write_text(text)
    return {student: folder / student for student in files}


@pytest.fixture(scope="module")
def stub(course: Course) -> str:
    return (course.exercise_dir(course.find("02")) / "allreduce.py").read_text()


def copied_class(course: Course, stub: str, folder: Path) -> dict[str, Path]:
    """alice hands in the reference; bob hands in alice's, renamed and reformatted; carol, dave and erin
    wrote their own ring or recursive doubling; fay handed in the stub; gus wrote the heap tree only."""
    reference = (course.solution_dir(course.find("02")) / "allreduce.py").read_text()
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


def test_a_renamed_reformatted_copy_is_flagged_and_no_other_pair(
    course: Course, stub: str, tmp_path: Path
) -> None:
    subs = copied_class(course, stub, tmp_path / "subs")
    bob = (subs["bob"] / "allreduce.py").read_text()
    assert "world, me = dist.get_world_size(group)" in bob and "#" not in bob  # renamed, comments gone
    found = compare_class(course, course.find("02"), read_submissions(course.find("02"), subs))
    flagged = found.flagged()
    assert [p.students for p in flagged] == [("alice", "bob")]
    assert min(flagged[0].shares) > 0.9 and flagged[0].shared > 10 * MIN_SHARED
    assert "fay" not in {s for p in found.pairs for s in p.students}  # the stub is all boilerplate
    assert all(p.score < DEFAULT_THRESHOLD for p in found.pairs if p is not flagged[0])


def test_code_everyone_writes_alike_flags_nobody(course: Course, stub: str, tmp_path: Path) -> None:
    tree = [HEAP_TREE, HEAP_TREE.replace("r", "rank"), "parents = [(i - 1) // 2 for i in range(p)]\n"]
    tree[2] += "parents[0] = -1\nreturn parents\n"
    everyone = {f"s{i}": fill(stub, "binary_tree", tree[i % 3]) for i in range(6)}
    found = compare_class(
        course,
        course.find("02"),
        read_submissions(course.find("02"), write_class(tmp_path / "all", everyone)),
    )
    assert found.flagged() == [] and len(found.students) == 6

    # Two of them alone share it: too little code to be evidence, however alike.
    two = {"s0": everyone["s0"], "s3": everyone["s3"], "fay": stub, "zoe": stub}
    found = compare_class(
        course, course.find("02"), read_submissions(course.find("02"), write_class(tmp_path / "two", two))
    )
    assert found.flagged() == []
    assert [(p.students, p.score) for p in found.pairs] == [(("s0", "s3"), pytest.approx(1.0))]
    assert found.pairs[0].shared < MIN_SHARED


def test_the_threshold_is_checked_and_its_default_is_the_one_the_help_names(course: Course) -> None:
    with pytest.raises(ValueError, match=r"--threshold must be in \(0, 1\], got 1.5"):
        compare_class(course, course.find("02"), {}, threshold=1.5)
    similarity = build_parser()._subparsers._group_actions[0].choices["similarity"]  # type: ignore[union-attr,index]
    assert f"(default {DEFAULT_THRESHOLD:g})" in similarity.format_help()


# ---------------------------------------------------------------------------------------------------------
# the report


def graded_batch(course: Course, subs: dict[str, Path], folder: Path) -> Path:
    """A batch's folder for ``subs``: a record per student, and ivan's, whose upload was invalid."""
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
    subs = copied_class(course, stub, tmp_path / "subs")
    shutil.copytree(subs["alice"], tmp_path / "subs" / "ivan")  # recorded invalid: never compared
    (tmp_path / "subs" / "alice" / "allreduce.py").write_text(
        "# by alice\n" + (tmp_path / "subs" / "alice" / "allreduce.py").read_text()
    )
    grades = graded_batch(course, subs, tmp_path / "grades")
    record_submissions(grades, tmp_path / "subs")
    return grades, tmp_path / "subs"


def rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_the_report_its_pair_pages_and_csv(course: Course, stub: str, batch: tuple[Path, Path]) -> None:
    grades, _ = batch
    page = write_similarity(grades, course)  # the submissions folder the batch recorded
    assert page == grades / "report" / "similarity.html"
    text = page.read_text()
    assert "Similarity is a reason to look at two submissions, never a verdict." in text
    assert f"at least {DEFAULT_THRESHOLD:g} (<code>--threshold</code>" in text
    assert "<code>exercises/02_ring_tree/allreduce.py</code>" in text  # named as boilerplate
    assert 'href="similarity/alice--bob.html"' in text and "ivan" not in text  # invalid: not compared
    assert "<p>7 students' editable files (allreduce.py) were compared" in text
    pair = (grades / "report" / "similarity" / "alice--bob.html").read_text()
    assert pair.count("<mark>") > 3 and "never a verdict" in pair
    assert "def ring_allreduce(tensor: torch.Tensor, group=None) -" in pair  # the code...
    assert "&gt; None:" in pair and "-> None" not in pair  # ...escaped
    marked = [html.unescape(m).strip() for m in re.findall(r"<mark>(.*?)</mark>", pair, re.DOTALL)]
    given = {line.strip() for line in stub.splitlines()}
    assert len(marked) > 50 and not given & set(marked)  # a match over the stub's lines leaves them unmarked
    [row] = rows(grades / "report" / "similarity.csv")
    assert (row["student_a"], row["student_b"], row["page"]) == ("alice", "bob", "similarity/alice--bob.html")
    assert float(row["score"]) > 0.9 and int(row["shared_chars"]) >= MIN_SHARED

    # A higher threshold than any pair reaches: no pair, and no page left from the run before.
    write_similarity(grades, course, threshold=1.0)
    assert rows(grades / "report" / "similarity.csv") == []
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


def test_grade_similarity_and_grade_report(
    course: Course, batch: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grades, subs = batch
    argv = ["--course", str(course.root / "course.yml")]
    assert (
        cli.main([*argv, "similarity", str(grades), "--threshold", "0.95", "--html", str(tmp_path / "o")])
        == 0
    )
    assert "1 pair(s) to look at (a reason to look, never a verdict)" in capsys.readouterr().out
    assert rows(tmp_path / "o" / "similarity.csv")[0]["student_a"] == "alice"

    # `grade report --anonymize` rewrites the similarity report with the same pseudonyms...
    assert cli.main([*argv, "report", str(grades), "--anonymize"]) == 0
    assert "alice" not in (grades / "report" / "similarity.csv").read_text()
    # ...or, the submissions gone, removes it rather than leave other names linked from the class page.
    subs.rename(tmp_path / "moved")
    assert cli.main([*argv, "report", str(grades)]) == 0
    assert not (grades / "report" / "similarity.html").exists()
    assert 'href="similarity.html"' not in (grades / "report" / "index.html").read_text()
    assert cli.main([*argv, "similarity", str(grades)]) == 2
    assert "no such folder of submissions" in capsys.readouterr().out
    assert cli.main([*argv, "similarity", str(grades), "--submissions", str(tmp_path / "moved")]) == 0


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


def test_a_student_id_cannot_run_as_a_formula_in_the_csv(course: Course, tmp_path: Path) -> None:
    evil = '=HYPERLINK("http://evil.example","open")'
    pair = Pair((evil, "bob"), score=1.0, shares=(1.0, 1.0), shared=10 * MIN_SHARED, files=())
    found = Similarity(course.find("02"), (evil, "bob"), (pair,), DEFAULT_THRESHOLD, ())
    write_pages(found, tmp_path, {evil: evil, "bob": "bob"})
    [row] = rows(tmp_path / "similarity.csv")
    assert (row["student_a"], row["student_b"], row["score"]) == (f"'{evil}", "bob", "1.000")


def test_grade_report_keeps_the_threshold_and_submissions_grade_similarity_used(
    course: Course, batch: tuple[Path, Path], tmp_path: Path
) -> None:
    grades, subs = batch
    elsewhere = shutil.copytree(subs, tmp_path / "elsewhere")
    argv = ["--course", str(course.root / "course.yml")]
    options = ["--threshold", "0.95", "--submissions", str(elsewhere)]
    assert cli.main([*argv, "similarity", str(grades), *options]) == 0
    subs.rename(tmp_path / "moved")  # the folder the batch graded is gone; the one compared is not
    assert cli.main([*argv, "report", str(grades), "--anonymize"]) == 0
    page = (grades / "report" / "similarity.html").read_text()
    assert "at least 0.95 (<code>--threshold</code>" in page and "alice" not in page


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
        raise RuntimeError("copydetect could not\ntokenize allreduce.py")

    monkeypatch.setattr("grader.classroom.grade.LocalPool", InstantPool)
    monkeypatch.setattr("grader.classroom.outputs.similarity_report.compare_class", broken)
    copied_class(course, stub, tmp_path / "subs")
    out = tmp_path / "out"
    (out / "report").mkdir(parents=True)
    (out / "report" / "similarity.html").write_text("a report of an earlier run")
    argv = ["--course", str(course.root / "course.yml"), "batch", str(tmp_path / "subs"), "--exercise", "02"]
    options = ["--out", str(out), "--device", "cpu", "--gradebook", f"sqlite:///{tmp_path / 'gb.db'}"]
    assert cli.main([*argv, *options, "--allow-unsandboxed"]) == 0
    said = capsys.readouterr().out
    warning = (
        "warning: no similarity report (RuntimeError: copydetect could not tokenize allreduce.py); "
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
    pair = chromium("--dump-dom", (page.parent / "similarity" / "alice--bob.html").as_uri()).stdout
    assert pair.count("<mark>") > 3
    shot = tmp_path / "pair.png"
    chromium(f"--screenshot={shot}", (page.parent / "similarity" / "alice--bob.html").as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] >= 1000 and pixels.std() > 0.05, "a blank screenshot"
