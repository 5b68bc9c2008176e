"""GPUDirect RDMA paths and NCCL's GDR decision (an alternative-correct case for exercise 05)."""

from __future__ import annotations

import re
from functools import reduce
from itertools import pairwise

from coursekit.pcie import Topology

PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def env_int(env: dict[str, str], name: str, default: int) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return default


def _farther(x: str, y: str) -> str:
    return x if PATH_TYPES.index(x) >= PATH_TYPES.index(y) else y


def hop_type(topo: Topology, a: str, b: str) -> str:
    if topo.link(a, b).kind == "SYS":
        return "SYS"
    ends = sorted((topo.kind(a), topo.kind(b)))
    if "CPU" in ends:
        return "PHB"
    return "PXB" if ends == ["PCI", "PCI"] else "PIX"


def _route_class(topo: Topology, nodes: list[str]) -> str:
    return reduce(_farther, (hop_type(topo, u, v) for u, v in pairwise(nodes)), "LOC")


def path_type(topo: Topology, a: str, b: str) -> str:
    return _route_class(topo, topo.path(a, b))


def data_path(topo: Topology, gpu: str, nic: str, *, gdr: bool) -> dict:
    if gdr:
        legs = [topo.path(gpu, nic)]
    else:
        host = topo.local_cpu(gpu)
        legs = [topo.path(gpu, host), topo.path(host, nic)]
    nodes = list(legs[0])
    for leg in legs[1:]:
        nodes.extend(leg[1:])
    links = list(pairwise(nodes))
    return {
        "nodes": nodes,
        "hops": len(links),
        "host_bridge_crossings": len([n for n in nodes[1:-1] if topo.kind(n) == "CPU"]),
        "smp_crossings": len([1 for u, v in links if topo.link(u, v).kind == "SYS"]),
        "bounce_buffers": len(legs) - 1,
        "path_type": _route_class(topo, nodes),
    }


def parse_gdr_level(value: str | None) -> str | None:
    if value is None:
        return None
    if value in PATH_TYPES:
        return value
    legacy = re.match(r"[0-9]+", value)
    if legacy is None:
        return None
    return LEGACY_LEVELS[min(int(legacy.group()), len(LEGACY_LEVELS) - 1)]


def gdr_enabled(topo: Topology, gpu: str, nic: str, env: dict[str, str], *, read: bool) -> bool:
    gpu_attrs, nic_attrs = topo.nodes[gpu].attrs, topo.nodes[nic].attrs
    if not (gpu_attrs.get("gdr") and nic_attrs.get("gdr")):
        return False
    if read:
        setting = env_int(env, "NCCL_NET_GDR_READ", -2)
        if setting == 0:
            return False
        if setting < 0 and gpu_attrs["cc"] < 80:
            others = [g for g in topo.of_kind("GPU") if g != gpu]
            nvlink_peer = gpu_attrs.get("nvlink") and any(topo.nodes[g].attrs.get("nvlink") for g in others)
            if others and not nvlink_peer:
                return False
    level = parse_gdr_level(env.get("NCCL_NET_GDR_LEVEL"))
    if level is None:
        level = "PXB" if env_int(env, "NCCL_NET_GDR_C2C", 1) == 0 else "P2C"
    return _farther(path_type(topo, gpu, nic), level) == level
