"""Trusted rank programs for exercise 19: rebuild `Cluster` and `StepTraffic` from dicts on the rank, call the
student's function, and hand back plain data (dataclasses cannot cross the judge/worker boundary)."""

from __future__ import annotations

from typing import Any

TRAFFIC_FIELDS = ("tp_bytes", "tp_calls", "pp_bytes", "pp_calls", "dp_bytes", "dp_calls")


def call(
    ctx: Any,
    *,
    module: str,
    function: str,
    args: list | None = None,
    kwargs: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    traffic: dict[str, Any] | None = None,
) -> Any:
    """`module.function(*args, **kwargs)`, with `cluster=Cluster(**cluster)` and
    `traffic=StepTraffic(**traffic)` passed as keyword arguments when given. An exception comes back as
    {"raised": type name, "message": ...}, so that a test can require a ValueError."""
    mod = ctx.submission(module)
    kwargs = dict(kwargs or {})
    if cluster is not None:
        kwargs["cluster"] = ctx.submission("placement").Cluster(**cluster)
    if traffic is not None:
        kwargs["traffic"] = ctx.submission("placement").StepTraffic(**traffic)
    try:
        return getattr(mod, function)(*(args or []), **kwargs)
    except NotImplementedError:
        raise  # a stub: let the test fail as unimplemented
    except Exception as exc:  # reported as data, judged by the test
        return {"raised": type(exc).__name__, "message": str(exc)}


def megatron_traffic(ctx: Any, **kwargs: Any) -> dict[str, Any]:
    """placement.megatron_step_traffic(**kwargs) as a dict of its fields."""
    traffic = ctx.submission("placement").megatron_step_traffic(**kwargs)
    return {name: getattr(traffic, name) for name in TRAFFIC_FIELDS}
