"""The course's catalogue: the frozen tree of sections, exercises, parts and concepts that course.yml and the
exercises' concepts.yml describe (``grader.core.course`` reads them into it).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from grader.core.errors import UsageError

DEVICES = ("cpu", "gpu")
"""What a part's ``device`` may be."""
CORE_SHARE_FLOOR = 0.10
"""The least share of its exercise's points each core concept costs on its own (issue 41: a bug that breaks
only that concept loses that share, so a summed misconception no longer hides a 3 % concept)."""


class CourseConfigError(UsageError):
    """``course.yml`` is malformed; the message says where and why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Concept:
    name: str
    """What ``@pytest.mark.concept(name)`` names; unique within its exercise."""
    weight: float
    """Relative to the part's other concepts: the concept is worth ``weight / sum(weights)`` of the part."""
    idea: str
    """The idea in one sentence, shown to a student who lost the concept's points."""
    why: str = ""
    """One line for authors: why the concept weighs what it does. Not in feedback, but concepts.yml ships to
    students, so it names no answer."""
    core: str | None = None
    """The misconception the concept guards, where a TA would call missing it "did not understand the
    exercise"; each core concept is worth at least ``CORE_SHARE_FLOOR`` of its exercise on its own."""
    minor: str | None = None
    """Instead of ``core``: one line saying why missing this stated contract is not missing the exercise."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Part:
    id: str
    """Dotted id used everywhere: test marker, report key, stub message (e.g. '02.ring_allreduce')."""
    points: float
    """Split over the part's concepts by weight; a concept is earned only when all its tests pass."""
    world_sizes: tuple[int, ...]
    """Ranks the suite runs the part on; tests taking the ``world`` fixture are parametrized over these."""
    timeout: float = 10.0
    """Seconds per test. Tests take milliseconds on a warm world, so 10 s only ever trips on a hang."""
    device: str = "cpu"
    """'cpu': runs anywhere (gloo on CPU, NCCL on GPUs); 'gpu': needs one GPU per rank, else blocked."""
    gpus: int | None = None
    """GPUs the world's ranks share (rank r on GPU r % gpus); None: one per rank. Fewer GPUs than ranks
    means a gloo process group (NCCL refuses two ranks on one GPU), e.g. CUDA IPC between processes."""
    nodes: int = 1
    """Nodes the ranks spread over on a cluster (each world size a multiple of it); one machine runs all."""
    concepts: tuple[Concept, ...] = ()
    """From the exercise's concepts.yml; empty when it declares none (the part is then one concept)."""

    def gpus_needed(self, size: int) -> int:
        """GPUs a world of ``size`` ranks of this part uses on a CUDA run."""
        return size if self.gpus is None else min(self.gpus, size)

    @property
    def name(self) -> str:
        """'ring_allreduce' for '02.ring_allreduce'."""
        return self.id.split(".", 1)[1]

    def concept(self, name: str) -> Concept | None:
        return next((c for c in self.concepts if c.name == name), None)

    def concept_points(self, name: str, among: Collection[str] | None = None) -> float:
        """The points ``name`` is worth: the part split by weight over its concepts, or over those in
        ``among`` alone (the concepts a run has tests for); the whole part when it declares no concepts."""
        concept = self.concept(name)
        if concept is None:
            return self.points if not self.concepts else 0.0
        counted = [c for c in self.concepts if among is None or c.name in among]
        return self.points * concept.weight / sum(c.weight for c in counted)


@dataclass(frozen=True, kw_only=True, slots=True)
class Exercise:
    number: int
    """Fixed forever: students type ``grade exercise 04``."""
    slug: str
    """Also accepted by ``grade exercise``; names the folders exercises/NN_slug and solutions/NN_slug."""
    title: str
    section: int
    files: tuple[str, ...] = ()
    """The modules a student edits, relative to the exercise folder; the only files read from a submission."""
    timeout: float = 120.0
    """Wall-clock budget for the whole grading run; tests not started by then get 'timeout'."""
    parts: tuple[Part, ...] = ()
    """Empty while the exercise is not written yet."""
    deadline: datetime | None = None
    """When submissions are due (ISO 8601 with a time zone); ``grade batch --late`` records lateness."""
    memory_gb: float = 4.0
    """Memory one grading needs per node; ``grade batch --backend slurm`` asks Slurm for it."""
    preload: tuple[str, ...] = ()
    """Modules the rank factory imports once, before it forks ranks, besides torch: what the rank programs
    would otherwise import in every rank (``torch.fx.experimental.symbolic_shapes``, with sympy, which
    ``backward(grad)`` imports; ``torch._dynamo``, which an optimizer's first ``step()`` imports)."""
    problem: str | None = None
    """Why the exercise cannot be used (a file of it missing, its concepts.yml malformed), as the loader's
    error says it; None when it is whole. ``Course.find`` refuses a broken exercise with it, and the rest of
    the course works: each exercise stands alone."""

    @property
    def key(self) -> str:
        return f"{self.number:02d}"

    @property
    def dirname(self) -> str:
        return f"{self.number:02d}_{self.slug}"

    @property
    def points(self) -> float:
        return sum(p.points for p in self.parts)

    def share(self, part: Part, concept: Concept) -> float:
        """``concept``'s share of the exercise's points (0..1): what losing it alone costs."""
        return part.concept_points(concept.name) / self.points if self.points else 0.0

    def usable(self) -> Exercise:
        """The exercise, for a command that needs it; ``CourseConfigError`` saying why when it is broken."""
        if self.problem:
            raise CourseConfigError(f"exercise {self.key} ({self.slug}) cannot be used: {self.problem}")
        return self

    def core_shares(self) -> dict[tuple[str, str], float]:
        """Each core concept's share of the exercise's points, by (part id, concept name)."""
        return {
            (part.id, concept.name): self.share(part, concept)
            for part in self.parts
            for concept in part.concepts
            if concept.core is not None
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    threshold: float
    """Fraction of the section's points (0 < threshold <= 1) that ``grade checkpoint N`` needs to pass."""
    summary: str
    """What a learner who passed can now do; printed when the checkpoint passes."""
    concept_floor: float = 0.5
    """Every concept of the section must score at least this fraction of its points (concepts are
    all-or-nothing, so: every concept earned), whatever the section's total."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Section:
    number: int
    title: str
    exercises: tuple[Exercise, ...]
    checkpoint: Checkpoint | None = None
    """None: the section has no checkpoint yet."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmSettings:
    """course.yml's ``slurm:`` section: how ``grade batch --backend slurm`` asks the cluster for resources."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    sbatch: tuple[str, ...] = ()
    """Extra sbatch options, one per entry (``--constraint=a100``); written as ``#SBATCH`` lines."""
    runner: str = "local"
    """How each array task grades inside its allocation: 'local' or 'docker'."""
    per_task: int = 1
    """Submissions one array task grades in turn (fewer, longer tasks: less scheduling overhead)."""
    gpus: str = "gres"
    """How GPUs are requested: 'gres' (``--gres=gpu:N``) or 'gpus' (``--gpus-per-node=N``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Course:
    title: str
    root: Path
    sections: tuple[Section, ...]
    slurm: SlurmSettings = SlurmSettings()
    version: str | None = None
    """The course's own version (course.yml ``version``), printed by ``grade --version``."""

    @property
    def exercises(self) -> tuple[Exercise, ...]:
        return tuple(e for s in self.sections for e in s.exercises)

    def exercise_dir(self, exercise: Exercise) -> Path:
        return self.root / "exercises" / exercise.dirname

    def given_files(self, exercise: Exercise) -> frozenset[str]:
        """The names of the files the course ships in the exercise's folder beside the editable ones (the
        README, the public tests, the hints): a student's checkout holds them, and staging ignores them."""
        folder = self.exercise_dir(exercise)
        shipped = {p.name for p in folder.iterdir() if p.is_file()} if folder.is_dir() else set()
        return frozenset(shipped - set(exercise.files))

    def solution_dir(self, exercise: Exercise) -> Path:
        return self.root / "solutions" / exercise.dirname

    @property
    def broken(self) -> tuple[Exercise, ...]:
        """The exercises that cannot be used (``Exercise.problem``)."""
        return tuple(e for e in self.exercises if e.problem)

    def with_exercises(self, change: Callable[[Exercise], Exercise]) -> Course:
        """The course with ``change`` applied to each of its exercises."""
        sections = (replace(s, exercises=tuple(change(e) for e in s.exercises)) for s in self.sections)
        return replace(self, sections=tuple(sections))

    def find(self, ref: str) -> Exercise:
        """Resolve '4', '04' or 'nccl_internals' to an exercise; ``UsageError`` with a hint otherwise, and
        ``CourseConfigError`` for an exercise that cannot be used (``Exercise.problem``)."""
        for exercise in self.exercises:
            if ref == exercise.slug or (ref.isdigit() and int(ref) == exercise.number):
                return exercise.usable()
        hint = difflib.get_close_matches(ref, [e.slug for e in self.exercises], n=1)
        raise UsageError(f"no exercise {ref!r}" + (f"; did you mean {hint[0]!r}?" if hint else ""))

    def part(self, part_id: str) -> Part:
        for exercise in self.exercises:
            for part in exercise.parts:
                if part.id == part_id:
                    return part
        raise KeyError(part_id)

    def section(self, ref: str) -> Section:
        """Resolve '1' to section 1; ``UsageError`` naming the sections there are otherwise."""
        for section in self.sections:
            if ref.isdigit() and int(ref) == section.number:
                return section
        numbers = ", ".join(str(s.number) for s in self.sections)
        raise UsageError(f"no section {ref!r}; the sections are {numbers}")
