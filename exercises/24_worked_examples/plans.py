"""Two training plans, each a YAML document: the plan, and your answers to the questions about it.

You plan Llama-3 70B on 32 H100s and DeepSeek-V3 (671B, MoE) on 256, with the tools of exercises 21-23 and the
MoE refinements of README.md ("Experts across nodes"); the README works Llama-3 8B on 8 H100s as the example.
The grader recomputes every answer for YOUR plan with the reference tools and judges the plan itself: it must
be one exercise 21's planner could choose (layout rules), fit on its busiest GPU, reach the problem's MFU
floor, and not be dominated (README, "How a plan is judged"). Check: `grade exercise 24`; hints:
`grade hint 24 <part>`. Units are in the names: GB = 1e9 bytes, MB = 1e6 bytes, s = seconds.
"""

from dataclasses import dataclass
from typing import Any

from coursekit.cluster import Cluster
from coursekit.models import MODELS, ModelSpec

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

# What plan(problem)'s `answers:` must contain, for any problem (other keys may be there, ungraded).
PLAN_QUESTIONS = ("dominant_overhead", "crosses_network")


@dataclass(frozen=True)
class SpecCluster(Cluster):
    """A cluster described by its numbers instead of a catalogue name, for the problems `plan` is given:
    `nodes` nodes of `gpus` GPUs, NVLink domains of `domain` GPUs (1: no NVLink), `memory_gb` per GPU (GB =
    1e9 bytes), `tflops` dense bf16 per GPU, and per-GPU bandwidths per direction in GB/s: `nvlink`, `pcie`
    (its host link) and `nic` (its share of the node's NICs). Everything of coursekit.cluster works on it
    (levels, p2p_level, aligned, allreduce_s, ...), as on Cluster("dgx_h100", nodes)."""

    node: str = "generated"
    nodes: int = 1
    gpus: int = 8
    domain: int = 8
    memory_gb: float = 80.0
    tflops: float = 989.4
    nvlink: float = 450.0
    pcie: float = 31.5
    nic: float = 50.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus < 1 or self.domain < 1 or self.gpus % self.domain:
            raise ValueError(f"not a cluster: {self}")

    gpus_per_node = property(lambda self: self.gpus)
    domain_gpus = property(lambda self: self.domain)
    gpu = property(lambda self: self.node)
    memory_bytes = property(lambda self: self.memory_gb * 1e9)
    peak_flops = property(lambda self: self.tflops * 1e12)
    nvlink_gb_s = property(lambda self: self.nvlink if self.domain > 1 else 0.0)
    pcie_gb_s = property(lambda self: self.pcie)
    nic_gb_s = property(lambda self: self.nic)


def problem_objects(problem: dict) -> tuple[ModelSpec, Cluster]:
    """The model and the cluster of a problem: a named one of PROBLEMS (model and node names) or one given to
    `plan` (model: ModelSpec fields as a dict; cluster: SpecCluster fields as a dict)."""
    model = problem["model"]
    model = MODELS[model] if isinstance(model, str) else ModelSpec.from_dict(model)
    if "cluster" in problem:
        return model, SpecCluster(**problem["cluster"])
    return model, Cluster(problem["node"], problem["nodes"])


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


def costs(model: ModelSpec, cluster: Cluster, plan: dict, seq_len: int) -> dict[str, Any]:
    """What `plan` costs on `cluster`, as the grader counts it (README, "The step time" and "Experts across
    nodes"): memory_bytes (the busiest GPU), fits (within coursekit.budget.USABLE_MEMORY_FRACTION of its
    memory), and the step time's terms in seconds, compute_s, bubble_s, dp_s, tp_s, pp_s, ep_s, with total_s
    their sum. Use it from `plan`; your exercise 21 `memory_per_gpu` and `step_time` are where to start."""
    raise NotImplementedError("TODO(24.llama3_70b): not implemented yet")


def plan(problem: dict) -> dict | str:
    """Your planner, for any problem: `problem` has the keys of PROBLEMS' values, except that the grader gives
    the model as a dict of ModelSpec fields and the cluster as a dict of SpecCluster fields under "cluster"
    (`problem_objects` turns either form into objects). The grader calls it on models and clusters you have
    not seen: sizes, layer counts, widths, experts, node counts, GPUs per node, memory and link bandwidths of
    its own. Return a document as llama3_70b's: plan (exercise 21's plan keys), answers (at least every key
    of PLAN_QUESTIONS, for the plan you return) and, if you like, justification. It is judged as the named
    plans are (README, "How a plan is judged"); a run must take seconds, not minutes."""
    raise NotImplementedError("TODO(24.llama3_70b): not implemented yet")
