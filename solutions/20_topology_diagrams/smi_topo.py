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
    ### BEGIN SOLUTION 20.parse_smi
    lines = [ANSI.sub("", line).rstrip() for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if "GPU0" in line.split())  # the header comes first
    header = lines[start]
    extra = [h for h in AFFINITY_HEADERS if h in header]  # multi-word column names: cut them off first
    for h in extra:
        header = header.replace(h, "")
    devices = header.split()
    topo: dict = {"devices": devices, "gpus": [d for d in devices if d.startswith("GPU")], "matrix": {}}
    topo["nics"] = [d for d in devices if not d.startswith("GPU")]
    topo["cpu_affinity"], topo["numa_affinity"] = {}, {}
    for line in lines[start + 1 : start + 1 + len(devices)]:
        label, *cells = line.split()  # " X " splits to "X" like every other cell
        topo["matrix"][label] = dict(zip(devices, cells[: len(devices)], strict=True))
        rest = cells[len(devices) :]  # affinity columns, in header order; NIC rows leave them empty
        if label.startswith("GPU") and rest:
            topo["cpu_affinity"][label] = rest[0]
            if "NUMA Affinity" in extra and len(rest) > 1:
                topo["numa_affinity"][label] = None if rest[1] == "N/A" else int(rest[1])
    topo["legend"], topo["nic_names"] = {}, {d: d for d in topo["nics"]}
    section = None
    for line in lines[start + 1 + len(devices) :]:
        stripped = line.strip()
        if stripped in ("Legend:", "NIC Legend:"):
            section = stripped
        elif section == "Legend:" and "=" in stripped:
            code, meaning = (s.strip() for s in stripped.split("=", 1))
            topo["legend"][code] = meaning
        elif section == "NIC Legend:" and ":" in stripped:
            nic, name = (s.strip() for s in stripped.split(":", 1))
            topo["nic_names"][nic] = name
    return topo
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 20.smi_questions: each takes the dict parse_topo returns


def link_kind(topo: dict, a: str, b: str) -> str:
    """How devices a and b talk: "self" (X), "nvlink" (NV#), "pcie" (PIX, PXB, PHB or NODE: the path stays in
    one CPU socket's PCIe tree) or "sys" (SYS: through the inter-socket link)."""
    ### BEGIN SOLUTION 20.smi_questions
    code = topo["matrix"][a][b]
    if code == "X":
        return "self"
    if code.startswith("NV"):
        return "nvlink"
    if code in PCIE_CODES:
        return "pcie"
    if code == "SYS":
        return "sys"
    raise ValueError(f"unknown topology code {code!r} for {a} - {b}")
    ### END SOLUTION


def nvlink_count(topo: dict, a: str, b: str) -> int:
    """Number of bonded NVLinks between a and b: # of "NV#", 0 for anything else."""
    ### BEGIN SOLUTION 20.smi_questions
    code = topo["matrix"][a][b]
    return int(code[2:]) if code.startswith("NV") else 0  # "NV18" -> 18: 18 x 25 GB/s per direction on H100
    ### END SOLUTION


def gpu_pairs(topo: dict) -> dict[str, list[list[str]]]:
    """Every GPU pair [a, b] (a listed before b) under its link_kind: {"nvlink": [...], "pcie": [...],
    "sys": [...]}, pairs in listing order; all three keys always present."""
    ### BEGIN SOLUTION 20.smi_questions
    out: dict[str, list[list[str]]] = {"nvlink": [], "pcie": [], "sys": []}
    for a, b in itertools.combinations(topo["gpus"], 2):
        out[link_kind(topo, a, b)].append([a, b])
    return out
    ### END SOLUTION


def largest_nvlink_group(topo: dict) -> list[str]:
    """The largest set of GPUs in which EVERY pair has a direct NVLink: the biggest tensor-parallel group that
    never leaves NVLink. Among sets of that size, the first in listing order (compare the lists of their
    positions); a single GPU when there is no NVLink at all."""
    ### BEGIN SOLUTION 20.smi_questions
    gpus = topo["gpus"]
    # brute force over subsets, largest first: 2^8 = 256 subsets on an 8-GPU node, nothing to optimise
    for size in range(len(gpus), 1, -1):
        for group in itertools.combinations(gpus, size):  # combinations come in listing order
            if all(link_kind(topo, a, b) == "nvlink" for a, b in itertools.combinations(group, 2)):
                return list(group)
    return gpus[:1]
    ### END SOLUTION


def nearest_nics(topo: dict, gpu: str) -> list[str]:
    """The NICs closest to `gpu`, by their NIC Legend names (e.g. ["mlx5_0"]): those whose code to the GPU
    ranks lowest in PIX < PXB < PHB < NODE < SYS, in listing order. GPUDirect RDMA wants PIX or PXB: a path
    through the CPU (PHB and beyond) is what NCCL_NET_GDR_LEVEL limits."""
    ### BEGIN SOLUTION 20.smi_questions
    nics = topo["nics"]
    if not nics:
        return []
    best = min(RANK[topo["matrix"][gpu][n]] for n in nics)
    return [topo["nic_names"][n] for n in nics if RANK[topo["matrix"][gpu][n]] == best]
    ### END SOLUTION
