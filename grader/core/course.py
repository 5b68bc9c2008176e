"""``course.yml`` -> a small frozen tree of sections, exercises and parts.

The loader is strict: an unknown key, a wrong type, a duplicate or a missing file raises
``CourseConfigError`` naming the file, the line and the key, with a "did you mean" where one fits.

The tree's classes live in ``grader.core.catalogue``, and each part's concepts come from
``grader.core.concepts``: both are importable from here, where the rest of the grader finds them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from grader.core.catalogue import (
    DEVICES,
    Checkpoint,
    Concept,
    Course,
    CourseConfigError,
    Exercise,
    Part,
    Section,
    SlurmSettings,
)
from grader.core.concepts import CONCEPTS_FILE, load_concepts, with_concepts
from grader.core.yaml_reader import YamlReader, compose

__all__ = [
    "CONCEPTS_FILE",
    "DEVICES",
    "Checkpoint",
    "Concept",
    "Course",
    "CourseConfigError",
    "Exercise",
    "Part",
    "Section",
    "SlurmSettings",
    "load_concepts",
    "load_course",
]


def load_course(path: Path, *, check_stubs: bool = True) -> Course:
    """Parse and validate ``path``; a problem of course.yml itself is a ``CourseConfigError``.

    A problem of one exercise (a missing folder or file, a malformed concepts.yml) is that exercise's
    ``problem`` instead: commands that need it stop (``Course.find``), the others work. ``check_stubs=False``
    skips the existence check of the generated stubs (for ``grade stubs`` itself).
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise CourseConfigError(f"{path}: cannot read: {exc.strerror}") from None
    root_node = compose(text, path.name)
    reader = _CourseReader(path)
    top = reader.mapping(root_node, "", required=("course", "sections"), optional=("version", "slurm"))
    sections = tuple(
        reader.section(node, f"sections[{i}]")
        for i, node in enumerate(reader.seq(top["sections"], "sections"))
    )
    course = Course(
        title=reader.string(top["course"], "course"),
        root=path.resolve().parent,
        sections=sections,
        slurm=reader.slurm(top["slurm"], "slurm") if "slurm" in top else SlurmSettings(),
        version=reader.string(top["version"], "version") if "version" in top else None,
    )
    _check_unique(reader, course)
    missing = _missing_files(reader, course, check_stubs)
    course = course.with_exercises(lambda e: replace(e, problem=missing.get(e.key)))
    return with_concepts(course)


class _CourseReader(YamlReader):
    """The sections, exercises, parts and ``slurm:`` settings of course.yml, from its YAML nodes."""

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


def _check_unique(reader: YamlReader, course: Course) -> None:
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


def _missing_files(reader: YamlReader, course: Course, check_stubs: bool) -> dict[str, str]:
    """The first missing folder or file of each exercise that has one, by the exercise's key."""
    has_solutions = (course.root / "solutions").is_dir()
    missing: dict[str, str] = {}
    for si, section in enumerate(course.sections):
        for ei, exercise in enumerate(section.exercises):
            dirs = [course.exercise_dir(exercise)] if check_stubs else []
            dirs += [course.solution_dir(exercise)] if has_solutions else []
            problem = _first_missing(reader, exercise, dirs, f"sections[{si}].exercises[{ei}]")
            if problem:
                missing[exercise.key] = problem
    return missing


def _first_missing(reader: YamlReader, exercise: Exercise, dirs: list[Path], where: str) -> str | None:
    """What comes first of the exercise's folders in ``dirs`` and its files in them that does not exist."""
    if not (exercise.parts or exercise.files):
        return None  # not written yet: no folder to look for
    root = reader.path.resolve().parent
    for folder in dirs:
        if not folder.is_dir():
            slug = f"{where}.slug"
            return str(
                reader.fail(reader.nodes.get(slug), slug, f"{folder.relative_to(root)}/ does not exist")
            )
    for i, name in enumerate(exercise.files):
        for folder in dirs:
            if not (folder / name).is_file():
                hint = " (run `grade stubs`)" if folder.parent.name == "exercises" else ""
                rel = (folder / name).relative_to(root)
                return str(
                    reader.fail(
                        reader.nodes.get(f"{where}.files"),
                        f"{where}.files[{i}]",
                        f"{rel} does not exist{hint}",
                    )
                )
    return None
