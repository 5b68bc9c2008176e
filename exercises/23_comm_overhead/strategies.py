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
    raise NotImplementedError("TODO(23.dp): not implemented yet")


def bucket_ready_s(sizes: list[float], backward_s: float) -> list[float]:
    """When each bucket's gradients are all computed, in seconds from the start of backward. Backward
    produces gradient bytes at a steady rate over `backward_s`, in the bucket order given."""
    raise NotImplementedError("TODO(23.dp): not implemented yet")


def overlap(comm_s: list[float], ready_s: list[float], compute_s: float) -> dict[str, float]:
    """One communication stream (NCCL runs a process group's collectives in order): item i starts when it is
    ready and the item before it has finished, and runs comm_s[i]. Compute ends at `compute_s`.
    {"total_s": all communication, "exposed_s": how long the last item finishes after compute, or 0}."""
    raise NotImplementedError("TODO(23.dp): not implemented yet")


def dp_allreduce(
    grad_bytes: float, backward_s: float, cluster: Cluster, size: int, stride: int,
    bucket_bytes: float = DDP_BUCKET_BYTES, latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """DDP's gradient all-reduce over the DP group (`size` ranks `stride` apart), bucket by bucket, each
    bucket a collective_s("all_reduce", ...), overlapped with a backward of `backward_s`.
    {"buckets", "total_s", "exposed_s"}."""
    raise NotImplementedError("TODO(23.dp): not implemented yet")


def dp_critical_tokens_per_gpu(cluster: Cluster, size: int, stride: int) -> float:
    """Tokens per DP rank at which backward (at cluster.peak_flops) lasts exactly as long as the
    bandwidth-only gradient all-reduce of bf16 gradients over the group (`size` ranks `stride` apart): above
    it, the all-reduce can hide (jax-ml/scaling-book gpus.md, "B/X > C/W_collective"; Kaplan et al. 2020,
    arXiv 2001.08361, §2.1, for the flops)."""
    raise NotImplementedError("TODO(23.dp): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 23.tp: Megatron's all-reduces, on the critical path


def tp_collectives_per_layer(sequence_parallel: bool, recompute: str) -> dict[str, int]:
    """{collective name: how many} one transformer layer issues per micro-batch over its TP group
    (Megatron-LM mappings.py, f and g): "all_reduce" without sequence parallelism; "all_gather" and
    "reduce_scatter" with it (Korthikanti et al. 2022, §4.2.2). Forward, backward, and under
    recompute == "full" the forward that backward runs again."""
    raise NotImplementedError("TODO(23.tp): not implemented yet")


def tp_step(
    seq_len: int, micro_batch: int, dim: int, layers: int, microbatches: int, cluster: Cluster, tp: int,
    sequence_parallel: bool = False, recompute: str = "none", latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """TP communication of one GPU in one step: every collective of tp_collectives_per_layer in each
    of `layers` layers and `microbatches` micro-batches, over the TP group (tp consecutive ranks), on bf16
    (seq_len, micro_batch, dim) activations. {"message_bytes": the bytes of one such collective's buffer,
    "total_s", "exposed_s"}: nothing hides TP traffic in this model."""
    raise NotImplementedError("TODO(23.tp): not implemented yet")


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
    raise NotImplementedError("TODO(23.pp): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 23.ep: token dispatch and combine


def ep_dispatch_bytes(tokens: int, dim: int, top_k: int, bytes_per_elem: float) -> float:
    """Bytes one GPU hands to one dispatch (or combine) all-to-all: its `tokens` tokens, each routed
    to its top_k experts, as dim-wide vectors of bytes_per_elem each. An upper bound: tokens going to
    several experts on one GPU or node are not de-duplicated (DeepEP README)."""
    raise NotImplementedError("TODO(23.ep): not implemented yet")


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
    raise NotImplementedError("TODO(23.ep): not implemented yet")
