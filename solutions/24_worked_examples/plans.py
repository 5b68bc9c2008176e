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
    ### BEGIN SOLUTION 24.llama3_70b
    # 1.13 TB of model states: every GPU must hold a slice. TP 8 fills a node's NVLink domain (TP 16 would
    # cross InfiniBand); PP 2 over nodes halves the layers per GPU; ZeRO-1 over the 2 replicas shards the
    # optimizer. 256 micro-batches keep the bubble at 0.4%; the TP all-reduces are the price (21 s).
    return """
plan: {tp: 8, pp: 2, dp: 2, ep: 1, zero_stage: 1, recompute: selective, micro_batch_size: 1,
       num_microbatches: 256}
answers:  # for this plan
  memory_gb: 66.91        # 40 layers / 8 TP ranks: 44.1 GB states (ZeRO-1 over 2) + 22.8 GB activations
  step_s: 162.3           # 140.2 compute + 0.55 bubble + 21.4 TP + 0.17 PP
  mfu: 0.346
  tp_message_mb: 134.2    # 8192 x 1 x 8192 x 2 bytes
  tp_s: 21.38             # 4 all-reduces x 40 layers x 256 micro-batches x 0.522 ms
  bubble_fraction: 0.003906  # (2 - 1) / 256
  dominant_overhead: tp
  crosses_network: [dp, pp]  # TP stays in the node; DP pairs and the two stages are in different nodes
"""
    ### END SOLUTION


def deepseek_v3() -> str:
    """Your plan for PROBLEMS["deepseek_v3"], as for llama3_70b, answering QUESTIONS["deepseek_v3"]."""
    ### BEGIN SOLUTION 24.deepseek_v3
    # Compute counts only the 37.6B active parameters: 9.3 s of compute per step at 40% MFU. The all-to-alls
    # of EP 64 (8 nodes) hide behind the compute of another micro-batch, so experts can go across nodes; TP
    # would split every expert and all-gather its tokens, so TP 1; ZeRO-3 gathers each layer whole, which EP
    # keeps small (1/64 of the experts); at TP 1 only full recomputation fits the activations.
    return """
plan: {tp: 1, pp: 1, dp: 256, ep: 64, zero_stage: 3, recompute: full, micro_batch_size: 1,
       num_microbatches: 4}
answers:  # for this plan
  memory_gb: 46.43        # 41.9 GB ZeRO-3 states + 0.9 GB gathered layer + 3.6 GB activations
  step_s: 12.44           # 8 N T with N = 37.6B active, at 40% MFU; nothing exposed
  mfu: 0.300
  expert_replicas: 4      # dp 256 / ep 64
  dispatch_mb: 469.8      # 4096 tokens x top-8 x 7168 x 2 bytes
  ep_s: 0.0               # 6 all-to-alls of 8.2 ms per MoE layer hide behind its 51 ms of compute
  dominant_overhead: none
  crosses_network: [dp, ep]
"""
    ### END SOLUTION
