"""One training step of a whole plan: every strategy's communication, and what overlap leaves exposed.

A plan is a dict: tp, pp, dp, ep (EP groups are carved out of DP), zero_stage, micro_batch_size,
num_microbatches, recompute. Ranks are laid out Megatron's way, TP fastest, then DP, then PP: the TP group is
tp consecutive ranks, the DP group dp ranks tp apart, pipeline neighbours tp x dp apart; an EP group is ep
consecutive DP ranks (stride tp) and the expert-data-parallel group the dp/ep ranks tp x ep apart.
Check: `grade exercise 23`.
"""

from __future__ import annotations

from collective_time import collective_s
from strategies import (
    BF16,
    DDP_BUCKET_BYTES,
    bucket_ready_s,
    bucket_sizes,
    ep_step,
    overlap,
    pp_step,
    tp_step,
)

from coursekit.cluster import Cluster
from coursekit.models import ModelSpec

STRATEGIES = ("dp", "tp", "pp", "ep")
COMM_KEYS = ("total_s", "exposed_s")


def backward_share(recompute: str) -> float:
    """Backward's share of a micro-batch's compute: 4 of the 6 flops per parameter and token (Kaplan et al.
    2020, §2.1: forward 2N, backward 4N), or 6 of 8 when the recomputed forward runs in backward. Given."""
    return 6 / 8 if recompute == "full" else 4 / 6


# ------------------------------------------------------------------------------------------------------------
# 23.step


def dp_step(
    model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int, *, compute_s: float,
    bucket_bytes: float = DDP_BUCKET_BYTES, latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """The data-parallel traffic of one GPU of the busiest stage in one step, {"total_s",
    "exposed_s"}: the bf16 gradients of its dense parameters over the DP group, and of its routed experts
    over the expert-data-parallel group (the layout above), after TP and EP have split them.
    zero_stage 0-2: DDP's buckets of `bucket_bytes` (dense first), each a collective_s("all_reduce", ...),
    overlapped as in dp_allreduce with the backward that produces the step's final gradients (a
    reduce-scatter + all-gather costs what the all-reduce costs). zero_stage 3: the weight gathers and
    gradient reduce-scatter that ZeRO-3 needs around every micro-batch, layer by layer (Ultra-Scale
    Playbook, "ZeRO-3"), each micro-batch hiding what it can behind its own compute.
    compute_s: seconds of compute of the whole step on one GPU (exercise 21's step_time["compute_s"]; the
    judge passes it in); backward_share splits a micro-batch's compute."""
    pp, tp, dp, ep, m = plan["pp"], plan["tp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    layers = -(-model.n_layers // pp)
    dense_grads = BF16 * model.dense_params * layers / model.n_layers / tp
    expert_grads = BF16 * model.expert_params * layers / model.n_layers / (tp * ep)
    streams = [(g, n, st) for g, n, st in ((dense_grads, dp, tp), (expert_grads, dp // ep, tp * ep)) if g > 0]
    one_mb = compute_s / m
    if plan["zero_stage"] == 3:
        per_mb = sum(
            layers * (2 * collective_s("all_gather", g / layers, cluster, n, st, latency)
                      + collective_s("reduce_scatter", g / layers, cluster, n, st, latency))
            for g, n, st in streams
        )  # fmt: skip
        return {"total_s": per_mb * m, "exposed_s": max(per_mb - one_mb, 0.0) * m}
    sizes, times = [], []
    for g, n, st in streams:
        for bucket in bucket_sizes(g, bucket_bytes):
            sizes.append(bucket)
            times.append(collective_s("all_reduce", bucket, cluster, n, st, latency))
    if not sizes:
        return {"total_s": 0.0, "exposed_s": 0.0}
    backward = one_mb * backward_share(plan["recompute"])
    return overlap(times, bucket_ready_s(sizes, backward), backward)


def step_comm(
    model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int, *, compute_s: float,
    bucket_bytes: float = DDP_BUCKET_BYTES, latency: bool = True,
) -> dict:  # fmt: skip
    """Every strategy's communication in one step on the busiest GPU: {"dp", "tp", "pp", "ep"}, each
    {"total_s", "exposed_s"} (only those two keys), plus "compute_s" (the argument, returned as given) and
    "exposed_s" (the four exposed times summed). Sequence parallelism is on whenever tp > 1, so each TP rank
    holds seq_len / tp of every sequence, and that slice is all it sends between stages and dispatches to
    experts (bf16 both ways, every MoE layer of its stage). A dense model or ep = 1 has no EP traffic.
    ValueError unless tp x pp x dp = cluster.world and ep divides dp."""
    tp, pp, dp, ep = (plan[k] for k in ("tp", "pp", "dp", "ep"))
    if dp % ep != 0 or tp * pp * dp != cluster.world:
        raise ValueError(f"plan {plan} does not fit {cluster.world} GPUs")
    b, m, rc = plan["micro_batch_size"], plan["num_microbatches"], plan["recompute"]
    layers = -(-model.n_layers // pp)
    local_seq = seq_len // tp  # sequence parallelism whenever tp > 1
    parts = {
        "dp": dp_step(model, cluster, plan, seq_len, compute_s=compute_s, bucket_bytes=bucket_bytes,
                      latency=latency),
        "tp": tp_step(seq_len, b, model.dim, layers, m, cluster, tp, tp > 1, rc, latency),
        "pp": pp_step(local_seq, b, model.dim, pp, m, cluster, tp * dp, latency),
        "ep": {"total_s": 0.0, "exposed_s": 0.0},
    }  # fmt: skip
    if model.is_moe and ep > 1:
        moe_here = -(-model.moe_layers // pp)
        parts["ep"] = ep_step(seq_len * b // tp, model.dim, model.top_k, moe_here, m, cluster, ep, tp, rc,
                              latency=latency)  # fmt: skip
    out = {k: {"total_s": v["total_s"], "exposed_s": v["exposed_s"]} for k, v in parts.items()}
    out["compute_s"] = compute_s
    out["exposed_s"] = sum(v["exposed_s"] for v in parts.values())
    return out
