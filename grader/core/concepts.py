"""Reading ``concepts.yml``: the concepts each part of an exercise grades, their weights and their ideas.

Like course.yml it is read strictly: every problem is a ``CourseConfigError`` naming the file and the line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from grader.core.catalogue import Concept, Course, CourseConfigError, Exercise, Part
from grader.core.yaml_reader import YamlReader, compose

CONCEPTS_FILE = "concepts.yml"
"""Beside each exercise's public suite: per part, the concepts its tests grade (see docs/authoring.md)."""


def with_concepts(course: Course) -> Course:
    """``course`` with each part's concepts read from its exercise's concepts.yml, where there is one; an
    exercise whose concepts.yml is malformed keeps the error as its ``problem`` (it stands alone)."""

    def read(exercise: Exercise) -> Exercise:
        path = course.exercise_dir(exercise) / CONCEPTS_FILE
        if exercise.problem or not exercise.parts or not path.is_file():
            return exercise
        try:
            return replace(exercise, parts=load_concepts(path, exercise))
        except CourseConfigError as exc:
            return replace(exercise, problem=str(exc))

    return course.with_exercises(read)


def load_concepts(path: Path, exercise: Exercise) -> tuple[Part, ...]:
    """``exercise.parts`` with their concepts from ``path``; ``CourseConfigError`` naming the line."""
    reader = YamlReader(path, label=f"{exercise.dirname}/{path.name}")
    root = compose(path.read_text(), reader.label)
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
            concepts.append(_concept(reader, value_node, name, where))
        parts.append(replace(part, concepts=tuple(concepts)))
    return tuple(parts)


def _concept(reader: YamlReader, node: yaml.Node, name: str, where: str) -> Concept:
    """One concept's entry: ``weight`` and ``idea``; ``why`` (one line) and ``core`` (a name), or ``minor``
    (one line: why missing it is not missing the exercise) instead of both, optional."""
    f = reader.mapping(node, where, required=("weight", "idea"), optional=("why", "core", "minor"))
    idea = reader.string(f["idea"], f"{where}.idea").strip()
    if len(idea) < 40:
        raise reader.fail(f["idea"], f"{where}.idea", "expected a sentence a student can learn from")
    weight = reader.number(f["weight"], f"{where}.weight", positive=True)
    why = reader.string(f["why"], f"{where}.why").strip() if "why" in f else ""
    if "why" in f and (len(why) < 20 or "\n" in why):
        raise reader.fail(f["why"], f"{where}.why", "expected one line saying why the concept weighs this")
    core = reader.name(f["core"], f"{where}.core") if "core" in f else None
    minor = reader.string(f["minor"], f"{where}.minor").strip() if "minor" in f else None
    if minor is not None and ({"core", "why"} & set(f)):
        raise reader.fail(f["minor"], f"{where}.minor", "a minor concept takes no `core:` and no `why:`")
    if minor is not None and (len(minor) < 20 or "\n" in minor):
        raise reader.fail(f["minor"], f"{where}.minor", "expected one line saying why it is minor")
    return Concept(name=name, weight=weight, idea=idea, why=why, core=core, minor=minor)
