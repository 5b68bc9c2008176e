"""Consumer GPUs: the largest model an RTX 4090 box can train, and its all-reduce through host memory.

RTX 4090: 24 GB, 165.2 dense bf16 TFLOPS, PCIe 4.0 x16, no NVLink, no GPU-to-GPU P2P (coursekit/hardware.yml).
Memory wall: mixed-precision Adam's model states under ZeRO (Rajbhandari et al. 2020, arXiv 1910.02054).
Host path: without P2P, NCCL's SHM transport stages every message in host memory (NVIDIA/nccl
src/transport/shm.cc; env.rst, NCCL_SHM_DISABLE). README.md says what each resource is and where its
bandwidth comes from; which bytes cross it is the part to work out. Check: `grade exercise 25`.
Units: bytes, seconds, GB/s with GB = 1e9 B, every bandwidth per direction unless it says otherwise.
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
    """Bytes of model states (bf16 weights and gradients, fp32 master weights and Adam's two moments) that
    each of `dp` data-parallel GPUs keeps per parameter of the model under ZeRO stage `zero_stage`, a float.
    ValueError for a stage other than 0-3."""
    raise NotImplementedError("TODO(25.memory_wall): not implemented yet")


def largest_trainable_params(
    box: HostBox, zero_stage: int, boxes: int = 1, reserve_bytes: float = 0.0
) -> int:
    """The most parameters (an int, 0 if nothing fits) whose model states fit on every GPU of `boxes` boxes,
    every GPU data-parallel at ZeRO stage `zero_stage`, next to `reserve_bytes` of activations per GPU, in the
    share of a GPU's memory a plan may fill (coursekit.budget.USABLE_MEMORY_FRACTION)."""
    raise NotImplementedError("TODO(25.memory_wall): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 25.host_allreduce


def host_allreduce_s(nbytes: float, box: HostBox, boxes: int = 1, p2p: bool | None = None) -> dict:
    """Bandwidth-only seconds of one ring all-reduce of `nbytes` over every GPU of `boxes` identical boxes,
    resource by resource: {"pcie_s", "dram_s", "socket_s", "network_s", "time_s", "wall"}.

    Each `<resource>_s` is the time that resource alone needs for the bytes of the all-reduce that cross it
    (0.0 where none do): "pcie" one GPU's host link (HostBox.pcie_gb_s), "dram" the box's host memory
    (dram_gb_s per socket), "socket" the link between two sockets, "network" the box's NICs. time_s is the
    all-reduce's time, and wall the resource that sets it, by its key without "_s" (ties: the first in WALLS),
    or "none" when nothing moves. p2p: whether the GPUs of a box reach each other's memory directly; None
    takes the catalogue's gpu_p2p for the node. ValueError for a box with other than 1 or 2 sockets.
    """
    raise NotImplementedError("TODO(25.host_allreduce): not implemented yet")
