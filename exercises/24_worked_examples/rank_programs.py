"""Trusted rank programs for exercise 24: read a student's plan document on the rank, as plain data.

The judge never parses student files. The rank calls `plans.<function>()`, loads the YAML text it returns with
yaml.safe_load (no tags, no objects), and sends back only JSON values: a date, a set or a non-string key in
the document is an error that names where it is.
"""

from __future__ import annotations

from typing import Any

import yaml

_SCALARS = (bool, int, float, str, type(None))


def _plain(value: Any, where: str) -> Any:
    """`value` as JSON data (lists for tuples), or TypeError naming the path of the first non-JSON value."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: key {k!r} is a {type(k).__name__}; keys must be strings")
            out[k] = _plain(v, f"{where}.{k}")
        return out
    raise TypeError(f"{where}: a {type(value).__name__} ({value!r}) is not a number, string, list or mapping")


def plan_document(ctx: Any, *, function: str, problem: dict | None = None) -> Any:
    """`plans.<function>()` from the submission, or `plans.<function>(problem)` when a problem is given: its
    YAML text parsed safely (a dict is taken as it is)."""
    call = getattr(ctx.submission("plans"), function)
    document = call() if problem is None else call(problem)
    if isinstance(document, str):
        try:
            document = yaml.safe_load(document)
        except yaml.YAMLError as e:
            raise ValueError(f"{function}() returned text that is not valid YAML: {e}") from None
    return _plain(document, f"{function}()")


def plan_breakdown(ctx: Any, *, function: str, model: str, node: str, nodes: int, seq_len: int) -> dict:
    """For `grade exercise 24`'s plan tables: the plan document, and its memory and step time by YOUR exercise
    21 estimate.py (../21_decision_process, where this checkout has it), or why there are none."""
    import importlib.util
    from pathlib import Path

    from coursekit.cluster import Cluster
    from coursekit.models import MODELS

    document = plan_document(ctx, function=function)
    out = {"document": document, "memory": None, "time": None, "note": ""}
    path = Path(__file__).resolve().parent.parent / "21_decision_process" / "estimate.py"
    try:
        spec = importlib.util.spec_from_file_location("estimate_21_for_24", path)
        estimate = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(estimate)  # type: ignore[union-attr]
        plan, cluster = document["plan"], Cluster(node, nodes)
        out["memory"] = estimate.memory_per_gpu(MODELS[model], cluster, plan, seq_len)
        out["time"] = estimate.step_time(MODELS[model], cluster, plan, seq_len)
    except Exception as e:  # your exercise 21 is not written yet, or rejects this plan: the table says so
        out["memory"] = out["time"] = None
        out["note"] = f"no breakdown from exercise 21's estimate.py: {type(e).__name__}: {e}"[:300]
    return _plain(out, "plan_breakdown")
