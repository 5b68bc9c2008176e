"""GPUDirect RDMA: the PCIe path between a GPU and a NIC, and when NCCL lets the NIC use GPU memory directly.

NCCL classes every path between two devices (NVIDIA/nccl src/graph/paths.cc, ncclTopoSetPaths) and decides
from that class, the GPU and the environment whether the NIC may use GPU memory directly (ncclTopoCheckGdr).
Path classes, nearest first: LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS (README.md says what each means).
Check: `grade exercise 05`.
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
    """The class (a name in PATH_TYPES) that ncclTopoSetPaths gives the single link between adjacent nodes a
    and b, in either order. Only PIX, PXB, PHB and SYS occur on the PCIe topologies here."""
    ### BEGIN SOLUTION 05.paths
    link = topo.link(a, b)
    if link.kind == "SYS":
        return "SYS"  # the SMP interconnect (QPI/UPI/xGMI) between NUMA nodes
    kinds = {topo.kind(a), topo.kind(b)}
    if "CPU" in kinds:
        return "PHB"  # "Consider a path going through the CPU as PATH_PHB"
    if kinds == {"PCI"}:
        return "PXB"  # "Differentiate between one and multiple PCI switches"
    return "PIX"  # LINK_PCI starts as PATH_PIX: a device hanging off one switch
    ### END SOLUTION


def path_type(topo: Topology, a: str, b: str) -> str:
    """NCCL's class (a name in PATH_TYPES) of the route topo.path(a, b); LOC if a == b."""
    ### BEGIN SOLUTION 05.paths
    nodes = topo.path(a, b)
    # ncclTopoSetPaths: remPath->type = max(path->type, type), hop by hop
    hops = [hop_type(topo, u, v) for u, v in pairwise(nodes)]
    return max(hops, key=PATH_TYPES.index, default="LOC")
    ### END SOLUTION


def data_path(topo: Topology, gpu: str, nic: str, *, gdr: bool) -> dict:
    """The way a message goes from ``gpu``'s memory out of ``nic``, with GPUDirect RDMA (gdr=True) or
    without it, as NCCL's network proxy moves it (README.md, "GPUDirect RDMA"). Every leg follows topo.path.
    Returns {"nodes": every node the bytes pass, in order, ends included (a node may appear twice),
     "hops": links crossed, "host_bridge_crossings": CPU nodes strictly inside the route,
     "smp_crossings": SYS links crossed, "bounce_buffers": copies into host memory on the way,
     "path_type": the class of the route as path_type would class it, hop by hop}.
    """
    ### BEGIN SOLUTION 05.paths
    if gdr:
        nodes = topo.path(gpu, nic)
    else:
        cpu = topo.local_cpu(gpu)  # NCCL's proxy buffer lives on the GPU's NUMA node (ncclGetLocalCpu)
        nodes = topo.path(gpu, cpu) + topo.path(cpu, nic)[1:]  # up to host memory, then down to the NIC
    pairs = list(pairwise(nodes))
    return {
        "nodes": nodes,
        "hops": len(pairs),
        "host_bridge_crossings": sum(topo.kind(n) == "CPU" for n in nodes[1:-1]),
        "smp_crossings": sum(topo.link(u, v).kind == "SYS" for u, v in pairs),
        "bounce_buffers": 0 if gdr else 1,
        "path_type": max((hop_type(topo, u, v) for u, v in pairs), key=PATH_TYPES.index, default="LOC"),
    }
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 05.gdr_level: NCCL's decision, NCCL_NET_GDR_LEVEL and friends


def parse_gdr_level(value: str | None) -> str | None:
    """The path class (a name in PATH_TYPES) that the NCCL_NET_GDR_LEVEL value ``value`` sets, as ncclGetLevel
    (paths.cc) reads it, or None when NCCL would ignore the value and keep its default. ``value`` is the
    variable's string, or None when it is unset. README.md, "GPUDirect RDMA and NCCL_NET_GDR_LEVEL", says
    where to read which forms NCCL accepts."""
    ### BEGIN SOLUTION 05.gdr_level
    if not value:
        return None  # unset (or empty): NCCL picks its default
    if value in PATH_TYPES:
        return value  # strcmp against topoPathTypeStr[0..PATH_SYS]: exact and case-sensitive
    if value[0] in "0123456789":  # 'str[0] >= '0' && str[0] <= '9'': "-1" is not a number here
        digits = value[: len(value) - len(value.lstrip("0123456789"))]  # strtol stops at the first non-digit
        return LEGACY_LEVELS[min(int(digits), len(LEGACY_LEVELS) - 1)]  # "if (oldLevel > maxOldLevel) ..."
    return None
    ### END SOLUTION


def gdr_enabled(topo: Topology, gpu: str, nic: str, env: dict[str, str], *, read: bool) -> bool:
    """Whether NCCL uses GPUDirect RDMA between ``gpu`` and ``nic`` (ncclTopoCheckGdr, paths.cc).

    read=True is the send side (the NIC reads GPU memory), read=False the receive side. ``env`` holds the
    NCCL_* variables that are set, as strings; a variable that is absent takes NCCL's default (README.md).
    Read integer variables with env_int. Device facts are in topo.nodes[name].attrs: "gdr" on GPUs and NICs;
    "cc" (compute capability x 10) and "nvlink" (on an NVSwitch with the other nvlink GPUs) on GPUs.
    """
    ### BEGIN SOLUTION 05.gdr_level
    g, n = topo.nodes[gpu].attrs, topo.nodes[nic].attrs
    if not n.get("gdr") or not g.get("gdr"):
        return False  # no nvidia-peermem / dma-buf support, or a GPU without GPUDirect
    if read:
        gdr_read = env_int(env, "NCCL_NET_GDR_READ", -2)
        if gdr_read == 0:
            return False
        if gdr_read < 0 and g["cc"] < 80:  # "Disable GDR Reads pre-Ampere when we have other PCI flows"
            gpus = topo.of_kind("GPU")
            peers = [o for o in gpus if o != gpu and topo.nodes[o].attrs.get("nvlink")]
            if not (len(gpus) == 1 or (g.get("nvlink") and peers)):
                return False
    level = "P2C" if env_int(env, "NCCL_NET_GDR_C2C", 1) else "PXB"  # on PCIe-only machines both mean PXB
    user = parse_gdr_level(env.get("NCCL_NET_GDR_LEVEL"))
    if user is not None:
        level = user
    # "if (distance > netGdrLevel) ... GPU Direct RDMA Disabled"
    return PATH_TYPES.index(path_type(topo, gpu, nic)) <= PATH_TYPES.index(level)
    ### END SOLUTION
