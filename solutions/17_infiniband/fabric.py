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
    ### BEGIN SOLUTION 17.fat_tree
    # a spine has k ports, one per leaf: at most k leaves; each leaf keeps k/2 ports down, k/2 up
    return k * (k // 2)
    ### END SOLUTION


def three_tier_hosts(k: int) -> int:
    """Endpoints of the largest non-blocking 3-tier fat tree of radix-k switches (Al-Fares' k-ary fat tree),
    an int."""
    ### BEGIN SOLUTION 17.fat_tree
    # k pods of (k/2 leaves x k/2 endpoints), joined by (k/2)^2 core switches: k^3/4 (k=64: 65,536)
    return k * (k // 2) * (k // 2)
    ### END SOLUTION


def three_tier_switches(k: int) -> int:
    """Switches of the full 3-tier k-ary fat tree (Al-Fares et al. §3), every tier counted, an int."""
    ### BEGIN SOLUTION 17.fat_tree
    pods = k * (k // 2 + k // 2)  # k pods, each k/2 leaf + k/2 aggregation (spine) switches
    cores = (k // 2) ** 2  # every spine sends k/2 links up, each core takes k of them
    return pods + cores  # 5k^2/4: 5,120 for k = 64
    ### END SOLUTION


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
    ### BEGIN SOLUTION 17.sizing
    half = k // 2
    if n_endpoints <= k:
        return {"tiers": 1, "leaves": 1, "spines": 0, "cores": 0, "switches": 1, "cables": n_endpoints}
    leaves = math.ceil(n_endpoints / half)  # k/2 endpoints per leaf keeps up == down: non-blocking
    if n_endpoints <= two_tier_hosts(k):
        spines = math.ceil(leaves * half / k)  # leaves x k/2 uplinks land on k-port spines
        cables = n_endpoints + leaves * half
        return {
            "tiers": 2,
            "leaves": leaves,
            "spines": spines,
            "cores": 0,
            "switches": leaves + spines,
            "cables": cables,
        }
    if n_endpoints <= three_tier_hosts(k):
        spines = leaves  # each spine takes one leaf's worth (k/2) down and sends k/2 up
        cores = math.ceil(spines * half / k)
        cables = n_endpoints + leaves * half + spines * half
        switches = leaves + spines + cores
        return {
            "tiers": 3,
            "leaves": leaves,
            "spines": spines,
            "cores": cores,
            "switches": switches,
            "cables": cables,
        }
    raise ValueError(f"{n_endpoints} endpoints exceed a 3-tier fat tree of radix {k} ({three_tier_hosts(k)})")
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 17.rails: a GPU is (node, local index); a rail group is k/2 nodes sharing gpus_per_node leaves


def leaf_of(node: int, gpu: int, gpus_per_node: int, k: int) -> int:
    """The leaf switch (an int, numbered across the fabric from 0) of GPU `gpu` of node `node`, rail-optimized
    on radix-k leaves that stay non-blocking: a scalable unit is as many consecutive nodes (from node 0) as
    one leaf can take, unit s owns leaves s*gpus_per_node .. (s+1)*gpus_per_node - 1, and GPU i of each of its
    nodes plugs into the unit's i-th leaf (rail i)."""
    ### BEGIN SOLUTION 17.rails
    group = node // (k // 2)  # one port per node on each leaf: k/2 nodes fill a leaf's down ports
    return group * gpus_per_node + gpu  # rail i = local GPU index i
    ### END SOLUTION


def path(src: list[int], dst: list[int], gpus_per_node: int, k: int, pxn: bool = False) -> list[str]:
    """How a message from GPU src = [node, gpu] reaches dst in a 2-tier rail-optimized fabric, as a list of
    hops: "nvlink" (inside a node), "leaf" (up to one leaf and down), "spine" (leaf, spine, leaf).
    Same node: ["nvlink"]. With pxn (NCCL's PXN), a message for another rail first moves over NVLink to the
    local GPU on dst's rail, then travels on that rail: ["nvlink", "leaf"] or ["nvlink", "spine"]."""
    ### BEGIN SOLUTION 17.rails
    (s_node, s_gpu), (d_node, d_gpu) = src, dst
    if s_node == d_node:
        return ["nvlink"]
    hops = []
    if pxn and s_gpu != d_gpu:
        hops.append("nvlink")  # hand the data to local GPU d_gpu, which sits on dst's rail
        s_gpu = d_gpu
    same_leaf = leaf_of(s_node, s_gpu, gpus_per_node, k) == leaf_of(d_node, d_gpu, gpus_per_node, k)
    return [*hops, "leaf" if same_leaf else "spine"]
    ### END SOLUTION


def ring_spine_crossings(ring: list[list[int]], gpus_per_node: int, k: int, pxn: bool = False) -> int:
    """How many of the ring's hops (GPU i to GPU i+1, and the last back to the first) go through a spine."""
    ### BEGIN SOLUTION 17.rails
    crossings = 0
    for i, src in enumerate(ring):
        dst = ring[(i + 1) % len(ring)]  # a ring closes: the last GPU sends to the first
        crossings += "spine" in path(src, dst, gpus_per_node, k, pxn)
    return crossings
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 17.nics: why 8 NICs


def per_gpu_injection_gb_s(node: str) -> float:
    """GB/s per direction that each GPU of catalogue node `node` can put on the compute fabric when all of
    the node's GPUs send at once, through the node's compute NICs (`nics`, `nic_kind`, `nic` in the
    catalogue; a link rate is in Gb/s per direction)."""
    ### BEGIN SOLUTION 17.nics
    hw = load()
    n = hw.nodes[node]
    gbit_s = hw.link_rate(n.nic_kind, n.nic).gbit_s  # 400 Gb/s NDR: a per-direction port rate
    return n.nics * gbit_s / BITS_PER_BYTE / n.gpus  # DGX H100: 8 x 50 GB/s / 8 GPUs = 50
    ### END SOLUTION


def nvlink_to_network_ratio(node: str) -> float:
    """Per-GPU NVLink bandwidth over per-GPU fabric injection bandwidth, both per direction, for `node`."""
    ### BEGIN SOLUTION 17.nics
    hw = load()
    gpu = hw.gpus[hw.nodes[node].gpu]
    gen = hw.nvlink[gpu.nvlink]
    # 450 for H100: NVIDIA's 900 is both ways
    nvlink = gpu.nvlink_links * gen.per_link_gb_s / (1 if gen.convention == PER_DIRECTION else 2)
    return nvlink / per_gpu_injection_gb_s(node)  # DGX H100: 450 / 50 = 9
    ### END SOLUTION


def nics_for_target(gpus: int, per_gpu_gb_s: float, nic_gbit_s: float) -> int:
    """The fewest NICs of `nic_gbit_s` that give each of `gpus` GPUs `per_gpu_gb_s` per direction at once."""
    ### BEGIN SOLUTION 17.nics
    return math.ceil(gpus * per_gpu_gb_s / (nic_gbit_s / BITS_PER_BYTE))
    ### END SOLUTION


def internode_allreduce_time_s(nbytes: float, nodes: int, nics: int, nic_gbit_s: float) -> float:
    """Bandwidth-only time of the across-nodes phase of a hierarchical all-reduce of `nbytes` per GPU: after
    the in-node reduce-scatter, each node's GPUs ring-all-reduce their shards over `nodes` nodes in parallel,
    sharing the node's `nics` NICs of `nic_gbit_s`."""
    ### BEGIN SOLUTION 17.nics
    node_gb_s = nics * nic_gbit_s / BITS_PER_BYTE  # node egress: 400 GB/s for a DGX H100
    # g GPUs each ring-all-reduce S/g over `nodes`, all through the same NICs: 2(n-1)/n * S / egress
    return 2 * (nodes - 1) / nodes * nbytes / (node_gb_s * GB)
    ### END SOLUTION


def nic_fits_pcie(nic_gbit_s: float, pcie: str, lanes: int = 16) -> bool:
    """Can a PCIe link of catalogue generation `pcie` with `lanes` lanes carry the NIC's full rate, per
    direction? (GPUDirect RDMA moves the data GPU -> PCIe switch -> NIC, so the slot must keep up.)"""
    ### BEGIN SOLUTION 17.nics
    gen = load().pcie[pcie]
    payload, wire = gen.encoding  # 128b/130b since Gen3
    slot_gb_s = lanes * gen.gt_s * payload / wire / BITS_PER_BYTE  # Gen5 x16: 63.0 GB/s each way
    return nic_gbit_s / BITS_PER_BYTE <= slot_gb_s  # 400 Gb/s = 50 GB/s fits Gen5 x16, not Gen4 x16
    ### END SOLUTION
