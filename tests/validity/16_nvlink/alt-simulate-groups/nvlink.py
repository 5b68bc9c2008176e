"""NVLink arithmetic by hand, TP groups checked by walking ranks (alternative-correct case)."""

from __future__ import annotations

from coursekit.hardware import BIDIRECTIONAL, PER_DIRECTION, load

GB = 10**9  # bytes in a decimal gigabyte
_FACTOR = {PER_DIRECTION: 1.0, BIDIRECTIONAL: 2.0}  # how many directions a figure sums


def to_convention(gb_s: float, quoted: str, want: str) -> float:
    """A bandwidth `gb_s` quoted in convention `quoted`, expressed in convention `want`."""
    if quoted not in _FACTOR or want not in _FACTOR:
        raise ValueError(f"unknown convention: {quoted!r} or {want!r}")
    one_way = gb_s / _FACTOR[quoted]
    return one_way * _FACTOR[want]


def nvlink_gpu_gb_s(generation: str, want: str, links: int | None = None) -> float:
    """NVLink bandwidth of one GPU in convention `want`."""
    gen = load().nvlink[generation]
    n = gen.links_per_gpu if links is None else links
    per_link = to_convention(gen.per_link_gb_s, gen.convention, want)
    return per_link * n


def p2p_time_s(nbytes: float, generation: str, links: int | None = None) -> float:
    """Seconds for a one-way copy."""
    rate = nvlink_gpu_gb_s(generation, PER_DIRECTION, links) * 1e9
    return nbytes / rate


def ring_allreduce_time_s(nbytes: float, p: int, gpu_gb_s: float, alpha_s: float = 0.0) -> float:
    """Ring all-reduce: reduce-scatter then all-gather, each p-1 steps of nbytes/p."""
    total = 0.0
    for _phase in ("reduce-scatter", "all-gather"):
        total += (p - 1) * (alpha_s + nbytes / p / (gpu_gb_s * 1e9))
    return total


def nvls_allreduce_time_s(nbytes: float, gpu_gb_s: float) -> float:
    """Switch-side reduction: the upload and the download overlap, one buffer each way."""
    return nbytes / gpu_gb_s / 1e9


def _node_domain(node: str) -> tuple[int, float]:
    hw = load()
    n = hw.nodes[node]
    gpu = hw.gpus[n.gpu]
    if gpu.nvlink is None:
        return n.nvlink_domain_gpus, 0.0
    return n.nvlink_domain_gpus, nvlink_gpu_gb_s(gpu.nvlink, PER_DIRECTION, gpu.nvlink_links)


def domain_allreduce_time_s(nbytes: float, node: str) -> float:
    """Ring all-reduce over the node's NVLink domain."""
    p, bw = _node_domain(node)
    if p == 1:
        return 0.0
    return ring_allreduce_time_s(nbytes, p, bw)


def two_level_allreduce_time_s(
    nbytes: float, domains: int, gpus_per_domain: int, nvlink_gb_s: float, nic_gb_s: float
) -> float:
    """Three phases, summed."""
    g, d = gpus_per_domain, domains
    phase = (g - 1) / g * nbytes / (nvlink_gb_s * GB)  # reduce-scatter (and again: all-gather)
    shard = nbytes / g
    cross = 2 * (d - 1) / d * shard / (nic_gb_s * GB)
    return phase + cross + phase


def bisection_gb_s(n_gpus: int, gpu_gb_s: float, want: str) -> float:
    """Bisection bandwidth in `want`."""
    half = n_gpus // 2
    one_way = half * gpu_gb_s
    return one_way if want == PER_DIRECTION else to_convention(one_way, PER_DIRECTION, want)


def domain_bisection_gb_s(node: str, want: str) -> float:
    """Bisection of the node's NVLink domain."""
    p, bw = _node_domain(node)
    return bisection_gb_s(p, bw, want)


def _domain(rank: int, domain_gpus: int) -> int:
    return rank // domain_gpus


def tp_groups_crossing(world: int, tp: int, domain_gpus: int) -> list[int]:
    """Walk every group and compare the domains of its ranks."""
    out = []
    for g in range(world // tp):
        doms = {_domain(r, domain_gpus) for r in range(g * tp, (g + 1) * tp)}
        if len(doms) > 1:
            out.append(g)
    return out


def tp_fits(tp: int, domain_gpus: int) -> bool:
    """Check one full period of the two tilings (lcm ranks)."""
    a, b = tp, domain_gpus
    while b:
        a, b = b, a % b
    period = tp * domain_gpus // a
    return not tp_groups_crossing(period, tp, domain_gpus)


def max_tp_degree(domain_gpus: int, n_heads: int) -> int:
    """Search downward."""
    for t in range(min(domain_gpus, n_heads), 0, -1):
        if tp_fits(t, domain_gpus) and n_heads % t == 0:
            return t
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
    """2 forward + 2 backward all-reduces."""
    if tp == 1:
        return 0.0
    nbytes = seq * batch * hidden * bytes_per_elem
    bw = nvlink_gb_s if tp_fits(tp, domain_gpus) else nic_gb_s
    one = ring_allreduce_time_s(nbytes, tp, bw)
    return one + one + one + one
