"""Trusted rank programs for exercise 20: parse with the student's own parser, then ask the student's question
function about the result (the public checks use them; the hidden suite feeds the reference's parse instead,
so that a parsing bug does not cost the questions twice)."""

from __future__ import annotations

from typing import Any


def smi_question(ctx: Any, *, text: str, function: str, args: list | None = None) -> Any:
    """smi_topo.<function>(smi_topo.parse_topo(text), *args)."""
    smi = ctx.submission("smi_topo")
    return getattr(smi, function)(smi.parse_topo(text), *(args or []))


def cluster_question(ctx: Any, *, text: str, function: str, args: list | None = None) -> Any:
    """cluster.<function>(cluster.load_cluster(text), *args)."""
    cluster = ctx.submission("cluster")
    return getattr(cluster, function)(cluster.load_cluster(text), *(args or []))
