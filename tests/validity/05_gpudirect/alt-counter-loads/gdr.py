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
    link = topo.link(a, b)
    if link.kind == "SYS":
        return "SYS"
    kinds = {topo.kind(a), topo.kind(b)}
    if "CPU" in kinds:
        return "PHB"
    if kinds == {"PCI"}:
        return "PXB"
    return "PIX"


def path_type(topo: Topology, a: str, b: str) -> str:
    """NCCL's class of the path from a to b: the farthest class of any hop on topo.path(a, b); LOC if a==b."""
    if a == b:
        return "LOC"
    hops = [hop_type(topo, x, y) for x, y in pairwise(topo.path(a, b))]
    return max(hops, key=PATH_TYPES.index)


def data_path(topo: Topology, gpu: str, nic: str, *, gdr: bool) -> dict:
    """The way a message goes from ``gpu``'s memory out of ``nic``.

    With GDR the NIC reads GPU memory directly along topo.path(gpu, nic). Without GDR the GPU first writes it
    to a bounce buffer in the memory of topo.local_cpu(gpu), and the NIC reads it from there: the path is
    topo.path(gpu, cpu) followed by topo.path(cpu, nic). Returns
    {"nodes": the nodes in order (a node may appear twice), "hops": links crossed,
     "host_bridge_crossings": CPU nodes strictly inside the path, "smp_crossings": SYS links crossed,
     "bounce_buffers": 1 without GDR else 0, "path_type": the farthest class of any hop}.
    """
    if gdr:
        nodes = topo.path(gpu, nic)
    else:
        cpu = topo.local_cpu(gpu)
        nodes = topo.path(gpu, cpu) + topo.path(cpu, nic)[1:]
    links = list(pairwise(nodes))
    classes = [hop_type(topo, x, y) for x, y in links]
    return {
        "nodes": nodes,
        "hops": len(links),
        "host_bridge_crossings": sum(topo.kind(n) == "CPU" for n in nodes[1:-1]),
        "smp_crossings": sum(topo.link(x, y).kind == "SYS" for x, y in links),
        "bounce_buffers": 0 if gdr else 1,
        "path_type": max(classes, key=PATH_TYPES.index) if classes else "LOC",
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
    if value is None:
        return None
    if value in PATH_TYPES:
        return value
    digits = ""
    for ch in value:
        if not ch.isdigit() or ch not in "0123456789":
            break
        digits += ch
    if not digits:
        return None
    return LEGACY_LEVELS[min(int(digits), len(LEGACY_LEVELS) - 1)]


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
    if not (topo.nodes[nic].attrs.get("gdr") and topo.nodes[gpu].attrs.get("gdr")):
        return False
    if read:
        gdr_read = env_int(env, "NCCL_NET_GDR_READ", -2)
        if gdr_read == 0:
            return False
        if gdr_read == -2 and topo.nodes[gpu].attrs.get("cc", 0) < 80:
            gpus = topo.of_kind("GPU")
            nvlink_peer = topo.nodes[gpu].attrs.get("nvlink") and any(
                topo.nodes[g].attrs.get("nvlink") for g in gpus if g != gpu
            )
            if not nvlink_peer and len(gpus) > 1:
                return False
    level = "P2C" if env_int(env, "NCCL_NET_GDR_C2C", 1) else "PXB"
    override = parse_gdr_level(env.get("NCCL_NET_GDR_LEVEL"))
    if override is not None:
        level = override
    return PATH_TYPES.index(path_type(topo, gpu, nic)) <= PATH_TYPES.index(level)
