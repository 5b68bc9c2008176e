"""Trusted rank programs for exercise 21: rebuild coursekit objects on the rank, then call the student.

A Cluster or a ModelSpec cannot cross the judge/worker boundary, so tests send {"cluster": [node, nodes]} and
{"model": {...fields...}} and the rank turns them back into coursekit.cluster.Cluster and
coursekit.models.ModelSpec before calling the student's function with them.
"""

from __future__ import annotations

from typing import Any

from coursekit.cluster import Cluster
from coursekit.models import ModelSpec


def _load(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"cluster"}:
        node, nodes = value["cluster"]
        return Cluster(node, nodes)
    if isinstance(value, dict) and set(value) == {"model"}:
        return ModelSpec.from_dict(value["model"])
    return value


def call(
    ctx: Any, *, module: str, function: str, args: list | None = None, kwargs: dict | None = None
) -> Any:
    """Return `module.function(*args, **kwargs)` from the submission, coursekit objects rebuilt."""
    target = getattr(ctx.submission(module), function)
    return target(*[_load(a) for a in args or []], **{k: _load(v) for k, v in (kwargs or {}).items()})


def call_many(ctx: Any, *, calls: list[dict]) -> list[Any]:
    """[call(ctx, **c) for c in calls]: one round trip for many small checks."""
    return [call(ctx, **c) for c in calls]
