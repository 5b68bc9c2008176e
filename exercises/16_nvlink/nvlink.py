"""NVLink and NVSwitch: how much a GPU can send, what an all-reduce costs inside an NVLink domain, bisection
bandwidth, and when a tensor-parallel group stays on NVLink.

NVIDIA quotes NVLink with both directions of a full-duplex link summed (an H100's "900 GB/s"); the Scaling
Book (jax-ml/scaling-book gpus.md, "NVLink Bandwidth (GB/s, full-duplex)") tabulates the same links per
direction. The catalogue keeps every figure as quoted, with its convention (ground-truth.md §7.1). Ring
all-reduce cost: nccl-tests doc/PERFORMANCE.md, "allReduce", and exercise 02. An NVSwitch is non-blocking.
Check: `grade exercise 16`; hints: `grade hint 16 <part>`.
Units: bytes, seconds, GB/s with GB = 1e9 bytes, as datasheets and nccl-tests count (ground-truth.md §0.1).
"""

from __future__ import annotations

import math

from coursekit.hardware import BIDIRECTIONAL, PER_DIRECTION, load

GB = 10**9  # bytes in a decimal gigabyte

# ------------------------------------------------------------------------------------------------------------
# 16.bandwidth: per link and per GPU, in the convention asked for


def to_convention(gb_s: float, quoted: str, want: str) -> float:
    """A bandwidth `gb_s` quoted in convention `quoted`, expressed in convention `want` (each one of
    "per-direction" or "bidirectional")."""
    raise NotImplementedError("TODO(16.bandwidth): not implemented yet")


def nvlink_gpu_gb_s(generation: str, want: str, links: int | None = None) -> float:
    """NVLink bandwidth of one GPU in convention `want`, over `links` links of `generation` (a key of the
    catalogue's `nvlink` table, e.g. "nvlink4"); links=None means the generation's full links_per_gpu.
    Read the figures from `load().nvlink[generation]` each time you are called (the judge adds generations you
    have not seen to the catalogue): per_link_gb_s is quoted in its `convention`."""
    raise NotImplementedError("TODO(16.bandwidth): not implemented yet")


def p2p_time_s(nbytes: float, generation: str, links: int | None = None) -> float:
    """Seconds to copy `nbytes` from one GPU to another over `links` NVLink links of `generation` (None: all
    of them, as through an NVSwitch), bandwidth only, GB = 1e9 bytes. The links' other direction may be busy
    with a copy the other way at the same time."""
    raise NotImplementedError("TODO(16.bandwidth): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 16.allreduce: inside one NVLink domain, and across domains


def ring_allreduce_time_s(nbytes: float, p: int, gpu_gb_s: float, alpha_s: float = 0.0) -> float:
    """Seconds for a ring all-reduce (NCCL's ring: a reduce-scatter, then an all-gather) of `nbytes`, the
    buffer each GPU holds, over `p` GPUs that each send at `gpu_gb_s` per direction, all at once, through a
    non-blocking switch. `alpha_s` is the latency of one ring step (every GPU sends one message to its
    successor); the steps run one after another. One GPU: 0.0."""
    raise NotImplementedError("TODO(16.allreduce): not implemented yet")


def nvls_allreduce_time_s(nbytes: float, gpu_gb_s: float) -> float:
    """Seconds for an ideal all-reduce of `nbytes` per GPU with the reduction done inside the NVSwitch
    (NVLink SHARP, NCCL's NVLS algorithm), each GPU at `gpu_gb_s` per direction, bandwidth only. The README
    says what crosses a GPU's links in each direction; the number of GPUs does not enter."""
    raise NotImplementedError("TODO(16.allreduce): not implemented yet")


def domain_allreduce_time_s(nbytes: float, node: str) -> float:
    """Ring all-reduce of `nbytes` over every GPU of the NVLink domain of catalogue node `node` (e.g.
    "dgx_h100", "gb200_nvl72"): p = its nvlink_domain_gpus, each GPU at its NVLink per-direction rate.
    Bandwidth only. Read the node, its GPU and the GPU's NVLink generation and link count from load()."""
    raise NotImplementedError("TODO(16.allreduce): not implemented yet")


def two_level_allreduce_time_s(
    nbytes: float, domains: int, gpus_per_domain: int, nvlink_gb_s: float, nic_gb_s: float
) -> float:
    """Seconds for a hierarchical all-reduce of `nbytes` per GPU over domains x gpus_per_domain GPUs: ring
    collectives inside each domain over NVLink (nvlink_gb_s per GPU) around ring all-reduces across the
    domains, in which every GPU uses its own NIC (nic_gb_s) at the same time. The phases do not overlap;
    which bytes each phase moves is yours to work out (README, "Across domains"). Rates per direction,
    bandwidth only. One domain: NVLink only; one GPU per domain: NICs only."""
    raise NotImplementedError("TODO(16.allreduce): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 16.bisection


def bisection_gb_s(n_gpus: int, gpu_gb_s: float, want: str) -> float:
    """Bisection bandwidth, GB/s, of `n_gpus` (even) GPUs on a non-blocking switch, each sending gpu_gb_s
    per direction: the most that can cross the worst cut into two halves of n_gpus/2, in convention `want`
    ("per-direction": one way across the cut; "bidirectional": both ways summed, as NVIDIA reports it)."""
    raise NotImplementedError("TODO(16.bisection): not implemented yet")


def domain_bisection_gb_s(node: str, want: str) -> float:
    """Bisection bandwidth of the NVLink domain of catalogue node `node`, in convention `want`."""
    raise NotImplementedError("TODO(16.bisection): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 16.tp_domain: a TP group is ranks [g*tp, (g+1)*tp); rank r lives in NVLink domain r // domain_gpus


def tp_fits(tp: int, domain_gpus: int) -> bool:
    """True if every TP group of `tp` consecutive ranks lies inside one NVLink domain of `domain_gpus`."""
    raise NotImplementedError("TODO(16.tp_domain): not implemented yet")


def tp_groups_crossing(world: int, tp: int, domain_gpus: int) -> list[int]:
    """Indices g (ascending) of the TP groups [g*tp, (g+1)*tp) that span more than one NVLink domain, for
    `world` ranks (a multiple of tp)."""
    raise NotImplementedError("TODO(16.tp_domain): not implemented yet")


def max_tp_degree(domain_gpus: int, n_heads: int) -> int:
    """The largest TP degree whose groups stay inside one NVLink domain of `domain_gpus` and that splits
    `n_heads` attention heads evenly (Megatron-LM asserts n_heads % tp == 0)."""
    raise NotImplementedError("TODO(16.tp_domain): not implemented yet")


def tp_layer_comm_time_s(
    seq: int,
    batch: int,
    hidden: int,
    tp: int,
    domain_gpus: int,
    nvlink_gb_s: float,
    nic_gb_s: float,
    bytes_per_elem: int = 2,
) -> float:
    """Seconds one transformer layer spends in tensor-parallel all-reduces for one micro-batch, forward and
    backward, as Megatron-LM's tensor parallelism does them (Shoeybi et al. 2019, §3; count them in
    megatron/core/tensor_parallel/mappings.py): ring all-reduces of the layer's (seq, batch, hidden)
    activations, `bytes_per_elem` bytes per element, over the tp GPUs. A ring runs at nvlink_gb_s when the TP
    groups fit in an NVLink domain (`tp_fits`), else at nic_gb_s: a ring is as fast as its slowest hop.
    Bandwidth only, rates per direction. tp = 1: 0.0."""
    raise NotImplementedError("TODO(16.tp_domain): not implemented yet")
