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


def plan_document(ctx: Any, *, function: str) -> Any:
    """`plans.<function>()` from the submission: its YAML text parsed safely (a dict is taken as it is)."""
    document = getattr(ctx.submission("plans"), function)()
    if isinstance(document, str):
        try:
            document = yaml.safe_load(document)
        except yaml.YAMLError as e:
            raise ValueError(f"{function}() returned text that is not valid YAML: {e}") from None
    return _plain(document, f"{function}()")
