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
    ### BEGIN SOLUTION 23.step
    tp, dp, ep, m = plan["tp"], plan["dp"], plan["ep"], plan["num_microbatches"]
    layers = math.ceil(model.n_layers / plan["pp"])
    stage = layers / model.n_layers  # share of the model on the busiest stage
    groups = [  # (gradient bytes on this GPU, group size, stride)
        (BF16 * model.dense_params * stage / tp, dp, tp),
        (BF16 * model.expert_params * stage / (tp * ep), dp // ep, tp * ep),
    ]
    per_microbatch = compute_s / m
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
    model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int, *, compute_s: float,
    bucket_bytes: float = DDP_BUCKET_BYTES, latency: bool = True,
) -> dict:  # fmt: skip
    """Every strategy's communication in one step on the busiest GPU: {"dp", "tp", "pp", "ep"}, each
    {"total_s", "exposed_s"} (only those two keys), plus "compute_s" (the argument, returned as given) and
    "exposed_s" (the four exposed times summed). Sequence parallelism is on whenever tp > 1, so each TP rank
    holds seq_len / tp of every sequence, and that slice is all it sends between stages and dispatches to
    experts (bf16 both ways, every MoE layer of its stage). A dense model or ep = 1 has no EP traffic.
    ValueError unless tp x pp x dp = cluster.world and ep divides dp."""
    ### BEGIN SOLUTION 23.step
    tp, pp, dp, ep = plan["tp"], plan["pp"], plan["dp"], plan["ep"]
    if tp * pp * dp != cluster.world or dp % ep:
        raise ValueError(
            f"tp {tp} x pp {pp} x dp {dp} must be the {cluster.world} GPUs, and ep {ep} divide dp"
        )
    s, b, h, m, rc = seq_len, plan["micro_batch_size"], model.dim, plan["num_microbatches"], plan["recompute"]
    layers = math.ceil(model.n_layers / pp)
    out = {
        "dp": dp_step(
            model, cluster, plan, s, compute_s=compute_s, bucket_bytes=bucket_bytes, latency=latency
        )
    }
    out["tp"] = tp_step(s, b, h, layers, m, cluster, tp, tp > 1, rc, latency)
    out["pp"] = pp_step(s // tp, b, h, pp, m, cluster, tp * dp, latency)  # SP: each TP rank sends s/tp
    if model.is_moe and ep > 1:
        moe = math.ceil(model.moe_layers / pp)
        out["ep"] = ep_step(s * b // tp, h, model.top_k, moe, m, cluster, ep, tp, rc, latency=latency)
    else:
        out["ep"] = dict.fromkeys(COMM_KEYS, 0.0)
    out = {k: {key: out[k][key] for key in COMM_KEYS} for k in STRATEGIES}
    out["compute_s"] = compute_s
    out["exposed_s"] = sum(out[k]["exposed_s"] for k in STRATEGIES)
    return out
    ### END SOLUTION
