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
    ### BEGIN SOLUTION 20.cluster_yaml
    raw = yaml.safe_load(text)
    gpus, node_of, nic_of, linked = [], {}, {}, set()
    for node in raw["nodes"]:
        name, n, nics = node["name"], node["gpus"], node.get("nics", 0)
        ids = [f"{name}:{i}" for i in range(n)]
        gpus += ids
        gpu_nic = node.get("gpu_nic", [i * nics // n for i in range(n)])  # spread GPUs evenly over NICs
        for i, gpu in enumerate(ids):
            node_of[gpu] = name
            nic_of[gpu] = f"{name}:nic{gpu_nic[i]}" if nics else None
        if node.get("nvlink", "none") == "all":  # NVSwitch: every pair at full bandwidth
            linked |= {frozenset(p) for p in itertools.combinations(ids, 2)}
        elif isinstance(node.get("nvlink"), list):  # direct links only, e.g. DGX-1's hybrid cube-mesh
            linked |= {frozenset((ids[i], ids[j])) for i, j in node["nvlink"]}
    for domain in raw.get("nvlink_domains") or []:  # NVLink switches across trays: one domain, many nodes
        members = [g for g in gpus if node_of[g] in set(domain)]
        linked |= {frozenset(p) for p in itertools.combinations(members, 2)}
    cables: dict[str, set[str]] = {}
    for a, b in raw.get("links") or []:
        cables.setdefault(a, set()).add(b)
        cables.setdefault(b, set()).add(a)
    return {
        "name": raw["name"],
        "gpus": gpus,
        "node_of": node_of,
        "nvlink": [[a, b] for a, b in itertools.combinations(gpus, 2) if frozenset((a, b)) in linked],
        "nic_of": nic_of,
        "tiers": {s["name"]: s["tier"] for s in raw.get("switches") or []},
        "cables": {end: sorted(peers) for end, peers in cables.items()},
    }
    ### END SOLUTION


def gpu_path(cluster: dict, a: str, b: str) -> dict:
    """How GPU a reaches GPU b, given load_cluster's dict: {"kind": ..., "tiers": [...]}.
      "self" (a == b); "nvlink" ([a, b] or [b, a] in "nvlink"); "pcie" (same node, no NVLink between them);
      "network": from a's NIC to b's NIC along a shortest path of cables whose inner stops are all switches
      (a NIC does not forward), "tiers" being the tier of each switch on it, in order, e.g. ["leaf", "spine",
      "leaf"]; "unreachable" when a GPU has no NIC or no such path exists. "tiers" is [] unless "network".
    Where several shortest paths exist, any of them: in a leaf-spine fabric they cross the same tiers."""
    ### BEGIN SOLUTION 20.cluster_yaml
    if a == b:
        return {"kind": "self", "tiers": []}
    if [a, b] in cluster["nvlink"] or [b, a] in cluster["nvlink"]:
        return {"kind": "nvlink", "tiers": []}
    if cluster["node_of"][a] == cluster["node_of"][b]:
        return {"kind": "pcie", "tiers": []}  # through the node's PCIe tree (and CPUs), never the network
    src, dst = cluster["nic_of"][a], cluster["nic_of"][b]
    parent: dict[str, str | None] = {src: None} if src else {}
    queue = deque(parent)
    while queue:
        here = queue.popleft()
        if here == dst:
            break
        if here != src and here not in cluster["tiers"]:
            continue  # another node's NIC: a dead end, NICs do not route
        for nxt in cluster["cables"].get(here, []):
            if nxt not in parent:
                parent[nxt] = here
                queue.append(nxt)
    if dst is None or dst not in parent:
        return {"kind": "unreachable", "tiers": []}
    stops, here = [], parent[dst]
    while here != src:  # walk back from b's NIC: every stop in between is a switch
        stops.append(cluster["tiers"][here])
        here = parent[here]
    return {"kind": "network", "tiers": stops[::-1]}
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 20.layouts


def largest_tp_degree(cluster: dict) -> int:
    """The largest t dividing the number of GPUs such that every block of t consecutive GPUs in "gpus"
    (the TP groups when TP is the fastest rank axis) has a direct NVLink between every pair. At least 1."""
    ### BEGIN SOLUTION 20.layouts
    gpus, linked = cluster["gpus"], {frozenset(p) for p in cluster["nvlink"]}
    n = len(gpus)
    for t in range(n, 1, -1):
        if n % t == 0 and all(
            frozenset(p) in linked for k in range(0, n, t) for p in itertools.combinations(gpus[k : k + t], 2)
        ):
            return t
    return 1
    ### END SOLUTION


def supported_layouts(cluster: dict) -> list[list[int]]:
    """Every [tp, pp, dp] with tp * pp * dp = number of GPUs that the cluster runs well. Rank r is GPU
    gpus[r]; TP varies fastest, then DP, then PP (Megatron-Core's default order "tp-cp-ep-dp-pp"). A layout
    is supported when
      1. every pair inside every TP group has a direct NVLink (TP all-reduces run every layer), and
      2. every DP ring neighbour pair (member i -> i + 1 mod dp) and every pipeline neighbour pair (stage
         s -> s + 1) can reach each other: gpu_path is not "unreachable".
    Sorted by (tp, pp, dp)."""
    ### BEGIN SOLUTION 20.layouts
    gpus, linked = cluster["gpus"], {frozenset(p) for p in cluster["nvlink"]}
    n = len(gpus)
    out = []
    for tp, pp in itertools.product(range(1, n + 1), repeat=2):
        if n % (tp * pp):
            continue
        dp = n // (tp * pp)

        def rank(t: int, d: int, p: int, tp: int = tp, dp: int = dp) -> str:
            return gpus[t + tp * (d + dp * p)]  # the GPU that runs TP rank t of DP replica d, stage p

        tp_ok = all(
            frozenset((rank(a, d, p), rank(b, d, p))) in linked
            for d, p in itertools.product(range(dp), range(pp))
            for a, b in itertools.combinations(range(tp), 2)
        )
        if not tp_ok:
            continue
        hops = [
            (rank(t, d, p), rank(t, (d + 1) % dp, p)) for t in range(tp) for d in range(dp) for p in range(pp)
        ]
        hops += [
            (rank(t, d, p), rank(t, d, p + 1)) for t in range(tp) for d in range(dp) for p in range(pp - 1)
        ]
        # NVLinked pairs are reachable for sure: ask gpu_path only about the others (72-GPU racks are slow)
        if all(frozenset(h) in linked or gpu_path(cluster, *h)["kind"] != "unreachable" for h in hops):
            out.append([tp, pp, dp])
    return out
    ### END SOLUTION
