"""Checkpoint times with and without GPUDirect Storage (an alternative-correct case for exercise 05)."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from coursekit.pcie import Topology

GB = 10**9
WEIGHT_BYTES = 2
OPTIMIZER_BYTES = 12


def checkpoint_bytes(num_params: int, *, optimizer: bool = True) -> int:
    per_param = WEIGHT_BYTES + OPTIMIZER_BYTES if optimizer else WEIGHT_BYTES
    return per_param * num_params


def device_rate(topo: Topology, node: str, *, reading: bool) -> float | None:
    attrs = topo.nodes[node].attrs
    rate = attrs.get("read_gbps" if reading else "write_gbps", attrs.get("gbps"))
    return None if rate is None else float(rate)


def phase_seconds(topo: Topology, flows: list[tuple[str, str, float]]) -> float:
    load: Counter = Counter()
    for src, dst, nbytes in flows:
        route = topo.path(src, dst)
        for a, b in pairwise(route):
            load[("link", a, b)] += nbytes
        load[("read", src)] += nbytes
        load[("write", dst)] += nbytes
    worst = 0.0
    for key, nbytes in load.items():
        if key[0] == "link":
            rate = topo.link(key[1], key[2]).gbps
        else:
            rate = device_rate(topo, key[1], reading=key[0] == "read")
        if rate is not None:
            worst = max(worst, nbytes / (rate * GB))
    return worst


def checkpoint_seconds(
    topo: Topology, *, total_bytes: float, placement: dict[str, list[str]], gds: bool, op: str
) -> float:
    if op == "save":
        flip = False
    elif op == "restore":
        flip = True
    else:
        raise ValueError(op)
    per_gpu = total_bytes / len(placement)
    stage, io = [], []
    for gpu, devices in placement.items():
        talker = gpu
        if not gds:
            talker = topo.local_cpu(gpu)
            stage.append((gpu, talker, per_gpu))
        io += [(talker, dev, per_gpu / len(devices)) for dev in devices]
    if flip:
        stage = [(b, a, n) for a, b, n in stage]
        io = [(b, a, n) for a, b, n in io]
    return phase_seconds(topo, stage) + phase_seconds(topo, io)
