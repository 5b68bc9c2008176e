"""What one collective costs on a real cluster: NCCL's latency model on top of the bandwidth of each link.

time = latency + bandwidth term. The bandwidth term is coursekit.cluster's: a hierarchical collective whose
slowest level sets the pace, bytes x max_i (D_i - 1)/(D_i W_i) (jax-ml/scaling-book gpus.md; exercise 16).
The latency term is NCCL's own cost model for a ring (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel):
    base + (nsteps - nInterSteps) x intraLat + nInterSteps x interLat
with nsteps = 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter, and nInterSteps the steps that
cross between nodes: 2(nodes-1) and nodes-1. Check: `grade exercise 23`.
Units: bytes, seconds, GB/s with GB = 1e9 bytes. n = ranks in the group, nodes = nodes it spans.
"""

from __future__ import annotations

import math

from coursekit.cluster import Cluster, allgather_s, allreduce_s, alltoall_s, p2p_s
from coursekit.hardware import load

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

# NCCL's latencies for the Ring algorithm and the Simple protocol, the one large messages use
# (NVIDIA/nccl src/graph/tuning.cc at 5067397c, NCCL 2.30.7; ground-truth.md §3):
#   baseLat Ring {LL 6.6, LL128 14.0, Simple 8.4} us;  hwLat Ring Simple: NVLink 3.4, PCI 5.7, NET 14.0 us
BASE_LATENCY_S = 8.4e-6
HW_LATENCY_S = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "network": 14.0e-6}

# nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor, the factor that makes busbw comparable to the
# hardware's per-GPU bandwidth whatever the collective (ground-truth.md §1)
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def _check(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; expected one of {OPS}")


# ------------------------------------------------------------------------------------------------------------
# 23.collectives


def latency_s(op: str, cluster: Cluster, size: int, stride: int) -> float:
    """NCCL's modelled latency of collective `op` over the group of `size` ranks `stride` apart.

    all_reduce, all_gather, reduce_scatter: the ring formula above, intraLat = the NVLink latency if the
    group has NVLink peers, else the PCIe one; interLat = the network latency. all_to_all: NCCL posts every
    send of an all-to-all at once, so it pays one step: base + the hardware latency of the slowest level
    crossed (this one is a course choice: tuning.cc has no all-to-all model). One rank: 0."""
    _check(op)
    if size <= 1:
        return 0.0
    levels = cluster.levels(size, stride)
    kinds = [lv.kind for lv in levels]
    if op == "all_to_all":  # every send posted at once: one step, paced by the outermost (slowest) link
        return BASE_LATENCY_S + max(HW_LATENCY_S[k] for k in kinds)
    per_pass = 1 if op != "all_reduce" else 2  # all-reduce = reduce-scatter pass + all-gather pass
    nodes = 1
    for lv in levels:
        if lv.kind == "network":
            nodes = lv.members
    steps = per_pass * (size - 1)
    inter = per_pass * (nodes - 1)
    intra_lat = HW_LATENCY_S["nvlink"] if "nvlink" in kinds else HW_LATENCY_S["pcie"]
    return BASE_LATENCY_S + (steps - inter) * intra_lat + inter * HW_LATENCY_S["network"]


def collective_s(
    op: str, nbytes: float, cluster: Cluster, size: int, stride: int, latency: bool = True
) -> float:
    """Seconds for collective `op` on `nbytes` over the group (nbytes: the all-reduced buffer, the gathered
    output, the reduce-scattered input, or what one GPU holds for an all-to-all), latency included unless
    latency=False. Bandwidth terms: coursekit.cluster's allreduce_s, allgather_s, alltoall_s."""
    _check(op)
    levels = cluster.levels(size, stride)
    if op == "all_reduce":
        bandwidth = allreduce_s(nbytes, levels)
    elif op == "all_to_all":
        bandwidth = alltoall_s(nbytes, levels)
    else:  # a reduce-scatter moves what the all-gather that undoes it moves
        bandwidth = allgather_s(nbytes, levels)
    return bandwidth + (latency_s(op, cluster, size, stride) if latency else 0.0)


def send_s(nbytes: float, cluster: Cluster, stride: int, latency: bool = True) -> float:
    """Seconds to send `nbytes` from rank 0 to rank `stride` while every GPU sends alike (a pipeline hop):
    the link of cluster.p2p_level(stride), plus base + that link's hardware latency unless latency=False."""
    level = cluster.p2p_level(stride)
    t = p2p_s(nbytes, level)
    if latency:
        t += BASE_LATENCY_S + HW_LATENCY_S[level.kind]
    return t


def bus_bandwidth_gb_s(op: str, nbytes: float, cluster: Cluster, size: int, stride: int) -> float:
    """The bus bandwidth nccl-tests would print for this collective if it took collective_s (latency
    included): algbw = nbytes / time in GB/s, times the collective's factor for `size` ranks."""
    seconds = collective_s(op, nbytes, cluster, size, stride)
    if seconds == 0:
        return 0.0
    return nbytes / seconds / 1e9 * BUSBW_FACTOR[op](size)


def per_interconnect(op: str, nbytes: float, gpus: int) -> dict[str, float]:
    """Seconds for `op` on `nbytes` over `gpus` consecutive ranks on each node design of the catalogue
    (coursekit.hardware.load().nodes), using as many nodes as it takes: {node key: seconds}. Node designs
    the group would split unevenly are left out."""
    out = {}
    for key, node in load().nodes.items():
        cluster = Cluster(key, math.ceil(gpus / node.gpus))
        try:
            out[key] = collective_s(op, nbytes, cluster, gpus, 1)
        except ValueError:  # the group splits unevenly over this design's nodes or domains
            continue
    return out
