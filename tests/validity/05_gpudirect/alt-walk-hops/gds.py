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

from coursekit.pcie import Topology

GB = 10**9

# What a training checkpoint holds per parameter, mixed-precision Adam (ZeRO, arXiv 1910.02054 §3.1): bf16
# weights (2 B) + fp32 master weights, Adam m and v (K = 12 B). Gradients (2 B) are recomputed, not saved.
WEIGHT_BYTES = 2
OPTIMIZER_BYTES = 12


def checkpoint_bytes(num_params: int, *, optimizer: bool = True) -> int:
    """Bytes of a checkpoint of ``num_params`` parameters: bf16 weights, plus the optimizer state if asked."""
    total = num_params * WEIGHT_BYTES
    if optimizer:
        total += num_params * OPTIMIZER_BYTES
    return total


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
    seconds: dict[tuple, float] = {}
    for src, dst, nbytes in flows:
        path = topo.path(src, dst)
        for i in range(len(path) - 1):
            key = ("link", path[i], path[i + 1])
            seconds[key] = seconds.get(key, 0.0) + nbytes / (topo.link(path[i], path[i + 1]).gbps * GB)
        for node, reading in ((src, True), (dst, False)):
            rate = device_rate(topo, node, reading=reading)
            if rate is not None:
                key = ("device", node, reading)
                seconds[key] = seconds.get(key, 0.0) + nbytes / (rate * GB)
    return max(seconds.values(), default=0.0)


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
    if op == "save":
        flip = False
    elif op == "restore":
        flip = True
    else:
        raise ValueError(f"unknown op {op!r}")

    def flow(a: str, b: str, nbytes: float) -> tuple[str, str, float]:
        return (b, a, nbytes) if flip else (a, b, nbytes)

    per_gpu = total_bytes / len(placement)
    if gds:
        return phase_seconds(topo, [flow(g, d, per_gpu / len(ds)) for g, ds in placement.items() for d in ds])
    phases = [
        [flow(g, topo.local_cpu(g), per_gpu) for g in placement],
        [flow(topo.local_cpu(g), d, per_gpu / len(ds)) for g, ds in placement.items() for d in ds],
    ]
    if flip:
        phases.reverse()  # a restore reads the drives first, then copies up to the GPUs
    return sum(phase_seconds(topo, p) for p in phases)
