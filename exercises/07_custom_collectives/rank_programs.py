"""Trusted rank programs for exercise 07: turn the student's schedule into plain data, or run it for real.

A `Schedule` cannot cross the judge/worker boundary, so `build` sends it back as `coursekit.schedules.to_data`
gives it; the judge simulates and costs it there. `run` has every rank build the same schedule and execute its
own part of it with isend/irecv (`coursekit.schedules.execute`) on the rank's tensor.
"""

from __future__ import annotations

from typing import Any

from coursekit import schedules


def _schedule(ctx: Any, function: str, kwargs: dict[str, Any]) -> schedules.Schedule:
    built = getattr(ctx.submission("hierarchical"), function)(**kwargs)
    if not isinstance(built, schedules.Schedule):
        raise TypeError(f"{function} must return a coursekit.schedules.Schedule, not {type(built).__name__}")
    return built


def build(ctx: Any, *, function: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`hierarchical.<function>(**kwargs)` as plain data."""
    return schedules.to_data(_schedule(ctx, function, kwargs))


def run(ctx: Any, *, function: str, kwargs: dict[str, Any], tensor: Any) -> Any:
    """Execute `hierarchical.<function>(**kwargs)` on this rank's `tensor` in place; return the tensor."""
    schedules.execute(_schedule(ctx, function, kwargs), tensor)
    return tensor
