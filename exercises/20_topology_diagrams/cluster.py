"""The course's YAML description of a multi-node cluster, and two questions about it: which path do two GPUs
use, and which TP x PP x DP layouts keep every tensor-parallel group on NVLink?

    name: dgx-h100-4node-rail
    nodes:                      # in rank order; GPU i of node n is "n:i"
      - {name: dgx0, gpus: 8, nvlink: all, nics: 8}       # nvlink: all | none | [[i, j], ...] GPU index pairs
      - {name: dgx1a, gpus: 8, nvlink: [[0, 1], ...], nics: 4, gpu_nic: [0, 0, 1, 1, 2, 2, 3, 3]}
    nvlink_domains:             # optional: nodes whose GPUs ALL reach each other over NVLink (GB200 NVL72)
      - [tray00, tray01, ...]
    switches:
      - {name: rail0, tier: leaf}
    links:                      # cables; an end is "node:nicK" or a switch name
      - [dgx0:nic0, rail0]
GPU i uses NIC gpu_nic[i], by default NIC i * nics // gpus. Samples: coursekit/data/cluster_*.yml.
Check: `grade exercise 20`; hints: `grade hint 20 <part>`.
"""

from __future__ import annotations

import itertools
from collections import deque

import yaml

# ------------------------------------------------------------------------------------------------------------
# 20.cluster_yaml


def load_cluster(text: str) -> dict:
    """Parse the YAML text into plain data:
    "name":   the cluster's name
    "gpus":   GPU ids "node:i", nodes in file order, i = 0 .. gpus-1: this is the rank order
    "node_of": {gpu: node name}
    "nvlink": every pair [a, b] of GPUs with a direct NVLink (from the node's `nvlink`, or both in one of
              the `nvlink_domains`), a before b in "gpus", pairs in itertools.combinations(gpus, 2) order
    "nic_of": {gpu: "node:nicK"}, or None for a node with nics: 0
    "tiers":  {switch name: tier}
    "cables": {end: sorted list of the ends it is cabled to}, for every end of every link
    """
    raise NotImplementedError("TODO(20.cluster_yaml): not implemented yet")


def gpu_path(cluster: dict, a: str, b: str) -> dict:
    """How GPU a reaches GPU b, given load_cluster's dict: {"kind": ..., "tiers": [...]}.
      "self" (a == b); "nvlink" ([a, b] or [b, a] in "nvlink"); "pcie" (same node, no NVLink between them);
      "network": from a's NIC to b's NIC along a shortest path of cables whose inner stops are all switches
      (a NIC does not forward), "tiers" being the tier of each switch on it, in order, e.g. ["leaf", "spine",
      "leaf"]; "unreachable" when a GPU has no NIC or no such path exists. "tiers" is [] unless "network".
    Where several shortest paths exist, any of them: in a leaf-spine fabric they cross the same tiers."""
    raise NotImplementedError("TODO(20.cluster_yaml): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 20.layouts


def largest_tp_degree(cluster: dict) -> int:
    """The largest t dividing the number of GPUs such that every block of t consecutive GPUs in "gpus"
    (the TP groups when TP is the fastest rank axis) has a direct NVLink between every pair. At least 1."""
    raise NotImplementedError("TODO(20.layouts): not implemented yet")


def supported_layouts(cluster: dict) -> list[list[int]]:
    """Every [tp, pp, dp] with tp * pp * dp = number of GPUs that the cluster runs well. Rank r is GPU
    gpus[r]; TP varies fastest, then DP, then PP (Megatron-Core's default order "tp-cp-ep-dp-pp"). A layout
    is supported when
      1. every pair inside every TP group has a direct NVLink (TP all-reduces run every layer), and
      2. every DP ring neighbour pair (member i -> i + 1 mod dp) and every pipeline neighbour pair (stage
         s -> s + 1) can reach each other: gpu_path is not "unreachable".
    Sorted by (tp, pp, dp)."""
    raise NotImplementedError("TODO(20.layouts): not implemented yet")
