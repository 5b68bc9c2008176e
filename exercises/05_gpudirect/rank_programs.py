"""Trusted rank programs for exercise 05: rebuild a topology on the rank, then call the student.

A Topology object cannot cross the judge/worker boundary, so tests send it as plain data (Topology.to_dict)
and the rank builds a coursekit.pcie.Topology from it before calling ``<module>.<function>(topo, ...)``.
"""

from __future__ import annotations

from typing import Any

from coursekit.pcie import Topology


def with_topology(
    ctx: Any, *, module: str, function: str, topology: dict[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> Any:
    """``module.function(Topology.from_dict(topology), *args, **kwargs)`` from the submission."""
    topo = Topology.from_dict(topology, "topology under test")
    return getattr(ctx.submission(module), function)(topo, *args, **kwargs)


def with_topology_many(
    ctx: Any, *, module: str, function: str, topology: dict[str, Any], calls: list[list[Any]]
) -> list[Any]:
    """Many calls on one topology: ``[function(topo, *args, **kwargs) for args, kwargs in calls]``."""
    topo = Topology.from_dict(topology, "topology under test")
    fn = getattr(ctx.submission(module), function)
    return [fn(topo, *args, **kwargs) for args, kwargs in calls]


def raises(ctx: Any, *, module: str, function: str, topology: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """The name of the exception ``function(topo, **kwargs)`` raises, or None if it returns."""
    topo = Topology.from_dict(topology, "topology under test")
    try:
        getattr(ctx.submission(module), function)(topo, **kwargs)
    except Exception as exc:
        return type(exc).__name__
    return None
