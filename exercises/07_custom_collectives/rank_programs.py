"""Trusted rank programs for exercise 07: turn the student's schedule into plain data, run it for real, or
run the fused all-gather + matmul with its calls recorded.

A `Schedule` cannot cross the judge/worker boundary, so `build` sends it back as `coursekit.schedules.to_data`
gives it; the judge simulates and costs it there. `run` has every rank build the same schedule and execute its
own part of it with isend/irecv (`coursekit.schedules.execute`) on the rank's tensor. `fused` hands the
student's `fused_allgather_matmul` an `mm` that records each product, and records each message it posts and
each receive it waits for, in order; `overlap_problems` (run by the judge) reads that order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch._C._distributed_c10d as _C
import torch.distributed as dist

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


# ---------------------------------------------------------------------------------------------------------
# 07.fused_allgather_matmul: run the student's function with every message, wait and product recorded
#
# The data come from a seed, so the judge and every rank build the same shards without sending them: shard j
# (group rank j) and the weight of each rank are small integer matrices, exact in float64 and float32, and
# every shard differs from every other, so a tensor's values say which shard it is.


def fused_shard(seed: int, j: int, m: int, k: int, dtype: str = "float64") -> torch.Tensor:
    """Shard j of X: (m, k) integers in [-9, 9], its first entry 20 + j so that no two shards are equal."""
    g = torch.Generator().manual_seed(1000 * seed + j)
    x = torch.randint(-9, 10, (m, k), generator=g).to(getattr(torch, dtype))
    x[0, 0] = 20 + j
    return x


def fused_weight(seed: int, rank: int, k: int, n: int, dtype: str = "float64") -> torch.Tensor:
    """The weight of global rank `rank`: (k, n) integers in [-5, 5], different on every rank."""
    g = torch.Generator().manual_seed(1000 * seed + 500 + rank)
    return torch.randint(-5, 6, (k, n), generator=g).to(getattr(torch, dtype))


class _Request:
    """A p2p request that records when its receive completes; everything else goes to the real one."""

    def __init__(self, work: Any, on_wait: Any) -> None:
        self._work, self._on_wait = work, on_wait

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        result = self._work.wait(*args, **kwargs)
        self._on_wait()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


class _Recorder:
    """Events, in the order this rank issued them, each [kind, shard, token]:
    ["send", j, None]  a message carrying shard j was posted (j None: not one whole shard);
    ["post", None, t]  receive t was posted;
    ["done", j, t]     receive t completed with shard j in its buffer (its request's wait returned);
    ["mm", j, ok]      mm was called on shard j (None: not one whole shard); ok: with this rank's whole w.
    """

    def __init__(self, shards: list[torch.Tensor], w: torch.Tensor) -> None:
        self.shards, self.w = shards, w
        self.events: list[list[Any]] = []
        self._tokens = 0

    def which(self, t: Any) -> int | None:
        if not isinstance(t, torch.Tensor):
            return None
        for j, shard in enumerate(self.shards):
            if t.numel() == shard.numel() and torch.equal(
                t.detach().reshape(-1).to(shard.dtype), shard.view(-1)
            ):
                return j
        return None

    def mm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The stand-in for a GEMM launch: records which shard it multiplies, then multiplies."""
        ok = isinstance(b, torch.Tensor) and b.shape == self.w.shape and torch.equal(b, self.w)
        self.events.append(["mm", self.which(a), bool(ok)])
        return torch.matmul(a, b)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Wrap ProcessGroup.send/recv (where every torch.distributed p2p call ends) for the call's span."""
        group_cls = _C.ProcessGroup
        send, recv, anysource = group_cls.send, group_cls.recv, group_cls.recv_anysource

        def on_send(pg: Any, tensors: Any, *args: Any, **kwargs: Any) -> Any:
            for t in tensors:
                self.events.append(["send", self.which(t), None])
            return send(pg, tensors, *args, **kwargs)

        def receiving(original: Any) -> Any:
            def on_recv(pg: Any, tensors: Any, *args: Any, **kwargs: Any) -> Any:
                token, self._tokens = self._tokens, self._tokens + 1
                self.events.append(["post", None, token])
                work = original(pg, tensors, *args, **kwargs)

                def done() -> None:
                    for t in tensors:
                        self.events.append(["done", self.which(t), token])

                return _Request(work, done)

            return on_recv

        group_cls.send, group_cls.recv = on_send, receiving(recv)
        group_cls.recv_anysource = receiving(anysource)
        try:
            yield
        finally:
            group_cls.send, group_cls.recv, group_cls.recv_anysource = send, recv, anysource


_GROUPS: dict[tuple[int, ...], Any] = {}


def _subgroup(ctx: Any, split: list[list[int]] | None) -> tuple[Any, list[int]]:
    """(group, its members' global ranks): the world, or this rank's group of `split` (created once)."""
    if not split:
        return None, list(range(ctx.world_size))
    for ranks in split:  # every rank creates every group, in the same order, as new_group requires
        key = tuple(ranks)
        if key not in _GROUPS:
            _GROUPS[key] = dist.new_group(list(ranks))
    [mine] = [ranks for ranks in split if ctx.rank in ranks]
    return _GROUPS[tuple(mine)], list(mine)


def fused(
    ctx: Any,
    *,
    seed: int,
    m: int,
    k: int,
    n: int,
    dtype: str = "float64",
    split: list[list[int]] | None = None,
) -> dict[str, Any]:
    """`fused.fused_allgather_matmul` on this rank's seeded shard and weight, over the world or this rank's
    group of `split`; returns {"out": what it returned, "events": the recorder's events}."""
    group, members = _subgroup(ctx, split)
    me = members.index(ctx.rank)
    shards = [fused_shard(seed, j, m, k, dtype) for j in range(len(members))]
    w = fused_weight(seed, ctx.rank, k, n, dtype)
    recorder = _Recorder(shards, w)
    function = ctx.submission("fused").fused_allgather_matmul
    with recorder.installed():
        out = function(shards[me].clone(), w.clone(), recorder.mm, group)
    return {"out": out, "events": recorder.events}


def overlap_problems(events: list[list[Any]], me: int, p: int) -> dict[str, list[str]]:
    """What a rank's events break, by concept of 07.fused_allgather_matmul (judge side; empty lists: none).

    "budget": not p products each on one shard with w, a message that is not one whole shard, a shard
    received twice or never; "overlap": a shard waited for before the previous shard's product was issued
    (or a received shard multiplied first); "in_flight": a shard whose receive was posted only after the
    previous product; "forward": a shard sent on after this rank's own product of it.
    """
    out: dict[str, list[str]] = {"budget": [], "overlap": [], "in_flight": [], "forward": []}
    at = {}  # (kind, shard) -> index of its first event
    posted = {}  # token -> index of its post
    for i, (kind, shard, extra) in enumerate(events):
        if kind == "post":
            posted[extra] = i
        else:
            at.setdefault((kind, shard), i)
    mms = [(i, e[1]) for i, e in enumerate(events) if e[0] == "mm"]
    order = [j for _, j in mms]
    if not _each_once(order, list(range(p))) or any(not e[2] for e in events if e[0] == "mm"):
        out["budget"].append(
            f"mm calls on shards {order} (None: not one whole shard, or not with this rank's w); "
            f"expected one call per shard 0..{p - 1} with the whole w"
        )
    done = [e[1] for e in events if e[0] == "done"]
    if not _each_once(done, [j for j in range(p) if j != me]):
        out["budget"].append(
            f"received shards {done} (None: a message that is not one whole shard); expected every other "
            f"shard exactly once: {[j for j in range(p) if j != me]}"
        )
    if [e for e in events if e[0] == "send" and e[1] is None]:
        out["budget"].append("sent a message that is not one whole shard")
    if out["budget"]:
        return out
    mm_at = dict((j, i) for i, j in mms)
    for pos, j in enumerate(order):
        if j == me:
            continue
        done_i = at[("done", j)]
        token = next(e[2] for e in events if e[0] == "done" and e[1] == j)
        if pos == 0:
            out["overlap"].append(
                f"the first product is of shard {j}, which had to arrive first: nothing was computed while "
                "it travelled"
            )
            continue
        prev = order[pos - 1]
        if done_i < mm_at[prev]:
            out["overlap"].append(
                f"waited for shard {j} before issuing the product of shard {prev}, the one before it"
            )
        if posted[token] > mm_at[prev]:
            out["in_flight"].append(
                f"the receive of shard {j} was posted after the product of shard {prev}: nothing was in "
                "flight while it ran"
            )
    for i, (kind, shard, _) in enumerate(events):
        if kind == "send" and shard in mm_at and i > mm_at[shard]:
            out["forward"].append(
                f"sent shard {shard} on after multiplying it: the rank waiting for it waited for your product"
            )
            break
    return out


def _each_once(got: list[Any], want: list[int]) -> bool:
    """`got` holds every element of `want` exactly once and nothing else (None included)."""
    return None not in got and sorted(got) == sorted(want)
