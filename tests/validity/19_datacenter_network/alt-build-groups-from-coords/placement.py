"""Alternative-correct 19 placement (validity corpus): ranks built from coordinates."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

AXES = ("tp", "pp", "dp")
HOPS = ("local", "nvlink", "leaf", "spine")


@dataclass(frozen=True)
class Cluster:
    gpus_per_node: int = 8
    nodes_per_unit: int = 32
    rail_optimized: bool = True


def _strides(sizes: dict[str, int], order: str) -> dict[str, int]:
    axes = order.split("-")
    if sorted(axes) != sorted(AXES):
        raise ValueError(f"bad order {order!r}")
    strides, step = {}, 1
    for axis in axes:
        strides[axis] = step
        step *= sizes[axis]
    return strides


def _rank(coords: dict[str, int], strides: dict[str, int]) -> int:
    return sum(coords[a] * strides[a] for a in AXES)


def rank_coords(rank: int, sizes: dict[str, int], order: str = "tp-dp-pp") -> dict[str, int]:
    strides = _strides(sizes, order)
    return {a: rank // strides[a] % sizes[a] for a in order.split("-")}


def groups(axis: str, sizes: dict[str, int], order: str = "tp-dp-pp") -> list[list[int]]:
    strides = _strides(sizes, order)
    others = [a for a in AXES if a != axis]
    out = []
    for fixed in itertools.product(*(range(sizes[a]) for a in others)):
        coords = dict(zip(others, fixed, strict=True))
        out.append([_rank(coords | {axis: i}, strides) for i in range(sizes[axis])])
    return sorted(out)


def locate(rank: int, cluster: Cluster) -> dict[str, int]:
    node = rank // cluster.gpus_per_node
    gpu = rank - node * cluster.gpus_per_node
    unit = node // cluster.nodes_per_unit
    if cluster.rail_optimized:
        leaf = unit * cluster.gpus_per_node + gpu
    else:
        leaf = unit
    return {"node": node, "gpu": gpu, "unit": unit, "rail": gpu, "leaf": leaf}


def hop(src: int, dst: int, cluster: Cluster) -> str:
    if src == dst:
        return "local"
    a, b = locate(src, cluster), locate(dst, cluster)
    if a["node"] == b["node"]:
        return "nvlink"
    return "spine" if a["leaf"] != b["leaf"] else "leaf"


@dataclass(frozen=True)
class StepTraffic:
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
    act = hidden * seq_len * micro_batch * bytes_per_elem
    per_layer = 2 + 2  # g after attention and after the MLP in forward, f at both in backward
    stage_layers = layers // sizes["pp"]
    return StepTraffic(
        tp_bytes=act,
        tp_calls=(per_layer * stage_layers * microbatches) if sizes["tp"] > 1 else 0,
        pp_bytes=act,
        pp_calls=microbatches if sizes["pp"] > 1 else 0,
        dp_bytes=bytes_per_elem * params / sizes["tp"] / sizes["pp"],
        dp_calls=0 if sizes["dp"] == 1 else 1,
    )


def transfers(sizes: dict[str, int], order: str, traffic: StepTraffic) -> list[list]:
    flows: list[list] = []
    for axis, size, calls in (
        ("tp", traffic.tp_bytes, traffic.tp_calls),
        ("dp", traffic.dp_bytes, traffic.dp_calls),
    ):
        for g in groups(axis, sizes, order):
            n = len(g)
            volume = calls * size * 2 * (n - 1) / n if n > 1 else 0.0
            flows += [[g[i], g[(i + 1) % n], volume, axis] for i in range(n) if volume]
    for g in groups("pp", sizes, order):
        volume = traffic.pp_calls * traffic.pp_bytes
        if not volume:
            continue
        forward = [[g[s], g[s + 1], volume, "pp"] for s in range(len(g) - 1)]
        backward = [[g[s + 1], g[s], volume, "pp"] for s in range(len(g) - 1)]
        flows += forward + backward
    return flows


def spine_bytes(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic
) -> dict[str, float]:
    by_axis = dict.fromkeys(AXES, 0.0)
    up: dict[int, float] = {}
    for src, dst, nbytes, axis in transfers(sizes, order, traffic):
        if hop(src, dst, cluster) != "spine":
            continue
        by_axis[axis] += nbytes
        leaf = locate(src, cluster)["leaf"]
        up[leaf] = up.get(leaf, 0.0) + nbytes
    total = by_axis["tp"] + by_axis["pp"] + by_axis["dp"]
    return {**by_axis, "total": total, "max_leaf_up": max(up.values()) if up else 0.0}


def hop_counts(axis: str, sizes: dict[str, int], order: str, cluster: Cluster) -> dict[str, int]:
    counts = {h: 0 for h in HOPS}
    for g in groups(axis, sizes, order):
        n = len(g)
        if n < 2:
            continue
        if axis == "pp":
            pairs = [(g[s], g[s + 1]) for s in range(n - 1)]
            pairs += [(b, a) for a, b in pairs]
        else:
            pairs = [(g[i], g[(i + 1) % n]) for i in range(n)]
        for a, b in pairs:
            counts[hop(a, b, cluster)] += 1
    return counts


def rank_orders(sizes: dict[str, int], cluster: Cluster, traffic: StepTraffic) -> list[list]:
    table = {}
    for perm in itertools.permutations(AXES):
        name = "-".join(perm)
        b = spine_bytes(sizes, name, cluster, traffic)
        table[name] = (b["total"], b["max_leaf_up"])
    names = sorted(table, key=lambda o: (*table[o], o))
    return [[o, *table[o]] for o in names]


def uplink_seconds(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic, leaf_uplink_gbit_s: float
) -> float:
    busiest = spine_bytes(sizes, order, cluster, traffic)["max_leaf_up"]
    return busiest * 8 / 1e9 / leaf_uplink_gbit_s
