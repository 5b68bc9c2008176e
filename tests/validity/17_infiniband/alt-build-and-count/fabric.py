"""Alternative-correct 17 (validity corpus): fabrics built and counted, not closed forms."""

from __future__ import annotations

from coursekit.hardware import PER_DIRECTION, load


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def two_tier_hosts(k: int) -> int:
    down = k // 2
    leaves = k  # one port of every spine per leaf
    return leaves * down


def three_tier_hosts(k: int) -> int:
    pods = k
    return pods * two_tier_hosts(k) // 2  # a pod is half of a 2-tier tree: k/2 leaves x k/2 endpoints


def three_tier_switches(k: int) -> int:
    per_pod = k // 2 + k // 2
    uplinks = k * (k // 2) * (k // 2)  # every aggregation switch sends k/2 up
    return k * per_pod + uplinks // k


def fabric_size(n_endpoints: int, k: int) -> dict[str, int]:
    down = k // 2
    if n_endpoints <= k:
        return {"tiers": 1, "leaves": 1, "spines": 0, "cores": 0, "switches": 1, "cables": n_endpoints}
    if n_endpoints > three_tier_hosts(k):
        raise ValueError(f"too many endpoints for three tiers of radix {k}")
    leaves = 0
    placed = 0
    while placed < n_endpoints:  # fill leaves one at a time
        placed += min(down, n_endpoints - placed)
        leaves += 1
    leaf_uplinks = leaves * down
    cables = n_endpoints + leaf_uplinks
    if n_endpoints <= two_tier_hosts(k):
        spines = _ceil_div(leaf_uplinks, k)
        return {
            "tiers": 2,
            "leaves": leaves,
            "spines": spines,
            "cores": 0,
            "switches": leaves + spines,
            "cables": cables,
        }
    spines = leaves  # pods: an aggregation switch per leaf
    spine_uplinks = spines * (k - down)
    cores = _ceil_div(spine_uplinks, k)
    return {
        "tiers": 3,
        "leaves": leaves,
        "spines": spines,
        "cores": cores,
        "switches": leaves + spines + cores,
        "cables": cables + spine_uplinks,
    }


def leaf_of(node: int, gpu: int, gpus_per_node: int, k: int) -> int:
    nodes_per_unit = k - k // 2  # a leaf's down ports, one per node
    unit = 0
    while node >= nodes_per_unit:
        node -= nodes_per_unit
        unit += 1
    return unit * gpus_per_node + gpu


def path(src: list[int], dst: list[int], gpus_per_node: int, k: int, pxn: bool = False) -> list[str]:
    if src[0] == dst[0]:
        return ["nvlink"]
    node, gpu = src
    prefix: list[str] = []
    if pxn and gpu != dst[1]:
        prefix = ["nvlink"]
        gpu = dst[1]
    here = leaf_of(node, gpu, gpus_per_node, k)
    there = leaf_of(dst[0], dst[1], gpus_per_node, k)
    return prefix + (["leaf"] if here == there else ["spine"])


def ring_spine_crossings(ring: list[list[int]], gpus_per_node: int, k: int, pxn: bool = False) -> int:
    hops = list(zip(ring, ring[1:] + ring[:1], strict=True))
    return sum(1 for a, b in hops if path(a, b, gpus_per_node, k, pxn)[-1] == "spine")


def per_gpu_injection_gb_s(node: str) -> float:
    hw = load()
    spec = hw.nodes[node]
    node_gbit_s = spec.nics * hw.link_rate(spec.nic_kind, spec.nic).gbit_s
    return node_gbit_s / spec.gpus / 8


def nvlink_to_network_ratio(node: str) -> float:
    hw = load()
    gpu = hw.gpus[hw.nodes[node].gpu]
    gen = hw.nvlink[gpu.nvlink]
    per_link = gen.per_link_gb_s if gen.convention == PER_DIRECTION else gen.per_link_gb_s / 2
    return gpu.nvlink_links * per_link / per_gpu_injection_gb_s(node)


def nics_for_target(gpus: int, per_gpu_gb_s: float, nic_gbit_s: float) -> int:
    need_gbit = gpus * per_gpu_gb_s * 8
    nics = 1
    while nics * nic_gbit_s < need_gbit and not abs(nics * nic_gbit_s - need_gbit) < 1e-9 * need_gbit:
        nics += 1
    return nics


def internode_allreduce_time_s(nbytes: float, nodes: int, nics: int, nic_gbit_s: float) -> float:
    egress_bytes_s = nics * nic_gbit_s * 1e9 / 8
    return (nodes - 1) * 2 * nbytes / nodes / egress_bytes_s


def nic_fits_pcie(nic_gbit_s: float, pcie: str, lanes: int = 16) -> bool:
    gen = load().pcie[pcie]
    payload, wire = gen.encoding
    slot_gbit_s = gen.gt_s * lanes * payload / wire
    return nic_gbit_s <= slot_gbit_s
