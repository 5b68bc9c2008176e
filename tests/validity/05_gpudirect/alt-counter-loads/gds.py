"""GPUDirect Storage: how long a checkpoint takes to save and to restore, with and without a bounce through
host memory.

Without GDS each GPU copies its shard into host memory (cudaMemcpy to a pinned buffer) and the drive then
DMAs it from there; with GDS the drive DMAs straight to or from GPU memory over PCIe (cuFile; NVIDIA GDS
overview guide: "avoids a bounce buffer through the CPU"). Every flow takes topo.path; all flows of a phase
share the links, and a phase lasts as long as its most loaded link or device:
    T = max over directed links l and devices d of (bytes through l) / bandwidth(l), (bytes at d) / rate(d).
Bandwidths are in GB/s = 1e9 B/s (coursekit/pcie_topologies.yml says where each comes from). Check:
`grade exercise 05`.
"""

from __future__ import annotations

from itertools import pairwise

from coursekit.pcie import Topology

GB = 10**9

# What a training checkpoint holds per parameter, mixed-precision Adam (ZeRO, arXiv 1910.02054 §3.1): bf16
# weights (2 B) + fp32 master weights, Adam m and v (K = 12 B). Gradients (2 B) are recomputed, not saved.
WEIGHT_BYTES = 2
OPTIMIZER_BYTES = 12


def checkpoint_bytes(num_params: int, *, optimizer: bool = True) -> int:
    """Bytes of a checkpoint of ``num_params`` parameters: bf16 weights, plus the optimizer state if asked."""
    per_param = WEIGHT_BYTES + (OPTIMIZER_BYTES if optimizer else 0)
    return num_params * per_param


def device_rate(topo: Topology, node: str, *, reading: bool) -> float | None:
    """GB/s at which ``node`` can source (reading=True) or sink data, or None for no limit of its own.

    A drive (or storage target) has read_gbps / write_gbps; a NIC without them is limited by its line rate
    gbps both ways; GPUs and CPUs are no limit here (HBM and host DRAM are much faster than PCIe).
    """
    attrs = topo.nodes[node].attrs
    rate = attrs.get("read_gbps" if reading else "write_gbps", attrs.get("gbps"))
    return None if rate is None else float(rate)


def phase_seconds(topo: Topology, flows: list[tuple[str, str, float]]) -> float:
    """Seconds for all ``flows`` (src, dst, bytes) to finish when they run at the same time.

    Each flow loads every link of topo.path(src, dst) in its direction (PCIe is full duplex: a->b and b->a
    are separate), its source device by device_rate(src, reading=True) and its destination by
    device_rate(dst, reading=False). The answer is the largest load / bandwidth over all of them; 0.0 for
    no flows. Link bandwidths: topo.link(a, b).gbps.
    """
    from collections import Counter

    link_bytes: Counter = Counter()
    device_times = [0.0]
    src_bytes: Counter = Counter()
    dst_bytes: Counter = Counter()
    for src, dst, nbytes in flows:
        for x, y in pairwise(topo.path(src, dst)):
            link_bytes[(x, y)] += nbytes  # directed: x -> y
        src_bytes[src] += nbytes
        dst_bytes[dst] += nbytes
    for node, nbytes in src_bytes.items():
        rate = device_rate(topo, node, reading=True)
        if rate is not None:
            device_times.append(nbytes / (rate * GB))
    for node, nbytes in dst_bytes.items():
        rate = device_rate(topo, node, reading=False)
        if rate is not None:
            device_times.append(nbytes / (rate * GB))
    link_times = [b / (topo.link(x, y).gbps * GB) for (x, y), b in link_bytes.items()]
    return max(link_times + device_times)


def checkpoint_seconds(
    topo: Topology, *, total_bytes: float, placement: dict[str, list[str]], gds: bool, op: str
) -> float:
    """Seconds to save (op="save") or restore (op="restore") a checkpoint sharded evenly over the GPUs in
    ``placement``; each GPU's shard is striped evenly over its list of storage devices.

    With GDS: one phase, GPU <-> device directly. Without GDS: two phases one after the other (torch.save
    copies each storage to the CPU, then writes it: torch/serialization.py _save): GPU -> host memory of
    topo.local_cpu(gpu), then host memory -> devices; a restore runs the same two phases in reverse. Raise
    ValueError for another op.
    """
    if op not in ("save", "restore"):
        raise ValueError(f"op must be 'save' or 'restore', not {op!r}")
    shard = total_bytes / len(placement)
    direct = []  # (gpu, device, bytes) in the save direction
    for gpu, devices in placement.items():
        for dev in devices:
            direct.append((gpu, dev, shard / len(devices)))

    def oriented(flows):
        return flows if op == "save" else [(d, s, b) for s, d, b in flows]

    if gds:
        return phase_seconds(topo, oriented(direct))
    to_host = [(gpu, topo.local_cpu(gpu), shard) for gpu in placement]
    from_host = [(topo.local_cpu(gpu), dev, b) for gpu, dev, b in direct]
    return phase_seconds(topo, oriented(to_host)) + phase_seconds(topo, oriented(from_host))
