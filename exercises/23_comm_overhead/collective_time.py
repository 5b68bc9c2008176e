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
    raise NotImplementedError("TODO(23.collectives): not implemented yet")


def collective_s(
    op: str, nbytes: float, cluster: Cluster, size: int, stride: int, latency: bool = True
) -> float:
    """Seconds for collective `op` on `nbytes` over the group (nbytes: the all-reduced buffer, the gathered
    output, the reduce-scattered input, or what one GPU holds for an all-to-all), latency included unless
    latency=False. Bandwidth terms: coursekit.cluster's allreduce_s, allgather_s, alltoall_s."""
    raise NotImplementedError("TODO(23.collectives): not implemented yet")


def send_s(nbytes: float, cluster: Cluster, stride: int, latency: bool = True) -> float:
    """Seconds to send `nbytes` from rank 0 to rank `stride` while every GPU sends alike (a pipeline hop):
    the link of cluster.p2p_level(stride), plus base + that link's hardware latency unless latency=False."""
    raise NotImplementedError("TODO(23.collectives): not implemented yet")


def bus_bandwidth_gb_s(op: str, nbytes: float, cluster: Cluster, size: int, stride: int) -> float:
    """The bus bandwidth, in GB/s, that nccl-tests would print for this collective if it took
    collective_s (latency included): nccl-tests doc/PERFORMANCE.md, "busbw", the figure comparable to one
    GPU's link speed whatever the collective and the group size."""
    raise NotImplementedError("TODO(23.collectives): not implemented yet")


def per_interconnect(op: str, nbytes: float, gpus: int) -> dict[str, float]:
    """Seconds for `op` on `nbytes` over `gpus` consecutive ranks on each node design of the catalogue
    (coursekit.hardware.load().nodes), using as many nodes as it takes: {node key: seconds}. Node designs
    the group would split unevenly are left out."""
    raise NotImplementedError("TODO(23.collectives): not implemented yet")
