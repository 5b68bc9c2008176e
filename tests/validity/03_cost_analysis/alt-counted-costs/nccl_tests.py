"""Bus bandwidth as nccl-tests reports it, and the all-reduce lower bound it comes from.

algbw = S / t. busbw = algbw * factor, where the factor is the share of S each rank must put on its link at
the very least, so that busbw compares with the hardware's link bandwidth whatever the number of ranks.
All-reduce: every rank must send and receive 2(p-1)/p * S bytes, hence t >= 2(p-1)/p * S / B for ANY
algorithm built from point-to-point messages (NVIDIA/nccl-tests doc/PERFORMANCE.md).
Conventions (nccl-tests src/*.cu GetBw, ground-truth.md §0-1): GB = 1e9 bytes; `count` is the element count
nccl-tests passes to GetBw, which is per rank for AllGather, ReduceScatter, AlltoAll, Gather and Scatter.
Check: `grade exercise 03`.
"""

from __future__ import annotations

COLLECTIVES = (
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "AlltoAll",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "Gather",
    "Scatter",
    "HyperCube",
)  # the testColl names of nccl-tests' src/*.cu
GB = 1e9  # bytes: nccl-tests divides by 1.0E9, never by 2**30


def _check(collective: str) -> None:
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; nccl-tests has {COLLECTIVES}")


# ------------------------------------------------------------------------------------------------------------
# 03.bus_bandwidth


def busbw_factor(collective: str, nranks: int) -> float:
    """busbw / algbw in nccl-tests: AllReduce 2(n-1)/n; AllGather, ReduceScatter, AlltoAll, Gather, Scatter
    (n-1)/n; Broadcast, Reduce, SendRecv, HyperCube 1. ValueError for an unknown collective."""
    _check(collective)
    factors = {"AllReduce": 2 * (nranks - 1) / nranks}
    for name in ("AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"):
        factors[name] = (nranks - 1) / nranks
    return float(factors.get(collective, 1.0))


def nccl_tests_bytes(collective: str, count: int, type_size: int, nranks: int) -> int:
    """S, the bytes nccl-tests divides by the time: count * type_size for AllReduce, Broadcast, Reduce and
    SendRecv; count * type_size * nranks for AllGather, ReduceScatter, AlltoAll, Gather and Scatter (count is
    per rank there); count * type_size * (nranks - 1) for HyperCube."""
    _check(collective)
    per_rank = ("AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter")
    scale = nranks if collective in per_rank else nranks - 1 if collective == "HyperCube" else 1
    return int(count) * int(type_size) * scale


def nccl_tests_bandwidth(collective: str, count: int, type_size: int, seconds: float, nranks: int) -> dict:
    """{"algbw": S / seconds / GB, "busbw": algbw * busbw_factor}, both in GB/s, GB = 1e9 bytes."""
    algbw = nccl_tests_bytes(collective, count, type_size, nranks) / GB / seconds
    return {"algbw": algbw, "busbw": algbw * busbw_factor(collective, nranks)}


def allreduce_lower_bound(nbytes: float, nranks: int, bandwidth: float) -> float:
    """Seconds an all-reduce of `nbytes` per rank takes at least when each rank's link moves `bandwidth`
    bytes/s each way: 2(n-1)/n * nbytes / bandwidth (doc/PERFORMANCE.md)."""
    return busbw_factor("AllReduce", nranks) * nbytes / bandwidth
