"""Alternative-correct 16 (validity corpus): counted step by step instead of closed forms."""

from __future__ import annotations

import math

from coursekit.hardware import BIDIRECTIONAL, PER_DIRECTION, load

GB = 10**9
DUPLEX = {PER_DIRECTION: 1.0, BIDIRECTIONAL: 2.0}  # how many directions each convention counts


def to_convention(gb_s: float, quoted: str, want: str) -> float:
    return gb_s / DUPLEX[quoted] * DUPLEX[want]


def nvlink_gpu_gb_s(generation: str, want: str, links: int | None = None) -> float:
    gen = load().nvlink[generation]
    used = links if links is not None else gen.links_per_gpu
    total = 0.0
    for _ in range(used):
        total += to_convention(gen.per_link_gb_s, gen.convention, want)
    return total


def p2p_time_s(nbytes: float, generation: str, links: int | None = None) -> float:
    return nbytes / GB / nvlink_gpu_gb_s(generation, PER_DIRECTION, links)


def ring_allreduce_time_s(nbytes: float, p: int, gpu_gb_s: float, alpha_s: float = 0.0) -> float:
    chunk_s = nbytes / p / (gpu_gb_s * GB)
    steps = 2 * (p - 1)  # reduce-scatter, then all-gather
    return steps * (alpha_s + chunk_s)


def nvls_allreduce_time_s(nbytes: float, gpu_gb_s: float) -> float:
    up = nbytes / (gpu_gb_s * GB)  # to the switch
    down = nbytes / (gpu_gb_s * GB)  # the reduced buffer back, on the other direction at the same time
    return max(up, down)


def domain_allreduce_time_s(nbytes: float, node: str) -> float:
    hw = load()
    spec = hw.nodes[node]
    gpu = hw.gpus[spec.gpu]
    return ring_allreduce_time_s(
        nbytes, spec.nvlink_domain_gpus, nvlink_gpu_gb_s(gpu.nvlink, PER_DIRECTION, gpu.nvlink_links)
    )


def two_level_allreduce_time_s(
    nbytes: float, domains: int, gpus_per_domain: int, nvlink_gb_s: float, nic_gb_s: float
) -> float:
    g = gpus_per_domain
    reduce_scatter = (g - 1) * (nbytes / g) / (nvlink_gb_s * GB)
    across = ring_allreduce_time_s(nbytes / g, domains, nic_gb_s)
    all_gather = (g - 1) * (nbytes / g) / (nvlink_gb_s * GB)
    return reduce_scatter + across + all_gather


def bisection_gb_s(n_gpus: int, gpu_gb_s: float, want: str) -> float:
    left = range(n_gpus // 2)
    one_way = sum(gpu_gb_s for _ in left)
    return one_way * DUPLEX[want]


def domain_bisection_gb_s(node: str, want: str) -> float:
    hw = load()
    spec = hw.nodes[node]
    gpu = hw.gpus[spec.gpu]
    rate = nvlink_gpu_gb_s(gpu.nvlink, PER_DIRECTION, gpu.nvlink_links)
    return bisection_gb_s(spec.nvlink_domain_gpus, rate, want)


def _domains_of_group(g: int, tp: int, domain_gpus: int) -> set[int]:
    return {rank // domain_gpus for rank in range(g * tp, (g + 1) * tp)}


def tp_fits(tp: int, domain_gpus: int) -> bool:
    # the pattern of groups against domains repeats every lcm(tp, D) ranks: check one period
    period = math.lcm(tp, domain_gpus)
    return all(len(_domains_of_group(g, tp, domain_gpus)) == 1 for g in range(period // tp))


def tp_groups_crossing(world: int, tp: int, domain_gpus: int) -> list[int]:
    return [g for g in range(world // tp) if len(_domains_of_group(g, tp, domain_gpus)) > 1]


def max_tp_degree(domain_gpus: int, n_heads: int) -> int:
    for tp in range(min(domain_gpus, n_heads), 0, -1):
        if n_heads % tp == 0 and tp_fits(tp, domain_gpus):
            return tp
    return 1


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
    activation = seq * batch * hidden * bytes_per_elem
    rate = nvlink_gb_s if tp_fits(tp, domain_gpus) else nic_gb_s
    forward = 2 * ring_allreduce_time_s(activation, tp, rate)  # after attention, after the MLP
    backward = 2 * ring_allreduce_time_s(activation, tp, rate)
    return forward + backward
