"""What this catches: estimators far from published figures, and plans that break the hard rules.
Public self-checks: `grade exercise 21` runs them.

Each check compares your modules with a figure someone published or with a rule from the README, not with the
reference solution. The hidden suite checks the estimators exactly, and judges seven plans with
the reference's estimators: fit, TP inside NVLink, DP and PP on the slow links, no listed alternative more
than 2% faster, true reasons.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from coursekit.cluster import Cluster
from coursekit.models import MODELS, ModelSpec
from grader.harness import World


def run(world: World, module: str, function: str, *args: Any) -> Any:
    """`module.function(*args)` on the one rank, Cluster and ModelSpec sent as plain data."""

    def wire(v: Any) -> Any:
        if isinstance(v, Cluster):
            return {"cluster": [v.node, v.nodes]}
        return {"model": v.to_dict()} if isinstance(v, ModelSpec) else v

    inputs = {"module": module, "function": function, "args": [wire(a) for a in args]}
    [res] = world.run("rank_programs:call", inputs=inputs)
    return res.value


def near(got: Any, expected: float, what: str, rel: float = 1e-9) -> None:
    if type(got) not in (int, float):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if not math.isclose(got, expected, rel_tol=rel):
        raise AssertionError(f"{what}: got {got!r}, expected {expected!r} (allowed {rel:.0e} relative)")


def plan(tp: int, pp: int, dp: int, zero: int, recompute: str, mbs: int, batch: int) -> dict:
    return {"tp": tp, "pp": pp, "dp": dp, "ep": 1, "zero_stage": zero, "recompute": recompute,
            "micro_batch_size": mbs, "num_microbatches": batch // (dp * mbs)}  # fmt: skip


@pytest.mark.part("21.fit_check")
@pytest.mark.concept("states_against_usable_memory")
def test_70b_needs_16_h100s_for_its_states(world: World) -> None:
    # Ultra-Scale Playbook: 16 bytes per parameter, 70B -> 1120 GB; Llama-3 70B's 70.55B -> 1128.9 GB,
    # which needs 16 H100s at 72 GB usable each
    got = run(world, "planner", "fit_check", MODELS["llama3_70b"], Cluster("dgx_h100", 1))
    assert isinstance(got, dict), f"fit_check returned {got!r}"
    near(got["state_bytes"], 1128.9e9, "model states of Llama-3 70B", rel=1e-4)
    assert got["min_gpus"] == 16 and got["fits"] is False, f"8 H100s cannot hold them: {got!r}"


@pytest.mark.part("21.layouts")
@pytest.mark.concept("tp_within_nvlink")
def test_no_tp_without_nvlink(world: World) -> None:
    got = run(world, "planner", "layouts", MODELS["llama3_8b"], Cluster("rtx4090_pcie_8x", 2), 512)
    assert isinstance(got, list) and got, f"layouts returned {got!r}"
    assert all(x["tp"] == 1 for x in got), "an RTX 4090 has no NVLink: every TP group would cross PCIe"
    assert {"tp": 1, "pp": 2, "dp": 8, "ep": 1} in got, "TP 1 x PP 2 x DP 8 is a valid layout of 16 GPUs"


@pytest.mark.part("21.memory")
@pytest.mark.concept("stage_states")
def test_70b_tp8_pp4_states(world: World) -> None:
    # ground-truth.md §12: TP 8 x PP 4 without ZeRO holds 16 x 70.55B / 32 = 35.3 GB of states per GPU
    got = run(world, "estimate", "memory_per_gpu", MODELS["llama3_70b"], Cluster("dgx_h100", 4),
              plan(8, 4, 1, 0, "selective", 1, 1024), 4096)  # fmt: skip
    near(got["params"] + got["grads"] + got["optimizer"], 16 * 70_553_706_496 / 32, "states per GPU")


@pytest.mark.part("21.step_time")
@pytest.mark.concept("compute_at_mfu")
def test_8b_compute_at_40_percent_mfu(world: World) -> None:
    # ground-truth.md §12: 6 N T for 4M tokens on 8 H100s at 40% MFU = 63.85 s. 0.1%: rounded.
    got = run(world, "estimate", "step_time", MODELS["llama3_8b"], Cluster("dgx_h100", 1),
              plan(1, 1, 8, 1, "none", 1, 1024), 4096)  # fmt: skip
    near(got["compute_s"], 63.85, "compute seconds per step", rel=1e-3)


@pytest.mark.part("21.plan")
@pytest.mark.concept("good_plan")
def test_8b_on_8_h100s(world: World) -> None:
    got = run(world, "planner", "plan", MODELS["llama3_8b"], Cluster("dgx_h100", 1), 1024, 4096)
    assert isinstance(got, dict) and got.get("feasible") is True, f"plan returned {got!r}"
    assert got["tp"] * got["pp"] * got["dp"] == 8, f"the plan does not use the 8 GPUs: {got!r}"
    assert 8 % got["tp"] == 0, f"TP {got['tp']} leaves the NVLink domain"
    keys = {"tp", "pp", "ep", "zero_stage", "recompute", "micro_batch_size"}
    assert set(got["reasons"]) == keys, f"reasons must name {sorted(keys)}: {got['reasons']!r}"


@pytest.mark.part("21.plan")
@pytest.mark.concept("good_plan")
def test_deepseek_v3_does_not_fit_one_node(world: World) -> None:
    got = run(world, "planner", "plan", MODELS["deepseek_v3"], Cluster("dgx_h100", 1), 256, 4096)
    assert got == {"feasible": False, "reasons": {"fit": "memory"}}, f"plan returned {got!r}"
