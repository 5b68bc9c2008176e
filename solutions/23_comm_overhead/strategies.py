"""Communication per training step, strategy by strategy, and what is left exposed after overlap.

DP: DDP's bucketed gradient all-reduce, launched while backward runs (Li et al. 2020, arXiv 2006.15704, §3.2).
TP: Megatron-LM's collectives inside every layer (megatron/core/tensor_parallel/mappings.py).
PP: activations forward and gradients backward between neighbouring stages (jax-ml/scaling-book gpus.md,
    "Pipeline Parallelism").
EP: token dispatch and combine all-to-alls around every MoE layer (DeepEP README).
Check: `grade exercise 23`. Symbols: s seq_len, b micro_batch, h dim, m micro-batches, p pipeline stages.
"""

from __future__ import annotations

from itertools import accumulate

from collective_time import collective_s, send_s

from coursekit.cluster import Cluster

BF16 = 2  # bytes per activation and per gradient element
DDP_BUCKET_BYTES = 25 * 2**20  # torch/nn/parallel/distributed.py: bucket_cap_mb=25 (MiB)

# ------------------------------------------------------------------------------------------------------------
# 23.dp: bucketed gradient all-reduce, overlapped with backward


def bucket_sizes(grad_bytes: float, bucket_bytes: float) -> list[float]:
    """Gradients cut into buckets of `bucket_bytes` in the order backward produces them; the last bucket
    takes what is left. No gradients: no buckets."""
    ### BEGIN SOLUTION 23.dp
    full, rest = divmod(grad_bytes, bucket_bytes)
    return [float(bucket_bytes)] * int(full) + ([rest] if rest > 0 else [])
    ### END SOLUTION


def bucket_ready_s(sizes: list[float], backward_s: float) -> list[float]:
    """When each bucket's gradients are all computed, in seconds from the start of backward. Backward
    produces gradient bytes at a steady rate over `backward_s`, in the bucket order given."""
    ### BEGIN SOLUTION 23.dp
    total = sum(sizes)
    return [backward_s * done / total for done in accumulate(sizes)]
    ### END SOLUTION


def overlap(comm_s: list[float], ready_s: list[float], compute_s: float) -> dict[str, float]:
    """One communication stream (NCCL runs a process group's collectives in order): item i starts when it is
    ready and the item before it has finished, and runs comm_s[i]. Compute ends at `compute_s`.
    {"total_s": all communication, "exposed_s": how long the last item finishes after compute, or 0}."""
    ### BEGIN SOLUTION 23.dp
    end = 0.0
    for took, ready in zip(comm_s, ready_s, strict=True):
        end = max(end, ready) + took  # waits for its gradients AND for the stream
    return {"total_s": sum(comm_s), "exposed_s": max(0.0, end - compute_s)}
    ### END SOLUTION


def dp_allreduce(
    grad_bytes: float, backward_s: float, cluster: Cluster, size: int, stride: int,
    bucket_bytes: float = DDP_BUCKET_BYTES, latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """DDP's gradient all-reduce over the DP group (`size` ranks `stride` apart), bucket by bucket, each
    bucket a collective_s("all_reduce", ...), overlapped with a backward of `backward_s`.
    {"buckets", "total_s", "exposed_s"}."""
    ### BEGIN SOLUTION 23.dp
    sizes = bucket_sizes(grad_bytes, bucket_bytes)
    comm = [collective_s("all_reduce", b, cluster, size, stride, latency) for b in sizes]
    return {"buckets": len(sizes), **overlap(comm, bucket_ready_s(sizes, backward_s), backward_s)}
    ### END SOLUTION


def dp_critical_tokens_per_gpu(cluster: Cluster, size: int, stride: int) -> float:
    """Tokens per DP rank at which backward (at cluster.peak_flops) lasts exactly as long as the
    bandwidth-only gradient all-reduce of bf16 gradients over the group (`size` ranks `stride` apart): above
    it, the all-reduce can hide (jax-ml/scaling-book gpus.md, "B/X > C/W_collective"; Kaplan et al. 2020,
    arXiv 2001.08361, §2.1, for the flops)."""
    ### BEGIN SOLUTION 23.dp
    # per parameter: all-reduce of 2 bytes vs 4 x tokens flops of backward; equal at the critical batch
    per_param_s = collective_s("all_reduce", BF16, cluster, size, stride, latency=False)
    return per_param_s * cluster.peak_flops / 4
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 23.tp: Megatron's all-reduces, on the critical path


def tp_collectives_per_layer(sequence_parallel: bool, recompute: str) -> dict[str, int]:
    """{collective name: how many} one transformer layer issues per micro-batch over its TP group
    (Megatron-LM mappings.py, f and g): "all_reduce" without sequence parallelism; "all_gather" and
    "reduce_scatter" with it (Korthikanti et al. 2022, §4.2.2). Forward, backward, and under
    recompute == "full" the forward that backward runs again."""
    ### BEGIN SOLUTION 23.tp
    passes = 2 if recompute == "full" else 1  # forward passes: 1, or 2 with the recomputed one
    per_pass = 2  # two blocks (attention, MLP), one g in forward and one f in backward each
    count = per_pass * passes + per_pass  # forward(s) + backward
    if sequence_parallel:
        return {"all_gather": count, "reduce_scatter": count}  # same bytes as the all-reduces they replace
    return {"all_reduce": count}
    ### END SOLUTION


def tp_step(
    seq_len: int, micro_batch: int, dim: int, layers: int, microbatches: int, cluster: Cluster, tp: int,
    sequence_parallel: bool = False, recompute: str = "none", latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """TP communication of one GPU in one step: every collective of tp_collectives_per_layer in each
    of `layers` layers and `microbatches` micro-batches, over the TP group (tp consecutive ranks), on bf16
    (seq_len, micro_batch, dim) activations. {"message_bytes": the bytes of one such collective's buffer,
    "total_s", "exposed_s"}: nothing hides TP traffic in this model."""
    ### BEGIN SOLUTION 23.tp
    message = seq_len * micro_batch * dim * BF16  # 134 MB for 70B at s = 8192, b = 1
    per_layer = sum(
        count * collective_s(op, message, cluster, tp, 1, latency)
        for op, count in tp_collectives_per_layer(sequence_parallel, recompute).items()
    )
    total = per_layer * layers * microbatches
    return {"message_bytes": message, "total_s": total, "exposed_s": total}
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 23.pp: activations forward, gradients backward, between neighbouring stages


def pp_step(
    seq_len: int, micro_batch: int, dim: int, pp: int, microbatches: int, cluster: Cluster, stride: int,
    latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """Point-to-point traffic of a pipeline of `pp` stages `stride` ranks apart, one hop being a
    send_s of a bf16 (seq_len, micro_batch, dim) tensor. {"hop_bytes", "hop_s": one hop, "total_s": what one
    middle stage sends in the step, "exposed_s": the hops on the step's critical path, forward and backward
    (1F1B; scaling book, "Pipeline Parallelism")}. One stage sends nothing: zero seconds."""
    ### BEGIN SOLUTION 23.pp
    hop_bytes = seq_len * micro_batch * dim * BF16
    if pp == 1:
        return {"hop_bytes": hop_bytes, "hop_s": 0.0, "total_s": 0.0, "exposed_s": 0.0}
    hop = send_s(hop_bytes, cluster, stride, latency)
    # scaling book: "T_comms per hop = 2BD/(W N_MB) and N_MB + N_stages - 2 hops"; backward mirrors it
    return {
        "hop_bytes": hop_bytes,
        "hop_s": hop,
        "total_s": 2 * microbatches * hop,
        "exposed_s": 2 * (microbatches + pp - 2) * hop,
    }
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 23.ep: token dispatch and combine


def ep_dispatch_bytes(tokens: int, dim: int, top_k: int, bytes_per_elem: float) -> float:
    """Bytes one GPU hands to one dispatch (or combine) all-to-all: its `tokens` tokens, each routed
    to its top_k experts, as dim-wide vectors of bytes_per_elem each. An upper bound: tokens going to
    several experts on one GPU or node are not de-duplicated (DeepEP README)."""
    ### BEGIN SOLUTION 23.ep
    return tokens * top_k * dim * bytes_per_elem
    ### END SOLUTION


def ep_step(
    tokens: int, dim: int, top_k: int, moe_layers: int, microbatches: int, cluster: Cluster, ep: int,
    stride: int, recompute: str = "none", dispatch_bytes: float = BF16, combine_bytes: float = BF16,
    latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """All-to-alls of one GPU in one step over the EP group (`ep` ranks `stride` apart), `tokens`
    tokens per micro-batch: dispatch and combine around every MoE layer, in forward and in backward, and
    again in the recomputed forward under recompute == "full" (DeepEP README). Dispatch sends
    dispatch_bytes per element and combine combine_bytes; a backward pass reverses each one's direction.
    {"total_s", "exposed_s"}: nothing hides them in this model."""
    ### BEGIN SOLUTION 23.ep
    a2a = {}  # seconds of one all-to-all, by bytes per element
    for precision in (dispatch_bytes, combine_bytes):
        size = ep_dispatch_bytes(tokens, dim, top_k, precision)
        a2a[precision] = collective_s("all_to_all", size, cluster, ep, stride, latency)
    forward = a2a[dispatch_bytes] + a2a[combine_bytes]
    backward = a2a[combine_bytes] + a2a[dispatch_bytes]  # gradients flow back through both, reversed
    per_layer = forward * (2 if recompute == "full" else 1) + backward
    total = per_layer * moe_layers * microbatches
    return {"total_s": total, "exposed_s": total}
    ### END SOLUTION
