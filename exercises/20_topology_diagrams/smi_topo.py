"""Read `nvidia-smi topo -m`: which GPUs talk over NVLink, over PCIe, or across the CPU sockets, and which NIC
sits next to each GPU.

The matrix gives one code per device pair (the tool's own legend, printed under the matrix):
    X self | NV# a bonded set of # NVLinks | PIX at most one PCIe bridge | PXB several PCIe bridges, no host
    bridge | PHB a PCIe host bridge (the CPU) | NODE between host bridges of one NUMA node | SYS across NUMA
    nodes (QPI/UPI/xGMI)
from the closest to the farthest; NCCL names the same ladder in NCCL_P2P_LEVEL (LOC, NVL, PIX, PXB, PHB, SYS;
NVIDIA/nccl docs/userguide/source/env.rst). Samples: coursekit/data/topo_*.txt; drivers and terminals print
other variants (README). Check: `grade exercise 20`; hints: `grade hint 20 <part>`.
"""

from __future__ import annotations

import itertools
import re

# Closest first. NODE sits between PHB and SYS: it crosses host bridges but stays on one socket.
PCIE_CODES = ("PIX", "PXB", "PHB", "NODE")
RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour/underline escapes nvidia-smi prints to a terminal


# ------------------------------------------------------------------------------------------------------------
# 20.parse_smi


def parse_topo(text: str) -> dict:
    """Parse the output of `nvidia-smi topo -m` from any driver: tabs or spaces of any width, with or without
    ANSI escapes, CRLF line ends, blank or title lines above the table, one GPU or many, zero or more NICs,
    and zero to three affinity columns ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") after the devices.

    Returns a dict:
      "devices":  row labels in order, e.g. ["GPU0", ..., "NIC0", ...] (older drivers print "mlx5_0" rows)
      "gpus":     the labels that start with "GPU";  "nics": every other device, in order
      "matrix":   {row: {column: code}} for every device pair, "X" on the diagonal
      "cpu_affinity":  {gpu: "0-55,112-167"} and "numa_affinity": {gpu: 0 or None for "N/A"}, for the GPU
                  rows that print them ("numa_affinity" is {} when the column is absent)
      "legend":   {"X": "Self", "SYS": "Connection traversing ...", ..., "NV#": "..."}: the "Legend:" lines
      "nic_names": {"NIC0": "mlx5_0", ...} from the "NIC Legend:" lines; a NIC without one names itself
    """
    raise NotImplementedError("TODO(20.parse_smi): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 20.smi_questions: each takes the dict parse_topo returns


def link_kind(topo: dict, a: str, b: str) -> str:
    """How devices a and b talk: "self" (X), "nvlink" (NV#), "pcie" (PIX, PXB, PHB or NODE: the path stays in
    one CPU socket's PCIe tree) or "sys" (SYS: through the inter-socket link)."""
    raise NotImplementedError("TODO(20.smi_questions): not implemented yet")


def nvlink_count(topo: dict, a: str, b: str) -> int:
    """Number of bonded NVLinks between a and b: # of "NV#", 0 for anything else."""
    raise NotImplementedError("TODO(20.smi_questions): not implemented yet")


def gpu_pairs(topo: dict) -> dict[str, list[list[str]]]:
    """Every GPU pair [a, b] (a listed before b) under its link_kind: {"nvlink": [...], "pcie": [...],
    "sys": [...]}, pairs in listing order; all three keys always present."""
    raise NotImplementedError("TODO(20.smi_questions): not implemented yet")


def largest_nvlink_group(topo: dict) -> list[str]:
    """The largest set of GPUs in which EVERY pair has a direct NVLink: the biggest tensor-parallel group that
    never leaves NVLink. Among sets of that size, the first in listing order (compare the lists of their
    positions); a single GPU when there is no NVLink at all."""
    raise NotImplementedError("TODO(20.smi_questions): not implemented yet")


def nearest_nics(topo: dict, gpu: str) -> list[str]:
    """The NICs closest to `gpu`, by their NIC Legend names (e.g. ["mlx5_0"]): those whose code to the GPU
    ranks lowest in PIX < PXB < PHB < NODE < SYS, in listing order. GPUDirect RDMA wants PIX or PXB: a path
    through the CPU (PHB and beyond) is what NCCL_NET_GDR_LEVEL limits."""
    raise NotImplementedError("TODO(20.smi_questions): not implemented yet")
