"""InfiniBand fabric sizing by walking the structure tier by tier (alternative-correct case)."""

from __future__ import annotations

import math

from coursekit.hardware import load

GB = 10**9  # bytes in a decimal gigabyte
BITS_PER_BYTE = 8


def two_tier_hosts(k: int) -> int:
    """Each spine port reaches one leaf, each leaf hosts half its ports."""
    leaves = k  # a spine has k ports, one per leaf
    return leaves * (k - k // 2)


def three_tier_hosts(k: int) -> int:
    """Sum over pods of hosts per pod."""
    total = 0
    for _pod in range(k):
        total += (k // 2) * (k // 2)
    return total


def three_tier_switches(k: int) -> int:
    """Pods first, then the core layer needed for their uplinks."""
    pod_switches = k * (k // 2 + k // 2)
    spine_uplinks = k * (k // 2) * (k // 2)
    cores = spine_uplinks // k
    return pod_switches + cores


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def fabric_size(n_endpoints: int, k: int) -> dict[str, int]:
    """Grow tiers until the hosts fit."""
    half = k // 2
    out = {"tiers": 0, "leaves": 0, "spines": 0, "cores": 0, "switches": 0, "cables": n_endpoints}
    if n_endpoints <= k:
        out.update(tiers=1, leaves=1, switches=1)
        return out
    if n_endpoints <= k * k // 2:
        out["tiers"] = 2
        out["leaves"] = _ceil_div(n_endpoints, half)
        out["spines"] = _ceil_div(out["leaves"], 2)
        out["cables"] += out["leaves"] * half
    elif n_endpoints <= k**3 // 4:
        out["tiers"] = 3
        out["leaves"] = _ceil_div(n_endpoints, half)
        out["spines"] = out["leaves"]
        out["cores"] = _ceil_div(out["spines"], 2)
        out["cables"] += out["leaves"] * half + out["spines"] * half
    else:
        raise ValueError(f"too many endpoints for radix {k}: {n_endpoints}")
    out["switches"] = out["leaves"] + out["spines"] + out["cores"]
    return out


def leaf_of(node: int, gpu: int, gpus_per_node: int, k: int) -> int:
    """Leaves are numbered unit by unit, rail by rail."""
    first_leaf_of_unit = (node // (k // 2)) * gpus_per_node
    return first_leaf_of_unit + gpu


def _hop(a: list[int], b: list[int], gpus_per_node: int, k: int) -> str:
    return "leaf" if leaf_of(*a, gpus_per_node, k) == leaf_of(*b, gpus_per_node, k) else "spine"


def path(src: list[int], dst: list[int], gpus_per_node: int, k: int, pxn: bool = False) -> list[str]:
    """Hops of a message."""
    if src[0] == dst[0]:
        return ["nvlink"]
    if not pxn or src[1] == dst[1]:
        return [_hop(src, dst, gpus_per_node, k)]
    proxy = [src[0], dst[1]]
    return ["nvlink", _hop(proxy, dst, gpus_per_node, k)]


def ring_spine_crossings(ring: list[list[int]], gpus_per_node: int, k: int, pxn: bool = False) -> int:
    """Walk the closed ring."""
    count = 0
    for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
        if path(a, b, gpus_per_node, k, pxn)[-1] == "spine":
            count += 1
    return count


def per_gpu_injection_gb_s(node: str) -> float:
    """NIC Gb/s summed, to GB/s, split over the GPUs."""
    hw = load()
    n = hw.nodes[node]
    gbit = hw.link_rate(n.nic_kind, n.nic).gbit_s * n.nics
    return gbit / n.gpus / BITS_PER_BYTE


def nvlink_to_network_ratio(node: str) -> float:
    """Ratio of per-GPU per-direction bandwidths."""
    hw = load()
    gpu = hw.gpus[hw.nodes[node].gpu]
    if gpu.nvlink is None:
        return 0.0
    nv = hw.nvlink[gpu.nvlink]
    per_dir = gpu.nvlink_links * nv.per_link_gb_s / (2 if nv.convention == "bidirectional" else 1)
    return per_dir / per_gpu_injection_gb_s(node)


def nics_for_target(gpus: int, per_gpu_gb_s: float, nic_gbit_s: float) -> int:
    """Add NICs until the GPUs get their share."""
    need_gbit = gpus * per_gpu_gb_s * BITS_PER_BYTE
    n = max(0, math.floor(need_gbit / nic_gbit_s) - 1)
    while n * nic_gbit_s < need_gbit:
        n += 1
    return n


def internode_allreduce_time_s(nbytes: float, nodes: int, nics: int, nic_gbit_s: float) -> float:
    """Reduce-scatter then all-gather over the nodes, each at the node's egress."""
    if nodes == 1:
        return 0.0
    per_step_bytes = nbytes / nodes
    egress = nics * nic_gbit_s * 1e9 / 8  # bytes per second per direction
    return 2 * (nodes - 1) * per_step_bytes / egress


def nic_fits_pcie(nic_gbit_s: float, pcie: str, lanes: int = 16) -> bool:
    """Compare in Gb/s of payload."""
    gen = load().pcie[pcie]
    payload, wire = gen.encoding
    slot_gbit_s = gen.gt_s * lanes * payload / wire
    return slot_gbit_s >= nic_gbit_s
