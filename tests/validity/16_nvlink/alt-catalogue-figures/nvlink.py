"""NVLink and NVSwitch, reading the catalogue's per-direction GPU figure (alternative-correct case)."""

from __future__ import annotations

import math

from coursekit.hardware import PER_DIRECTION, load

GB = 10**9  # bytes in a decimal gigabyte


def to_convention(gb_s: float, quoted: str, want: str) -> float:
    """A bandwidth `gb_s` quoted in convention `quoted`, expressed in convention `want`."""
    if quoted == want:
        return gb_s
    return gb_s * 2 if quoted == PER_DIRECTION else gb_s / 2


def nvlink_gpu_gb_s(generation: str, want: str, links: int | None = None) -> float:
    """NVLink bandwidth of one GPU in convention `want`, over `links` links of `generation`."""
    gen = load().nvlink[generation]
    one_link = to_convention(gen.per_link_gb_s, gen.convention, want)
    return one_link * (gen.links_per_gpu if links is None else links)


def p2p_time_s(nbytes: float, generation: str, links: int | None = None) -> float:
    """Seconds to copy `nbytes` over `links` NVLink links of `generation`, bandwidth only."""
    return nbytes / GB / nvlink_gpu_gb_s(generation, PER_DIRECTION, links)


def ring_allreduce_time_s(nbytes: float, p: int, gpu_gb_s: float, alpha_s: float = 0.0) -> float:
    """Ring all-reduce over p GPUs on a non-blocking switch."""
    steps = 2 * (p - 1)
    if steps == 0:
        return 0.0
    return steps * alpha_s + steps * (nbytes / p) / (gpu_gb_s * GB)


def nvls_allreduce_time_s(nbytes: float, gpu_gb_s: float) -> float:
    """In-switch reduction: send once, receive once, both directions at the same time."""
    return nbytes / (gpu_gb_s * GB)


def domain_allreduce_time_s(nbytes: float, node: str) -> float:
    """Ring all-reduce over the whole NVLink domain of `node`."""
    hw = load()
    n = hw.nodes[node]
    return ring_allreduce_time_s(nbytes, n.nvlink_domain_gpus, hw.gpus[n.gpu].nvlink_gb_s)


def two_level_allreduce_time_s(
    nbytes: float, domains: int, gpus_per_domain: int, nvlink_gb_s: float, nic_gb_s: float
) -> float:
    """Reduce-scatter in the domain, all-reduce the shard across domains, all-gather in the domain."""
    g = gpus_per_domain
    # reduce-scatter + all-gather inside the domain together cost what one ring all-reduce costs
    inside = ring_allreduce_time_s(nbytes, g, nvlink_gb_s) if g > 1 else 0.0
    across = ring_allreduce_time_s(nbytes / g, domains, nic_gb_s) if domains > 1 else 0.0
    return inside + across


def bisection_gb_s(n_gpus: int, gpu_gb_s: float, want: str) -> float:
    """What crosses a cut into two halves, in `want`."""
    return to_convention(n_gpus / 2 * gpu_gb_s, PER_DIRECTION, want)


def domain_bisection_gb_s(node: str, want: str) -> float:
    """Bisection bandwidth of the NVLink domain of `node`."""
    hw = load()
    n = hw.nodes[node]
    return bisection_gb_s(n.nvlink_domain_gpus, hw.gpus[n.gpu].nvlink_gb_s, want)


def tp_fits(tp: int, domain_gpus: int) -> bool:
    """Every TP group inside one domain."""
    return domain_gpus % tp == 0


def tp_groups_crossing(world: int, tp: int, domain_gpus: int) -> list[int]:
    """TP groups that span more than one domain."""
    return [g for g in range(world // tp) if (g * tp) // domain_gpus != ((g + 1) * tp - 1) // domain_gpus]


def max_tp_degree(domain_gpus: int, n_heads: int) -> int:
    """Largest tp that divides both the domain and the heads."""
    return math.gcd(domain_gpus, n_heads)


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
    """Four ring all-reduces of the activations per layer, forward and backward."""
    bw = nvlink_gb_s if tp_fits(tp, domain_gpus) else nic_gb_s
    return 4 * ring_allreduce_time_s(seq * batch * hidden * bytes_per_elem, tp, bw)
