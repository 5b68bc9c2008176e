"""Trusted rank programs for exercise 22: rebuild a config dataclass on the rank, then call the student.

A dataclass cannot cross the judge/worker boundary, so tests send the config as a dict of its fields and the
rank turns it back into the student's own `LlamaConfig` or `DeepSeekV3Config`.
"""

from __future__ import annotations

from typing import Any


def with_config(
    ctx: Any,
    *,
    function: str,
    config_class: str,
    config: dict[str, Any],
    kwargs: dict[str, Any] | None = None,
) -> Any:
    """Return `memory.<function>(memory.<config_class>(**config), **kwargs)` from the submission."""
    memory = ctx.submission("memory")
    cfg = getattr(memory, config_class)(**config)
    return getattr(memory, function)(cfg, **(kwargs or {}))


def call_many(ctx: Any, *, calls: list[dict[str, Any]]) -> list[Any]:
    """[memory.<function>(*args, **kwargs) for each call], a config dict (with its "config_class") rebuilt as
    the submission's own dataclass and passed first: one round trip for many generated cases."""
    memory = ctx.submission("memory")
    out = []
    for c in calls:
        args = list(c.get("args", []))
        if "config" in c:
            args.insert(0, getattr(memory, c["config_class"])(**c["config"]))
        out.append(getattr(memory, c["function"])(*args, **c.get("kwargs", {})))
    return out
