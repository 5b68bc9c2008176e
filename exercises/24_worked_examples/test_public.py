"""What this catches: plan documents the grader cannot read, and plans your own answers say cannot work.

Public self-checks: `grade exercise 24` runs them. They read your YAML the way the grader does and check it
against itself: the keys, the layout rules you can check by hand, and your own answers (does the busiest GPU
fit in 72 GB, does your MFU agree with your step time and reach the floor). At submission the hidden suite
recomputes every answer for your plan with the reference tools of exercises 21-23.
"""

from __future__ import annotations

import io
import math
from typing import Any

import pytest

from coursekit.cluster import Cluster
from coursekit.models import MODELS
from grader.harness import World

# The same problems as PROBLEMS, QUESTIONS and EP_ONLY in plans.py
PROBLEMS = {
    "llama3_70b": ("llama3_70b", Cluster("dgx_h100", 4), 512, 8192, 0.32),
    "deepseek_v3": ("deepseek_v3", Cluster("dgx_h100", 32), 1024, 4096, 0.27),
}
QUESTIONS = {
    "llama3_70b": {"memory_gb", "step_s", "mfu", "tp_message_mb", "tp_s", "bubble_fraction",
                   "dominant_overhead", "crosses_network"},
    "deepseek_v3": {"memory_gb", "step_s", "mfu", "expert_replicas", "dispatch_mb", "ep_s",
                    "dominant_overhead", "crosses_network"},
}  # fmt: skip
EP_ONLY = {"dispatch_mb", "ep_s"}  # asked only of a plan with ep > 1
WORDS = {"dominant_overhead", "crosses_network"}  # a word, and a list of words
PLAN_KEYS = {"tp", "pp", "dp", "ep", "zero_stage", "recompute", "micro_batch_size", "num_microbatches"}
MEMORY_KEYS = (
    "params",
    "grads",
    "optimizer",
    "activations",
    "total",
    "limit",
)  # exercise 21's memory_per_gpu
TIME_KEYS = ("compute_s", "bubble_s", "dp_s", "tp_s", "pp_s", "ep_s", "total_s")  # and its step_time
LIMIT_GB = 0.9 * 80  # coursekit.budget.USABLE_MEMORY_FRACTION of an H100's 80 GB


def per_problem(concept: str) -> Any:
    """Run a test once per problem, scoring for that problem's part and its `concept` (concepts.yml: "plan"
    is plan_70b for llama3_70b)."""
    suffix = {"llama3_70b": "70b", "deepseek_v3": "deepseek"}
    params = [
        pytest.param(
            n, marks=(pytest.mark.part(f"24.{n}"), pytest.mark.concept(f"{concept}_{suffix[n]}")), id=n
        )
        for n in PROBLEMS
    ]

    def decorate(test: Any) -> Any:
        return pytest.mark.parametrize("world", [1], indirect=True)(
            pytest.mark.parametrize("name", params)(test)
        )

    return decorate


def read(world: World, name: str) -> dict:
    [res] = world.run("rank_programs:plan_document", inputs={"function": name})
    doc = res.value
    assert isinstance(doc, dict), f"{name}() must give a mapping (plan, answers), got {doc!r}"
    assert {"plan", "answers"} <= set(doc) <= {"plan", "answers", "justification"}, (
        f"{name}(): keys {sorted(doc)}"
    )
    assert isinstance(doc["plan"], dict) and set(doc["plan"]) == PLAN_KEYS, (
        f"{name}(): plan keys {doc['plan']!r}"
    )
    answers = doc["answers"]
    assert isinstance(answers, dict), f"{name}(): answers must be a mapping, got {answers!r}"
    asked = QUESTIONS[name] - (set() if doc["plan"].get("ep", 1) > 1 else EP_ONLY)
    given = {k for k, v in answers.items() if v is not None}
    assert asked <= given <= QUESTIONS[name], f"{name}(): answer keys {sorted(given)}, asked {sorted(asked)}"
    for k in given - WORDS:
        v = answers[k]
        assert type(v) in (int, float) and math.isfinite(v), (
            f"{name}(): answers.{k} must be a number, got {v!r}"
        )
    return doc


@per_problem("plan")
def test_layout_by_hand(world: World, name: str) -> None:
    plan = read(world, name)["plan"]
    model_key, cluster, global_batch, _, _ = PROBLEMS[name]
    model = MODELS[model_key]
    tp, pp, dp = plan["tp"], plan["pp"], plan["dp"]
    assert tp * pp * dp == cluster.world, f"{name}: tp x pp x dp = {tp * pp * dp}, not {cluster.world} GPUs"
    assert cluster.domain_gpus % tp == 0, f"{name}: TP {tp} leaves the NVLink domain of {cluster.domain_gpus}"
    assert model.n_kv_heads % tp == 0, f"{name}: TP {tp} splits the {model.n_kv_heads} KV heads"
    assert plan["ep"] == 1 or dp % plan["ep"] == 0, f"{name}: EP groups are carved out of DP: ep divides dp"
    assert dp * plan["micro_batch_size"] * plan["num_microbatches"] == global_batch, f"{name}: batch"
    assert model.is_moe or plan["ep"] == 1, f"{name}: a dense model has no experts to split (ep = 1)"


@per_problem("step")
def test_your_mfu_agrees_with_your_step_time(world: World, name: str) -> None:
    answers = read(world, name)["answers"]
    model_key, cluster, global_batch, seq_len, _ = PROBLEMS[name]
    # PaLM (arXiv 2204.02311, Appendix B): MFU = 6 N T / (GPUs x peak x step time), N the active parameters
    useful = 6 * MODELS[model_key].active_params * global_batch * seq_len
    implied = useful / (cluster.world * cluster.peak_flops * answers["step_s"])
    assert math.isclose(answers["mfu"], implied, rel_tol=0.01), (
        f"{name}: your step_s {answers['step_s']} gives MFU {implied:.3f}, but your mfu is {answers['mfu']}"
    )


@per_problem("plan")
def test_your_plan_fits_and_meets_the_floor_by_your_answers(world: World, name: str) -> None:
    answers = read(world, name)["answers"]
    floor = PROBLEMS[name][4]
    assert answers["memory_gb"] <= LIMIT_GB, (
        f"{name}: by your own answer {answers['memory_gb']} GB > {LIMIT_GB} GB"
    )
    assert answers["mfu"] >= floor, (
        f"{name}: by your own answers MFU {answers['mfu']} is under the floor {floor}"
    )


@per_problem("document")
def test_plan_report(world: World, name: str, artifact) -> None:  # type: ignore[no-untyped-def]
    """Saves your plan as a table, with memory and time broken down by YOUR exercise 21 estimate.py, and a
    memory chart: `grade exercise 24` says where."""
    read(world, name)
    path = artifact(f"plan_24_{name}.txt", f"your {name} plan as a table")
    if path is None:  # this run keeps no files (a container)
        return
    model, cluster, _, seq_len, _ = PROBLEMS[name]
    inputs = {
        "function": name,
        "model": model,
        "node": cluster.node,
        "nodes": cluster.nodes,
        "seq_len": seq_len,
    }
    [res] = world.run("rank_programs:plan_breakdown", inputs=inputs)
    report = res.value
    from rich.console import Console  # the grader's own dependency

    from coursekit.plan_report import plan_table, save_memory_chart

    doc, memory, time, note = report["document"], report["memory"], report["time"], report["note"]
    if not (_numbers(memory, MEMORY_KEYS) and _numbers(time, TIME_KEYS)):
        memory = time = None
        note = note or "your exercise 21 estimate.py gave no usable breakdown: see its docstrings"
    title = f"{name}: {MODELS[model].name} on {cluster.world} x H100, {PROBLEMS[name][2]} x {seq_len} tokens"
    console = Console(file=io.StringIO(), width=100, record=True)
    console.print(plan_table(doc["plan"] | {"reasons": {}}, memory, time, title=title))
    console.print(note or "memory and time: your exercise 21 estimate.py")
    console.print("answers: " + ", ".join(f"{k} {v}" for k, v in doc["answers"].items()))
    console.print("justification (not graded): " + str(doc.get("justification", "")))
    path.write_text(console.export_text())
    if memory:
        chart = artifact(f"plan_24_{name}.png", f"a memory chart of your {name} plan")
        save_memory_chart(memory, chart, title=f"{MODELS[model].name}, {cluster.world} GPUs")


def _numbers(values: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(values, dict) and all(type(values.get(k)) in (int, float) for k in keys)


# One problem of the kind plan(problem) is graded on (the grader's are generated and never shown): a 14B dense
# model on 3 nodes of 4 GPUs, 12 GPUs in all, with slower NICs than a DGX H100's.
EXAMPLE = {
    "model": {"name": "example-14b", "n_layers": 46, "dim": 5120, "n_heads": 40, "n_kv_heads": 8,
              "ffn_dim": 14336, "vocab_size": 128256, "params": 14_337_131_520,
              "active_params": 14_337_131_520},
    "cluster": {"node": "generated", "nodes": 3, "gpus": 4, "domain": 4, "memory_gb": 80, "tflops": 989.4,
                "nvlink": 450.0, "pcie": 31.5, "nic": 25.0},
    "global_batch": 96, "seq_len": 4096, "mfu_floor": 0.33,
}  # fmt: skip


@pytest.mark.part("24.llama3_70b")
@pytest.mark.concept("plan_70b")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_planner_on_a_cluster_of_4_gpu_nodes(world: World) -> None:
    [res] = world.run("rank_programs:plan_document", inputs={"function": "plan", "problem": EXAMPLE})
    doc = res.value
    assert isinstance(doc, dict) and {"plan", "answers"} <= set(doc), f"plan(): got {doc!r:.200}"
    plan, answers = doc["plan"], doc["answers"]
    assert isinstance(plan, dict) and set(plan) == PLAN_KEYS, f"plan(): plan keys {plan!r}"
    assert isinstance(answers, dict) and WORDS <= set(answers), f"plan(): answers must give {sorted(WORDS)}"
    tp, pp, dp = plan["tp"], plan["pp"], plan["dp"]
    assert tp * pp * dp == 12, f"plan(): tp x pp x dp = {tp * pp * dp}, not the example's 12 GPUs"
    assert 4 % tp == 0, f"plan(): TP {tp} leaves the 4-GPU NVLink domain of the example's nodes"
    assert plan["ep"] == 1, "plan(): a dense model has no experts to split (ep = 1)"
    assert dp * plan["micro_batch_size"] * plan["num_microbatches"] == 96, "plan(): the batch does not add up"
