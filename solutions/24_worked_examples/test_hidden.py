"""What this catches: plans that are not good under the reference tools of exercises 21-23, and wrong answers.

Each plan document is read on the rank (rank_programs.plan_document: safe YAML, plain data) and checked in
the judge with solutions/24_worked_examples/verify.py, a copy of exercise 21's reference yardsticks with the
MoE refinements of the README (equal to exercise 21 on dense models: tests/test_worked_examples_tools.py).
The plan concept carries most of each part, and it is lost by any one of:
- layout: TP leaving the NVLink domain (70B at TP 16), TP splitting heads, tp x pp x dp not the cluster, EP on
  a dense model, a batch that does not add up;
- memory: the busiest GPU needing more than 90% of 80 GB (ZeRO-1 alone for DeepSeek-V3, EP 1 under ZeRO-3);
- the problem's MFU floor: full recomputation where selective fits, TP across nodes, long pipelines;
- dominance: another plan of the planner's space fits in no more memory and is MARGIN faster.
Answers are recomputed for the student's own plan (1%, 3 significant figures): GiB for GB, ms for s, NVLink's
bidirectional 900 GB/s, fp32 messages, total instead of active parameters, replicas = ep, a dispatch without
top_k, an all-to-all counted as if nothing hid it; the structured answers name the largest overhead and the
groups whose traffic leaves the node. A justification is shown, never graded.

Unseen problems: `plans.plan(problem)` is also run on models and clusters generated here from seeds
(GENERATED: widths, layer counts, experts; node counts, GPUs per node, memory, flops and link bandwidths),
with an MFU floor set below the best plan the judge finds. Its plan must pass the same four checks (the
part's plan concept) and name the largest overhead and the groups that leave a node (its overheads concept):
a planner that knows only the named problems (a lookup table, TP fixed at 8, a model's layer count written
in) loses the plan concept.
"""

from __future__ import annotations

import functools
import math
import random
from typing import Any

import pytest

from coursekit.cluster import Cluster
from coursekit.models import MODELS
from grader.harness import World

NAMES = ("llama3_70b", "deepseek_v3")
REL = 0.01  # answers are read from YAML written by hand: 3 significant figures
ABS = {"s": 1e-3, "bubble_fraction": 1e-4}  # where the right answer may be 0: 1 ms, or 1e-4 of a fraction
MARGIN = 0.05  # README: a plan is dominated by one at least 5% faster that needs no more memory
WORDS = {"dominant_overhead", "crosses_network"}
GROUPS = {"dp", "ep", "pp", "tp"}


def per_problem(concept: str) -> Any:
    """Parametrize a test over the problems, each instance scoring for its own part and for that part's
    `concept` ("plan" -> "plan_70b" for llama3_70b), at world size 1."""
    params = [pytest.param(n, marks=marks(n, concept), id=n) for n in NAMES]
    return at_world_size_1("name", params)


def per_question() -> Any:
    """Parametrize a test over each problem's questions, each scoring for its part and for the concept the
    question asks about (ANSWER_CONCEPT)."""
    params = [
        pytest.param(n, q, marks=marks(n, ANSWER_CONCEPT[q]), id=f"{n}-{q}")
        for n in NAMES
        for q in _QUESTIONS[n]
    ]
    return at_world_size_1("name,question", params)


def at_world_size_1(names: str, params: list) -> Any:
    def decorate(test: Any) -> Any:
        return pytest.mark.parametrize("world", [1], indirect=True)(
            pytest.mark.parametrize(names, params)(test)
        )

    return decorate


def marks(name: str, concept: str) -> tuple[Any, ...]:
    """The part of problem `name` and its concept `concept` (concepts.yml ids carry the problem: plan_70b)."""
    return pytest.mark.part(f"24.{name}"), pytest.mark.concept(f"{concept}_{SUFFIX[name]}")


SUFFIX = {"llama3_70b": "70b", "deepseek_v3": "deepseek"}
# what misunderstanding a wrong answer shows (concepts.yml); the plan itself is each part's central concept
ANSWER_CONCEPT = {
    "memory_gb": "memory",
    "step_s": "step",
    "mfu": "step",
    "tp_message_mb": "tp_traffic",
    "tp_s": "tp_traffic",
    "bubble_fraction": "bubble",
    "expert_replicas": "expert_copies",
    "dispatch_mb": "ep_traffic",
    "ep_s": "ep_traffic",
    "dominant_overhead": "overheads",
    "crosses_network": "overheads",
}


# the questions, for parametrizing at collection (tests/test_worked_examples_tools.py checks plans.py agrees)
_COMMON, _READING = ("memory_gb", "step_s", "mfu"), ("dominant_overhead", "crosses_network")
_QUESTIONS = {
    "llama3_70b": (*_COMMON, "tp_message_mb", "tp_s", "bubble_fraction", *_READING),
    "deepseek_v3": (*_COMMON, "expert_replicas", "dispatch_mb", "ep_s", *_READING),
}


@pytest.fixture
def ref(reference) -> dict[str, Any]:
    return {"plans": reference("plans"), "verify": reference("verify")}


def document(world: World, name: str) -> Any:
    [res] = world.run("rank_programs:plan_document", inputs={"function": name})
    return res.value


def problem(ref: dict, name: str) -> tuple[Any, Cluster, dict]:
    p = ref["plans"].PROBLEMS[name]
    return MODELS[p["model"]], Cluster(p["node"], p["nodes"]), p


def is_number(x: Any) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def asked(ref: dict, name: str, plan: Any) -> set[str]:
    """The questions a plan must answer: EP_ONLY ones only of a plan with ep > 1."""
    questions = set(ref["plans"].QUESTIONS[name])
    if not (isinstance(plan, dict) and type(plan.get("ep")) is int and plan["ep"] > 1):
        questions -= set(ref["plans"].EP_ONLY)
    return questions


def checked_plan(world: World, ref: dict, name: str) -> dict:
    """The student's document, with a plan that is well formed and valid; else a failed check saying why."""
    doc = document(world, name)
    shape = shape_errors(doc, ref, name)
    assert not shape, f"{name}(): " + "; ".join(shape)
    model, cluster, p = problem(ref, name)
    errors = ref["verify"].layout_errors(model, cluster, p["global_batch"], doc["plan"])
    assert not errors, f"{name}(): the plan breaks exercise 21's layout rules: " + "; ".join(errors)
    return doc


def shape_errors(doc: Any, ref: dict, name: str) -> list[str]:
    if not isinstance(doc, dict) or not {"plan", "answers"} <= set(doc) <= {
        "plan",
        "answers",
        "justification",
    }:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        return [f"expected a mapping with keys plan, answers (and, if you like, justification); got {got}"]
    errors = []
    plan, answers = doc["plan"], doc["answers"]
    keys = set(ref["verify"].PLAN_KEYS)
    if not isinstance(plan, dict) or set(plan) != keys:
        got = sorted(plan) if isinstance(plan, dict) else plan
        errors.append(f"plan: expected the keys {sorted(keys)}, got {got!r}")
    if not isinstance(answers, dict):
        return [*errors, f"answers: expected a mapping, got {answers!r}"]
    given = {k for k, v in answers.items() if v is not None}
    questions = asked(ref, name, plan)
    optional = set(ref["plans"].QUESTIONS[name]) - questions
    if not questions <= given or given - questions - optional:
        want = sorted(questions) + [f"({k}: only with ep > 1)" for k in sorted(optional)]
        errors.append(f"answers: expected the keys {want}, got {sorted(given)}")
    for k in sorted(given & questions):
        v = answers[k]
        if k == "dominant_overhead" and not isinstance(v, str):
            errors.append(f"answers: {k} must be a word (bubble, dp, tp, pp, ep or none), got {v!r}")
        elif k == "crosses_network" and not (isinstance(v, list) and all(isinstance(g, str) for g in v)):
            errors.append(f"answers: {k} must be a list of group names (dp, ep, pp, tp), got {v!r}")
        elif k not in WORDS and not is_number(v):
            errors.append(f"answers: {k} must be a number, got {v!r}")
    return errors


# ------------------------------------------------------------------------------------------------------------
# the plan: valid, fits, reaches the floor, not dominated (the part's central concept)


@per_problem("document")
def test_document_is_well_formed(world: World, ref: dict, name: str) -> None:
    errors = shape_errors(document(world, name), ref, name)
    assert not errors, f"{name}(): " + "; ".join(errors)


@per_problem("plan")
def test_plan_is_valid(world: World, ref: dict, name: str) -> None:
    checked_plan(world, ref, name)


@per_problem("plan")
def test_plan_fits_memory(world: World, ref: dict, name: str) -> None:
    plan = checked_plan(world, ref, name)["plan"]
    model, cluster, p = problem(ref, name)
    mem = ref["verify"].memory_per_gpu(model, cluster, plan, p["seq_len"])
    parts = ", ".join(f"{k} {mem[k] / 1e9:.1f}" for k in ("params", "grads", "optimizer", "activations"))
    assert mem["fits"], (
        f"{name}: the busiest GPU needs {mem['total'] / 1e9:.1f} GB ({parts}), more than the "
        f"{mem['limit'] / 1e9:.0f} GB a plan may use (90% of {cluster.memory_bytes / 1e9:.0f} GB)"
    )


@per_problem("plan")
def test_plan_meets_throughput_floor(world: World, ref: dict, name: str) -> None:
    plan = checked_plan(world, ref, name)["plan"]
    model, cluster, p = problem(ref, name)
    got = ref["verify"].mfu(model, cluster, plan, p["seq_len"])
    t = ref["verify"].step_time(model, cluster, plan, p["seq_len"])
    where = ", ".join(f"{k} {v:.2f}" for k, v in t.items() if k != "total_s" and v)
    assert got >= p["mfu_floor"], (
        f"{name}: MFU {got:.3f} is under the floor {p['mfu_floor']}: {t['total_s']:.1f} s per step ({where})"
    )


@per_problem("plan")
def test_plan_is_not_dominated(world: World, ref: dict, name: str) -> None:
    plan = checked_plan(world, ref, name)["plan"]
    model, cluster, p = problem(ref, name)
    better = ref["verify"].dominating_plan(model, cluster, p["global_batch"], p["seq_len"], plan, MARGIN)
    if better is None:
        return
    step, memory, other = better
    mine = ref["verify"].step_time(model, cluster, plan, p["seq_len"])["total_s"]
    shown = {k: other[k] for k in ("tp", "pp", "dp", "ep", "zero_stage", "recompute", "micro_batch_size")}
    raise AssertionError(
        f"{name}: a plan of the same space is at least {MARGIN:.0%} faster ({step:.2f} s against your "
        f"{mine:.2f} s per step) and needs no more memory ({memory / 1e9:.1f} GB): {shown}. What does it do "
        "differently, and which of your choices cost the time?"
    )


# ------------------------------------------------------------------------------------------------------------
# the answers, recomputed for the student's plan


@per_question()
def test_answer(world: World, ref: dict, name: str, question: str) -> None:
    doc = checked_plan(world, ref, name)
    if question not in asked(ref, name, doc["plan"]):
        return  # dispatch_mb and ep_s are not asked of a plan without EP
    model, cluster, p = problem(ref, name)
    want = ref["verify"].answers(model, cluster, doc["plan"], p["seq_len"], (question,))[question]
    got = doc["answers"][question]
    if question == "dominant_overhead":  # a set: every term within 1% of the largest is accepted
        assert got in want, (
            f"{name}: the largest overhead of this plan is {' or '.join(sorted(want))}, not {got!r}"
        )
        return
    if question == "crosses_network":
        assert set(got) <= GROUPS and sorted(set(got)) == want, (
            f"{name}: the groups whose traffic leaves a node in this plan are {want}, not {sorted(set(got))}"
        )
        return
    if isinstance(want, int):
        assert got == want, f"{name}: {question} is {want} for this plan, got {got}"
        return
    atol = ABS.get(question, ABS["s"] if question.endswith("_s") else 0.0)
    if math.isclose(got, want, rel_tol=REL, abs_tol=atol):
        return
    raise AssertionError(
        f"{name}: {question} = {got!r}, but this plan gives {want:.6g} (1% allowed){hint(got, want)}"
    )


def hint(got: float, want: float) -> str:
    """Name the usual slip when `got` is `want` in other units or off by a classic factor."""
    slips = {
        "GiB instead of GB": 1e9 / 2**30,
        "MiB instead of MB": 1e6 / 2**20,
        "milliseconds instead of seconds": 1e3,
        "a percentage instead of a fraction": 100.0,
        "bytes instead of GB or MB": 1e9,
        "twice the right value (bidirectional bandwidth? fp32?)": 2.0,
        "half the right value (bidirectional NVLink counted as per direction?)": 0.5,
    }
    for slip, factor in slips.items():
        if want and math.isclose(got, want * factor, rel_tol=REL):
            return f": that is {slip}"
    return ""


# ------------------------------------------------------------------------------------------------------------
# unseen problems: plan(problem) on models and clusters generated from seeds in the judge

# Seeds chosen so that each family exposes the planner mistakes of the bug corpus (grade validate checks that
# a bug of every concept graded here is caught by these cases alone): dense 27 (6 nodes of 8 GPUs, like seed
# 3 before it) is a problem where a planner that forgets the optimizer states under ZeRO-1 picks a plan that
# does not fit.
GENERATED = (("dense", 1), ("dense", 2), ("dense", 27), ("moe", 1), ("moe", 2))
KIND_PART = {"dense": "llama3_70b", "moe": "deepseek_v3"}


def per_generated(concept: str) -> Any:
    params = [
        pytest.param(
            kind, seed, marks=(*marks(KIND_PART[kind], concept), pytest.mark.generated), id=f"{kind}-{seed}"
        )
        for kind, seed in GENERATED
    ]
    return at_world_size_1("kind,seed", params)


@functools.cache
def _draw(kind: str, seed: int, attempt: int) -> dict:
    """A problem in plan()'s form with realistic numbers: H100/A100/H200-like GPUs, 4 or 8 per node and NVLink
    domain, 2-6 nodes (6: a world that is not a power of two), NIC shares of 12.5-100 GB/s; Llama-like dense
    models and DeepSeek-like MoE models (most parameters in routed experts) whose model states fill 15-70% of
    the cluster's memory (MoE: 40-70%)."""
    rng = random.Random(f"24-{kind}-{seed}-{attempt}")
    while True:
        gpus = (4, 8)[seed % 2] if kind == "dense" else rng.choice((4, 8))
        nodes = (6, 4, 3)[seed % 3] if kind == "dense" else rng.choice((2, 4, 6))
        gpu = rng.choice(((40, 312.0, 300.0), (80, 312.0, 300.0), (80, 989.4, 450.0), (141, 989.4, 450.0)))
        cluster = {"node": "generated", "nodes": nodes, "gpus": gpus, "domain": gpus, "memory_gb": gpu[0],
                   "tflops": gpu[1], "nvlink": gpu[2], "pcie": rng.choice((31.5, 63.0)),
                   "nic": rng.choice((12.5, 25.0, 50.0, 100.0))}  # fmt: skip
        dim = rng.choice((2048, 3072, 4096, 5120, 6144, 8192))
        heads, kv = dim // 128, rng.choice((8, dim // 128))
        layers = rng.randrange(18, 81)  # odd counts too: stages of unequal length
        ffn = round(dim * rng.uniform(2.6, 3.6) / 256) * 256
        vocab = rng.choice((32000, 128256, 151936))
        attention = 2 * dim * dim + 2 * dim * kv * 128 + 2 * dim  # q, o, k, v and two norms
        outside = 2 * vocab * dim + dim
        spec = {"name": f"generated-{kind}-{seed}", "n_layers": layers, "dim": dim, "n_heads": heads,
                "n_kv_heads": kv, "ffn_dim": ffn, "vocab_size": vocab}  # fmt: skip
        if kind == "dense":
            params = layers * (attention + 3 * dim * ffn) + outside
            spec |= {"params": params, "active_params": params}
        else:
            experts, top_k = rng.choice((32, 64)), rng.choice((4, 8))
            first_dense = rng.choice((0, 1, 3))
            moe_layers = layers - first_dense
            expert = 3 * dim * round(dim * rng.uniform(0.5, 1.0) / 128) * 128
            dense = layers * attention + first_dense * 3 * dim * ffn + moe_layers * (dim * experts + expert)
            dense += outside  # router and one shared expert per MoE layer
            routed = moe_layers * experts * expert
            active = dense + moe_layers * top_k * expert
            spec |= {"params": dense + routed, "active_params": active, "n_experts": experts, "top_k": top_k,
                     "moe_layers": moe_layers, "expert_params": routed}  # fmt: skip
        world = nodes * gpus
        if not (0.15, 0.4)[kind == "moe"] <= 16 * spec["params"] / (world * gpu[0] * 1e9) <= 0.7:
            continue
        return {"model": spec, "cluster": cluster, "global_batch": world * rng.choice((4, 8, 16)),
                "seq_len": rng.choice((2048, 4096, 8192)), "mfu_floor": 0.0}  # fmt: skip


@functools.cache
def _generated(kind: str, seed: int, verify: Any, plans: Any) -> dict:
    """_draw's problem, redrawn until some plan of the planner's space fits, with the MFU floor set at 90% of
    the best plan's MFU (rounded down to 0.01)."""
    for attempt in range(100):
        problem = _draw(kind, seed, attempt)
        model, cluster = plans.problem_objects(problem)
        rows = verify.frontier(model, cluster, problem["global_batch"], problem["seq_len"])
        if rows:
            best = dict(rows[0][2])
            top = verify.mfu(model, cluster, best, problem["seq_len"])
            return problem | {"mfu_floor": math.floor(90 * top) / 100}
    raise AssertionError(f"no feasible {kind} problem for seed {seed}")  # pragma: no cover


def generated(ref: dict, kind: str, seed: int) -> dict:
    return _generated(kind, seed, ref["verify"], ref["plans"])


def generated_plan(world: World, ref: dict, problem: dict) -> dict:
    """plan(problem)'s document, well formed and with a valid plan; else a failed check saying why."""
    [res] = world.run("rank_programs:plan_document", inputs={"function": "plan", "problem": problem})
    doc, where = res.value, f"plan({problem['model']['name']} on {describe(problem)})"
    assert isinstance(doc, dict) and {"plan", "answers"} <= set(doc), (
        f"{where}: expected a mapping with keys plan and answers, got {doc!r:.200}"
    )
    plan, answers = doc["plan"], doc["answers"]
    keys = set(ref["verify"].PLAN_KEYS)
    assert isinstance(plan, dict) and set(plan) == keys, f"{where}: plan must have the keys {sorted(keys)}"
    assert isinstance(answers, dict) and set(ref["plans"].PLAN_QUESTIONS) <= set(answers), (
        f"{where}: answers must give {list(ref['plans'].PLAN_QUESTIONS)}"
    )
    model, cluster = ref["plans"].problem_objects(problem)
    errors = ref["verify"].layout_errors(model, cluster, problem["global_batch"], plan)
    assert not errors, f"{where}: the plan {plan} breaks exercise 21's layout rules: " + "; ".join(errors)
    return doc


def describe(problem: dict) -> str:
    c, m = problem["cluster"], problem["model"]
    return (
        f"{c['nodes']} nodes x {c['gpus']} GPUs of {c['memory_gb']} GB, {m['n_layers']} layers, "
        f"dim {m['dim']}, batch {problem['global_batch']} x {problem['seq_len']}"
    )


@per_generated("plan")
def test_generated_plan_is_good(world: World, ref: dict, kind: str, seed: int) -> None:
    problem = generated(ref, kind, seed)
    plan = generated_plan(world, ref, problem)["plan"]
    model, cluster = ref["plans"].problem_objects(problem)
    verify, seq = ref["verify"], problem["seq_len"]
    where = f"plan({model.name} on {describe(problem)}) chose {plan}"
    mem = verify.memory_per_gpu(model, cluster, plan, seq)
    assert mem["fits"], (
        f"{where}: its busiest GPU needs {mem['total'] / 1e9:.1f} GB of {mem['limit'] / 1e9:.0f}"
    )
    got = verify.mfu(model, cluster, plan, seq)
    assert got >= problem["mfu_floor"], f"{where}: MFU {got:.3f} is under the floor {problem['mfu_floor']}"
    better = verify.dominating_plan(model, cluster, problem["global_batch"], seq, plan, MARGIN)
    assert better is None, (
        f"{where}: a plan of the same space is at least {MARGIN:.0%} faster ({better[0]:.2f} s) and needs no "
        f"more memory ({better[1] / 1e9:.1f} GB): {better[2]}"
    )


@per_generated("overheads")
def test_generated_reading(world: World, ref: dict, kind: str, seed: int) -> None:
    problem = generated(ref, kind, seed)
    doc = generated_plan(world, ref, problem)
    model, cluster = ref["plans"].problem_objects(problem)
    want = ref["verify"].answers(model, cluster, doc["plan"], problem["seq_len"], tuple(WORDS))
    got, where = doc["answers"], f"plan({model.name} on {describe(problem)}) chose {doc['plan']}"
    assert got["dominant_overhead"] in want["dominant_overhead"], (
        f"{where}: its largest overhead is {' or '.join(sorted(want['dominant_overhead']))}, "
        f"not {got['dominant_overhead']!r}"
    )
    crosses = got["crosses_network"]
    assert isinstance(crosses, list) and sorted(set(crosses)) == want["crosses_network"], (
        f"{where}: the groups whose traffic leaves a node are {want['crosses_network']}, not {crosses!r}"
    )
