"""``grade validate``: mutation testing for an autograder. Is each exercise's suite fair, and does it bite?

For one exercise it grades, with one runner (one judge process, torch imported once):
  1. the reference ``runs`` times: full marks every time, else the tests that wavered are named (flaky);
  2. the fresh stubs: zero, every test a NotImplementedError;
  3. the alternative-correct corpus, ``tests/validity/NN_slug/alt-*/``: correct solutions written from the
     README alone, laid over a copy of the reference; each must earn full marks (else the suite over-fits);
  4. the bug corpus, ``tests/corpus/NN_slug.yml``: plausible mistakes applied to the reference; each must
     fail a test of the concept it names, and so lose at least that concept's share of the points. A bug
     is graded on the parts it concerns only (``bug_parts``);
  5. the contracts (``grader.authoring.contracts``): every concept is core or marked minor, each core
     concept costs at least ``CORE_SHARE_FLOOR`` of the exercise on its own, and some bug of the corpus
     breaks it alone; a bug failing tests of three or more concepts of its part is flagged (a warning);
  6. the generated inputs: every concept a generated test grades has a bug that the generated cases catch on
     their own (``grader.authoring.generated``);
  7. the timeouts (no grading of its own): each part's slowest reference test, and the slowest whole run,
     against its timeout; under 3x is flagged, as a warning: the figure is this machine's, at its load
     (``grader.authoring.timeouts``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grader.authoring.check import stub_problems
from grader.authoring.contracts import bundle_warnings, contract_rows, isolation_problems, weight_problems
from grader.authoring.generated import generated_problems
from grader.authoring.stubs import fresh_stubs
from grader.authoring.timeouts import PartTime, part_times
from grader.core.atomic import write_atomic
from grader.core.course import Course, Exercise
from grader.core.errors import UsageError
from grader.core.results import ExerciseResult, Status
from grader.runners import GradeJob, Runner

BUG_KEYS = {
    "name",
    "why",
    "file",
    "replace",
    "with",
    "also",
    "concept",
    "loses",
    "keeps",
    "verdict",
    "message",
}
"""What a bug-corpus entry may say (docs/authoring.md); name, why, file, replace, with, concept: always."""
ALT_CASE_FILE = "case.yml"


class CorpusError(UsageError):
    """A corpus entry that cannot be applied (the reference changed under it): the corpus must be fixed."""


@dataclass(frozen=True)
class BugOutcome:
    bug: dict[str, Any]
    result: ExerciseResult
    concept_points: float
    """What the named concept is worth: the least this bug must lose."""
    problem: str | None
    """None when the bug was caught as it must be, or could not be judged here (``blocked``)."""
    blocked: bool = False
    """Every test of the bug's concept was blocked (a GPU part on a CPU run): judged only where it runs."""

    @property
    def loss_share(self) -> float:
        """Points lost over the concept's points (>= 1 when caught)."""
        return _points_lost(self.result) / self.concept_points if self.concept_points else 0.0


@dataclass(frozen=True)
class AltOutcome:
    name: str
    why: str
    result: ExerciseResult

    @property
    def problem(self) -> str | None:
        if self.result.all_graded_passed:
            return None
        lost = [t for t in self.result.tests if t.status not in (Status.PASSED, Status.BLOCKED)]
        first = lost[0].output.splitlines()[0] if lost[0].output else str(lost[0].status)
        return (
            f"alt {self.name}: {self.result.score:g}/{self.result.max_score:g}, {len(lost)} test(s) reject "
            f"a correct solution, first {lost[0].name}: {first}"
        )


@dataclass(frozen=True)
class Validity:
    exercise: Exercise
    references: list[ExerciseResult]
    stubs: ExerciseResult
    alts: list[AltOutcome]
    bugs: list[BugOutcome]
    problems: list[str] = field(default_factory=list)
    timeouts: list[PartTime] = field(default_factory=list)
    """Each part's slowest reference test against its timeout (``grader.authoring.timeouts``)."""
    warnings: list[str] = field(default_factory=list)
    """What deserves a look but fails nothing: a bug that fails tests of many concepts of its part."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def smallest_loss(self) -> float | None:
        """The smallest (points lost / concept points) over the bugs judged here: >= 1 when all are caught."""
        return min((b.loss_share for b in self.bugs if not b.blocked), default=None)

    @property
    def smallest_core_share(self) -> float | None:
        """The smallest core concept's share of the exercise (>= ``CORE_SHARE_FLOOR`` when valid)."""
        return min(self.exercise.core_shares().values(), default=None)

    def graded_bugs(self) -> list[tuple[str, str, ExerciseResult]]:
        """Each bug's name, the concept its entry names, and its result."""
        return [(b.bug["name"], b.bug["concept"], b.result) for b in self.bugs]

    def graded(self) -> dict[str, ExerciseResult]:
        """Every grading by case: 'reference-1'.., 'stubs', each alt's folder name, each bug's name."""
        found = {f"reference-{i}": r for i, r in enumerate(self.references, start=1)}
        found["stubs"] = self.stubs
        found |= {a.name: a.result for a in self.alts}
        return found | {b.bug["name"]: b.result for b in self.bugs}

    def write_results(self, folder: Path) -> None:
        """One results.json-shaped file per grading (``ExerciseResult.to_dict``), named by its case."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, result in self.graded().items():
            write_atomic(folder / f"{name}.json", json.dumps(result.to_dict(), indent=1))

    def summary(self) -> dict[str, Any]:
        """The row of the validity table, as JSON values."""
        stable = sum(r.all_graded_passed for r in self.references)
        core = self.smallest_core_share
        return {
            "exercise": self.exercise.key,
            "slug": self.exercise.slug,
            "reference_stable": f"{stable}/{len(self.references)}",
            "stub_zero": self.stubs.score == 0,
            "alt_full": f"{sum(a.problem is None for a in self.alts)}/{len(self.alts)}",
            "bugs_caught": _caught(self.bugs),
            "smallest_loss_per_concept": None if self.smallest_loss is None else round(self.smallest_loss, 3),
            "smallest_core_share": None if core is None else round(core, 4),
            "concepts": contract_rows(self.exercise, self.references[0], self.graded_bugs()),
            "problems": self.problems,
            "warnings": self.warnings,
            "timeouts": [t.to_dict() for t in self.timeouts],
            "alts": [{"name": a.name, "score": a.result.score, "max": a.result.max_score} for a in self.alts],
            "bugs": [
                {
                    "name": b.bug["name"],
                    "concept": b.bug.get("concept"),
                    "lost": round(b.result.max_score - b.result.score, 6),
                    "concept_points": round(b.concept_points, 6),
                    "loss_of_exercise": round(_points_lost(b.result) / self.exercise.points, 4),
                    "caught": b.problem is None and not b.blocked,
                    "blocked": b.blocked,
                }
                for b in self.bugs
            ],
        }


def validate_exercise(
    *,
    course: Course,
    exercise: Exercise,
    runner: Runner,
    device: str,
    corpus_root: Path,
    runs: int = 3,
    on_step: Callable[[str], None] = lambda what: None,
) -> Validity:
    """Grade the reference ``runs`` times, the stubs, every alt-correct case and every bug of ``exercise``.

    ``corpus_root`` holds ``corpus/NN_slug.yml`` and ``validity/NN_slug/alt-*/``. ``CorpusError`` when an
    entry cannot be applied to the reference.
    """

    def grade(source: Path, label: str, parts: tuple[str, ...] = ()) -> ExerciseResult:
        on_step(label)
        job = GradeJob(
            course=course, exercise=exercise, source=source, label=label, device=device, parts=parts
        )
        return runner.run(job)

    reference_dir = course.solution_dir(exercise)
    references = [grade(reference_dir, f"reference run {i + 1}") for i in range(runs)]
    with fresh_stubs(course, exercise) as folder:
        stubs = grade(folder, "stubs")
    alts = []
    for case in alt_cases(corpus_root, exercise):
        with _overlaid(reference_dir, case) as folder:
            why = yaml.safe_load((case / ALT_CASE_FILE).read_text()).get("why", "")
            alts.append(AltOutcome(case.name, why, grade(folder, case.name)))
    bugs = []
    for bug in bug_corpus(corpus_root, exercise):
        with mutated(reference_dir, bug) as folder:
            result = grade(folder, bug["name"], bug_parts(exercise, bug))
        bugs.append(judge_bug(exercise, bug, result))
    graded = [(b.bug["name"], b.bug["concept"], b.result) for b in bugs]
    problems = weight_problems(exercise) + _reference_problems(references) + stub_problems(stubs)
    problems += [a.problem for a in alts if a.problem] + [b.problem for b in bugs if b.problem]
    problems += generated_problems(references[0], [(name, result) for name, _, result in graded])
    problems += isolation_problems(exercise, references[0], graded)
    timeouts = part_times(exercise, references)
    warnings = bundle_warnings(exercise, graded)
    return Validity(exercise, references, stubs, alts, bugs, problems, timeouts, warnings)


# ---------------------------------------------------------------------------------------------------------
# the corpora


def bug_corpus(corpus_root: Path, exercise: Exercise) -> list[dict[str, Any]]:
    path = corpus_root / "corpus" / f"{exercise.dirname}.yml"
    if not path.is_file():
        return []
    bugs = yaml.safe_load(path.read_text()) or []
    for bug in bugs:
        unknown = set(bug) - BUG_KEYS
        missing = {"name", "why", "file", "replace", "with", "concept"} - set(bug)
        if unknown or missing:
            raise CorpusError(
                f"{path.name}: {bug.get('name')}: unknown {unknown or '-'}, missing {missing or '-'}"
            )
    return bugs


def alt_cases(corpus_root: Path, exercise: Exercise) -> list[Path]:
    folder = corpus_root / "validity" / exercise.dirname
    cases = sorted(p for p in folder.glob("alt-*") if p.is_dir()) if folder.is_dir() else []
    for case in cases:
        if not (case / ALT_CASE_FILE).is_file():
            raise CorpusError(f"{case}: no {ALT_CASE_FILE} saying how the case differs from the reference")
    return cases


def bug_parts(exercise: Exercise, bug: dict[str, Any]) -> tuple[str, ...]:
    """The parts a bug is graded on: its concept's, and those its entry says it loses or keeps (a part's
    tests see the same mutated files either way, so grading the others would only cost time). All the
    parts when the concept is unknown, so that the verdict names the error."""
    own = [
        p.id
        for p in exercise.parts
        if p.concept(bug["concept"]) or (not p.concepts and p.name == bug["concept"])
    ]
    if not own:
        return ()
    named = [*bug.get("loses", ()), *bug.get("keeps", ())]
    return tuple(p.id for p in exercise.parts if p.id in own or p.id in named)


@contextmanager
def _overlaid(reference: Path, case: Path) -> Iterator[Path]:
    """The reference with the case's files written over it."""
    with tempfile.TemporaryDirectory(prefix="distgpu-alt-") as folder:
        shutil.copytree(reference, folder, dirs_exist_ok=True)
        for path in case.iterdir():
            if path.name != ALT_CASE_FILE and path.is_file():
                shutil.copyfile(path, Path(folder) / path.name)
        yield Path(folder)


@contextmanager
def mutated(reference: Path, bug: dict[str, Any]) -> Iterator[Path]:
    """The reference with the bug's ``replace`` -> ``with`` edit, then each of its ``also`` edits (the same
    misconception written in several functions of the file), each matching exactly once."""
    edits = [bug, *bug.get("also", ())]
    with tempfile.TemporaryDirectory(prefix="distgpu-bug-") as folder:
        shutil.copytree(reference, folder, dirs_exist_ok=True)
        target = Path(folder) / bug["file"]
        source = target.read_text()
        for i, edit in enumerate(edits):
            if not isinstance(edit, dict) or source.count(edit.get("replace", "")) != 1 or "with" not in edit:
                where = "'replace'" if i == 0 else f"'also' edit {i}"
                raise CorpusError(
                    f"{bug['name']}: {where} must match {bug['file']} of the reference exactly once"
                )
            source = source.replace(edit["replace"], edit["with"])
        target.write_text(source)
        yield Path(folder)


# ---------------------------------------------------------------------------------------------------------
# verdicts


def judge_bug(exercise: Exercise, bug: dict[str, Any], result: ExerciseResult) -> BugOutcome:
    name = bug["concept"]
    part = next((p for p in exercise.parts if p.concept(name) or (not p.concepts and p.name == name)), None)
    if part is None:
        return BugOutcome(
            bug, result, 0.0, f"bug {bug['name']}: names concept {name!r}, which no part declares"
        )
    points = part.concept_points(name)
    tests = [t for t in result.tests if (t.part, t.concept) == (part.id, name)]
    if tests and all(t.status is Status.BLOCKED for t in tests):
        return BugOutcome(bug, result, points, None, blocked=True)
    lost = _points_lost(result)
    problem = None
    if all(t.status is Status.PASSED for t in tests):
        problem = f"bug {bug['name']}: every test of concept {name!r} passes (the bug goes unnoticed there)"
    elif lost < points - 1e-6:
        problem = f"bug {bug['name']}: loses {lost:g}, less than concept {name!r}'s {points:g} points"
    return BugOutcome(bug, result, points, problem)


def _points_lost(result: ExerciseResult) -> float:
    """Points lost on the tests that ran: a blocked test (a GPU part on a CPU run) is neither won nor lost."""
    ran = [t for t in result.tests if t.status is not Status.BLOCKED]
    return sum(t.max_score for t in ran) - sum(t.score for t in ran)


def _caught(bugs: list[BugOutcome]) -> str:
    """'9/9', or '9/9 (+2 blocked)' when some bugs' concepts could not run here."""
    judged = [b for b in bugs if not b.blocked]
    caught = f"{sum(b.problem is None for b in judged)}/{len(judged)}"
    blocked = len(bugs) - len(judged)
    return caught + (f" (+{blocked} blocked)" if blocked else "")


def _reference_problems(references: list[ExerciseResult]) -> list[str]:
    wavered = sorted(
        {t.name for r in references for t in r.tests if t.status not in (Status.PASSED, Status.BLOCKED)}
    )
    if not wavered:
        return []
    failing_runs = sum(not r.all_graded_passed for r in references)
    kind = "fails" if failing_runs == len(references) else "is flaky"
    return [f"reference {kind} ({failing_runs} of {len(references)} runs): {', '.join(wavered)}"]
