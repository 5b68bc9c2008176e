"""Communication per training step, strategy by strategy, and what is left exposed after overlap.

DP: one all-reduce of the gradients per step, in buckets launched as backward produces them, so all but the
    tail hides behind backward (PyTorch DDP, Li et al. 2020, arXiv 2006.15704, §3.2).
TP: 4 all-reduces of the (s, b, h) activations per layer and micro-batch, 2 forward + 2 backward (Megatron-LM
    mappings.py), on the critical path: nothing hides them.
PP: one activation forward and one gradient backward per micro-batch and stage boundary; the step waits for
    the (m + p - 2) hops on the critical path each way (jax-ml/scaling-book gpus.md, "Pipeline Parallelism").
EP: dispatch + combine all-to-alls per MoE layer and micro-batch, forward and backward (DeepEP README).
Check: `grade exercise 23`. Symbols: s seq_len, b micro_batch, h dim, m micro-batches, p pipeline stages.
"""

from __future__ import annotations

from collective_time import collective_s, send_s

from coursekit.cluster import Cluster

BF16 = 2  # bytes per activation and per gradient element
DDP_BUCKET_BYTES = 25 * 2**20  # torch/nn/parallel/distributed.py: bucket_cap_mb=25 (MiB)

# ------------------------------------------------------------------------------------------------------------
# 23.dp: bucketed gradient all-reduce, overlapped with backward


def bucket_sizes(grad_bytes: float, bucket_bytes: float) -> list[float]:
    """Gradients cut into buckets of `bucket_bytes` in the order backward produces them; the last bucket
    takes what is left. No gradients: no buckets."""
    sizes = []
    left = grad_bytes
    while left > 0:
        sizes.append(min(bucket_bytes, left))
        left -= bucket_bytes
    return sizes


def bucket_ready_s(sizes: list[float], backward_s: float) -> list[float]:
    """When each bucket's gradients are all computed: backward produces gradient bytes at a steady rate over
    `backward_s`, so bucket i is ready at backward_s x (bytes of buckets 0..i) / (all bytes)."""
    total = sum(sizes)
    done = 0.0
    ready = []
    for size in sizes:
        done += size
        ready.append(backward_s * done / total)
    return ready


def overlap(comm_s: list[float], ready_s: list[float], compute_s: float) -> dict[str, float]:
    """One communication stream (NCCL runs a process group's collectives in order): item i starts when it is
    ready and the item before it has finished, and runs comm_s[i]. Compute ends at `compute_s`.
    {"total_s": all communication, "exposed_s": how long the last item finishes after compute, or 0}."""
    finish = 0.0
    for c, r in zip(comm_s, ready_s, strict=True):
        finish = max(finish, r) + c
    exposed = max(0.0, finish - compute_s) if comm_s else 0.0
    return {"total_s": float(sum(comm_s)), "exposed_s": exposed}


def dp_allreduce(
    grad_bytes: float, backward_s: float, cluster: Cluster, size: int, stride: int,
    bucket_bytes: float = DDP_BUCKET_BYTES, latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """DDP's gradient all-reduce over the DP group (`size` ranks `stride` apart), bucket by bucket, each
    bucket a collective_s("all_reduce", ...), overlapped with a backward of `backward_s`.
    {"buckets", "total_s", "exposed_s"}."""
    sizes = bucket_sizes(grad_bytes, bucket_bytes)
    comm = [collective_s("all_reduce", x, cluster, size, stride, latency) for x in sizes]
    result = overlap(comm, bucket_ready_s(sizes, backward_s), backward_s)
    return {"buckets": len(sizes), **result}


def dp_critical_tokens_per_gpu(cluster: Cluster, size: int, stride: int) -> float:
    """Tokens per DP rank above which the gradient all-reduce fits under backward, bandwidth only: backward
    costs 4 flops per parameter per token at cluster.peak_flops; the all-reduce moves 2 bytes per parameter
    (scaling book gpus.md, "B/X > C/W_collective": about 2200 in a node, 2475 across nodes)."""
    params = 1e9  # any count: both sides scale with it
    allreduce = collective_s("all_reduce", BF16 * params, cluster, size, stride, latency=False)
    backward_per_token = 4 * params / cluster.peak_flops
    return allreduce / backward_per_token


# ------------------------------------------------------------------------------------------------------------
# 23.tp: Megatron's all-reduces, on the critical path


def tp_collectives_per_layer(sequence_parallel: bool, recompute: str) -> dict[str, int]:
    """Collectives one transformer layer issues per micro-batch over its TP group. Without SP: all-reduces,
    2 forward (after attention, after the MLP) + 2 backward. With SP each becomes an all-gather before and a
    reduce-scatter after the block. Full recomputation runs the forward again inside backward."""
    passes = 2 + 2 + (2 if recompute == "full" else 0)  # forward, backward, the forward again
    if sequence_parallel:
        return {"all_gather": passes, "reduce_scatter": passes}
    return {"all_reduce": passes}


def tp_step(
    seq_len: int, micro_batch: int, dim: int, layers: int, microbatches: int, cluster: Cluster, tp: int,
    sequence_parallel: bool = False, recompute: str = "none", latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """TP communication of one GPU in one step: `layers` layers x `microbatches` micro-batches x the
    collectives of tp_collectives_per_layer, each on the whole (s, b, h) bf16 activation, over the TP group
    (tp consecutive ranks). {"message_bytes", "total_s", "exposed_s"}: all of it is exposed."""
    message = BF16 * seq_len * micro_batch * dim
    per_layer = 0.0
    for op, count in tp_collectives_per_layer(sequence_parallel, recompute).items():
        per_layer += count * collective_s(op, message, cluster, tp, 1, latency)
    total = per_layer * layers * microbatches
    return {"message_bytes": message, "total_s": total, "exposed_s": total}


# ------------------------------------------------------------------------------------------------------------
# 23.pp: activations forward, gradients backward, between neighbouring stages


def pp_step(
    seq_len: int, micro_batch: int, dim: int, pp: int, microbatches: int, cluster: Cluster, stride: int,
    latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """Point-to-point traffic of a pipeline of `pp` stages `stride` ranks apart. One hop = one send_s of a
    bf16 (s, b, h) tensor. total_s: what one middle stage sends (m activations + m gradients). exposed_s:
    the hops on the step's critical path, (m + p - 2) forward and as many backward. One stage: zeros."""
    if pp <= 1:
        return {"total_s": 0.0, "exposed_s": 0.0}
    hop = send_s(BF16 * seq_len * micro_batch * dim, cluster, stride, latency)
    return {"total_s": 2 * microbatches * hop, "exposed_s": 2 * (microbatches + pp - 2) * hop}


# ------------------------------------------------------------------------------------------------------------
# 23.ep: token dispatch and combine


def ep_dispatch_bytes(tokens: int, dim: int, top_k: int, bytes_per_elem: float) -> float:
    """Bytes one GPU hands to a dispatch (or combine) all-to-all: each of its `tokens` goes to top_k experts
    as a dim-wide vector. An upper bound: no de-duplication of experts on the same GPU or node."""
    return tokens * top_k * dim * bytes_per_elem


def ep_step(
    tokens: int, dim: int, top_k: int, moe_layers: int, microbatches: int, cluster: Cluster, ep: int,
    stride: int, recompute: str = "none", dispatch_bytes: float = BF16, combine_bytes: float = BF16,
    latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """All-to-alls of one GPU in one step over the EP group (`ep` ranks `stride` apart), `tokens` per
    micro-batch: per MoE layer a dispatch and a combine forward, and their mirror images backward (the
    combine's backward is a dispatch, in combine's precision, and vice versa); full recomputation repeats
    the forward pair. {"total_s", "exposed_s"}: all exposed."""

    def a2a(bytes_per_elem: float) -> float:
        nbytes = ep_dispatch_bytes(tokens, dim, top_k, bytes_per_elem)
        return collective_s("all_to_all", nbytes, cluster, ep, stride, latency)

    # forward: dispatch + combine; backward: the mirror of each, in the same precisions
    rounds = 3 if recompute == "full" else 2
    total = moe_layers * microbatches * rounds * (a2a(dispatch_bytes) + a2a(combine_bytes))
    return {"total_s": total, "exposed_s": total}
