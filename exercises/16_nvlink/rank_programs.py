"""Trusted rank programs for exercise 16: run your functions on NVLink generations you have not seen.

Your functions take a key of the catalogue's `nvlink` table. To grade them on hardware you have not seen, the
judge sends made-up generations as plain data ({table: {key: fields as in coursekit/hardware.yml}}, each
generation with the GPU that introduced it); this program adds them to the catalogue that
`coursekit.hardware.load()` returns while your functions run (`coursekit.hardware.serving`).
"""

from __future__ import annotations

from typing import Any

from coursekit.hardware import load, serving


def call_unseen(ctx: Any, *, added: dict[str, dict[str, dict]], calls: list[list]) -> list[Any]:
    """[nvlink.<function>(*args) for function, *args in calls], with the entries `added` in load()."""
    catalogue = load().extended(added, origin="the judge's made-up hardware")
    nvlink = ctx.submission("nvlink")
    with serving(catalogue):
        return [getattr(nvlink, function)(*args) for function, *args in calls]
