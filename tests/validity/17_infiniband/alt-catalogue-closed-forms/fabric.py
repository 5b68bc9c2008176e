"""InfiniBand fabric sizing from closed forms and the catalogue's own helpers (alternative-correct case)."""

from __future__ import annotations

import math

from coursekit.hardware import load

GB = 10**9  # bytes in a decimal gigabyte
BITS_PER_BYTE = 8


def two_tier_hosts(k: int) -> int:
    """k leaves with k/2 hosts each."""
    return k * (k // 2)


def three_tier_hosts(k: int) -> int:
    """k pods of (k/2)^2 hosts."""
    return k * (k // 2) ** 2


def three_tier_switches(k: int) -> int:
    """k pods of k switches, and (k/2)^2 cores."""
    half = k // 2
    return k * k + half * half


def fabric_size(n_endpoints: int, k: int) -> dict[str, int]:
    """Switches and cables of a non-blocking fabric for n endpoints."""
    half = k // 2
    if n_endpoints <= k:
        return {"tiers": 1, "leaves": 1, "spines": 0, "cores": 0, "switches": 1, "cables": n_endpoints}
    if n_endpoints > three_tier_hosts(k):
        raise ValueError(f"{n_endpoints} endpoints exceed a 3-tier fat tree of radix {k}")
    leaves = -(-n_endpoints // half)
    uplinks = leaves * half
    if n_endpoints <= two_tier_hosts(k):
        spines = -(-uplinks // k)
        return {
            "tiers": 2,
            "leaves": leaves,
            "spines": spines,
            "cores": 0,
            "switches": leaves + spines,
            "cables": n_endpoints + uplinks,
        }
    spines = leaves
    cores = -(-spines * half // k)
    return {
        "tiers": 3,
        "leaves": leaves,
        "spines": spines,
        "cores": cores,
        "switches": leaves + spines + cores,
        "cables": n_endpoints + uplinks + spines * half,
    }


def leaf_of(node: int, gpu: int, gpus_per_node: int, k: int) -> int:
    """Rail-optimized leaf of a GPU."""
    unit = node // (k // 2)
    return unit * gpus_per_node + gpu


def path(src: list[int], dst: list[int], gpus_per_node: int, k: int, pxn: bool = False) -> list[str]:
    """Hops from src to dst."""
    (sn, sg), (dn, dg) = src, dst
    if sn == dn:
        return ["nvlink"]
    hops = []
    if pxn and sg != dg:
        hops.append("nvlink")  # hand the data to the local GPU on dst's rail
        sg = dg
    same_leaf = leaf_of(sn, sg, gpus_per_node, k) == leaf_of(dn, dg, gpus_per_node, k)
    hops.append("leaf" if same_leaf else "spine")
    return hops


def ring_spine_crossings(ring: list[list[int]], gpus_per_node: int, k: int, pxn: bool = False) -> int:
    """Ring hops that go through a spine."""
    return sum(
        "spine" in path(ring[i], ring[(i + 1) % len(ring)], gpus_per_node, k, pxn) for i in range(len(ring))
    )


def per_gpu_injection_gb_s(node: str) -> float:
    """Node egress shared by its GPUs."""
    hw = load()
    return hw.node_egress_gb_s(node) / hw.nodes[node].gpus


def nvlink_to_network_ratio(node: str) -> float:
    """NVLink per GPU over fabric per GPU."""
    hw = load()
    return hw.gpus[hw.nodes[node].gpu].nvlink_gb_s / per_gpu_injection_gb_s(node)


def nics_for_target(gpus: int, per_gpu_gb_s: float, nic_gbit_s: float) -> int:
    """Fewest NICs."""
    return math.ceil(gpus * per_gpu_gb_s * BITS_PER_BYTE / nic_gbit_s)


def internode_allreduce_time_s(nbytes: float, nodes: int, nics: int, nic_gbit_s: float) -> float:
    """Ring over the nodes, at the node's egress."""
    egress_bytes_s = nics * nic_gbit_s / BITS_PER_BYTE * GB
    return 2 * (nodes - 1) / nodes * nbytes / egress_bytes_s


def nic_fits_pcie(nic_gbit_s: float, pcie: str, lanes: int = 16) -> bool:
    """Slot per direction against NIC per direction."""
    gen = load().pcie[pcie]
    return gen.lane_gb_s * lanes >= nic_gbit_s / BITS_PER_BYTE
