"""InfiniBand fabrics for GPU clusters: fat-tree capacity, switch and cable counts, rail-optimized wiring, and
why a DGX node carries one NIC per GPU.

Fat trees: Al-Fares, Loukissas, Vahdat, "A Scalable, Commodity Data Center Network Architecture", SIGCOMM
2008, §3; NVIDIA DGX SuperPOD reference architectures (ground-truth.md §7.2). One endpoint = one NIC port =
one GPU here (8 x 400 Gb/s per DGX H100). Rail-optimized wiring: NIC i of every node of a scalable unit plugs
into that unit's leaf i (Juniper, "Rail Optimized Fabric"). Check: `grade exercise 17`; hints: `grade hint 17
<part>`.
Units: Gb/s for link rates (8 bits = 1 byte), GB/s and bytes with GB = 1e9, seconds.
"""

from __future__ import annotations

import math

from coursekit.hardware import PER_DIRECTION, load

GB = 10**9  # bytes in a decimal gigabyte
BITS_PER_BYTE = 8

# ------------------------------------------------------------------------------------------------------------
# 17.fat_tree: capacity for radix k


def two_tier_hosts(k: int) -> int:
    """Endpoints (NIC ports) of the largest non-blocking 2-tier (leaf-spine) fat tree built from radix-k
    switches (k even, every switch alike), an int."""
    raise NotImplementedError("TODO(17.fat_tree): not implemented yet")


def three_tier_hosts(k: int) -> int:
    """Endpoints of the largest non-blocking 3-tier fat tree of radix-k switches (Al-Fares' k-ary fat tree),
    an int."""
    raise NotImplementedError("TODO(17.fat_tree): not implemented yet")


def three_tier_switches(k: int) -> int:
    """Switches of the full 3-tier k-ary fat tree (Al-Fares et al. §3), every tier counted, an int."""
    raise NotImplementedError("TODO(17.fat_tree): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 17.sizing: the smallest non-blocking fabric for n endpoints


def fabric_size(n_endpoints: int, k: int) -> dict[str, int]:
    """Switches and cables of the smallest non-blocking fabric for `n_endpoints` NIC ports on radix-k
    switches, built the way the DGX SuperPOD reference architectures build it (the README's table is the
    specification: your rule must reproduce every row of it, for any n and k): {"tiers", "leaves", "spines",
    "cores", "switches", "cables"}, all ints, "spines" and "cores" 0 for tiers that are not there.

    Use the fewest tiers that can hold n (one switch counts as a single leaf). Every switch port that carries
    traffic in one tier has a matching port in the next, so nothing is oversubscribed; a 3-tier fabric keeps
    the SuperPOD's pod structure. More endpoints than 3 tiers can hold: raise ValueError.
    cables: every link counted once (endpoint-leaf, leaf-spine, spine-core; a twin-port OSFP cable is 2).
    """
    raise NotImplementedError("TODO(17.sizing): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 17.rails: a GPU is (node, local index); a rail group is k/2 nodes sharing gpus_per_node leaves


def leaf_of(node: int, gpu: int, gpus_per_node: int, k: int) -> int:
    """The leaf switch (an int, numbered across the fabric from 0) of GPU `gpu` of node `node`, rail-optimized
    on radix-k leaves that stay non-blocking: a scalable unit is as many consecutive nodes (from node 0) as
    one leaf can take, unit s owns leaves s*gpus_per_node .. (s+1)*gpus_per_node - 1, and GPU i of each of its
    nodes plugs into the unit's i-th leaf (rail i)."""
    raise NotImplementedError("TODO(17.rails): not implemented yet")


def path(src: list[int], dst: list[int], gpus_per_node: int, k: int, pxn: bool = False) -> list[str]:
    """How a message from GPU src = [node, gpu] reaches dst in a 2-tier rail-optimized fabric, as a list of
    hops: "nvlink" (inside a node), "leaf" (up to one leaf and down), "spine" (leaf, spine, leaf).
    Same node: ["nvlink"]. With pxn (NCCL's PXN), a message for another rail first moves over NVLink to the
    local GPU on dst's rail, then travels on that rail: ["nvlink", "leaf"] or ["nvlink", "spine"]."""
    raise NotImplementedError("TODO(17.rails): not implemented yet")


def ring_spine_crossings(ring: list[list[int]], gpus_per_node: int, k: int, pxn: bool = False) -> int:
    """How many of the ring's hops (GPU i to GPU i+1, and the last back to the first) go through a spine."""
    raise NotImplementedError("TODO(17.rails): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 17.nics: why 8 NICs


def per_gpu_injection_gb_s(node: str) -> float:
    """GB/s per direction that each GPU of catalogue node `node` can put on the compute fabric when all of
    the node's GPUs send at once, through the node's compute NICs (`nics`, `nic_kind`, `nic` in the
    catalogue; a link rate is in Gb/s per direction)."""
    raise NotImplementedError("TODO(17.nics): not implemented yet")


def nvlink_to_network_ratio(node: str) -> float:
    """Per-GPU NVLink bandwidth over per-GPU fabric injection bandwidth, both per direction, for `node`."""
    raise NotImplementedError("TODO(17.nics): not implemented yet")


def nics_for_target(gpus: int, per_gpu_gb_s: float, nic_gbit_s: float) -> int:
    """The fewest NICs of `nic_gbit_s` that give each of `gpus` GPUs `per_gpu_gb_s` per direction at once."""
    raise NotImplementedError("TODO(17.nics): not implemented yet")


def internode_allreduce_time_s(nbytes: float, nodes: int, nics: int, nic_gbit_s: float) -> float:
    """Bandwidth-only time of the across-nodes phase of a hierarchical all-reduce of `nbytes` per GPU: after
    the in-node reduce-scatter, each node's GPUs ring-all-reduce their shards over `nodes` nodes in parallel,
    sharing the node's `nics` NICs of `nic_gbit_s`."""
    raise NotImplementedError("TODO(17.nics): not implemented yet")


def nic_fits_pcie(nic_gbit_s: float, pcie: str, lanes: int = 16) -> bool:
    """Can a PCIe link of catalogue generation `pcie` with `lanes` lanes carry the NIC's full rate, per
    direction? (GPUDirect RDMA moves the data GPU -> PCIe switch -> NIC, so the slot must keep up.)"""
    raise NotImplementedError("TODO(17.nics): not implemented yet")
