"""``course.yml`` -> a small frozen tree of sections, exercises and parts.

The loader is strict: an unknown key, a wrong type, a duplicate or a missing file raises
``CourseConfigError`` naming the file, the line and the key, with a "did you mean" where one fits.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

DEVICES = ("cpu", "gpu")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class CourseConfigError(ValueError):
    """``course.yml`` is malformed; the message says where and why."""


CONCEPTS_FILE = "concepts.yml"
"""Beside each exercise's public suite: per part, the concepts its tests grade (see docs/authoring.md)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Concept:
    name: str
    """What ``@pytest.mark.concept(name)`` names; unique within its exercise."""
    weight: float
    """Relative to the part's other concepts: the concept is worth ``weight / sum(weights)`` of the part."""
    idea: str
    """The idea in one sentence, shown to a student who lost the concept's points."""


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

    @property
    def key(self) -> str:
        return f"{self.number:02d}"

    @property
    def dirname(self) -> str:
        return f"{self.number:02d}_{self.slug}"

    @property
    def points(self) -> float:
        return sum(p.points for p in self.parts)


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

    @property
    def exercises(self) -> tuple[Exercise, ...]:
        return tuple(e for s in self.sections for e in s.exercises)

    def exercise_dir(self, exercise: Exercise) -> Path:
        return self.root / "exercises" / exercise.dirname

    def solution_dir(self, exercise: Exercise) -> Path:
        return self.root / "solutions" / exercise.dirname

    def find(self, ref: str) -> Exercise:
        """Resolve '4', '04' or 'nccl_internals' to an exercise; ``KeyError`` with a hint otherwise."""
        for exercise in self.exercises:
            if ref == exercise.slug or (ref.isdigit() and int(ref) == exercise.number):
                return exercise
        hint = difflib.get_close_matches(ref, [e.slug for e in self.exercises], n=1)
        raise KeyError(f"no exercise {ref!r}" + (f"; did you mean {hint[0]!r}?" if hint else ""))

    def part(self, part_id: str) -> Part:
        for exercise in self.exercises:
            for part in exercise.parts:
                if part.id == part_id:
                    return part
        raise KeyError(part_id)

    def section(self, ref: str) -> Section:
        """Resolve '1' to section 1; ``KeyError`` naming the sections there are otherwise."""
        for section in self.sections:
            if ref.isdigit() and int(ref) == section.number:
                return section
        numbers = ", ".join(str(s.number) for s in self.sections)
        raise KeyError(f"no section {ref!r}; the sections are {numbers}")


# ---------------------------------------------------------------------------------------------------------
# loading


def load_course(path: Path, *, check_stubs: bool = True) -> Course:
    """Parse and validate ``path``; every problem is a ``CourseConfigError``.

    ``check_stubs=False`` skips the existence check of the generated stubs (for ``grade stubs`` itself).
    """
    try:
        root_node = yaml.compose(path.read_text())
    except yaml.YAMLError as exc:
        raise CourseConfigError(f"{path.name}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise CourseConfigError(f"{path}: cannot read: {exc.strerror}") from None
    reader = _Reader(path)
    top = reader.mapping(root_node, "", required=("course", "sections"), optional=("slurm",))
    sections = tuple(
        reader.section(node, f"sections[{i}]")
        for i, node in enumerate(reader.seq(top["sections"], "sections"))
    )
    course = Course(
        title=reader.string(top["course"], "course"),
        root=path.resolve().parent,
        sections=sections,
        slurm=reader.slurm(top["slurm"], "slurm") if "slurm" in top else SlurmSettings(),
    )
    _check_unique(reader, course)
    _check_files(reader, course, check_stubs)
    return _with_concepts(course)


class _Reader:
    """Typed access to YAML nodes, raising errors that point at the node's line."""

    def __init__(self, path: Path, *, label: str | None = None) -> None:
        self.path = path
        self.label = label or path.name
        self.nodes: dict[str, yaml.Node] = {}

    def fail(self, node: yaml.Node | None, where: str, message: str) -> CourseConfigError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return CourseConfigError(f"{self.label}{line}: {where}: {message}")

    def mapping(
        self, node: yaml.Node, where: str, *, required: tuple[str, ...], optional: tuple[str, ...]
    ) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, where or "top level", "expected a mapping")
        found: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            prefix = f"{where}.{key}" if where else key
            if key not in required + optional:
                close = difflib.get_close_matches(key, required + optional, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.fail(key_node, prefix, f"unknown key{hint}")
            if key in found:
                raise self.fail(key_node, prefix, "given twice")
            found[key] = value_node
            self.nodes[prefix] = value_node
        missing = [k for k in required if k not in found]
        if missing:
            raise self.fail(node, where or "top level", f"missing required key {missing[0]!r}")
        return found

    def seq(self, node: yaml.Node, where: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, where, "expected a list")
        return list(node.value)

    def scalar(self, node: yaml.Node, where: str, kind: type, expect: str) -> Any:
        value = yaml.safe_load(yaml.serialize(node)) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.fail(node, where, f"expected {expect}, got {getattr(node, 'value', node)!r}")
        return value

    def string(self, node: yaml.Node, where: str) -> str:
        return self.scalar(node, where, str, "a string")

    def name(self, node: yaml.Node, where: str) -> str:
        value = self.string(node, where)
        if not _NAME.match(value):
            raise self.fail(node, where, f"expected a lower_snake_case name, got {value!r}")
        return value

    def module(self, node: yaml.Node, where: str) -> str:
        value = self.string(node, where)
        if not _MODULE.match(value):
            raise self.fail(node, where, f"expected a dotted module name, got {value!r}")
        return value

    def integer(self, node: yaml.Node, where: str, minimum: int) -> int:
        value = self.scalar(node, where, int, f"an integer >= {minimum}")
        if value < minimum:
            raise self.fail(node, where, f"expected an integer >= {minimum}, got {value}")
        return value

    def deadline(self, node: yaml.Node, where: str) -> datetime:
        text = str(getattr(node, "value", ""))
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise self.fail(
                node,
                where,
                f"expected an ISO 8601 time with a zone (2027-01-15T23:59:00+00:00), got {text!r}",
            )
        return moment

    def number(self, node: yaml.Node, where: str, *, positive: bool) -> float:
        value = self.scalar(node, where, (int, float), "a number")
        if value < 0 or (positive and value == 0):
            raise self.fail(node, where, f"expected a {'positive' if positive else 'non-negative'} number")
        return float(value)

    # -----------------------------------------------------------------------------------------------------

    def section(self, node: yaml.Node, where: str) -> Section:
        f = self.mapping(node, where, required=("number", "title", "exercises"), optional=("checkpoint",))
        number = self.integer(f["number"], f"{where}.number", 1)
        exercises = tuple(
            self.exercise(n, f"{where}.exercises[{i}]", number)
            for i, n in enumerate(self.seq(f["exercises"], f"{where}.exercises"))
        )
        checkpoint = self.checkpoint(f["checkpoint"], f"{where}.checkpoint") if "checkpoint" in f else None
        return Section(
            number=number,
            title=self.string(f["title"], f"{where}.title"),
            exercises=exercises,
            checkpoint=checkpoint,
        )

    def checkpoint(self, node: yaml.Node, where: str) -> Checkpoint:
        f = self.mapping(node, where, required=("threshold", "summary"), optional=("concept_floor",))
        fractions = {}
        for key in ("threshold", "concept_floor"):
            if key in f:
                fractions[key] = self.number(f[key], f"{where}.{key}", positive=key == "threshold")
                if fractions[key] > 1:
                    raise self.fail(f[key], f"{where}.{key}", "expected a fraction in (0, 1]")
        return Checkpoint(summary=self.string(f["summary"], f"{where}.summary"), **fractions)

    def exercise(self, node: yaml.Node, where: str, section: int) -> Exercise:
        f = self.mapping(
            node,
            where,
            required=("number", "slug", "title"),
            optional=("files", "timeout", "parts", "deadline", "memory_gb", "preload"),
        )
        number = self.integer(f["number"], f"{where}.number", 1)
        extra: dict[str, Any] = {}
        if "files" in f:
            extra["files"] = tuple(
                self.string(n, f"{where}.files[{i}]")
                for i, n in enumerate(self.seq(f["files"], f"{where}.files"))
            )
        if "timeout" in f:
            extra["timeout"] = self.number(f["timeout"], f"{where}.timeout", positive=True)
        if "deadline" in f:
            extra["deadline"] = self.deadline(f["deadline"], f"{where}.deadline")
        if "memory_gb" in f:
            extra["memory_gb"] = self.number(f["memory_gb"], f"{where}.memory_gb", positive=True)
        if "preload" in f:
            extra["preload"] = tuple(
                self.module(n, f"{where}.preload[{i}]")
                for i, n in enumerate(self.seq(f["preload"], f"{where}.preload"))
            )
        if "parts" in f:
            extra["parts"] = tuple(
                self.part(n, f"{where}.parts[{i}]", number)
                for i, n in enumerate(self.seq(f["parts"], f"{where}.parts"))
            )
        return Exercise(
            number=number,
            slug=self.name(f["slug"], f"{where}.slug"),
            title=self.string(f["title"], f"{where}.title"),
            section=section,
            **extra,
        )

    def part(self, node: yaml.Node, where: str, exercise: int) -> Part:
        f = self.mapping(
            node,
            where,
            required=("name", "points", "world_sizes"),
            optional=("timeout", "device", "gpus", "nodes"),
        )
        sizes_where = f"{where}.world_sizes"
        sizes = tuple(self.integer(n, sizes_where, 1) for n in self.seq(f["world_sizes"], sizes_where))
        if not sizes:
            raise self.fail(f["world_sizes"], sizes_where, "expected at least one world size")
        extra: dict[str, Any] = {}
        if "timeout" in f:
            extra["timeout"] = self.number(f["timeout"], f"{where}.timeout", positive=True)
        if "device" in f:
            device = self.string(f["device"], f"{where}.device")
            if device not in DEVICES:
                raise self.fail(f["device"], f"{where}.device", f"expected one of {', '.join(DEVICES)}")
            extra["device"] = device
        if "gpus" in f:
            extra["gpus"] = self.integer(f["gpus"], f"{where}.gpus", 1)
            if extra.get("device") != "gpu":
                raise self.fail(f["gpus"], f"{where}.gpus", "only a part with 'device: gpu' shares GPUs")
        if "nodes" in f:
            extra["nodes"] = self.integer(f["nodes"], f"{where}.nodes", 1)
            uneven = [s for s in sizes if s % extra["nodes"]]
            if uneven:
                raise self.fail(
                    f["nodes"],
                    f"{where}.nodes",
                    f"world size {uneven[0]} does not split over {extra['nodes']} nodes",
                )
        return Part(
            id=f"{exercise:02d}.{self.name(f['name'], f'{where}.name')}",
            points=self.number(f["points"], f"{where}.points", positive=False),
            world_sizes=sizes,
            **extra,
        )

    def slurm(self, node: yaml.Node, where: str) -> SlurmSettings:
        keys = ("partition", "account", "qos", "sbatch", "runner", "per_task", "gpus")
        f = self.mapping(node, where, required=(), optional=keys)
        found: dict[str, Any] = {
            k: self.string(f[k], f"{where}.{k}") for k in ("partition", "account", "qos") if k in f
        }
        if "sbatch" in f:
            options = [
                self.string(n, f"{where}.sbatch[{i}]")
                for i, n in enumerate(self.seq(f["sbatch"], f"{where}.sbatch"))
            ]
            for i, option in enumerate(options):
                if not option.startswith("-"):
                    raise self.fail(
                        f["sbatch"],
                        f"{where}.sbatch[{i}]",
                        f"expected an sbatch option (--name=value), got {option!r}",
                    )
            found["sbatch"] = tuple(options)
        for key, choices in (("runner", ("local", "docker")), ("gpus", ("gres", "gpus"))):
            if key in f:
                found[key] = self.string(f[key], f"{where}.{key}")
                if found[key] not in choices:
                    raise self.fail(f[key], f"{where}.{key}", f"expected one of {', '.join(choices)}")
        if "per_task" in f:
            found["per_task"] = self.integer(f["per_task"], f"{where}.per_task", 1)
        return SlurmSettings(**found)


def _check_unique(reader: _Reader, course: Course) -> None:
    seen: dict[Any, str] = {}
    for si, section in enumerate(course.sections):
        for ei, exercise in enumerate(section.exercises):
            where = f"sections[{si}].exercises[{ei}]"
            for key, label in ((exercise.number, "number"), (exercise.slug, "slug")):
                if (label, key) in seen:
                    raise reader.fail(
                        reader.nodes.get(f"{where}.{label}"),
                        f"{where}.{label}",
                        f"duplicate {label} {key!r} (also at {seen[(label, key)]})",
                    )
                seen[(label, key)] = where
            names = [p.id for p in exercise.parts]
            for pi, part_id in enumerate(names):
                if part_id in names[:pi]:
                    name_where = f"{where}.parts[{pi}].name"
                    raise reader.fail(reader.nodes.get(name_where), name_where, f"duplicate part {part_id!r}")


def _check_files(reader: _Reader, course: Course, check_stubs: bool) -> None:
    has_solutions = (course.root / "solutions").is_dir()
    for si, section in enumerate(course.sections):
        for ei, exercise in enumerate(section.exercises):
            where = f"sections[{si}].exercises[{ei}].files"
            dirs = [course.exercise_dir(exercise)] if check_stubs else []
            dirs += [course.solution_dir(exercise)] if has_solutions else []
            for i, name in enumerate(exercise.files):
                for folder in dirs:
                    if not (folder / name).is_file():
                        rel = (folder / name).relative_to(course.root)
                        hint = " (run `grade stubs`)" if folder.parent.name == "exercises" else ""
                        raise reader.fail(
                            reader.nodes.get(where), f"{where}[{i}]", f"{rel} does not exist{hint}"
                        )


# ---------------------------------------------------------------------------------------------------------
# concepts.yml


def _with_concepts(course: Course) -> Course:
    """``course`` with each part's concepts read from its exercise's concepts.yml, where there is one."""
    sections = []
    for section in course.sections:
        exercises = []
        for exercise in section.exercises:
            path = course.exercise_dir(exercise) / CONCEPTS_FILE
            if exercise.parts and path.is_file():
                exercise = replace(exercise, parts=load_concepts(path, exercise))
            exercises.append(exercise)
        sections.append(replace(section, exercises=tuple(exercises)))
    return replace(course, sections=tuple(sections))


def load_concepts(path: Path, exercise: Exercise) -> tuple[Part, ...]:
    """``exercise.parts`` with their concepts from ``path``; ``CourseConfigError`` naming the line."""
    try:
        root = yaml.compose(path.read_text())
    except yaml.YAMLError as exc:
        raise CourseConfigError(f"{exercise.dirname}/{path.name}: not valid YAML: {exc}") from None
    reader = _Reader(path, label=f"{exercise.dirname}/{path.name}")
    names = tuple(p.name for p in exercise.parts)
    by_part = reader.mapping(root, "", required=names, optional=())
    seen: dict[str, str] = {}
    parts = []
    for part in exercise.parts:
        node = by_part[part.name]
        if not isinstance(node, yaml.MappingNode) or not node.value:
            raise reader.fail(node, part.name, "expected a mapping of at least one concept")
        concepts = []
        for key_node, value_node in node.value:
            name = reader.name(key_node, part.name)
            where = f"{part.name}.{name}"
            if name in seen:
                raise reader.fail(key_node, where, f"concept {name!r} is also declared for {seen[name]}")
            seen[name] = part.name
            f = reader.mapping(value_node, where, required=("weight", "idea"), optional=())
            idea = reader.string(f["idea"], f"{where}.idea").strip()
            if len(idea) < 40:
                raise reader.fail(f["idea"], f"{where}.idea", "expected a sentence a student can learn from")
            weight = reader.number(f["weight"], f"{where}.weight", positive=True)
            concepts.append(Concept(name=name, weight=weight, idea=idea))
        parts.append(replace(part, concepts=tuple(concepts)))
    return tuple(parts)
