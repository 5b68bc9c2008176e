"""Trusted rank program for exercise 02: call one of the student's all-reduces over a sub-group of the world.

`in_group` has every rank create every group of `split` with dist.new_group (every rank must call
new_group for every group, in the same order, members or not; the groups are made once per world and kept).
A member of one of the groups then calls `allreduce.<function>(*args, group=its group)`; a rank in no
group calls nothing, so any message sent to it is never received. Ranks, roots and list slots in `args` are
group ranks. The program returns the arguments after the call, to see what was written in place.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

_GROUPS: dict[tuple[int, ...], Any] = {}


def _my_group(rank: int, split: list[list[int]]) -> Any:
    """This rank's group of `split` (None if it is in none); every rank creates every group, in order."""
    mine = None
    for members in split:
        key = tuple(sorted(members))
        if key not in _GROUPS:
            _GROUPS[key] = dist.new_group(list(key))
        if rank in key:
            mine = _GROUPS[key]
    return mine


def in_group(
    ctx: Any,
    *,
    function: str,
    split: list[list[int]],
    args: list[Any] | None,
    kwargs: dict[str, Any] | None = None,
) -> list[Any] | None:
    """`allreduce.<function>(*args, group=g, **kwargs)` on the members of each group g of `split`; the
    others idle.

    `args` is None on a rank in no group. Returns the (possibly modified) arguments, or None.
    """
    group = _my_group(ctx.rank, split)
    if group is None:
        return None
    getattr(ctx.submission("allreduce"), function)(*args, group=group, **(kwargs or {}))
    return list(args)
