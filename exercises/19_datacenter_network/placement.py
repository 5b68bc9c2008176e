"""Where the ranks of a TP x PP x DP job land: which GPU, node, rail and leaf, and what each hop crosses.

Rank order: an order such as "tp-dp-pp" lists the axes fastest-varying first, as Megatron-Core's RankGenerator
does (default "tp-cp-ep-dp-pp": TP neighbours are consecutive ranks). Rank r runs on node r // gpus_per_node,
local GPU r % gpus_per_node. Rail-optimized fabric (DGX SuperPOD): NIC i of every node of a scalable unit
plugs into that unit's leaf i, "rail i" (one NIC per GPU). Top-of-rack fabric: every NIC of a node plugs into
the same leaf, one leaf per unit. Then: the bytes of one training step that cross the spine, and the order
that keeps them off it. Check: `grade exercise 19`; hints: `grade hint 19 <part>`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

AXES = ("tp", "pp", "dp")
HOPS = ("local", "nvlink", "leaf", "spine")  # cheapest first


@dataclass(frozen=True)
class Cluster:
    """Identical nodes, grouped into scalable units (SUs) that share leaves."""

    gpus_per_node: int = 8  # DGX H100: 8 GPUs, 8 compute NICs (coursekit/hardware.yml, nodes.dgx_h100)
    nodes_per_unit: int = 32  # DGX SuperPOD: 32 nodes per SU (ground-truth.md §7.2)
    rail_optimized: bool = True  # True: a leaf per rail per SU; False: one leaf per SU (top of rack)


def _order(order: str) -> list[str]:
    axes = order.split("-")
    if sorted(axes) != sorted(AXES):
        raise ValueError(f"order must name tp, pp and dp once each, e.g. 'tp-dp-pp'; got {order!r}")
    return axes


# ------------------------------------------------------------------------------------------------------------
# 19.placement


def rank_coords(rank: int, sizes: dict[str, int], order: str = "tp-dp-pp") -> dict[str, int]:
    """The coordinates {"tp", "pp", "dp"} of `rank` (0 .. product of the sizes - 1) for group sizes
    {"tp", "pp", "dp"}, the first axis of `order` varying fastest and the last slowest, as Megatron-Core's
    RankGenerator numbers ranks. ValueError for an order that does not name each axis once."""
    raise NotImplementedError("TODO(19.placement): not implemented yet")


def groups(axis: str, sizes: dict[str, int], order: str = "tp-dp-pp") -> list[list[int]]:
    """Every communication group along `axis`: the ranks that agree on the two other coordinates, listed by
    their coordinate on `axis` (0, 1, ...). Groups are sorted by their first rank."""
    raise NotImplementedError("TODO(19.placement): not implemented yet")


def locate(rank: int, cluster: Cluster) -> dict[str, int]:
    """Where `rank` runs: {"node", "gpu" (local index), "unit", "rail", "leaf"}, all ints. rail = the local
    GPU index (its NIC's rail). Leaves are numbered across the cluster unit by unit: rail-optimized, unit u
    owns gpus_per_node leaves and rail i is its i-th; top-of-rack, unit u has one leaf, number u."""
    raise NotImplementedError("TODO(19.placement): not implemented yet")


def hop(src: int, dst: int, cluster: Cluster) -> str:
    """What a message from rank src to rank dst crosses: "local" (same GPU), "nvlink" (same node, through
    NVSwitch), "leaf" (other node, both NICs on one leaf) or "spine" (different leaves: up and down again)."""
    raise NotImplementedError("TODO(19.placement): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 19.spine_traffic: what one training step sends, and how much of it crosses the spine


@dataclass(frozen=True)
class StepTraffic:
    """Bytes one training step moves, per rank. Ring all-reduces for TP and DP, point-to-point for PP."""

    tp_bytes: float = 0.0  # S of one TP all-reduce (an activation, b * s * h elements)
    tp_calls: int = 0  # TP all-reduces per step, per rank
    pp_bytes: float = 0.0  # one activation sent to the next stage (its gradient comes back just as big)
    pp_calls: int = 0  # such messages per step, per stage boundary, in EACH direction
    dp_bytes: float = 0.0  # S of the gradient all-reduce: the rank's share of the weights' gradients
    dp_calls: int = 1


def megatron_step_traffic(
    *,
    hidden: int,
    seq_len: int,
    micro_batch: int,
    microbatches: int,
    layers: int,
    params: float,
    sizes: dict[str, int],
    bytes_per_elem: int = 2,
) -> StepTraffic:
    """The per-rank traffic of one Megatron-style training step, in bytes of `bytes_per_elem` per element:
    TP all-reduces of a layer's (micro_batch, seq_len, hidden) activation, as Megatron-LM's tensor
    parallelism issues them in forward and backward (Shoeybi et al. 2019, §3, Fig. 3), for the layers this
    rank's pipeline stage holds (layers split evenly over pp) and every micro-batch; PP sends of one such
    activation per micro-batch and stage boundary (its gradient comes back as big); one DP all-reduce of the
    gradients of the parameters this rank holds (`params` split evenly over tp x pp). A group of size 1
    sends nothing (0 calls)."""
    raise NotImplementedError("TODO(19.spine_traffic): not implemented yet")


def transfers(sizes: dict[str, int], order: str, traffic: StepTraffic) -> list[list]:
    """Every point-to-point flow of one step, [src, dst, bytes, axis], one flow per (src, dst, axis) with the
    bytes of all that axis's calls added up; a flow of 0 bytes may be left out, and the list may come in
    any order.

    TP and DP groups (from `groups`, n > 1 ranks) run ring all-reduces (the bytes a member sends in one:
    nccl-tests doc/PERFORMANCE.md, exercise 02) around the group in its listed order, member i sending to
    member (i + 1) % n: the ring's direction is a convention of this exercise. PP groups are pipelines:
    activations flow from stage s to s + 1 and their gradients back from s + 1 to s.
    """
    raise NotImplementedError("TODO(19.spine_traffic): not implemented yet")


def spine_bytes(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic
) -> dict[str, float]:
    """Bytes of one step that cross the spine (flows whose `hop` is "spine"), by axis: {"tp", "pp", "dp",
    "total", "max_leaf_up"}; max_leaf_up is the most any single leaf sends up to the spines (by the source's
    leaf), the load on the busiest leaf's uplinks."""
    raise NotImplementedError("TODO(19.spine_traffic): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 19.layouts: choosing the rank order


def hop_counts(axis: str, sizes: dict[str, int], order: str, cluster: Cluster) -> dict[str, int]:
    """How many neighbour hops of each kind ("local", "nvlink", "leaf", "spine") the groups along `axis`
    use: for TP and DP the n ring hops i -> (i + 1) % n of every group with n > 1, for PP the 2 (n - 1) hops
    s -> s + 1 and s + 1 -> s of every pipeline. "TP on the spine": hop_counts("tp", ...)["spine"] > 0."""
    raise NotImplementedError("TODO(19.layouts): not implemented yet")


def rank_orders(sizes: dict[str, int], cluster: Cluster, traffic: StepTraffic) -> list[list]:
    """All six orders as [order, total spine bytes, max_leaf_up], best first: fewest total spine bytes, then
    the lighter busiest leaf, then the order's name alphabetically."""
    raise NotImplementedError("TODO(19.layouts): not implemented yet")


def uplink_seconds(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic, leaf_uplink_gbit_s: float
) -> float:
    """Lower bound on the time the step's spine traffic needs: the busiest leaf's upward bytes over that
    leaf's total uplink bandwidth (leaf_uplink_gbit_s, all its uplinks together, per direction)."""
    raise NotImplementedError("TODO(19.layouts): not implemented yet")
