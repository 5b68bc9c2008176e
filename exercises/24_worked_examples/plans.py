"""Two training plans, each a YAML document: the plan, and your answers to the questions about it.

You plan Llama-3 70B on 32 H100s and DeepSeek-V3 (671B, MoE) on 256, with the tools of exercises 21-23 and the
MoE refinements of README.md ("Experts across nodes"); the README works Llama-3 8B on 8 H100s as the example.
The grader recomputes every answer for YOUR plan with the reference tools and judges the plan itself: it must
be one exercise 21's planner could choose (layout rules), fit on its busiest GPU, reach the problem's MFU
floor, and not be dominated (README, "How a plan is judged"). Check: `grade exercise 24`; hints:
`grade hint 24 <part>`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from __future__ import annotations

# The problems: which model (coursekit.models.MODELS), which cluster (coursekit.cluster.Cluster(node, nodes)),
# and the batch: global_batch sequences of seq_len tokens per step (4,194,304 tokens, ground-truth.md §12).
# mfu_floor: the least model flops utilisation a plan must reach (README, "How a plan is judged").
PROBLEMS = {
    "llama3_70b": {"model": "llama3_70b", "node": "dgx_h100", "nodes": 4,
                   "global_batch": 512, "seq_len": 8192, "mfu_floor": 0.32},
    "deepseek_v3": {"model": "deepseek_v3", "node": "dgx_h100", "nodes": 32,
                    "global_batch": 1024, "seq_len": 4096, "mfu_floor": 0.27},
}  # fmt: skip

# What each plan's `answers:` must contain: the README says what each one is. EP_ONLY: asked only of a plan
# whose ep is above 1 (leave them out, or null, when ep is 1).
QUESTIONS = {
    "llama3_70b": ("memory_gb", "step_s", "mfu", "tp_message_mb", "tp_s", "bubble_fraction",
                   "dominant_overhead", "crosses_network"),
    "deepseek_v3": ("memory_gb", "step_s", "mfu", "expert_replicas", "dispatch_mb", "ep_s",
                    "dominant_overhead", "crosses_network"),
}  # fmt: skip
EP_ONLY = ("dispatch_mb", "ep_s")


def llama3_70b() -> str:
    """Your plan for PROBLEMS["llama3_70b"]: a YAML document (a str; a dict is accepted too) with the keys
    plan: tp, pp, dp, ep, zero_stage, recompute, micro_batch_size, num_microbatches (exercise 21's plan keys);
    answers: every key of QUESTIONS["llama3_70b"] (numbers, except dominant_overhead, a word, and
    crosses_network, a list of words: README, "Questions"); and, if you like, justification: prose that is
    shown with your plan and not graded."""
    raise NotImplementedError("TODO(24.llama3_70b): not implemented yet")


def deepseek_v3() -> str:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_70b, answering QUESTIONS["deepseek_v3"]."""
    raise NotImplementedError("TODO(24.deepseek_v3): not implemented yet")
