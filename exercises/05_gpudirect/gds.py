"""GPUDirect Storage: how long a checkpoint takes to save and to restore, with and without a bounce through
host memory.

Without GDS each GPU copies its shard into host memory (cudaMemcpy to a pinned buffer) and the drive then
DMAs it from there; with GDS the drive DMAs straight to or from GPU memory over PCIe (cuFile; NVIDIA GDS
overview guide: "avoids a bounce buffer through the CPU"). Every flow takes topo.path, and all flows of a
phase share the links and devices (README.md, "The model of gds.py").
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
    raise NotImplementedError("TODO(05.checkpoint): not implemented yet")


def device_rate(topo: Topology, node: str, *, reading: bool) -> float | None:
    """GB/s at which ``node`` can source (reading=True) or sink data, or None for no limit of its own.

    A drive (or storage target) has read_gbps / write_gbps; a NIC without them is limited by its line rate
    gbps both ways; GPUs and CPUs are no limit here (HBM and host DRAM are much faster than PCIe).
    """
    attrs = topo.nodes[node].attrs
    rate = attrs.get("read_gbps" if reading else "write_gbps", attrs.get("gbps"))
    return None if rate is None else float(rate)


def phase_seconds(topo: Topology, flows: list[tuple[str, str, float]]) -> float:
    """Seconds for all ``flows`` (src, dst, bytes) to finish when they run at the same time, each on
    topo.path(src, dst), under the README's model: links are full duplex at topo.link(a, b).gbps per
    direction; a source is read at device_rate(src, reading=True) and a destination written at
    device_rate(dst, reading=False) (None: no limit). 0.0 for no flows.
    """
    raise NotImplementedError("TODO(05.checkpoint): not implemented yet")


def checkpoint_seconds(
    topo: Topology, *, total_bytes: float, placement: dict[str, list[str]], gds: bool, op: str
) -> float:
    """Seconds to save (op="save") or restore (op="restore") a checkpoint of ``total_bytes`` sharded evenly
    over the GPUs in ``placement``, each GPU's shard striped evenly over its list of storage devices, with
    GPUDirect Storage (gds=True) or without it, as README.md's model moves the bytes. ValueError for another
    op.
    """
    raise NotImplementedError("TODO(05.checkpoint): not implemented yet")
