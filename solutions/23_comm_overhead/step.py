"""One training step of a whole plan: every strategy's communication, and what overlap leaves exposed.

A plan is a dict: tp, pp, dp, ep (EP groups are carved out of DP), zero_stage, micro_batch_size,
num_microbatches, recompute. Ranks are laid out Megatron's way, TP fastest, then DP, then PP: the TP group is
tp consecutive ranks, the DP group dp ranks tp apart, pipeline neighbours tp x dp apart; an EP group is ep
consecutive DP ranks (stride tp) and the expert-data-parallel group the dp/ep ranks tp x ep apart.
Check: `grade exercise 23`.
"""

from __future__ import annotations

import math

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

from coursekit.budget import MFU, train_flops
from coursekit.cluster import Cluster
from coursekit.models import ModelSpec

STRATEGIES = ("dp", "tp", "pp", "ep")
COMM_KEYS = ("total_s", "exposed_s")


def compute_s(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> float:
    """Seconds of compute in one step on one GPU: train_flops of the global batch spread over every GPU at
    MFU x peak (coursekit.budget; exercise 21's step_time computes the same). Given."""
    tokens = plan["dp"] * plan["micro_batch_size"] * plan["num_microbatches"] * seq_len
    return train_flops(model.active_params, tokens, plan["recompute"]) / (
        cluster.world * cluster.peak_flops * MFU
    )


def backward_share(recompute: str) -> float:
    """Backward's share of a micro-batch's compute: 4 of the 6 flops per parameter and token (Kaplan et al.
    2020, §2.1: forward 2N, backward 4N), or 6 of 8 when the recomputed forward runs in backward. Given."""
    return 6 / 8 if recompute == "full" else 4 / 6


# ------------------------------------------------------------------------------------------------------------
# 23.step


def dp_step(
    model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int, bucket_bytes: float = DDP_BUCKET_BYTES,
    latency: bool = True,
) -> dict[str, float]:  # fmt: skip
    """The DP group's gradient traffic of one GPU in one step. Gradients: bf16, of the dense parameters of
    this GPU's stage (the busiest: ceil(L/pp) of the L layers) split by tp, all-reduced over the DP group;
    then those of its experts, split by tp x ep, over the expert-data-parallel group.
    zero_stage 0-2: both streams bucketed (dense first) and overlapped with the LAST micro-batch's backward,
    the only one whose gradients are final (a reduce-scatter + all-gather costs what the all-reduce costs).
    zero_stage 3: every micro-batch all-gathers the weights for forward, again for backward, and
    reduce-scatters the gradients, one layer at a time (3 x layers collectives per group); each micro-batch
    hides what it can behind its own compute. {"total_s", "exposed_s"}."""
    ### BEGIN SOLUTION 23.step
    tp, dp, ep, m = plan["tp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    layers = math.ceil(model.n_layers / plan["pp"])
    stage = layers / model.n_layers  # share of the model on the busiest stage
    groups = [  # (gradient bytes on this GPU, group size, stride)
        (BF16 * model.dense_params * stage / tp, dp, tp),
        (BF16 * model.expert_params * stage / (tp * ep), dp // ep, tp * ep),
    ]
    per_microbatch = compute_s(model, cluster, plan, seq_len) / m
    if plan["zero_stage"] == 3:
        comm = 0.0  # per micro-batch: all-gather for forward, again for backward, reduce-scatter the grads
        for grads, size, stride in groups:
            for op in ("all_gather", "all_gather", "reduce_scatter") if grads else ():
                comm += layers * collective_s(op, grads / layers, cluster, size, stride, latency)
        return {"total_s": m * comm, "exposed_s": m * max(0.0, comm - per_microbatch)}
    sizes, comm = [], []
    for grads, size, stride in groups:
        for bucket in bucket_sizes(grads, bucket_bytes):
            sizes.append(bucket)
            comm.append(collective_s("all_reduce", bucket, cluster, size, stride, latency))
    backward = per_microbatch * backward_share(plan["recompute"])
    return (
        overlap(comm, bucket_ready_s(sizes, backward), backward) if sizes else dict.fromkeys(COMM_KEYS, 0.0)
    )
    ### END SOLUTION


def step_comm(
    model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int, bucket_bytes: float = DDP_BUCKET_BYTES,
    latency: bool = True,
) -> dict:  # fmt: skip
    """Every strategy's communication in one step on the busiest GPU, {"dp", "tp", "pp", "ep"} each
    {"total_s", "exposed_s"} (only those two keys), plus "compute_s" and "exposed_s" (the four exposed
    times summed). Sequence parallelism is on whenever tp > 1, so each TP rank holds seq_len / tp of the
    sequence: a pipeline hop carries that slice, and EP dispatches seq_len x micro_batch_size / tp tokens
    per GPU and micro-batch through ceil(moe_layers / pp) MoE layers, bf16 both ways (a dense model or
    ep = 1 has no EP traffic). ValueError unless tp x pp x dp = cluster.world and ep divides dp."""
    ### BEGIN SOLUTION 23.step
    tp, pp, dp, ep = plan["tp"], plan["pp"], plan["dp"], plan["ep"]
    if tp * pp * dp != cluster.world or dp % ep:
        raise ValueError(
            f"tp {tp} x pp {pp} x dp {dp} must be the {cluster.world} GPUs, and ep {ep} divide dp"
        )
    s, b, h, m, rc = seq_len, plan["micro_batch_size"], model.dim, plan["num_microbatches"], plan["recompute"]
    layers = math.ceil(model.n_layers / pp)
    out = {"dp": dp_step(model, cluster, plan, s, bucket_bytes, latency)}
    out["tp"] = tp_step(s, b, h, layers, m, cluster, tp, tp > 1, rc, latency)
    out["pp"] = pp_step(s // tp, b, h, pp, m, cluster, tp * dp, latency)  # SP: each TP rank sends s/tp
    if model.is_moe and ep > 1:
        moe = math.ceil(model.moe_layers / pp)
        out["ep"] = ep_step(s * b // tp, h, model.top_k, moe, m, cluster, ep, tp, rc, latency=latency)
    else:
        out["ep"] = dict.fromkeys(COMM_KEYS, 0.0)
    out = {k: {key: out[k][key] for key in COMM_KEYS} for k in STRATEGIES}
    out["compute_s"] = compute_s(model, cluster, plan, seq_len)
    out["exposed_s"] = sum(out[k]["exposed_s"] for k in STRATEGIES)
    return out
    ### END SOLUTION
