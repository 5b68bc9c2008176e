"""Three training plans, each a YAML document: the plan, your answers to the questions about it, and why.

Alternative-correct case: every plan uses pipeline stages (8B on 2 stages, 70B on 2, DeepSeek-V3 on 32 with
EP 2), answers rounded to 3 significant figures, the YAML written by hand.
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


def llama3_8b() -> str:
    """Your plan for PROBLEMS["llama3_8b"]: a YAML document (a str; a dict is accepted too) with three keys.
    plan: tp, pp, dp, ep, zero_stage, recompute, micro_batch_size, num_microbatches (exercise 21's plan keys);
    answers: every key of QUESTIONS["llama3_8b"], a number each; justification: 10-150 words on why."""
    return """
plan:
  tp: 1
  pp: 2
  dp: 4
  ep: 1
  zero_stage: 2
  recompute: selective
  micro_batch_size: 1
  num_microbatches: 256
answers:
  memory_gb: 40.3
  step_s: 64.1
  mfu: 0.398
  zero0_memory_gb: 82.5
  dp_allreduce_s: 0.0268
justification: >-
  Two pipeline stages halve the model states per GPU, and ZeRO-2 over the four data-parallel replicas
  shards gradients and optimizer state, so selective recomputation fits in 40 GB. With 256 micro-batches
  the 1F1B bubble is 0.4% and the stage-to-stage sends over NVLink are tens of milliseconds. No TP: its
  all-reduces would cost seconds.
"""


def llama3_70b() -> str:
    """Your plan for PROBLEMS["llama3_70b"], as for llama3_8b, answering QUESTIONS["llama3_70b"]."""
    return """
plan: {tp: 8, pp: 2, dp: 2, ep: 1, zero_stage: 2, recompute: selective,
       micro_batch_size: 1, num_microbatches: 256}
answers:
  memory_gb: 62.5
  step_s: 162
  mfu: 0.346
  tp_message_mb: 134
  tp_s: 21.4
  bubble_fraction: 0.00391
justification: >-
  1.13 TB of model states need many GPUs, and one layer's activations at 8k tokens need TP: tp 8 fills the
  NVLink domain and never crosses a node. Two pipeline stages over the 4 nodes and ZeRO-2 over the two
  replicas bring the busiest GPU to 63 GB with selective recomputation; 256 micro-batches make the bubble
  negligible.
"""


def deepseek_v3() -> str:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_8b, answering QUESTIONS["deepseek_v3"]."""
    return """
plan: {tp: 4, pp: 32, dp: 2, ep: 2, zero_stage: 3, recompute: selective,
       micro_batch_size: 1, num_microbatches: 512}
answers:
  memory_gb: 60.0
  step_s: 11.5
  mfu: 0.323
  expert_replicas: 1
  dispatch_mb: 117
  ep_s: 0.534
justification: >-
  The 671B parameters dominate memory, so 32 pipeline stages of two layers and tp 4 inside each node split
  them, and EP 2 over the two data-parallel replicas keeps one copy of each expert. ZeRO-3 shards what is
  left to 60 GB. Compute counts only the 37.6B active parameters, so the step is short and the
  communication terms matter: MFU 0.32.
"""
