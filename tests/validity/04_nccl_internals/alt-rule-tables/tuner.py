"""NCCL's tuner as rule tables (an alternative-correct case for exercise 04)."""

from __future__ import annotations

import math
from dataclasses import dataclass

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOS = ("LL", "LL128", "Simple")
BASE_LAT = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4)}
HW_LAT = {
    "NVLink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4)},
    "PCI": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7)},
    "NET": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0)},
}
LL_MAX_BW = (141.0, 39.0, 20.4)
PER_CH_MAX_RING_LL128_BW = (36.7, 36.7, 36.7)
PER_CH_MAX_TREE_LL128_BW = (36.7, 36.7, 29.0)
PER_CH_MAX_TREE_BW = (38.7, 41.4, 36.0)
RING_LL_FACTOR = 0.5
RING_LL128_FACTOR = 0.92
TREE_FACTOR = 0.92
TREE_LL_FACTOR = 1.0 / 3.8
TREE_LL128_FACTOR = (7.0 / 9.0, 120.0 / 128.0)
NET_OVERHEAD_US = 1.0
RING_PLATEAU = 1.4
TREE_CORRECTION = {
    "LL": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
    "LL128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}  # fmt: skip


@dataclass(frozen=True)
class System:
    n_ranks: int
    n_nodes: int
    n_channels: int
    bw_intra: float
    bw_inter: float
    nvlink: bool = True
    ll128: bool = True


def _n_steps(func: str, n_ranks: int) -> int:
    passes = 2 if func == "AllReduce" else 1  # reduce-scatter and all-gather, or just one of them
    return passes * (n_ranks - 1)


def _modeled(func: str, algo: str) -> bool:
    if algo == "Tree":
        return func == "AllReduce"
    return algo == "Ring" and func in ("AllReduce", "AllGather", "ReduceScatter")


def _rules(algo: str, proto: str, s: System) -> list[tuple[float, float]]:
    """(factor, cap) pairs applied in turn: bus = min(bus * factor, cap)."""
    i = min(s.n_nodes, 3) - 1
    ch = s.n_channels
    inf = math.inf
    if algo == "Ring":
        return {
            "LL": [(RING_LL_FACTOR, LL_MAX_BW[i])],
            "LL128": [(RING_LL128_FACTOR, ch * PER_CH_MAX_RING_LL128_BW[i])],
            "Simple": [(1.0, inf)],
        }[proto]
    first = (TREE_FACTOR, ch * PER_CH_MAX_TREE_BW[i])
    second = {
        "LL": (TREE_LL_FACTOR, LL_MAX_BW[i]),
        "LL128": (TREE_LL128_FACTOR[min(s.n_nodes, 2) - 1], ch * PER_CH_MAX_TREE_LL128_BW[i]),
        "Simple": (1.0, inf),
    }[proto]
    return [first, second]


def algo_bandwidth(func: str, algo: str, proto: str, system: System) -> float:
    if not _modeled(func, algo):
        return 0.0
    per_channel = system.bw_inter if system.n_nodes > 2 else system.bw_intra
    bus = system.n_channels * per_channel
    for factor, cap in _rules(algo, proto, system):
        bus = min(bus * factor, cap)
    if algo == "Tree":
        return bus / 2
    return bus / (_n_steps(func, system.n_ranks) / system.n_ranks)


def algo_latency(func: str, algo: str, proto: str, system: System) -> float:
    j = PROTOS.index(proto)
    local = HW_LAT["PCI" if not system.nvlink else "NVLink"][algo][j]
    net_algo = "Tree" if system.n_nodes == system.n_ranks else algo
    net = HW_LAT["NET"][net_algo][j]
    if algo == "Tree":
        ppn = system.n_ranks // system.n_nodes
        levels = int(math.log2(system.n_nodes) + 1e-9)
        hops = [local] * (ppn - 1) + [net] * levels
        return BASE_LAT["Tree"][j] + 2 * sum(hops)
    steps = _n_steps(func, system.n_ranks)
    if system.n_nodes == 1:
        return BASE_LAT["Ring"][j] + steps * local
    local = max(local, NET_OVERHEAD_US * (3 if proto == "Simple" else 1))
    crossings = (system.n_nodes - 1) * (2 if func == "AllReduce" else 1)
    hops = [net] * crossings + [local] * (steps - crossings)
    return BASE_LAT["Ring"][j] + sum(hops)


def algo_time(func: str, algo: str, proto: str, nbytes: int, system: System) -> float:
    bw = algo_bandwidth(func, algo, proto, system)
    if bw <= 0:
        return -1.0
    lat = algo_latency(func, algo, proto, system)
    table = TREE_CORRECTION[proto]
    if algo == "Tree" and func == "AllReduce" and nbytes >= 64:
        index = math.floor(math.log2(nbytes // 64))
        if index < len(table):
            bw = bw * table[index]
    per_rank_chunk = nbytes // (system.n_channels * system.n_ranks)
    if (algo, proto, func) == ("Ring", "Simple", "AllReduce") and system.n_nodes > 1 and per_rank_chunk >= 64:
        lat = lat * RING_PLATEAU
    return lat + nbytes / 1000 / bw


def select_algo_proto(
    func: str, nbytes: int, system: System, algos: list[str] | None = None, protos: list[str] | None = None
) -> list[str]:
    if algos is None:
        algos = list(ALGOS)
    if protos is None:
        protos = ["LL", "LL128", "Simple"] if system.ll128 else ["LL", "Simple"]
    candidates = []
    for position, (a, p) in enumerate((a, p) for a in ALGOS for p in PROTOS):
        if a in algos and p in protos:
            t = algo_time(func, a, p, nbytes, system)
            if t >= 0:
                candidates.append((t, position, [a, p]))
    if not candidates:
        raise ValueError(f"nothing enabled for {func}")
    return min(candidates)[2]
