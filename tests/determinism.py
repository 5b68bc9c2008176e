"""A class built from the course's corpora, graded twice by ``grade batch``, and what differs (issue 29).

Shared by ``benchmarks/bench_determinism.py`` (a class of 200 or more) and ``tests/test_determinism.py``
(about 40, in the slow tier). One class folder per exercise, one member per student:
- ``reference``: the reference solution's files;
- ``stubs``: the fresh stubs (``grade stubs``), and ``stub-<file>``: the reference with that one file a stub
  (exercises with several files: a student who did some of the work);
- ``alt-*``: an alternative-correct case of ``tests/validity/NN_slug/`` laid over the reference;
- ``bug-<name>``: a bug of ``tests/corpus/NN_slug.yml`` applied to the reference; kind ``hang`` when the
  corpus says it times out;
- ``adv-<id>``: an item of the adversarial corpus (``tests/adversarial/items.yml``, exercise 02 only), built
  by ``test_adversarial.build_item``.

Each class is graded as ``python -m grader.cli batch`` grades it, in a process of its own; the grades are
read back from the batch's records. ``differences`` compares two gradings of the same class, per student
(score, verdict) and per test (status, score).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from leftovers import kill_processes_with
from test_adversarial import ITEMS, MARKER, build_item, local_sandbox

from grader.authoring.stubs import render_stub
from grader.authoring.validate import alt_cases, bug_corpus, mutated
from grader.classroom.state.records import RecordStore
from grader.core.course import Course, Exercise
from grader.core.results import ExerciseResult

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CANARY = "distgpu-determinism-no-secret"
"""What the adversarial items that hunt another submission's secret are given to look for."""


@dataclass(frozen=True)
class Member:
    exercise: str
    student: str
    kind: str
    """reference, stub, alt, bug, hang, or ``adversarial:<group>``."""

    @property
    def adversarial(self) -> bool:
        return self.kind.startswith("adversarial")

    @property
    def key(self) -> str:
        return f"{self.exercise}/{self.student}"


# ---------------------------------------------------------------------------------------------------------
# building a class


def build_class(
    folder: Path,
    course: Course,
    exercise: Exercise,
    *,
    adversarial: Sequence[str] = (),
    only: Collection[str] | None = None,
) -> tuple[list[Member], list[str]]:
    """Write one submission per member into ``folder`` (created): every member of the corpora, or those
    named in ``only``; plus the ``adversarial`` items. Return the members and the items left out (an item
    that needs the local sandbox where it does not work here), each with why."""
    folder.mkdir(parents=True)
    reference = course.solution_dir(exercise)
    members = []
    for student, kind, files in _corpus_members(course, exercise):
        if only is None or student in only:
            _write(folder / student, files)
            members.append(Member(exercise.key, student, kind))
    left_out = []
    no_sandbox = local_sandbox()
    source = (reference / "allreduce.py").read_text() if adversarial else ""
    for item_id in adversarial:
        item = ITEMS[item_id]
        if item.get("local") == "sandbox" and no_sandbox:
            left_out.append(f"adv-{item_id}: needs the local sandbox ({no_sandbox})")
            continue
        build_item(item, folder / f"adv-{item_id}", source, REPO, CANARY)
        members.append(Member(exercise.key, f"adv-{item_id}", f"adversarial:{item['group']}"))
    folder.chmod(0o755)  # ranks read the submissions as a uid of their own
    return members, left_out


def _corpus_members(course: Course, exercise: Exercise) -> list[tuple[str, str, dict[str, str]]]:
    """(student, kind, files by name) for the reference, the stubs, the alt-correct cases and the bugs."""
    reference = course.solution_dir(exercise)
    own = {name: (reference / name).read_text() for name in exercise.files}
    stubs = {name: render_stub(text, name) for name, text in own.items()}
    found = [("reference", "reference", own), ("stubs", "stub", stubs)]
    if len(own) > 1:
        found += [(f"stub-{Path(n).stem}", "stub", own | {n: stubs[n]}) for n in exercise.files]
    for case in alt_cases(TESTS, exercise):
        laid = {n: (case / n).read_text() for n in exercise.files if (case / n).is_file()}
        found.append((case.name, "alt", own | laid))
    for bug in bug_corpus(TESTS, exercise):
        with mutated(reference, bug) as mutant:
            files = {name: (mutant / name).read_text() for name in exercise.files}
        kind = "hang" if bug.get("verdict") == "timeout" else "bug"
        found.append((f"bug-{bug['name']}", kind, files))
    return found


def _write(dest: Path, files: dict[str, str]) -> None:
    dest.mkdir()
    for name, text in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text)


def adversarial_ids() -> list[str]:
    """Every item of the adversarial corpus, in its manifest's order."""
    manifest = yaml.safe_load((TESTS / "adversarial" / "items.yml").read_text())
    return [item["id"] for item in manifest["items"]]


# ---------------------------------------------------------------------------------------------------------
# grading it


def grade_class(
    subs: Path, exercise: str, out: Path, *, workers: int, shuffle: int | None = None
) -> dict[str, ExerciseResult]:
    """Grade the class in ``subs`` with ``grade batch`` (``--workers``, ``--shuffle``) into ``out``
    (created; the batch's output in out/batch.log); return each recorded grade by student (a grading
    that ended in an ERROR verdict is not recorded, so it has none). ``RuntimeError`` when the batch fails
    (a reference that loses points stops it) or a record cannot be read back."""
    out.mkdir(parents=True)
    command = [sys.executable, "-m", "grader.cli", "--course", str(REPO / "course.yml"), "batch", str(subs)]
    command += ["--exercise", exercise, "--workers", str(workers), "--device", "cpu"]
    command += ["--out", str(out / "grades"), "--gradebook", f"sqlite:///{out / 'gradebook.db'}"]
    command += [] if shuffle is None else ["--shuffle", str(shuffle)]
    with (out / "batch.log").open("w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=out, check=False).returncode
    if code:
        tail = (out / "batch.log").read_text(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"grade batch --exercise {exercise} exited with {code}: " + " | ".join(tail))
    records = out / "grades" / "records"
    grades = {r.student: r.result for r in RecordStore(records, sweep=False).all()}
    if len(grades) != len(list(records.glob("*.json"))):  # a record this code cannot read is no grade
        raise RuntimeError(f"{records}: only {len(grades)} records could be read back")
    return grades


def kill_leftovers() -> list[str]:
    """Processes an adversarial item left running on purpose (``MARKER`` in their command line): each is
    named and killed."""
    return kill_processes_with(MARKER)


# ---------------------------------------------------------------------------------------------------------
# comparing two gradings


@dataclass(frozen=True)
class Difference:
    student: str
    """``NN/student``."""
    test: str
    """The test's name; empty for the submission as a whole (score, verdict)."""
    first: str
    second: str


def differences(
    first: dict[str, ExerciseResult], second: dict[str, ExerciseResult], members: Sequence[Member] = ()
) -> list[Difference]:
    """What differs between two gradings of the same class, keyed ``NN/student``: a grade present in one
    only, a score or verdict, and each test's status or score. A member of ``members`` with a grade in
    neither run counts too (``no grade -> no grade``): a class nobody graded must not compare as equal."""
    found = [
        Difference(m.key, "", "no grade", "no grade") for m in members if m.key not in {**first, **second}
    ]
    for student in sorted(set(first) | set(second)):
        one, two = first.get(student), second.get(student)
        if _overall(one) != _overall(two):
            found.append(Difference(student, "", _overall(one), _overall(two)))
        if one is None or two is None:
            continue
        tests_one, tests_two = _tests(one), _tests(two)
        for name in sorted(set(tests_one) | set(tests_two)):
            a, b = tests_one.get(name, "not run"), tests_two.get(name, "not run")
            if a != b:
                found.append(Difference(student, name, a, b))
    return found


def _overall(result: ExerciseResult | None) -> str:
    return "no grade" if result is None else f"{result.score:g}/{result.max_score:g} {result.verdict}"


def _tests(result: ExerciseResult) -> dict[str, str]:
    return {
        (t.name if t.suite == "hidden" else f"{t.suite}:{t.name}"): f"{t.status} {t.score:g}"
        for t in result.tests
    }


def describe(members: Sequence[Member], found: Sequence[Difference]) -> list[str]:
    """The differences as lines, per student then per test, each student with its kind; and a summary
    line that counts the well-behaved (non-adversarial) submissions apart."""
    kinds = {m.key: m.kind for m in members}
    lines = []
    for diff in found:
        where = diff.test or "grade"
        lines.append(
            f"  {diff.student} [{kinds.get(diff.student, '?')}] {where}: {diff.first} -> {diff.second}"
        )
    students = {d.student for d in found}
    honest = {s for s in students if not kinds.get(s, "").startswith("adversarial")}
    lines.append(
        f"{len(students)} of {len(members)} submissions differ ({len(honest)} well-behaved, "
        f"{len(students) - len(honest)} adversarial); {sum(bool(d.test) for d in found)} test differences"
    )
    return lines
