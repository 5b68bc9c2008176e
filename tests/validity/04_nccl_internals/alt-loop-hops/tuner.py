"""NCCL's tuner in miniature: time = latency + bytes / bandwidth per (algorithm, protocol); the least wins.

Bandwidth starts from what the topology search found (GB/s per channel x channels), loses what the protocol
spends on flags (LL 0.5, LL128 about 120/128, Simple 1), is capped per channel, and is turned from bus into
algorithm bandwidth. Latency is a base cost plus one hardware hop per ring step, or per tree level.
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
    """Ring steps (tuning.cc nsteps): AllReduce 2(p-1), AllGather / ReduceScatter p-1."""
    return 2 * (n_ranks - 1) if func == "AllReduce" else n_ranks - 1


def _modeled(func: str, algo: str) -> bool:
    """Ring for AllReduce/AllGather/ReduceScatter, Tree for AllReduce only (NCCL has no tree AG or RS)."""
    return (algo == "Ring" and func in ("AllReduce", "AllGather", "ReduceScatter")) or (
        algo == "Tree" and func == "AllReduce"
    )


# ------------------------------------------------------------------------------------------------------------
# 04.selector


def algo_bandwidth(func: str, algo: str, proto: str, system: System) -> float:
    """NCCL's algorithm bandwidth in GB/s (comm->bandwidths), 0.0 where this model has no such algorithm.

    bw = bw_intra if n_nodes <= 2 else bw_inter; busBw = n_channels * bw; i = min(n_nodes, 3) - 1. Then:
      Ring/LL:     min(LL_MAX_BW[i], busBw * RING_LL_FACTOR)
      Ring/LL128:  min(busBw * RING_LL128_FACTOR, n_channels * PER_CH_MAX_RING_LL128_BW[i])
      Tree:        busBw = min(busBw * TREE_FACTOR, n_channels * PER_CH_MAX_TREE_BW[i]), and then
        Tree/LL:    min(busBw * TREE_LL_FACTOR, LL_MAX_BW[i])
        Tree/LL128: min(busBw * TREE_LL128_FACTOR[one node? 0 : 1], n_channels * PER_CH_MAX_TREE_LL128_BW[i])
    Bus to algorithm bandwidth: Ring x n_ranks / nsteps (nsteps: AllReduce 2(p-1), others p-1), Tree x 0.5.
    """
    if not _modeled(func, algo):
        return 0.0
    i = min(system.n_nodes, 3) - 1
    bw = system.bw_intra if system.n_nodes <= 2 else system.bw_inter
    bus = system.n_channels * bw
    if algo == "Ring":
        if proto == "LL":
            bus = min(LL_MAX_BW[i], bus * RING_LL_FACTOR)
        elif proto == "LL128":
            bus = min(bus * RING_LL128_FACTOR, system.n_channels * PER_CH_MAX_RING_LL128_BW[i])
        return bus * system.n_ranks / _n_steps(func, system.n_ranks)
    bus = min(bus * TREE_FACTOR, system.n_channels * PER_CH_MAX_TREE_BW[i])
    if proto == "LL":
        bus = min(bus * TREE_LL_FACTOR, LL_MAX_BW[i])
    elif proto == "LL128":
        factor = TREE_LL128_FACTOR[0 if system.n_nodes == 1 else 1]
        bus = min(bus * factor, system.n_channels * PER_CH_MAX_TREE_LL128_BW[i])
    return bus * 0.5


def algo_latency(func: str, algo: str, proto: str, system: System) -> float:
    """NCCL's latency in us (comm->latencies) for a modeled (func, algo); j = PROTOS.index(proto).

    intra = HW_LAT["NVLink" if system.nvlink else "PCI"][algo][j]
    inter = HW_LAT["NET"]["Tree" if one GPU per node else algo][j]   (ppn = 1 exposes the network latency)
    Ring: on several nodes intra = max(intra, NET_OVERHEAD_US, tripled for Simple); inter steps
      n_inter = 0 on one node, else 2(n_nodes-1) for AllReduce and n_nodes-1 for AllGather/ReduceScatter;
      BASE_LAT + (nsteps - n_inter) * intra + n_inter * inter.
    Tree: BASE_LAT + 2 * ((n_ranks // n_nodes - 1) * intra + floor(log2(n_nodes)) * inter).
    """
    j = PROTOS.index(proto)
    intra = HW_LAT["NVLink" if system.nvlink else "PCI"][algo][j]
    one_per_node = system.n_ranks == system.n_nodes
    inter = HW_LAT["NET"]["Tree" if one_per_node else algo][j]
    lat = BASE_LAT[algo][j]
    if algo == "Ring":
        if system.n_nodes > 1:
            overhead = NET_OVERHEAD_US * (3 if proto == "Simple" else 1)
            intra = max(intra, overhead)
        nsteps = _n_steps(func, system.n_ranks)
        n_inter = 0 if system.n_nodes == 1 else _n_steps(func, system.n_nodes)
        # add the hops one at a time, as a ring takes them
        for step in range(nsteps):
            lat += inter if step < n_inter else intra
        return lat
    levels = (system.n_ranks // system.n_nodes - 1) * intra + math.floor(math.log2(system.n_nodes)) * inter
    return lat + 2 * levels


def algo_time(func: str, algo: str, proto: str, nbytes: int, system: System) -> float:
    """ncclTopoGetAlgoTime in us: latency + nbytes / (1000 * bandwidth), or -1.0 when the bandwidth is 0.

    Tree AllReduce: bandwidth x TREE_CORRECTION[proto][floor(log2(nbytes // 64))] when nbytes >= 64 and that
    index is < 23. Ring/Simple AllReduce on several nodes with nbytes // (n_channels * n_ranks) >= 64:
    latency x RING_PLATEAU.
    """
    bw = algo_bandwidth(func, algo, proto, system)
    if bw == 0:
        return -1.0
    lat = algo_latency(func, algo, proto, system)
    if algo == "Tree" and func == "AllReduce" and nbytes >= 64:
        idx = (nbytes // 64).bit_length() - 1
        if idx < 23:
            bw *= TREE_CORRECTION[proto][idx]
    if (
        algo == "Ring"
        and proto == "Simple"
        and func == "AllReduce"
        and system.n_nodes > 1
        and nbytes // (system.n_channels * system.n_ranks) >= 64
    ):
        lat *= RING_PLATEAU
    return lat + nbytes / (1000 * bw)


def select_algo_proto(
    func: str, nbytes: int, system: System, algos: list[str] | None = None, protos: list[str] | None = None
) -> list[str]:
    """[algorithm, protocol] with the least algo_time, as getAlgoInfo picks it (src/enqueue.cc).

    `algos` / `protos`: what NCCL_ALGO / NCCL_PROTO enable for this function (see nccl_env.py), or None for
    NCCL's defaults: every algorithm; LL and Simple; LL128 only if system.ll128. A protocol the user listed
    explicitly is on even where NCCL would not enable it by default (hence the docs' corruption warning).
    Loop over ALGOS, then PROTOS, in their order; keep a candidate only if its time is >= 0 and strictly less
    than the best so far. ValueError if nothing is left.
    """
    algo_on = list(ALGOS) if algos is None else algos
    if protos is None:
        proto_on = ["LL", "LL128", "Simple"] if system.ll128 else ["LL", "Simple"]
    else:
        proto_on = protos
    best, choice = math.inf, None
    for a in ALGOS:
        if a not in algo_on:
            continue
        for pr in PROTOS:
            if pr not in proto_on:
                continue
            t = algo_time(func, a, pr, nbytes, system)
            if 0 <= t < best:
                best, choice = t, [a, pr]
    if choice is None:
        raise ValueError(f"no algorithm/protocol enabled for {func}")
    return choice
