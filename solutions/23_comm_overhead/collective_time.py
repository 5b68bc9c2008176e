"""What one collective costs on a real cluster: a bandwidth term plus NCCL's own latency model.

The bandwidth term is coursekit.cluster's hierarchical, bandwidth-only time (jax-ml/scaling-book gpus.md;
exercise 16). The latency term is the cost model NCCL uses to pick its algorithms, for the Ring algorithm and
the Simple protocol (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel; README, "Latency"), with the
constants below. Check: `grade exercise 23`.
Units: bytes, seconds, GB/s with GB = 1e9 bytes, per direction. n = ranks in the group.
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


def _check(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; expected one of {OPS}")


# ------------------------------------------------------------------------------------------------------------
# 23.collectives


def latency_s(op: str, cluster: Cluster, size: int, stride: int) -> float:
    """NCCL's modelled latency, in seconds, of collective `op` over the group of `size` ranks `stride`
    apart (the links of cluster.levels(size, stride)).
    all_reduce, all_gather, reduce_scatter: tuning.cc's ring latency with the Simple protocol; a step inside
    a node costs the NVLink latency if the group has NVLink peers, else the PCIe one, and a step between
    nodes the network latency. all_to_all: the course's rule in the README (tuning.cc has no all-to-all
    model). A group of one rank: 0. ValueError for an op not in OPS."""
    ### BEGIN SOLUTION 23.collectives
    _check(op)
    levels = cluster.levels(size, stride)
    if not levels:
        return 0.0  # a group of one talks to nobody
    kinds = [lv.kind for lv in levels]
    if op == "all_to_all":
        return BASE_LATENCY_S + HW_LATENCY_S[kinds[-1]]  # levels run innermost first: the last is the slowest
    nodes = next((lv.members for lv in levels if lv.kind == "network"), 1)
    # tuning.cc: nsteps = 2(nRanks-1) for AllReduce, nRanks-1 for ReduceScatter/AllGather; same for inter
    rounds = 2 if op == "all_reduce" else 1
    steps, inter = rounds * (size - 1), rounds * (nodes - 1)
    intra = HW_LATENCY_S["nvlink" if "nvlink" in kinds else "pcie"]
    return BASE_LATENCY_S + (steps - inter) * intra + inter * HW_LATENCY_S["network"]
    ### END SOLUTION


def collective_s(
    op: str, nbytes: float, cluster: Cluster, size: int, stride: int, latency: bool = True
) -> float:
    """Seconds for collective `op` on `nbytes` over the group (nbytes: the all-reduced buffer, the gathered
    output, the reduce-scattered input, or what one GPU holds for an all-to-all), latency included unless
    latency=False. Bandwidth terms: coursekit.cluster's allreduce_s, allgather_s, alltoall_s."""
    ### BEGIN SOLUTION 23.collectives
    _check(op)
    levels = cluster.levels(size, stride)
    bandwidth = {"all_reduce": allreduce_s, "all_to_all": alltoall_s}.get(op, allgather_s)(nbytes, levels)
    return bandwidth + (latency_s(op, cluster, size, stride) if latency else 0.0)
    ### END SOLUTION


def send_s(nbytes: float, cluster: Cluster, stride: int, latency: bool = True) -> float:
    """Seconds to send `nbytes` from rank 0 to rank `stride` while every GPU sends alike (a pipeline hop):
    the link of cluster.p2p_level(stride), plus base + that link's hardware latency unless latency=False."""
    ### BEGIN SOLUTION 23.collectives
    level = cluster.p2p_level(stride)
    return p2p_s(nbytes, level) + (BASE_LATENCY_S + HW_LATENCY_S[level.kind] if latency else 0.0)
    ### END SOLUTION


def bus_bandwidth_gb_s(op: str, nbytes: float, cluster: Cluster, size: int, stride: int) -> float:
    """The bus bandwidth, in GB/s, that nccl-tests would print for this collective if it took
    collective_s (latency included): nccl-tests doc/PERFORMANCE.md, "busbw", the figure comparable to one
    GPU's link speed whatever the collective and the group size."""
    ### BEGIN SOLUTION 23.collectives
    _check(op)
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor, the factor that makes busbw comparable to the
    # hardware's per-GPU bandwidth whatever the collective (ground-truth.md §1)
    factor = {
        "all_reduce": lambda n: 2 * (n - 1) / n,
        "all_gather": lambda n: (n - 1) / n,
        "reduce_scatter": lambda n: (n - 1) / n,
        "all_to_all": lambda n: (n - 1) / n,
    }
    seconds = collective_s(op, nbytes, cluster, size, stride)
    return nbytes / seconds / 1e9 * factor[op](size)
    ### END SOLUTION


def per_interconnect(op: str, nbytes: float, gpus: int) -> dict[str, float]:
    """Seconds for `op` on `nbytes` over `gpus` consecutive ranks on each node design of the catalogue
    (coursekit.hardware.load().nodes), using as many nodes as it takes: {node key: seconds}. Node designs
    the group would split unevenly are left out."""
    ### BEGIN SOLUTION 23.collectives
    table = {}
    for key, node in load().nodes.items():
        cluster = Cluster(key, nodes=math.ceil(gpus / node.gpus))
        if cluster.tiles(gpus, 1):  # 8 GPUs of a 72-GPU rack: fine; 6 of a 4-GPU box: uneven, skipped
            table[key] = collective_s(op, nbytes, cluster, gpus, 1)
    return table
    ### END SOLUTION
