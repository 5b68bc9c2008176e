"""A cluster of catalogue nodes, the links a parallel group crosses, and bandwidth-only collective times.

    from coursekit.cluster import Cluster, allreduce_s
    c = Cluster("dgx_h100", nodes=4)           # 32 H100s; every number comes from coursekit/hardware.yml
    c.levels(size=8, stride=4)                  # a DP group of 8 ranks 4 apart: 2 per node over 4 nodes
    allreduce_s(16e9, c.levels(32, 1))          # 16 GB all-reduced over all 32 GPUs, bandwidth only

Ranks are numbered node by node: rank r sits in node r // gpus_per_node and NVLink domain r // domain_gpus.
A group is `size` ranks `stride` apart, starting at rank 0 (Megatron's TP group: stride 1; DP: stride tp).

A collective over a group that spans several kinds of link runs hierarchically: inside each NVLink domain,
then between the domains of a node over PCIe (through host memory when the GPUs have no NVLink), then between
nodes over the NICs. The phases pipeline, so the slowest level sets the time (jax-ml/scaling-book gpus.md,
"T = bytes * max_i[(D_i - 1) / (D_i * W_link_i)]"; ground-truth.md §2). Each level's bandwidth W_i is that of
the whole sub-group below it: the k GPUs of one node that are in the group each have their own NIC share
(8 x 400 Gb/s per DGX H100: scaling book "node egress 400e9"), so W_network = k x nic share. Every bandwidth
is per direction, in GB/s with GB = 1e9 bytes (coursekit/hardware.py).
"""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass
from functools import cached_property

from coursekit.hardware import GB, load

LEVELS = ("nvlink", "pcie", "network")


@dataclass(frozen=True, slots=True)
class Level:
    """One kind of link a group crosses: `members` sub-groups of `below` GPUs each, joined by links of
    `gpu_gb_s` per GPU per direction. The level moves below x gpu_gb_s GB/s into and out of each sub-group."""

    kind: str
    """'nvlink' (inside an NVLink domain), 'pcie' (domains of one node), 'network' (between nodes)."""
    members: int
    """D_i: the sub-groups this level joins (GPUs, for NVLink; domains of a node; nodes)."""
    below: int
    """Group members inside one sub-group (1 for NVLink)."""
    gpu_gb_s: float
    """Per-GPU bandwidth of this level's links, per direction."""

    @property
    def gb_s(self) -> float:
        """W_i: bandwidth into or out of one sub-group."""
        return self.below * self.gpu_gb_s


@dataclass(frozen=True)
class Cluster:
    """`nodes` catalogue nodes of kind `node` (a key of coursekit/hardware.yml `nodes`)."""

    node: str
    nodes: int = 1

    def __post_init__(self) -> None:
        if self.node not in load().nodes:
            raise ValueError(f"unknown node {self.node!r}; the catalogue has {sorted(load().nodes)}")
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")

    # -- what one GPU has ---------------------------------------------------------------------------------
    @cached_property
    def gpus_per_node(self) -> int:
        return load().nodes[self.node].gpus

    @cached_property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node

    @cached_property
    def domain_gpus(self) -> int:
        """GPUs per NVLink domain; 1 without NVLink."""
        return load().nodes[self.node].nvlink_domain_gpus

    @cached_property
    def gpu(self) -> str:
        return load().nodes[self.node].gpu

    @cached_property
    def memory_bytes(self) -> float:
        return load().gpus[self.gpu].memory_gb * GB

    @cached_property
    def peak_flops(self) -> float:
        """Dense bf16 tensor-core flop/s of one GPU."""
        tflops = load().gpus[self.gpu].bf16_dense_tflops
        if tflops is None:  # hardware.yml's null: the GPU has no bf16 tensor cores (V100)
            raise TypeError(f"{self.gpu} has no bf16 tensor cores (bf16_dense_tflops is null): no peak_flops")
        return tflops * 1e12

    @cached_property
    def nvlink_gb_s(self) -> float:
        """One GPU's NVLink bandwidth, per direction (H100: 450); 0 without NVLink (hardware.yml's figure)."""
        return load().gpus[self.gpu].nvlink_gb_s

    @cached_property
    def pcie_gb_s(self) -> float:
        """One GPU's x16 host link, per direction (Gen4: 31.5)."""
        hw = load()
        return hw.pcie[hw.gpus[self.gpu].pcie].x16_gb_s

    @cached_property
    def nic_gb_s(self) -> float:
        """One GPU's share of its node's NICs, per direction (DGX H100: 400 / 8 = 50)."""
        return load().node_egress_gb_s(self.node) / self.gpus_per_node

    # -- groups -------------------------------------------------------------------------------------------
    def _ranks(self, size: int, stride: int) -> range:
        if size < 1 or stride < 1 or (size - 1) * stride >= self.world:
            raise ValueError(f"a group of {size} ranks {stride} apart does not fit in {self.world} GPUs")
        return range(0, size * stride, stride)

    def aligned(self, span: int) -> bool:
        """True if blocks of `span` consecutive ranks never straddle an NVLink domain or a node unevenly: span
        divides, or is a multiple of, both the domain and the node. Every group of a Megatron layout whose
        members lie within such blocks then crosses the same links as the group of rank 0."""
        return all(span % unit == 0 or unit % span == 0 for unit in (self.domain_gpus, self.gpus_per_node))

    def tiles(self, size: int, stride: int) -> bool:
        """True if the group puts the same number of members in every node and NVLink domain it touches."""
        return _counts(self, size, stride) is not None

    def levels(self, size: int, stride: int) -> tuple[Level, ...]:
        """The links a group of `size` ranks `stride` apart crosses, innermost first; () for one rank."""
        counts = _counts(self, size, stride)
        if counts is None:
            raise ValueError(f"a group of {size} ranks {stride} apart splits unevenly over {self.node} nodes")
        per_domain, per_node, n_nodes = counts
        levels = [
            Level("nvlink", per_domain, 1, self.nvlink_gb_s),
            Level("pcie", per_node // per_domain, per_domain, self.pcie_gb_s),
            Level("network", n_nodes, per_node, self.nic_gb_s),
        ]
        return tuple(lv for lv in levels if lv.members > 1)

    def p2p_level(self, stride: int) -> Level:
        """The link between rank 0 and rank `stride` (e.g. two pipeline stages), while every GPU sends."""
        self._ranks(2, stride)
        if stride < self.domain_gpus:
            return Level("nvlink", 2, 1, self.nvlink_gb_s)
        if stride < self.gpus_per_node:
            return Level("pcie", 2, 1, self.pcie_gb_s)
        return Level("network", 2, 1, self.nic_gb_s)


@functools.lru_cache(maxsize=4096)
def _counts(cluster: Cluster, size: int, stride: int) -> tuple[int, int, int] | None:
    """(members per NVLink domain, members per node, nodes) of the group, or None if uneven."""
    ranks = cluster._ranks(size, stride)
    found = []
    for unit in (cluster.domain_gpus, cluster.gpus_per_node):
        per_unit = collections.Counter(r // unit for r in ranks)
        if len(set(per_unit.values())) != 1:
            return None
        found.append((next(iter(per_unit.values())), len(per_unit)))
    (per_domain, _), (per_node, n_nodes) = found
    return per_domain, per_node, n_nodes


# ------------------------------------------------------------------------------------------------------------
# bandwidth-only times (no latency): the scaling book's hierarchical formulas


def allgather_s(nbytes: float, levels: tuple[Level, ...]) -> float:
    """All-gather whose OUTPUT is `nbytes` per GPU (or reduce-scatter whose input is): nccl-tests' S, moved
    with the (D-1)/D factor at each level (ground-truth.md §1), the slowest level setting the pace."""
    return max((nbytes * (lv.members - 1) / (lv.members * lv.gb_s * GB) for lv in levels), default=0.0)


def reduce_scatter_s(nbytes: float, levels: tuple[Level, ...]) -> float:
    """Reduce-scatter of an `nbytes` buffer: the same traffic as the all-gather that undoes it."""
    return allgather_s(nbytes, levels)


def allreduce_s(nbytes: float, levels: tuple[Level, ...]) -> float:
    """All-reduce of an `nbytes` buffer = reduce-scatter + all-gather (ring or hierarchical): 2(D-1)/D."""
    return 2 * allgather_s(nbytes, levels)


def alltoall_s(nbytes: float, levels: tuple[Level, ...]) -> float:
    """All-to-all where each GPU holds `nbytes`, 1/n for each of the n members (itself included). The share
    for members reached only through level i leaves over that level's links, all levels at once."""
    n = 1
    times = []
    for lv in levels:
        reached = n * lv.members  # members reachable without leaving this level
        times.append(nbytes * (reached - n) / (_size(levels) * lv.gpu_gb_s * GB))
        n = reached
    return max(times, default=0.0)


def p2p_s(nbytes: float, level: Level) -> float:
    """One send of `nbytes` over `level`'s per-GPU link."""
    return nbytes / (level.gpu_gb_s * GB)


def _size(levels: tuple[Level, ...]) -> int:
    n = 1
    for lv in levels:
        n *= lv.members
    return n
