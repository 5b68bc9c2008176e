"""Three training plans, each a YAML document: the plan, your answers to the questions about it, and why.

Alternative-correct case: each function returns a dict (the stub accepts one), and every plan leans on
sharding rather than the fastest layout: 8B on TP 2 with ZeRO-3 and no recomputation, 70B on TP 8 x PP 4 with
plain DDP state (dp 1), DeepSeek-V3 as pure data parallelism with ZeRO-3, EP 8 and full recomputation.
"""

from __future__ import annotations

PROBLEMS = {
    "llama3_8b": {"model": "llama3_8b", "node": "dgx_h100", "nodes": 1,
                  "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.35},
    "llama3_70b": {"model": "llama3_70b", "node": "dgx_h100", "nodes": 4,
                   "global_batch": 512, "seq_len": 8192, "mfu_floor": 0.32},
    "deepseek_v3": {"model": "deepseek_v3", "node": "dgx_h100", "nodes": 32,
                    "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.25},
}  # fmt: skip

QUESTIONS = {
    "llama3_8b": ("memory_gb", "step_s", "mfu", "zero0_memory_gb", "dp_allreduce_s"),
    "llama3_70b": ("memory_gb", "step_s", "mfu", "tp_message_mb", "tp_s", "bubble_fraction"),
    "deepseek_v3": ("memory_gb", "step_s", "mfu", "expert_replicas", "dispatch_mb", "ep_s"),
}


def _plan(tp: int, pp: int, dp: int, ep: int, zero: int, recompute: str, mbs: int, m: int) -> dict:
    return {
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "ep": ep,
        "zero_stage": zero,
        "recompute": recompute,
        "micro_batch_size": mbs,
        "num_microbatches": m,
    }


def llama3_8b() -> dict:
    """Your plan for PROBLEMS["llama3_8b"]: a YAML document (a str; a dict is accepted too) with three keys.
    plan: tp, pp, dp, ep, zero_stage, recompute, micro_batch_size, num_microbatches (exercise 21's plan keys);
    answers: every key of QUESTIONS["llama3_8b"], a number each; justification: 10-150 words on why."""
    seq, mbs, h = 4096, 1, 4096
    return {
        "plan": _plan(2, 1, 4, 1, 3, "none", mbs, 1024 // (4 * mbs)),
        "answers": {
            "memory_gb": 68.14,
            "step_s": 66.27,
            "mfu": 0.3853,
            "zero0_memory_gb": 116.3,
            # 8.03e9 params / tp 2, bf16, ring all-reduce over 4 NVLink GPUs at 450 GB/s
            "dp_allreduce_s": 2 * 3 / 4 * (8.030261248e9 / 2 * 2) / 450e9,
        },
        "justification": (
            f"TP 2 inside the node and ZeRO-3 over the four replicas leave so little model state per GPU "
            f"that activations of {seq} x {mbs} x {h} can be kept without recomputation: 68 GB. TP costs "
            "2.4 s of all-reduces per step, which still leaves MFU 0.385 above the 0.35 floor."
        ),
    }


def llama3_70b() -> dict:
    """Your plan for PROBLEMS["llama3_70b"], as for llama3_8b, answering QUESTIONS["llama3_70b"]."""
    pp, m = 4, 512
    return {
        "plan": _plan(8, pp, 1, 1, 0, "selective", 1, m),
        "answers": {
            "memory_gb": 58.09,
            "step_s": 162.7,
            "mfu": 0.3446,
            "tp_message_mb": 8192 * 1 * 8192 * 2 / 1e6,
            "tp_s": 21.38,
            "bubble_fraction": (pp - 1) / m,
        },
        "justification": (
            "TP 8 fills each node's NVLink domain; four pipeline stages, one per node, split the 80 layers, "
            "so no data parallelism is left and no ZeRO is needed: 58 GB with selective recomputation. "
            "512 micro-batches keep the bubble under 1%."
        ),
    }


def deepseek_v3() -> dict:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_8b, answering QUESTIONS["deepseek_v3"]."""
    dp, ep, mbs, seq, top_k, h = 256, 8, 4, 4096, 8, 7168
    return {
        "plan": _plan(1, 1, dp, ep, 3, "full", mbs, 1024 // (dp * mbs)),
        "answers": {
            "memory_gb": 56.27,
            "step_s": 13.71,
            "mfu": 0.2722,
            "expert_replicas": dp // ep,
            "dispatch_mb": seq * mbs * top_k * h * 2 / 1e6,
            "ep_s": 1.271,
        },
        "justification": (
            "Pure data parallelism: ZeRO-3 shards all 671B parameters' states over the 256 GPUs, EP 8 keeps "
            "the all-to-alls inside a node, and full recomputation keeps activations small at 56 GB. The "
            "forward runs twice, but MFU 0.27 still clears the 0.25 floor."
        ),
    }
