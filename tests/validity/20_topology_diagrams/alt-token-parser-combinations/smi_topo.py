"""Read `nvidia-smi topo -m` (alternative-correct case: token parser, cliques by combinations)."""

from __future__ import annotations

import itertools
import re

PCIE_CODES = ("PIX", "PXB", "PHB", "NODE")
RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_topo(text: str) -> dict:
    """Parse `nvidia-smi topo -m`."""
    lines = ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.split() and ln.split()[0].startswith("GPU"))
    header = lines[start]
    extras = sorted((header.find(h), h) for h in AFFINITY_HEADERS if h in header)
    for _, h in extras:
        header = header.replace(h, " ")
    columns = header.split()
    extra_names = [h for _, h in extras]
    devices, matrix, cpu, numa = [], {}, {}, {}
    i = start + 1
    while i < len(lines) and lines[i].strip():
        tokens = lines[i].split()
        label, codes, rest = tokens[0], tokens[1 : 1 + len(columns)], tokens[1 + len(columns) :]
        devices.append(label)
        matrix[label] = dict(zip(columns, codes, strict=True))
        values = dict(zip(extra_names, rest, strict=False))
        if label.startswith("GPU"):
            if "CPU Affinity" in values:
                cpu[label] = values["CPU Affinity"]
            if "NUMA Affinity" in values:
                v = values["NUMA Affinity"]
                numa[label] = None if v == "N/A" else int(v)
        i += 1
    legend, nic_legend, section = {}, {}, None
    for ln in lines[i:]:
        s = ln.strip()
        if s == "Legend:":
            section = "legend"
        elif s == "NIC Legend:":
            section = "nic"
        elif s and section == "legend" and "=" in s:
            key, _, value = s.partition("=")
            legend[key.strip()] = value.strip()
        elif s and section == "nic" and ":" in s:
            key, _, value = s.partition(":")
            nic_legend[key.strip()] = value.strip()
    gpus = [d for d in devices if d.startswith("GPU")]
    nics = [d for d in devices if not d.startswith("GPU")]
    return {
        "devices": devices,
        "gpus": gpus,
        "nics": nics,
        "matrix": matrix,
        "cpu_affinity": cpu,
        "numa_affinity": numa,
        "legend": legend,
        "nic_names": {n: nic_legend.get(n, n) for n in nics},
    }


def link_kind(topo: dict, a: str, b: str) -> str:
    """self, nvlink, pcie or sys."""
    code = topo["matrix"][a][b]
    if code == "X":
        return "self"
    if code.startswith("NV"):
        return "nvlink"
    return "pcie" if code in PCIE_CODES else "sys"


def nvlink_count(topo: dict, a: str, b: str) -> int:
    """Bonded NVLinks."""
    code = topo["matrix"][a][b]
    return int(code[2:]) if code.startswith("NV") else 0


def gpu_pairs(topo: dict) -> dict[str, list[list[str]]]:
    """GPU pairs by link kind."""
    out: dict[str, list[list[str]]] = {"nvlink": [], "pcie": [], "sys": []}
    for a, b in itertools.combinations(topo["gpus"], 2):
        out[link_kind(topo, a, b)].append([a, b])
    return out


def largest_nvlink_group(topo: dict) -> list[str]:
    """Largest all-NVLink set, first in listing order."""
    gpus = topo["gpus"]
    for size in range(len(gpus), 1, -1):
        for group in itertools.combinations(gpus, size):
            if all(nvlink_count(topo, a, b) > 0 for a, b in itertools.combinations(group, 2)):
                return list(group)
    return gpus[:1]


def nearest_nics(topo: dict, gpu: str) -> list[str]:
    """Closest NICs by the PCIe ladder."""
    if not topo["nics"]:
        return []
    rank = {n: RANK.get(topo["matrix"][gpu][n], 99) for n in topo["nics"]}
    best = min(rank.values())
    return [topo["nic_names"].get(n, n) for n in topo["nics"] if rank[n] == best]
