"""Trusted rank programs for exercise 08: run the student's analyzer on many dumps in one round trip."""

from __future__ import annotations

from typing import Any


def analyze_all(ctx: Any, *, scenarios: list[dict[str, Any]]) -> list[Any]:
    """`analyzer.find_mismatches(dumps)` for each scenario's dumps, in order."""
    analyzer = ctx.submission("analyzer")
    return [analyzer.find_mismatches(s) for s in scenarios]


def analyze_generated(ctx: Any, *, seeds: list[int]) -> list[Any]:
    """`analyzer.find_mismatches` on `coursekit.fr_scenarios.random_scenario(seed).dumps` for each seed.

    The dumps are generated here, on the rank, so that megabytes of JSON need not cross from the judge.
    """
    from coursekit.fr_scenarios import random_scenario

    analyzer = ctx.submission("analyzer")
    return [analyzer.find_mismatches(random_scenario(seed).dumps) for seed in seeds]
