"""Three training plans, each a YAML document: the plan, your answers to the questions about it, and why.

You plan Llama-3 8B on 8 H100s, Llama-3 70B on 32, and DeepSeek-V3 (671B, MoE) on 256, with the tools of
exercises 21-23. The grader recomputes every answer for YOUR plan with the reference tools, checks that the
plan is one the planner of exercise 21 could choose (layout rules), that its busiest GPU fits, and that its
model flops utilisation reaches the problem's floor. README.md walks through the first plan in full.
Check: `grade exercise 24`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from __future__ import annotations

# The problems: which model (coursekit.models.MODELS), which cluster (coursekit.cluster.Cluster(node, nodes)),
# and the batch: global_batch sequences of seq_len tokens per step (4,194,304 tokens, ground-truth.md §12).
# mfu_floor: the least model flops utilisation a plan must reach (README, "Throughput floor").
PROBLEMS = {
    "llama3_8b": {"model": "llama3_8b", "node": "dgx_h100", "nodes": 1,
                  "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.35},
    "llama3_70b": {"model": "llama3_70b", "node": "dgx_h100", "nodes": 4,
                   "global_batch": 512, "seq_len": 8192, "mfu_floor": 0.32},
    "deepseek_v3": {"model": "deepseek_v3", "node": "dgx_h100", "nodes": 32,
                    "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.25},
}  # fmt: skip

# What each plan's `answers:` must contain: the README says how to compute each one.
QUESTIONS = {
    "llama3_8b": ("memory_gb", "step_s", "mfu", "zero0_memory_gb", "dp_allreduce_s"),
    "llama3_70b": ("memory_gb", "step_s", "mfu", "tp_message_mb", "tp_s", "bubble_fraction"),
    "deepseek_v3": ("memory_gb", "step_s", "mfu", "expert_replicas", "dispatch_mb", "ep_s"),
}


def llama3_8b() -> str:
    """Your plan for PROBLEMS["llama3_8b"]: a YAML document (a str; a dict is accepted too) with three keys.
    plan: tp, pp, dp, ep, zero_stage, recompute, micro_batch_size, num_microbatches (exercise 21's plan keys);
    answers: every key of QUESTIONS["llama3_8b"], a number each; justification: 10-150 words on why."""
    raise NotImplementedError("TODO(24.llama3_8b): not implemented yet")


def llama3_70b() -> str:
    """Your plan for PROBLEMS["llama3_70b"], as for llama3_8b, answering QUESTIONS["llama3_70b"]."""
    raise NotImplementedError("TODO(24.llama3_70b): not implemented yet")


def deepseek_v3() -> str:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_8b, answering QUESTIONS["deepseek_v3"]."""
    raise NotImplementedError("TODO(24.deepseek_v3): not implemented yet")
