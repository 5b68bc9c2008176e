"""Rank placement and spine traffic (alternative-correct case: strides, backward PP flows listed after the
forward ones, empty flows left out, zero bytes for groups of one)."""

from __future__ import annotations

import itertools
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


def _strides(sizes: dict[str, int], order: str) -> dict[str, int]:
    strides, s = {}, 1
    for axis in _order(order):
        strides[axis] = s
        s *= sizes[axis]
    return strides


def rank_coords(rank: int, sizes: dict[str, int], order: str = "tp-dp-pp") -> dict[str, int]:
    """Coordinates from strides."""
    st = _strides(sizes, order)
    return {a: (rank // st[a]) % sizes[a] for a in AXES}


def groups(axis: str, sizes: dict[str, int], order: str = "tp-dp-pp") -> list[list[int]]:
    """Walk the ranks; a rank with coordinate 0 on `axis` starts a group."""
    st = _strides(sizes, order)
    world = sizes["tp"] * sizes["pp"] * sizes["dp"]
    out = []
    for r in range(world):
        if rank_coords(r, sizes, order)[axis] == 0:
            out.append([r + i * st[axis] for i in range(sizes[axis])])
    return out


def locate(rank: int, cluster: Cluster) -> dict[str, int]:
    """Node, GPU, unit, rail, leaf."""
    g = cluster.gpus_per_node
    node = rank // g
    unit = rank // (g * cluster.nodes_per_unit)
    rail = rank % g
    return {
        "node": node,
        "gpu": rail,
        "unit": unit,
        "rail": rail,
        "leaf": unit * g + rail if cluster.rail_optimized else unit,
    }


def hop(src: int, dst: int, cluster: Cluster) -> str:
    """Cheapest thing crossed."""
    a, b = locate(src, cluster), locate(dst, cluster)
    if src == dst:
        kind = 0
    elif a["node"] == b["node"]:
        kind = 1
    elif a["leaf"] == b["leaf"]:
        kind = 2
    else:
        kind = 3
    return HOPS[kind]


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
    """Megatron-style step; a group of one neither calls nor sends."""
    act = hidden * seq_len * micro_batch * bytes_per_elem
    tp, pp, dp = sizes["tp"], sizes["pp"], sizes["dp"]
    layers_here = layers // pp
    return StepTraffic(
        tp_bytes=act if tp > 1 else 0.0,
        tp_calls=(2 + 2) * layers_here * microbatches if tp > 1 else 0,
        pp_bytes=act if pp > 1 else 0.0,
        pp_calls=microbatches if pp > 1 else 0,
        dp_bytes=bytes_per_elem * params / (tp * pp) if dp > 1 else 0.0,
        dp_calls=1 if dp > 1 else 0,
    )


def _ring(g: list[int], total: float, axis: str) -> list[list]:
    n = len(g)
    return [[g[i], g[(i + 1) % n], 2 * (n - 1) / n * total, axis] for i in range(n)]


def transfers(sizes: dict[str, int], order: str, traffic: StepTraffic) -> list[list]:
    """Every flow of one step that carries bytes."""
    flows: list[list] = []
    for g in groups("tp", sizes, order):
        if len(g) > 1:
            flows += _ring(g, traffic.tp_calls * traffic.tp_bytes, "tp")
    for g in groups("pp", sizes, order):
        nbytes = traffic.pp_calls * traffic.pp_bytes
        flows += [[a, b, nbytes, "pp"] for a, b in itertools.pairwise(g)]  # forward
        flows += [[b, a, nbytes, "pp"] for a, b in itertools.pairwise(g)]  # gradients back
    for g in groups("dp", sizes, order):
        if len(g) > 1:
            flows += _ring(g, traffic.dp_calls * traffic.dp_bytes, "dp")
    return [f for f in flows if f[2] > 0]


def spine_bytes(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic
) -> dict[str, float]:
    """Spine bytes by axis and the busiest leaf's upward bytes."""
    spine = [f for f in transfers(sizes, order, traffic) if hop(f[0], f[1], cluster) == "spine"]
    out = {axis: float(sum(f[2] for f in spine if f[3] == axis)) for axis in AXES}
    out["total"] = float(sum(f[2] for f in spine))
    leaves = {locate(f[0], cluster)["leaf"] for f in spine}
    out["max_leaf_up"] = max(
        (float(sum(f[2] for f in spine if locate(f[0], cluster)["leaf"] == leaf)) for leaf in leaves),
        default=0.0,
    )
    return out


def hop_counts(axis: str, sizes: dict[str, int], order: str, cluster: Cluster) -> dict[str, int]:
    """Neighbour hops by kind."""
    counts = {h: 0 for h in HOPS}
    for g in groups(axis, sizes, order):
        n = len(g)
        if n < 2:
            continue
        if axis == "pp":
            pairs = list(itertools.pairwise(g))
            pairs += [(b, a) for a, b in pairs]
        else:
            pairs = list(zip(g, g[1:] + g[:1], strict=True))
        for a, b in pairs:
            counts[hop(a, b, cluster)] += 1
    return counts


def rank_orders(sizes: dict[str, int], cluster: Cluster, traffic: StepTraffic) -> list[list]:
    """All six orders, best first."""
    rows = []
    for perm in sorted(itertools.permutations(AXES)):
        order = "-".join(perm)
        sb = spine_bytes(sizes, order, cluster, traffic)
        rows.append([order, sb["total"], sb["max_leaf_up"]])
    rows.sort(key=lambda r: r[0])
    rows.sort(key=lambda r: (r[1], r[2]))  # stable: names break ties
    return rows


def uplink_seconds(
    sizes: dict[str, int], order: str, cluster: Cluster, traffic: StepTraffic, leaf_uplink_gbit_s: float
) -> float:
    """Busiest leaf's upward bits over its uplink rate."""
    bits = 8 * spine_bytes(sizes, order, cluster, traffic)["max_leaf_up"]
    return bits / 1e9 / leaf_uplink_gbit_s
