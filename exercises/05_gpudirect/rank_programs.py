"""Trusted rank programs for exercise 05: rebuild a topology on the rank, then call the student; and, on a
GPU rank, call the student's copies.py next to the judge's own measurement of the same copies.

A Topology object cannot cross the judge/worker boundary, so tests send it as plain data (Topology.to_dict)
and the rank builds a coursekit.pcie.Topology from it before calling ``<module>.<function>(topo, ...)``.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

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


# ------------------------------------------------------------------------------------------------------------
# 05.host_copies (a GPU rank): the student's copies.py, and the judge's own paired measurement
#
# The judge times copies its own way: the host's wall clock around one blocking copy_ followed by
# torch.cuda.synchronize(), the median of several. It never grades an absolute figure, only how the student's
# figures compare with the ones taken here, in the same process, interleaved with the student's.

DIRECTIONS = ("h2d", "d2h")
KINDS = ("pageable", "pinned")
CHECK_BYTES = (1 << 20) + 3  # the copies that gate the timing: odd-sized, so no word-size shortcut fits


def host_buffer_facts(ctx: Any, *, sizes: list[int]) -> list[dict[str, Any]]:
    """What the student's host_buffer(n, pinned=p) returns, for each n in sizes and p in (False, True)."""
    copies = ctx.submission("copies")
    facts = []
    for asked in sizes:
        for pinned in (False, True):
            buf = copies.host_buffer(asked, pinned=pinned)
            facts.append({"nbytes": asked, "pinned": pinned, **_tensor_facts(buf)})
    return facts


def copies_move_bytes(ctx: Any, *, nbytes: int, seed: int, repeats: int) -> dict[str, Any]:
    """time_copy in each direction and with each kind of host memory (the judge's buffers), on random bytes:
    per "direction/kind", whether the destination holds the source's bytes right after the call, and the
    seconds it returned."""
    return _bytes_check(ctx.submission("copies"), ctx.device, nbytes, seed, repeats)


def paired_time_copy(ctx: Any, *, nbytes: int, repeats: int, rounds: int) -> dict[str, Any]:
    """The student's time_copy and the judge's clock on the SAME buffers, interleaved ``rounds`` times: per
    "direction/kind", the lists of seconds {"student": [...], "judge": [...]}; "bytes" gates them."""
    copies = ctx.submission("copies")
    out: dict[str, Any] = {"bytes": _bytes_check(copies, ctx.device, CHECK_BYTES, 5, 2)}
    on_device = torch.full((nbytes,), 1, dtype=torch.uint8, device=ctx.device)
    for kind in ("pageable", "pinned"):
        host = _judge_host(nbytes, kind)
        for direction in ("h2d", "d2h"):
            dst, src = _ends(direction, host, on_device)
            student, judge = [], []
            for _ in range(rounds):
                student.append(_number(copies.time_copy(dst, src, repeats=repeats)))
                judge.append(_judge_seconds(dst, src, repeats, ctx.device))
            out[f"{direction}/{kind}"] = {"student": student, "judge": judge}
    return out


def paired_bandwidth(ctx: Any, *, nbytes: int, repeats: int, rounds: int) -> dict[str, Any]:
    """The student's copy_bandwidth(nbytes, device, repeats=repeats) and the judge's own figures of the same
    shape, interleaved ``rounds`` times: {"bytes": gate, "student": [figures...], "judge": [figures...]}.
    A student's figures that are not {direction: {kind: {"seconds": float, "gbps": float}}} come back as
    the problem's description, a str."""
    copies = ctx.submission("copies")
    out: dict[str, Any] = {
        "bytes": _bytes_check(copies, ctx.device, CHECK_BYTES, 7, 2),
        "student": [],
        "judge": [],
    }
    for _ in range(rounds):
        figures = copies.copy_bandwidth(nbytes, ctx.device, repeats=repeats)
        problem = _figures_problem(figures)
        out["student"].append(problem if problem else _plain_figures(figures))
        out["judge"].append(_judge_bandwidth(nbytes, repeats, ctx.device))
    return out


def _bytes_check(copies: Any, device: Any, nbytes: int, seed: int, repeats: int) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=gen)
    result: dict[str, Any] = {}
    for kind in ("pageable", "pinned"):
        for direction in ("h2d", "d2h"):
            host = _judge_host(nbytes, kind)
            on_device = torch.zeros(nbytes, dtype=torch.uint8, device=device)
            if direction == "h2d":
                host.copy_(data)
                seconds = copies.time_copy(on_device, host, repeats=repeats)
                arrived = on_device.cpu()  # on the current stream, after whatever the student left queued
            else:
                on_device.copy_(data)  # judge's blocking copy to the GPU
                torch.cuda.synchronize(device)
                host.zero_()
                seconds = copies.time_copy(host, on_device, repeats=repeats)
                arrived = host.clone()  # read at once: a copy still in flight shows up here
            ok = bool(torch.equal(arrived, data))
            result[f"{direction}/{kind}"] = {"ok": ok, "seconds": _number(seconds)}
    return result


def _ends(direction: str, host: torch.Tensor, gpu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dst, src) of a copy in ``direction``: "h2d" host to GPU, "d2h" GPU to host."""
    return (gpu, host) if direction == "h2d" else (host, gpu)


def _judge_host(nbytes: int, kind: str) -> torch.Tensor:
    """A host buffer of the judge's own, every page written: pinned through Tensor.pin_memory()."""
    buf = torch.full((nbytes,), 5, dtype=torch.uint8)
    return buf.pin_memory() if kind == "pinned" else buf


def _judge_seconds(dst: torch.Tensor, src: torch.Tensor, repeats: int, device: Any) -> float:
    """Host wall-clock seconds of one blocking copy, waited for: the median of ``repeats``, after two."""
    for _ in range(2):
        dst.copy_(src)
    torch.cuda.synchronize(device)
    laps = []
    for _lap in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(device)
        laps.append(time.perf_counter() - t0)
    return statistics.median(laps)


def _judge_bandwidth(nbytes: int, repeats: int, device: Any) -> dict[str, dict[str, dict[str, float]]]:
    on_device = torch.full((nbytes,), 2, dtype=torch.uint8, device=device)
    judged: dict[str, dict[str, dict[str, float]]] = {d: {} for d in DIRECTIONS}
    for kind in ("pageable", "pinned"):
        host = _judge_host(nbytes, kind)
        for direction in ("h2d", "d2h"):
            dst, src = _ends(direction, host, on_device)
            seconds = _judge_seconds(dst, src, repeats, device)
            judged[direction][kind] = {"seconds": seconds, "gbps": nbytes / seconds / 1e9}
    return judged


def _figures_problem(figures: Any) -> str | None:
    """Why ``figures`` is not {direction: {kind: {"seconds": float, "gbps": float}}}, or None."""
    if not isinstance(figures, dict) or sorted(figures) != sorted(DIRECTIONS):
        return f"copy_bandwidth must return a dict with keys {list(DIRECTIONS)}, got {_short(figures)}"
    for direction in ("h2d", "d2h"):
        per_kind = figures[direction]
        if not isinstance(per_kind, dict) or sorted(per_kind) != sorted(KINDS):
            return f"figures[{direction!r}] must be a dict with keys {list(KINDS)}, got {_short(per_kind)}"
        for kind in ("pageable", "pinned"):
            fig, where = per_kind[kind], f"figures[{direction!r}][{kind!r}]"
            if not isinstance(fig, dict) or sorted(fig) != ["gbps", "seconds"]:
                return f'{where} must be {{"seconds": ..., "gbps": ...}}, got {_short(fig)}'
            for key in ("seconds", "gbps"):
                value = fig[key]
                if not _is_float(value) or not math.isfinite(value) or value <= 0:
                    return f"{where}[{key!r}] must be a positive float, got {_short(value)}"
    return None


def _plain_figures(figures: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    return {d: {k: {key: float(v) for key, v in figures[d][k].items()} for k in KINDS} for d in DIRECTIONS}


def _tensor_facts(buf: Any) -> dict[str, Any]:
    if not isinstance(buf, torch.Tensor):
        return {"type": type(buf).__name__}
    return {
        "type": "Tensor",
        "dtype": str(buf.dtype),
        "shape": list(buf.shape),
        "device": buf.device.type,
        "is_pinned": bool(buf.is_pinned()) if buf.device.type == "cpu" else False,
    }


def _number(value: Any) -> float | str:
    """A float the student returned, as a plain float; anything else as its repr (the judge says so)."""
    return float(value) if _is_float(value) else _short(value)


def _is_float(value: Any) -> bool:
    return isinstance(value, float) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def staging_questions(ctx: Any) -> dict[str, list[str]]:
    """{key: the choice letters} of each question in the student's copies.QUESTIONS."""
    asked = ctx.submission("copies").QUESTIONS
    return {key: sorted(choices) for key, (_, choices) in asked.items()}
