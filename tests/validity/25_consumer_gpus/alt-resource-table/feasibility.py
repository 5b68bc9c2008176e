"""Consumer GPUs: the largest model an RTX 4090 box can train, and its all-reduce through host memory.

RTX 4090: 24 GB, 165.2 dense bf16 TFLOPS, PCIe 4.0 x16, no NVLink, no GPU-to-GPU P2P (coursekit/hardware.yml).
Memory wall: Ψ_max = usable bytes / bytes per parameter at ZeRO stage z over N_d GPUs (arXiv 1910.02054).
Host path: without P2P, NCCL's SHM transport has the sender GPU write into a host buffer that the receiver GPU
reads (NVIDIA/nccl src/transport/shm.cc; env.rst, NCCL_SHM_DISABLE): each byte crosses PCIe and DRAM twice.
Check: `grade exercise 25`. Symbols: S bytes all-reduced, n GPUs per box, N boxes, Ψ parameters. Units: bytes,
seconds, GB/s with GB = 1e9 B, every bandwidth per direction unless it says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from coursekit.budget import USABLE_MEMORY_FRACTION
from coursekit.hardware import GB, load

# ------------------------------------------------------------------------------------------------------------
# What the catalogue does not say about these boxes: their CPUs. Its 4090 nodes are course designs; we give
# them AMD EPYC 7003 ("Milan") sockets. Defined here, with sources (coursekit/hardware.yml has no CPU table).

# Host DRAM, per socket, peak: AMD EPYC 7003 "Milan" has 8 channels of DDR4-3200 (AnandTech, "AMD EPYC Milan
# Review", 2021); a 64-bit channel moves 3200e6 x 8 B = 25.6 GB/s, 8 x 25.6 = 204.8 GB/s ("204,8 Go/s pour
# les EPYC Milan", tomshardware.fr, 2021-12). STREAM reaches less than peak: a bound, not a measurement.
DDR4_3200_8CH_GB_S = 8 * 3200e6 * 8 / GB
# Between two sockets: the bandwidth NCCL itself assumes for an AMD Zen 3/4 SMP link (NVIDIA/nccl
# src/graph/topo.h, `#define AMD_ZEN34_BW 24.0`, GB/s). NCCL's model value, not an AMD datasheet figure.
NCCL_ZEN34_SOCKET_GB_S = 24.0
# What a 4090's PCIe 4.0 x16 link delivers of its 31.5 GB/s: cudaMemcpyPeer between two 4090s "24.44GB/s"
# (tinygrad/open-gpu-kernel-modules README, P2P-enabled driver), 0.776; NCCL models PCIe Gen3 x16 at
# 12.0 of 15.75 GB/s (topo.h `PCI_BW 12.0`), 0.762. TLP headers and flow control take the rest.
PCIE_EFFICIENCY = 24.44 / 31.5


@dataclass(frozen=True)
class HostBox:
    """A box of GPUs without NVLink, as the catalogue describes it (`node`), plus its CPUs."""

    node: str  # key of coursekit/hardware.yml `nodes`
    sockets: int  # CPU sockets; the GPUs are split evenly over them
    dram_gb_s: float  # host memory bandwidth of ONE socket, peak
    socket_link_gb_s: float  # between the two sockets, per direction (unused with one socket)
    pcie_efficiency: float = PCIE_EFFICIENCY

    @property
    def gpus(self) -> int:
        return load().nodes[self.node].gpus

    @property
    def p2p(self) -> bool:
        return load().nodes[self.node].gpu_p2p

    @property
    def memory_bytes(self) -> float:
        hw = load()
        return hw.gpus[hw.nodes[self.node].gpu].memory_gb * GB

    @property
    def peak_flops(self) -> float:
        hw = load()
        return hw.gpus[hw.nodes[self.node].gpu].bf16_dense_tflops * 1e12

    @property
    def pcie_gb_s(self) -> float:
        """What one GPU's x16 host link delivers per direction: line rate x pcie_efficiency."""
        hw = load()
        return hw.pcie[hw.gpus[hw.nodes[self.node].gpu].pcie].x16_gb_s * self.pcie_efficiency

    @property
    def nic_gb_s(self) -> float:
        """All compute NICs of the box, per direction (one 100GbE: 12.5)."""
        return load().node_egress_gb_s(self.node)

    def to_dict(self) -> dict:
        return asdict(self)


# The catalogue's two 4090 designs. The workstation has one socket (its `nvidia-smi topo -m`, coursekit/data/
# topo_4x4090.txt, shows one NUMA node); the server has two, as its catalogue entry says.
BOX_4X = HostBox("rtx4090_pcie_4x", sockets=1, dram_gb_s=DDR4_3200_8CH_GB_S, socket_link_gb_s=0.0)
BOX_8X = HostBox(
    "rtx4090_pcie_8x", sockets=2, dram_gb_s=DDR4_3200_8CH_GB_S, socket_link_gb_s=NCCL_ZEN34_SOCKET_GB_S
)
WALLS = ("pcie", "dram", "socket", "network")


# ------------------------------------------------------------------------------------------------------------
# 25.memory_wall


def state_bytes_per_param(zero_stage: int, dp: int) -> float:
    """Bytes of model states per parameter on each of `dp` data-parallel GPUs: bf16 weights 2, bf16 grads 2,
    fp32 master + Adam m + v 12, with ZeRO stage 1/2/3 sharding the optimizer / + grads / + weights."""
    if zero_stage not in range(4):
        raise ValueError(f"ZeRO has stages 0-3, not {zero_stage}")
    # the three kinds of state, in the order ZeRO shards them: optimizer (stage 1), grads (2), weights (3)
    states = [12.0, 2.0, 2.0]
    return sum(b / dp if i < zero_stage else b for i, b in enumerate(states))


def largest_trainable_params(
    box: HostBox, zero_stage: int, boxes: int = 1, reserve_bytes: float = 0.0
) -> int:
    """The most parameters whose model states fit on every GPU of `boxes` boxes, all data-parallel, next to
    `reserve_bytes` of activations, in USABLE_MEMORY_FRACTION of the GPU's memory. 0 if nothing fits."""
    budget = USABLE_MEMORY_FRACTION * box.memory_bytes - reserve_bytes
    if budget <= 0:
        return 0
    return math.floor(budget / state_bytes_per_param(zero_stage, box.gpus * boxes))


# ------------------------------------------------------------------------------------------------------------
# 25.host_allreduce


def host_allreduce_s(nbytes: float, box: HostBox, boxes: int = 1, p2p: bool | None = None) -> dict:
    """Bandwidth-only seconds of a ring all-reduce of `nbytes` over every GPU of `boxes` boxes, per resource
    the traffic crosses, the slowest setting the pace (the phases pipeline). p2p None: the node's gpu_p2p.
    {"pcie_s", "dram_s", "socket_s", "network_s", "time_s", "wall"}, wall the key (without _s) of the slowest
    or "none" when nothing moves.
    - pcie: each GPU sends and receives 2(n-1)/n x S, up and down its own link at the same time;
    - dram (no P2P only): every byte sent is written to and read from host memory: 4(n-1) S over all sockets;
    - socket (two sockets): the ring crosses between them once each way, 2(n-1)/n x S per direction;
    - network (boxes > 1): across boxes, 2(N-1)/N x S through one box's NICs (hierarchical: coursekit.cluster)
    """
    n, sockets = box.gpus, box.sockets
    if sockets > 2 or sockets < 1:
        raise ValueError(f"the host path models 1 or 2 sockets, not {sockets}")
    p2p = box.p2p if p2p is None else p2p
    ring = 2 * (n - 1) / n * nbytes  # what each GPU sends (and receives) inside the box
    # resource -> (bytes that cross it, its bandwidth in GB/s); a resource the path does not use moves 0
    crossing = {
        "pcie": (ring, box.pcie_gb_s),
        "dram": (0.0 if p2p else 4 * (n - 1) * nbytes, sockets * box.dram_gb_s),
        "socket": (ring if sockets > 1 else 0.0, box.socket_link_gb_s),
        "network": (2 * (boxes - 1) / boxes * nbytes, box.nic_gb_s),
    }
    out = {f"{k}_s": (b / (bw * GB) if b else 0.0) for k, (b, bw) in crossing.items()}
    slowest = max(out.values())
    out["time_s"] = slowest
    out["wall"] = next((k for k in WALLS if slowest > 0 and out[f"{k}_s"] == slowest), "none")
    return out
