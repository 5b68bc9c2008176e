"""Cluster YAML (alternative-correct case: adjacency sets, level-by-level BFS, layouts from group lists)."""

from __future__ import annotations

import itertools

import yaml


def load_cluster(text: str) -> dict:
    """Parse the YAML text into plain data."""
    spec = yaml.safe_load(text)
    gpus = [f"{nd['name']}:{i}" for nd in spec["nodes"] for i in range(nd["gpus"])]
    node_of = {g: g.rsplit(":", 1)[0] for g in gpus}
    nodes = {nd["name"]: nd for nd in spec["nodes"]}
    domain_of = {name: k for k, dom in enumerate(spec.get("nvlink_domains") or []) for name in dom}

    def linked(a: str, b: str) -> bool:
        na, nb = node_of[a], node_of[b]
        if na in domain_of and domain_of.get(nb) == domain_of[na]:
            return True
        if na != nb:
            return False
        nv = nodes[na].get("nvlink", "none")
        if nv == "all":
            return True
        if nv in ("none", None):
            return False
        i, j = int(a.rsplit(":", 1)[1]), int(b.rsplit(":", 1)[1])
        return [i, j] in nv or [j, i] in nv

    def nic(g: str) -> str | None:
        nd = nodes[node_of[g]]
        if not nd.get("nics"):
            return None
        i = int(g.rsplit(":", 1)[1])
        k = nd["gpu_nic"][i] if "gpu_nic" in nd else i * nd["nics"] // nd["gpus"]
        return f"{nd['name']}:nic{k}"

    ends: dict[str, list[str]] = {}
    for x, y in spec.get("links") or []:
        ends[x] = [*ends.get(x, []), y]
        ends[y] = [*ends.get(y, []), x]
    return {
        "name": spec["name"],
        "gpus": gpus,
        "node_of": node_of,
        "nvlink": [[a, b] for a, b in itertools.combinations(gpus, 2) if linked(a, b)],
        "nic_of": {g: nic(g) for g in gpus},
        "tiers": {s["name"]: s["tier"] for s in spec.get("switches") or []},
        "cables": {e: sorted(v) for e, v in ends.items()},
    }


def gpu_path(cluster: dict, a: str, b: str) -> dict:
    """How GPU a reaches GPU b: BFS level by level, carrying whole paths."""
    if a == b:
        kind = "self"
    elif [a, b] in cluster["nvlink"] or [b, a] in cluster["nvlink"]:
        kind = "nvlink"
    elif cluster["node_of"][a] == cluster["node_of"][b]:
        kind = "pcie"
    else:
        kind = "network"
    if kind != "network":
        return {"kind": kind, "tiers": []}
    src, dst = cluster["nic_of"][a], cluster["nic_of"][b]
    if src and dst:
        level, seen = [[src]], {src}
        while level:
            nxt = []
            for path in level:
                for end in cluster["cables"].get(path[-1], []):
                    if end == dst:
                        return {"kind": "network", "tiers": [cluster["tiers"][s] for s in path[1:]]}
                    if end in cluster["tiers"] and end not in seen:
                        seen.add(end)
                        nxt.append([*path, end])
            level = nxt
    return {"kind": "unreachable", "tiers": []}


def _all_nvlink(nv: set[frozenset[str]], members: list[str]) -> bool:
    return all(frozenset(p) in nv for p in itertools.combinations(members, 2))


def largest_tp_degree(cluster: dict) -> int:
    """Largest t whose consecutive blocks are all-NVLink."""
    gpus = cluster["gpus"]
    nv = {frozenset(p) for p in cluster["nvlink"]}
    fits = [t for t in range(1, len(gpus) + 1) if len(gpus) % t == 0]
    fits = [t for t in fits if all(_all_nvlink(nv, gpus[i : i + t]) for i in range(0, len(gpus), t))]
    return max(fits, default=1)


def supported_layouts(cluster: dict) -> list[list[int]]:
    """Every [tp, pp, dp] the cluster runs well."""
    gpus = cluster["gpus"]
    nv = {frozenset(p) for p in cluster["nvlink"]}
    n = len(gpus)
    out = []
    for tp, pp in itertools.product(range(1, n + 1), repeat=2):
        if n % (tp * pp):
            continue
        dp = n // (tp * pp)
        grid = [[gpus[tp * (d + dp * p) : tp * (d + dp * p) + tp] for d in range(dp)] for p in range(pp)]
        if not all(_all_nvlink(nv, grid[p][d]) for p in range(pp) for d in range(dp)):
            continue
        pairs = []
        for p, d, t in itertools.product(range(pp), range(dp), range(tp)):
            if dp > 1:
                pairs.append((grid[p][d][t], grid[p][(d + 1) % dp][t]))
            if p + 1 < pp:
                pairs.append((grid[p][d][t], grid[p + 1][d][t]))
        if all(gpu_path(cluster, x, y)["kind"] != "unreachable" for x, y in pairs):
            out.append([tp, pp, dp])
    return sorted(out)
