"""Cluster YAML (alternative-correct case: pair sets, deque BFS with parents, layouts by rank arithmetic)."""

from __future__ import annotations

import itertools
from collections import deque

import yaml


def load_cluster(text: str) -> dict:
    """Parse the YAML text into plain data."""
    spec = yaml.safe_load(text)
    gpus, node_of, nic_of, linked = [], {}, {}, set()
    for node in spec["nodes"]:
        name, n, nics = node["name"], node["gpus"], node.get("nics", 0)
        ids = [f"{name}:{i}" for i in range(n)]
        gpus += ids
        for i, g in enumerate(ids):
            node_of[g] = name
            if nics:
                k = node["gpu_nic"][i] if node.get("gpu_nic") is not None else i * nics // n
                nic_of[g] = f"{name}:nic{k}"
            else:
                nic_of[g] = None
        nv = node.get("nvlink", "none")
        if nv == "all":
            linked |= set(itertools.combinations(ids, 2))
        elif isinstance(nv, list):
            linked |= {(ids[min(i, j)], ids[max(i, j)]) for i, j in nv}
    for domain in spec.get("nvlink_domains") or []:
        members = [g for g in gpus if node_of[g] in set(domain)]
        linked |= set(itertools.combinations(members, 2))
    cables: dict[str, list[str]] = {}
    for x, y in spec.get("links") or []:
        cables.setdefault(x, []).append(y)
        cables.setdefault(y, []).append(x)
    return {
        "name": spec["name"],
        "gpus": gpus,
        "node_of": node_of,
        "nvlink": [[a, b] for a, b in itertools.combinations(gpus, 2) if (a, b) in linked],
        "nic_of": nic_of,
        "tiers": {s["name"]: s["tier"] for s in spec.get("switches") or []},
        "cables": {end: sorted(ends) for end, ends in cables.items()},
    }


def _nvlinked(cluster: dict, a: str, b: str) -> bool:
    return [a, b] in cluster["nvlink"] or [b, a] in cluster["nvlink"]


def gpu_path(cluster: dict, a: str, b: str) -> dict:
    """How GPU a reaches GPU b."""
    if a == b:
        return {"kind": "self", "tiers": []}
    if _nvlinked(cluster, a, b):
        return {"kind": "nvlink", "tiers": []}
    if cluster["node_of"][a] == cluster["node_of"][b]:
        return {"kind": "pcie", "tiers": []}
    src, dst = cluster["nic_of"][a], cluster["nic_of"][b]
    if src is None or dst is None:
        return {"kind": "unreachable", "tiers": []}
    parent = {src: None}
    queue = deque([src])
    while queue:
        here = queue.popleft()
        if here == dst:
            stops = []
            while parent[here] is not None:
                here = parent[here]
                stops.append(here)
            tiers = [cluster["tiers"][s] for s in reversed(stops) if s in cluster["tiers"]]
            return {"kind": "network", "tiers": tiers}
        if here != src and here not in cluster["tiers"]:
            continue  # a NIC is an end, never a stop
        for nxt in cluster["cables"].get(here, []):
            if nxt not in parent:
                parent[nxt] = here
                queue.append(nxt)
    return {"kind": "unreachable", "tiers": []}


def _clique(cluster: dict, members: list[str]) -> bool:
    return all(_nvlinked(cluster, a, b) for a, b in itertools.combinations(members, 2))


def largest_tp_degree(cluster: dict) -> int:
    """Largest t whose consecutive blocks are all-NVLink."""
    gpus = cluster["gpus"]
    n = len(gpus)
    for t in range(n, 0, -1):
        if n % t == 0 and all(_clique(cluster, gpus[i : i + t]) for i in range(0, n, t)):
            return t
    return 1


def supported_layouts(cluster: dict) -> list[list[int]]:
    """Every [tp, pp, dp] the cluster runs well."""
    gpus = cluster["gpus"]
    n = len(gpus)
    out = []
    for tp in range(1, n + 1):
        for pp in range(1, n // tp + 1):
            if n % (tp * pp):
                continue
            dp = n // (tp * pp)

            def rank(t: int, d: int, p: int, tp: int = tp, dp: int = dp) -> int:
                return t + tp * (d + dp * p)

            tp_groups = [[gpus[rank(t, d, p)] for t in range(tp)] for d in range(dp) for p in range(pp)]
            ok = all(_clique(cluster, g) for g in tp_groups)
            pairs = []
            for t, d, p in itertools.product(range(tp), range(dp), range(pp)):
                if dp > 1:
                    pairs.append((rank(t, d, p), rank(t, (d + 1) % dp, p)))
                if p + 1 < pp:
                    pairs.append((rank(t, d, p), rank(t, d, p + 1)))
            ok = ok and all(gpu_path(cluster, gpus[x], gpus[y])["kind"] != "unreachable" for x, y in pairs)
            if ok:
                out.append([tp, pp, dp])
    return sorted(out)
