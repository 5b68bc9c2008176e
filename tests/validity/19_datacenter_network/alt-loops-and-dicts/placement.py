"""Rank placement and spine traffic (alternative-correct case: straightforward loops)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

AXES = ("tp", "pp", "dp")
HOPS = ("local", "nvlink", "leaf", "spine")


@dataclass(frozen=True)
class Cluster:
    """Identical nodes, grouped into scalable units (SUs) that share leaves."""

    gpus_per_node: int = 8
    nodes_per_unit: int = 32
    rail_optimized: bool = True


def _order(order: str) -> list[str]:
    axes = order.split("-")
    if sorted(axes) != sorted(AXES):
        raise ValueError(f"order must name tp, pp and dp once each, e.g. 'tp-dp-pp'; got {order!r}")
    return axes


def rank_coords(rank: int, sizes: dict[str, int], order: str = "tp-dp-pp") -> dict[str, int]:
    """Mixed-radix digits of the rank, fastest axis first."""
    out = {}
    for axis in _order(order):
        rank, out[axis] = divmod(rank, sizes[axis])
    return {a: out[a] for a in AXES}


def _rank_of(coords: dict[str, int], sizes: dict[str, int], order: str) -> int:
    rank, stride = 0, 1
    for axis in _order(order):
        rank += coords[axis] * stride
        stride *= sizes[axis]
    return rank


def groups(axis: str, sizes: dict[str, int], order: str = "tp-dp-pp") -> list[list[int]]:
    """Groups along `axis`."""
    others = [a for a in AXES if a != axis]
    out = []
    for fixed in itertools.product(*(range(sizes[a]) for a in others)):
        base = dict(zip(others, fixed, strict=True))
        out.append([_rank_of(base | {axis: i}, sizes, order) for i in range(sizes[axis])])
    return sorted(out, key=lambda g: g[0])


def locate(rank: int, cluster: Cluster) -> dict[str, int]:
    """Node, GPU, unit, rail, leaf."""
    node, gpu = divmod(rank, cluster.gpus_per_node)
    unit = node // cluster.nodes_per_unit
    leaf = unit * cluster.gpus_per_node + gpu if cluster.rail_optimized else unit
    return {"node": node, "gpu": gpu, "unit": unit, "rail": gpu, "leaf": leaf}


def hop(src: int, dst: int, cluster: Cluster) -> str:
    """Cheapest thing crossed."""
    if src == dst:
        return "local"
    a, b = locate(src, cluster), locate(dst, cluster)
    if a["node"] == b["node"]:
        return "nvlink"
    return "leaf" if a["leaf"] == b["leaf"] else "spine"


@dataclass(frozen=True)
class StepTraffic:
    """Bytes one training step moves, per rank."""

    tp_bytes: float = 0.0
    tp_calls: int = 0
    pp_bytes: float = 0.0
    pp_calls: int = 0
    dp_bytes: float = 0.0
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
    """Megatron-style step."""
    activation = micro_batch * seq_len * hidden * bytes_per_elem
    tp, pp, dp = sizes["tp"], sizes["pp"], sizes["dp"]
    return StepTraffic(
        tp_bytes=activation,
        tp_calls=4 * (layers // pp) * microbatches if tp > 1 else 0,
        pp_bytes=activation,
        pp_calls=microbatches if pp > 1 else 0,
        dp_bytes=params / (tp * pp) * bytes_per_elem,
        dp_calls=1 if dp > 1 else 0,
    )


def transfers(sizes: dict[str, int], order: str, traffic: StepTraffic) -> list[list]:
    """Every flow of one step."""
    flows: list[list] = []
    for axis in AXES:
        for g in groups(axis, sizes, order):
            n = len(g)
            if n == 1:
                continue
            if axis == "pp":
                for s in range(n - 1):
                    nbytes = traffic.pp_calls * traffic.pp_bytes
                    flows.append([g[s], g[s + 1], nbytes, "pp"])
                    flows.append([g[s + 1], g[s], nbytes, "pp"])
            else:
                size, calls = getattr(traffic, f"{axis}_bytes"), getattr(traffic, f"{axis}_calls")
                for i in range(n):
                    flows.append([g[i], g[(i + 1) % n], calls * 2 * (n - 1) / n * size, axis])
    return flows


def spine_bytes(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic
) -> dict[str, float]:
    """Spine bytes by axis and the busiest leaf's upward bytes."""
    out = {"tp": 0.0, "pp": 0.0, "dp": 0.0}
    per_leaf: dict[int, float] = defaultdict(float)
    for src, dst, nbytes, axis in transfers(sizes, order, traffic):
        if hop(src, dst, cluster) == "spine":
            out[axis] += nbytes
            per_leaf[locate(src, cluster)["leaf"]] += nbytes
    out["total"] = out["tp"] + out["pp"] + out["dp"]
    out["max_leaf_up"] = max(per_leaf.values(), default=0.0)
    return out


def hop_counts(axis: str, sizes: dict[str, int], order: str, cluster: Cluster) -> dict[str, int]:
    """Neighbour hops by kind."""
    counts = dict.fromkeys(HOPS, 0)
    for g in groups(axis, sizes, order):
        n = len(g)
        if n == 1:
            continue
        if axis == "pp":
            pairs = [(g[s], g[s + 1]) for s in range(n - 1)] + [(g[s + 1], g[s]) for s in range(n - 1)]
        else:
            pairs = [(g[i], g[(i + 1) % n]) for i in range(n)]
        for a, b in pairs:
            counts[hop(a, b, cluster)] += 1
    return counts


def rank_orders(sizes: dict[str, int], cluster: Cluster, traffic: StepTraffic) -> list[list]:
    """All six orders, best first."""
    rows = []
    for perm in itertools.permutations(AXES):
        order = "-".join(perm)
        sb = spine_bytes(sizes, order, cluster, traffic)
        rows.append([order, sb["total"], sb["max_leaf_up"]])
    return sorted(rows, key=lambda r: (r[1], r[2], r[0]))


def uplink_seconds(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic, leaf_uplink_gbit_s: float
) -> float:
    """Busiest leaf's upward bytes over its uplink bandwidth."""
    busiest = spine_bytes(sizes, order, cluster, traffic)["max_leaf_up"]
    return busiest * 8 / (leaf_uplink_gbit_s * 1e9)
