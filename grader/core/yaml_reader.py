"""Typed access to the nodes of course.yml and concepts.yml, with errors naming the line and the key.

Every problem is a ``CourseConfigError``: an unknown key (with a "did you mean" where one fits), a key given
twice, a missing key or a value of the wrong type.
"""

from __future__ import annotations

import difflib
import re
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import yaml

from grader.core.catalogue import CourseConfigError

_Scalar = TypeVar("_Scalar", str, int, float)

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where pyyaml was built with it: a course's YAML is read by every ``grade`` process, and
pure-Python parsing of 25 concepts.yml took seconds (docs/benchmarks.md)."""

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def compose(text: str, label: str) -> yaml.Node | None:
    """The YAML node tree of ``text``; ``CourseConfigError`` when it is not YAML: one line naming ``label``
    and the line (pyyaml's own message spans five lines and quotes the source)."""
    try:
        return yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        pass  # read again by pyyaml's own parser, whose messages say more than libyaml's
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        line = f":{exc.problem_mark.line + 1}" if exc.problem_mark else ""
        context = ""
        if exc.context:
            at = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
            context = f" ({exc.context}{at})"
        raise CourseConfigError(f"{label}{line}: not valid YAML: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise CourseConfigError(f"{label}: not valid YAML: {exc}") from None


def _constructed(node: yaml.ScalarNode) -> object:
    """The scalar's value by the safe loader's rules for its resolved tag (int, float, bool, null, str)."""
    return yaml.constructor.SafeConstructor().construct_object(node)


class YamlReader:
    """Typed access to YAML nodes, raising errors that point at the node's line.

    ``nodes`` holds the value node of every key ``mapping`` accepted, by its dotted path
    (``sections[0].title``): checks that run after reading point at the line they blame with it."""

    def __init__(self, path: Path, *, label: str | None = None) -> None:
        self.path = path
        self.label = label or path.name
        self.nodes: dict[str, yaml.Node] = {}

    def fail(self, node: yaml.Node | None, where: str, message: str) -> CourseConfigError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return CourseConfigError(f"{self.label}{line}: {where}: {message}")

    def mapping(
        self, node: yaml.Node | None, where: str, *, required: tuple[str, ...], optional: tuple[str, ...]
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

    def scalar(self, node: yaml.Node, where: str, kind: type[_Scalar], expect: str) -> _Scalar:
        """The node's value as ``kind`` (an int is taken where a float is asked); never a bool."""
        value = _constructed(node) if isinstance(node, yaml.ScalarNode) else None
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
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
        value = self.scalar(node, where, float, "a number")
        if value < 0 or (positive and value == 0):
            raise self.fail(node, where, f"expected a {'positive' if positive else 'non-negative'} number")
        return float(value)
