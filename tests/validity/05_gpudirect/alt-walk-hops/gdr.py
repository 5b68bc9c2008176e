"""GPUDirect RDMA: the PCIe path between a GPU and a NIC, and when NCCL lets the NIC use GPU memory directly.

NCCL classes a path by its worst hop (NVIDIA/nccl src/graph/paths.cc, ncclTopoSetPaths) and turns GDR on when
that class is no farther than NCCL_NET_GDR_LEVEL (ncclTopoCheckGdr). Without GDR the data bounces through host
memory of the CPU closest to the GPU ("divert all traffic through the CPU local to the GPU", paths.cc).
Path classes, nearest first: LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS. Check: `grade exercise 05`.
"""

from __future__ import annotations

from itertools import pairwise

from coursekit.pcie import Topology

# NVIDIA/nccl src/graph/topo.h: PATH_LOC 0 ... PATH_SYS 9, named by topoPathTypeStr (src/graph/topo.cc).
# A bigger index is a longer way around: PIX = one PCIe switch, PXB = several switches, PHB = through a CPU's
# host bridge, SYS = also across the CPU-CPU interconnect. (NVL..C2C, P2C, PXN never occur on PCIe alone.)
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
# paths.cc levelsOldToNew: the integers NCCL_NET_GDR_LEVEL took before names did (docs env.rst, "Integer
# Values (Legacy)": LOC 0, PIX 1, PXB 2, PHB 3, SYS 4, "values greater than 4 will be interpreted as SYS").
LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def env_int(env: dict[str, str], name: str, default: int) -> int:
    """An integer NCCL parameter (NCCL_PARAM): the value if it is an integer, else the default."""
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return default


# ------------------------------------------------------------------------------------------------------------
# 05.paths: how far apart two devices are, and which way the bytes go


def hop_type(topo: Topology, a: str, b: str) -> str:
    """The class of the single link a-b, as ncclTopoSetPaths gives it: a SYS link (CPU to CPU) is SYS; a PCIe
    link between two PCI switches is PXB; a PCIe link with a CPU at either end is PHB; any other PCIe link
    (a device on a switch) is PIX."""
    if topo.link(a, b).kind == "SYS":
        return "SYS"
    if topo.kind(a) == "CPU" or topo.kind(b) == "CPU":
        return "PHB"
    if topo.kind(a) == topo.kind(b) == "PCI":
        return "PXB"
    return "PIX"


def path_type(topo: Topology, a: str, b: str) -> str:
    """NCCL's class of the path from a to b: the farthest class of any hop on topo.path(a, b); LOC if a==b."""
    worst = 0  # LOC
    nodes = topo.path(a, b)
    for i in range(len(nodes) - 1):
        worst = max(worst, PATH_TYPES.index(hop_type(topo, nodes[i], nodes[i + 1])))
    return PATH_TYPES[worst]


def data_path(topo: Topology, gpu: str, nic: str, *, gdr: bool) -> dict:
    """The way a message goes from ``gpu``'s memory out of ``nic``.

    With GDR the NIC reads GPU memory directly along topo.path(gpu, nic). Without GDR the GPU first writes it
    to a bounce buffer in the memory of topo.local_cpu(gpu), and the NIC reads it from there: the path is
    topo.path(gpu, cpu) followed by topo.path(cpu, nic). Returns
    {"nodes": the nodes in order (a node may appear twice), "hops": links crossed,
     "host_bridge_crossings": CPU nodes strictly inside the path, "smp_crossings": SYS links crossed,
     "bounce_buffers": 1 without GDR else 0, "path_type": the farthest class of any hop}.
    """
    legs = [(gpu, nic)] if gdr else [(gpu, topo.local_cpu(gpu)), (topo.local_cpu(gpu), nic)]
    nodes: list[str] = []
    for src, dst in legs:
        leg = topo.path(src, dst)
        nodes.extend(leg if not nodes else leg[1:])
    worst, sys_links = 0, 0
    for x, y in pairwise(nodes):
        worst = max(worst, PATH_TYPES.index(hop_type(topo, x, y)))
        sys_links += topo.link(x, y).kind == "SYS"
    inner_cpus = [n for n in nodes[1:-1] if topo.kind(n) == "CPU"]
    return {
        "nodes": nodes,
        "hops": len(nodes) - 1,
        "host_bridge_crossings": len(inner_cpus),
        "smp_crossings": sys_links,
        "bounce_buffers": int(not gdr),
        "path_type": PATH_TYPES[worst],
    }


# ------------------------------------------------------------------------------------------------------------
# 05.gdr_level: NCCL's decision, NCCL_NET_GDR_LEVEL and friends


def parse_gdr_level(value: str | None) -> str | None:
    """The path class an NCCL_NET_GDR_LEVEL value sets, as ncclGetLevel (paths.cc) reads it; None when NCCL
    would ignore it and keep its default.

    A value equal to one of PATH_TYPES, case-sensitively (strcmp), is that class. Else a value that starts
    with a digit 0-9 is a legacy integer: read its leading decimal digits and look them up in LEGACY_LEVELS,
    anything past the end meaning SYS. Anything else (None, "", "pxb", "-1", "NET") is ignored.
    """
    import re

    if not value:
        return None
    if value in PATH_TYPES:
        return value
    m = re.match(r"[0-9]+", value)
    if m is None:
        return None
    n = int(m.group())
    return LEGACY_LEVELS[n] if n < len(LEGACY_LEVELS) else "SYS"


def gdr_enabled(topo: Topology, gpu: str, nic: str, env: dict[str, str], *, read: bool) -> bool:
    """Whether NCCL uses GPUDirect RDMA between ``gpu`` and ``nic`` (ncclTopoCheckGdr, paths.cc).

    read=True is the send side (the NIC reads GPU memory), read=False the receive side. In order:
    1. both the NIC and the GPU must support it (attr "gdr");
    2. for reads, NCCL_NET_GDR_READ (default -2, "unset"): 0 turns reads off; unset, a GPU with cc < 80
       reads only when it has an NVLink peer (another GPU with nvlink, itself with nvlink) or is the only GPU;
    3. the level: the default is P2C when NCCL_NET_GDR_C2C (default 1) is non-zero, else PXB;
       parse_gdr_level(NCCL_NET_GDR_LEVEL), when not None, replaces it;
    4. GDR is on when path_type(gpu, nic) is no farther than the level (index in PATH_TYPES).
    env holds the NCCL_* variables that are set; read integers with env_int.
    """
    g, n = topo.nodes[gpu].attrs, topo.nodes[nic].attrs
    if not n.get("gdr") or not g.get("gdr"):
        return False
    if read:
        setting = env_int(env, "NCCL_NET_GDR_READ", -2)
        if setting == 0:
            return False
        if setting == -2 and g.get("cc", 0) < 80:
            others = [o for o in topo.of_kind("GPU") if o != gpu]
            has_peer = bool(g.get("nvlink")) and any(topo.nodes[o].attrs.get("nvlink") for o in others)
            if others and not has_peer:
                return False
    parsed = parse_gdr_level(env.get("NCCL_NET_GDR_LEVEL"))
    if parsed is None:
        parsed = "P2C" if env_int(env, "NCCL_NET_GDR_C2C", 1) != 0 else "PXB"
    distance = PATH_TYPES.index(path_type(topo, gpu, nic))
    return not distance > PATH_TYPES.index(parsed)
