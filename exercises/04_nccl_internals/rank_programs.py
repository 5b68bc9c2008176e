"""Trusted rank programs for exercise 04: many calls in one round trip, and the System dataclass rebuilt.

A dataclass cannot cross the judge/worker boundary, so tests send a System as a dict of its fields and the
rank turns it back into the student's own `tuner.System`, passed as the keyword argument `system`.
"""

from __future__ import annotations

from typing import Any


def call_many(
    ctx: Any,
    *,
    module: str,
    function: str,
    calls: list[dict[str, Any]],
    system: dict[str, Any] | None = None,
) -> list[Any]:
    """[module.function(*c["args"], **c.get("kwargs", {}), system=<System>) for c in calls], in order."""
    mod = ctx.submission(module)
    extra = {} if system is None else {"system": ctx.submission("tuner").System(**system)}
    return [getattr(mod, function)(*c["args"], **c.get("kwargs", {}), **extra) for c in calls]
