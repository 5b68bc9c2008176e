"""Bus bandwidth as nccl-tests reports it, and the all-reduce lower bound it comes from.

algbw = S / t. busbw = algbw * factor, where the factor is the share of S each rank must put on its link at
the very least, so that busbw compares with the hardware's link bandwidth whatever the number of ranks.
The same argument bounds the time of ANY all-reduce built from point-to-point messages from below
(NVIDIA/nccl-tests doc/PERFORMANCE.md); deriving the factors and the bound is this part.
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
    """busbw / algbw as nccl-tests computes it (GetBw in src/<collective>.cu) for `collective`, one
    of COLLECTIVES, on `nranks` ranks: the share of S that each rank's link must carry at the very least.
    A float. ValueError for a name not in COLLECTIVES (spelled as there)."""
    raise NotImplementedError("TODO(03.bus_bandwidth): not implemented yet")


def nccl_tests_bytes(collective: str, count: int, type_size: int, nranks: int) -> int:
    """S, the bytes nccl-tests divides by the time, for `count` elements of `type_size` bytes as nccl-tests
    passes them to GetBw (README.md, "Bus bandwidth": the table of what S is per collective). An int.
    ValueError for an unknown collective."""
    raise NotImplementedError("TODO(03.bus_bandwidth): not implemented yet")


def nccl_tests_bandwidth(collective: str, count: int, type_size: int, seconds: float, nranks: int) -> dict:
    """{"algbw": ..., "busbw": ...}, the two bandwidths an nccl-tests line prints for a run of `seconds`,
    both in GB/s with GB = 1e9 bytes. ValueError for an unknown collective."""
    raise NotImplementedError("TODO(03.bus_bandwidth): not implemented yet")


def allreduce_lower_bound(nbytes: float, nranks: int, bandwidth: float) -> float:
    """The fewest seconds any point-to-point all-reduce of `nbytes` (the vector every rank holds) can take on
    `nranks` ranks when each rank's link moves `bandwidth` bytes/s in each direction (doc/PERFORMANCE.md).
    Latency is left out: only the bytes count."""
    raise NotImplementedError("TODO(03.bus_bandwidth): not implemented yet")
