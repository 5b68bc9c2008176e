"""Trusted rank programs for exercise 03: many calls of one pure function in a single round trip."""

from __future__ import annotations

from typing import Any


def call_many(ctx: Any, *, module: str, function: str, calls: list[list[Any]]) -> list[Any]:
    """[module.function(*args) for args in calls], in order, from the student's module."""
    fn = getattr(ctx.submission(module), function)
    return [fn(*args) for args in calls]
