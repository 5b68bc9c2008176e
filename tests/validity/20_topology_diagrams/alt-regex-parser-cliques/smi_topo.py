"""Read `nvidia-smi topo -m` (alternative-correct case: column positions from the header, maximal cliques)."""

from __future__ import annotations

import itertools
import re

PCIE_CODES = ("PIX", "PXB", "PHB", "NODE")
RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LEGEND = re.compile(r"^\s*(X|SYS|NODE|PHB|PXB|PIX|NV#)\s*=\s*(.+?)\s*$")
NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def parse_topo(text: str) -> dict:
    """Parse `nvidia-smi topo -m`."""
    lines = [ln.rstrip("\r") for ln in ANSI.sub("", text).splitlines()]
    h = next(i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln))
    header = re.sub("|".join(AFFINITY_HEADERS), lambda m: m.group(0).replace(" ", "_"), lines[h])
    names = header.split()
    columns = [c for c in names if c.replace("_", " ") not in AFFINITY_HEADERS]
    extra = [c.replace("_", " ") for c in names if c.replace("_", " ") in AFFINITY_HEADERS]
    topo: dict = {"devices": [], "matrix": {}, "cpu_affinity": {}, "numa_affinity": {}}
    for ln in lines[h + 1 :]:
        if not ln.strip():
            break
        label, *fields = ln.split()
        topo["devices"].append(label)
        topo["matrix"][label] = {c: fields[k] for k, c in enumerate(columns)}
        if not label.startswith("GPU"):
            continue
        for name, value in zip(extra, fields[len(columns) :], strict=False):
            if name == "CPU Affinity":
                topo["cpu_affinity"][label] = value
            elif name == "NUMA Affinity":
                topo["numa_affinity"][label] = int(value) if value.isdigit() else None
    legend = dict(m.groups() for ln in lines if (m := LEGEND.match(ln)))
    nic_legend = dict(m.groups() for ln in lines if (m := NIC_LEGEND.match(ln)))
    topo["gpus"] = [d for d in topo["devices"] if d.startswith("GPU")]
    topo["nics"] = [d for d in topo["devices"] if not d.startswith("GPU")]
    topo["legend"] = legend
    topo["nic_names"] = {n: nic_legend.get(n, n) for n in topo["nics"]}
    return topo


def link_kind(topo: dict, a: str, b: str) -> str:
    """self, nvlink, pcie or sys."""
    code = topo["matrix"][a][b]
    kind = {"X": "self", "SYS": "sys"}.get(code)
    if kind:
        return kind
    return "nvlink" if re.fullmatch(r"NV\d+", code) else "pcie"


def nvlink_count(topo: dict, a: str, b: str) -> int:
    """Bonded NVLinks."""
    m = re.fullmatch(r"NV(\d+)", topo["matrix"][a][b])
    return int(m.group(1)) if m else 0


def gpu_pairs(topo: dict) -> dict[str, list[list[str]]]:
    """GPU pairs by link kind."""
    pairs = [[a, b] for a, b in itertools.combinations(topo["gpus"], 2)]
    return {k: [p for p in pairs if link_kind(topo, *p) == k] for k in ("nvlink", "pcie", "sys")}


def largest_nvlink_group(topo: dict) -> list[str]:
    """Enumerate maximal cliques (Bron-Kerbosch), keep the largest, earliest by positions."""
    gpus = topo["gpus"]
    pos = {g: i for i, g in enumerate(gpus)}
    adj = {g: {h for h in gpus if h != g and nvlink_count(topo, g, h) > 0} for g in gpus}
    found: list[list[str]] = []

    def expand(r: set[str], p: set[str], x: set[str]) -> None:
        if not p and not x:
            found.append(sorted(r, key=pos.__getitem__))
        for v in sorted(p, key=pos.__getitem__):
            expand(r | {v}, p & adj[v], x & adj[v])
            p = p - {v}
            x = x | {v}

    expand(set(), set(gpus), set())
    # every largest clique is maximal; among equals, the smallest list of positions
    return min(found, key=lambda c: (-len(c), [pos[g] for g in c]))


def nearest_nics(topo: dict, gpu: str) -> list[str]:
    """Closest NICs by the PCIe ladder."""
    ranked = sorted((RANK.get(topo["matrix"][gpu][n], len(RANK)), i, n) for i, n in enumerate(topo["nics"]))
    if not ranked:
        return []
    return [topo["nic_names"][n] for r, _, n in ranked if r == ranked[0][0]]
