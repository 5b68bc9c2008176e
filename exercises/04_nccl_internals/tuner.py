"""NCCL's tuner in miniature: time = latency + bytes / bandwidth per (algorithm, protocol); the least wins.

README.md ("The tuner") teaches where each bandwidth and latency rule comes from; the constants below are
NCCL's, with the line of tuning.cc each one comes from.
Source: NVIDIA/nccl src/graph/tuning.cc, the NCCL 2.2x version with PAT and Blackwell rows (ncclTopoTuneModel,
ncclTopoGetAlgoTime; ground-truth.md §3), and getAlgoInfo in src/enqueue.cc. Check: `grade exercise 04`.
Units: latencies in microseconds, bandwidths in GB/s (1 GB/s = 1000 bytes/us), sizes in bytes.
Modeled here: Ring and Tree, for AllReduce, AllGather and ReduceScatter, on Hopper GPUs with Intel CPUs.
Left out: CollNet, NVLS and PAT; Broadcast and Reduce; graph->latencyInter (0 here); the x0.85 for
NCCL_TOPO_PATTERN_TREE graphs; pipelined launches (latCount = 1). Newer NCCL (src/tuning/*.cc) keeps these
Hopper constants but moved the rules around and changed some of them between releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")  # ncclFuncStr, src/init.cc
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")  # ncclAlgoStr
PROTOS = ("LL", "LL128", "Simple")  # ncclProtoStr; every (LL, LL128, Simple) triple below is in this order

# src/graph/tuning.cc: baseLat, in us
BASE_LAT = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4)}
# src/graph/tuning.cc: hwLat[NCCL_HW_NVLINK | NCCL_HW_PCI | NCCL_HW_NET], in us per hop
HW_LAT = {
    "NVLink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4)},
    "PCI": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7)},
    "NET": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0)},
}
# src/graph/tuning.cc, Hopper (compCap 90) rows, indexed by [min(n_nodes, 3) - 1] ("N1/N2/N4"), GB/s.
# llMaxBws is indexed by GPU on one node, by CPU vendor on several: Hopper-N1 141.0; Intel-N2/N4 39.0, 20.4.
LL_MAX_BW = (141.0, 39.0, 20.4)
PER_CH_MAX_RING_LL128_BW = (36.7, 36.7, 36.7)  # perChMaxRingLL128Bws
PER_CH_MAX_TREE_LL128_BW = (36.7, 36.7, 29.0)  # perChMaxTreeLL128Bws
PER_CH_MAX_TREE_BW = (38.7, 41.4, 36.0)  # perChMaxTreeBws
# src/graph/tuning.cc, "Various model refinements"
RING_LL_FACTOR = 0.5  # Ring/LL: LL's 50% efficiency
RING_LL128_FACTOR = 0.92  # Ring/LL128: written "0.92 /*120.0/128.0*/", 120/128 = 0.9375 rounded down
TREE_FACTOR = 0.92  # Tree (AllReduce), every protocol
TREE_LL_FACTOR = 1.0 / 3.8  # Tree/LL, on top of TREE_FACTOR
TREE_LL128_FACTOR = (7.0 / 9.0, 120.0 / 128.0)  # Tree/LL128, on top of TREE_FACTOR: one node, several
NET_OVERHEAD_US = 1.0  # getNetOverhead: Intel x86 CPUs (AMD: 2.0); tripled for Simple
RING_PLATEAU = 1.4  # ncclTopoGetAlgoTime: multi-node Ring/Simple AllReduce latency x1.4 (compCap >= 80)
# src/graph/tuning.cc treeCorrectionFactor[proto][log2(nbytes / 64)], 64 B .. 256 MB: Tree/AllReduce only
TREE_CORRECTION = {  # 1 = no correction
    "LL": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
    "LL128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}  # fmt: skip


@dataclass(frozen=True)
class System:
    """What NCCL's topology search hands the tuner: ranks, nodes, and one ring/tree graph."""

    n_ranks: int
    n_nodes: int  # n_ranks / n_nodes GPUs per node
    n_channels: int  # graph->nChannels: parallel rings (or trees), one CUDA block each
    bw_intra: float  # graph->bwIntra: GB/s per channel inside a node
    bw_inter: float  # graph->bwInter: GB/s per channel between nodes
    nvlink: bool = True  # GPUs in a node talk over NVLink (hwLat NVLink), else PCIe (hwLat PCI)
    ll128: bool = True  # NCCL enables LL128 by default here (it does only where it was validated)


def _n_steps(func: str, n_ranks: int) -> int:
    """Ring steps of `func` on n_ranks ranks (tuning.cc nsteps)."""
    raise NotImplementedError("TODO(04.selector): not implemented yet")


def _modeled(func: str, algo: str) -> bool:
    """Ring for AllReduce/AllGather/ReduceScatter, Tree for AllReduce only (NCCL has no tree AG or RS)."""
    return (algo == "Ring" and func in ("AllReduce", "AllGather", "ReduceScatter")) or (
        algo == "Tree" and func == "AllReduce"
    )


# ------------------------------------------------------------------------------------------------------------
# 04.selector


def algo_bandwidth(func: str, algo: str, proto: str, system: System) -> float:
    """NCCL's algorithm bandwidth in GB/s (comm->bandwidths[func][algo][proto]: bytes of the user's buffer per
    second) for `system`, as ncclTopoTuneModel computes it in the NCCL version named above, with this
    module's constants; 0.0 for a (func, algo) this model leaves out (_modeled)."""
    raise NotImplementedError("TODO(04.selector): not implemented yet")


def algo_latency(func: str, algo: str, proto: str, system: System) -> float:
    """NCCL's latency in microseconds (comm->latencies[func][algo][proto]) for a modeled (func, algo) on
    `system`, as ncclTopoTuneModel computes it, with this module's constants and simplifications (module
    docstring). Only called for (func, algo) pairs that _modeled accepts."""
    raise NotImplementedError("TODO(04.selector): not implemented yet")


def algo_time(func: str, algo: str, proto: str, nbytes: int, system: System) -> float:
    """ncclTopoGetAlgoTime in microseconds: the predicted time of one `func` of `nbytes` bytes with (algo,
    proto) on `system`, including the two measured corrections it applies (README.md), or -1.0 when
    algo_bandwidth is 0."""
    raise NotImplementedError("TODO(04.selector): not implemented yet")


def select_algo_proto(
    func: str, nbytes: int, system: System, algos: list[str] | None = None, protos: list[str] | None = None
) -> list[str]:
    """[algorithm, protocol] that getAlgoInfo (src/enqueue.cc) picks for `func` on `nbytes` bytes: the enabled
    pair with the least algo_time, among those with a time >= 0. On a tie, the pair that comes first (ALGOS
    order, then PROTOS order) wins.

    `algos` / `protos`: what NCCL_ALGO / NCCL_PROTO enable for this function (as nccl_env.py parses them), or
    None where the variable is unset and NCCL's own defaults apply (README.md: which protocols NCCL enables
    by itself, and what a user's explicit list does). ValueError if no enabled pair has a time.
    """
    raise NotImplementedError("TODO(04.selector): not implemented yet")
