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
    raise NotImplementedError("TODO(05.paths): not implemented yet")


def path_type(topo: Topology, a: str, b: str) -> str:
    """NCCL's class (a name in PATH_TYPES) of the route topo.path(a, b); LOC if a == b."""
    raise NotImplementedError("TODO(05.paths): not implemented yet")


def data_path(topo: Topology, gpu: str, nic: str, *, gdr: bool) -> dict:
    """The way a message goes from ``gpu``'s memory out of ``nic``, with GPUDirect RDMA (gdr=True) or
    without it, as NCCL's network proxy moves it (README.md, "GPUDirect RDMA"). Every leg follows topo.path.
    Returns {"nodes": every node the bytes pass, in order, ends included (a node may appear twice),
     "hops": links crossed, "host_bridge_crossings": CPU nodes strictly inside the route,
     "smp_crossings": SYS links crossed, "bounce_buffers": copies into host memory on the way,
     "path_type": the class of the route as path_type would class it, hop by hop}.
    """
    raise NotImplementedError("TODO(05.paths): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 05.gdr_level: NCCL's decision, NCCL_NET_GDR_LEVEL and friends


def parse_gdr_level(value: str | None) -> str | None:
    """The path class (a name in PATH_TYPES) that the NCCL_NET_GDR_LEVEL value ``value`` sets, as ncclGetLevel
    (paths.cc) reads it, or None when NCCL would ignore the value and keep its default. ``value`` is the
    variable's string, or None when it is unset. README.md, "GPUDirect RDMA and NCCL_NET_GDR_LEVEL", says
    where to read which forms NCCL accepts."""
    raise NotImplementedError("TODO(05.gdr_level): not implemented yet")


def gdr_enabled(topo: Topology, gpu: str, nic: str, env: dict[str, str], *, read: bool) -> bool:
    """Whether NCCL uses GPUDirect RDMA between ``gpu`` and ``nic`` (ncclTopoCheckGdr, paths.cc).

    read=True is the send side (the NIC reads GPU memory), read=False the receive side. ``env`` holds the
    NCCL_* variables that are set, as strings; a variable that is absent takes NCCL's default (README.md).
    Read integer variables with env_int. Device facts are in topo.nodes[name].attrs: "gdr" on GPUs and NICs;
    "cc" (compute capability x 10) and "nvlink" (on an NVSwitch with the other nvlink GPUs) on GPUs.
    """
    raise NotImplementedError("TODO(05.gdr_level): not implemented yet")
