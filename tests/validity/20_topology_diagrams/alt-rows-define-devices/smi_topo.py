"""Alternative-correct 20 parser (validity corpus): devices taken from the matrix rows."""

from __future__ import annotations

import re

PCIE_CODES = ("PIX", "PXB", "PHB", "NODE")
RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LEGEND_LINE = re.compile(r"^\s*(\S+)\s*=\s*(.*?)\s*$")
NIC_LINE = re.compile(r"^\s*(\S+)\s*:\s*(.*?)\s*$")


def parse_topo(text: str) -> dict:
    lines = [ANSI.sub("", raw).replace("\t", " ").strip() for raw in text.replace("\r", "").split("\n")]
    h = next(i for i, line in enumerate(lines) if re.search(r"(^|\s)GPU0(\s|$)", line))
    header = lines[h]
    columns = sorted((header.index(name), name) for name in AFFINITY_HEADERS if name in header)
    tokens = set(header.split())
    rows = []
    for line in lines[h + 1 :]:
        cells = line.split()
        if not cells or cells[0] not in tokens:
            break
        rows.append(cells)
    devices = [cells[0] for cells in rows]
    n = len(devices)
    topo: dict = {
        "devices": devices,
        "gpus": [d for d in devices if d.startswith("GPU")],
        "nics": [d for d in devices if not d.startswith("GPU")],
        "matrix": {cells[0]: dict(zip(devices, cells[1 : n + 1], strict=True)) for cells in rows},
        "cpu_affinity": {},
        "numa_affinity": {},
        "legend": {},
    }
    names = [name for _, name in columns]
    for cells in rows:
        if not cells[0].startswith("GPU"):
            continue
        extra = dict(zip(names, cells[n + 1 :], strict=False))
        if "CPU Affinity" in extra:
            topo["cpu_affinity"][cells[0]] = extra["CPU Affinity"]
        if "NUMA Affinity" in extra:
            value = extra["NUMA Affinity"]
            topo["numa_affinity"][cells[0]] = None if value == "N/A" else int(value)
    topo["nic_names"] = {d: d for d in topo["nics"]}
    block = ""
    for line in lines[h + 1 + n :]:
        if line in ("Legend:", "NIC Legend:"):
            block = line
            continue
        if block == "Legend:" and (m := LEGEND_LINE.match(line)):
            topo["legend"][m[1]] = m[2]
        elif block == "NIC Legend:" and (m := NIC_LINE.match(line)):
            topo["nic_names"][m[1]] = m[2]
    return topo


def _code(topo: dict, a: str, b: str) -> str:
    return topo["matrix"][a][b]


def link_kind(topo: dict, a: str, b: str) -> str:
    code = _code(topo, a, b)
    if code == "X":
        return "self"
    if code[:2] == "NV":
        return "nvlink"
    if code == "SYS":
        return "sys"
    if code in PCIE_CODES:
        return "pcie"
    raise ValueError(f"unknown code {code!r}")


def nvlink_count(topo: dict, a: str, b: str) -> int:
    code = _code(topo, a, b)
    return int(code.removeprefix("NV")) if code.startswith("NV") else 0


def gpu_pairs(topo: dict) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {"nvlink": [], "pcie": [], "sys": []}
    gpus = topo["gpus"]
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            out[link_kind(topo, a, b)].append([a, b])
    return out


def largest_nvlink_group(topo: dict) -> list[str]:
    gpus = topo["gpus"]
    best: list[int] = [0] if gpus else []

    def linked(i: int, j: int) -> bool:
        return link_kind(topo, gpus[i], gpus[j]) == "nvlink"

    def grow(group: list[int], start: int) -> None:
        nonlocal best
        if len(group) > len(best):  # the first group of each size found is the first in listing order
            best = list(group)
        for k in range(start, len(gpus)):
            if all(linked(k, m) for m in group):
                grow([*group, k], k + 1)

    grow([], 0)
    return [gpus[i] for i in best]


def nearest_nics(topo: dict, gpu: str) -> list[str]:
    ranked = [(RANK[_code(topo, gpu, nic)], nic) for nic in topo["nics"]]
    if not ranked:
        return []
    best = min(r for r, _ in ranked)
    return [topo["nic_names"][nic] for r, nic in ranked if r == best]
