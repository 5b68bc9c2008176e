"""What this catches: the first numbers of a cluster network plan. Run them with `grade exercise 19`.

The checks compare your fabric.py and placement.py with published figures and small cases worked by hand. The
hidden suite checks every function exactly, on more fabrics, jobs and rank orders.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from coursekit.hardware import load
from grader.harness import World

RADIX = load().switches["qm9700"].radix  # 64-port NDR InfiniBand switch
SMALL_RAIL = {"gpus_per_node": 8, "nodes_per_unit": 4, "rail_optimized": True}  # 2 units of 4 DGX-like nodes
JOB = {"tp": 8, "pp": 2, "dp": 4}  # 64 GPUs


def call(world: World, module: str, function: str, *args: Any, **inputs: Any) -> Any:
    inputs = {"module": module, "function": function, "args": list(args)} | inputs
    [res] = world.run("rank_programs:call", inputs=inputs)
    return res.value


@pytest.mark.part("19.spine_leaf")
@pytest.mark.concept("two_tier_sizing")
def test_superpod_512_gpus(world: World) -> None:
    # NVIDIA DGX SuperPOD B200 reference architecture: 2 scalable units (512 GPUs) use 16 leaf and 8 spine
    # switches; 64-port switches split 32 down / 32 up at 1:1
    got = call(world, "fabric", "two_tier", 512, RADIX)
    assert isinstance(got, dict) and (got.get("leaves"), got.get("spines")) == (16, 8), got
    assert got["max_endpoints"] == RADIX * RADIX // 2, f"two tiers of {RADIX}-port switches: k^2/2 = 2048"


@pytest.mark.part("19.placement")
@pytest.mark.concept("rail_hops")
def test_rail_change_crosses_the_spine(world: World) -> None:
    # rank 0 = node 0 GPU 0 (rail 0); rank 8 = node 1 GPU 0 (rail 0); rank 9 = node 1 GPU 1 (rail 1)
    hops = [call(world, "placement", "hop", 0, dst, cluster=SMALL_RAIL) for dst in (1, 8, 9)]
    assert hops == ["nvlink", "leaf", "spine"], f"hops from rank 0 to ranks 1, 8, 9: {hops}"


@pytest.mark.part("19.spine_traffic")
@pytest.mark.concept("megatron_volumes")
def test_megatron_tp_calls(world: World) -> None:
    shape = {
        "hidden": 8192,
        "seq_len": 4096,
        "micro_batch": 1,
        "microbatches": 8,
        "layers": 80,
        "params": 70e9,
    }
    [res] = world.run("rank_programs:megatron_traffic", inputs=shape | {"sizes": JOB})
    # Megatron-LM's TP all-reduces of the 40 layers a stage holds, for 8 micro-batches
    assert res.value["tp_calls"] == 1280, res.value
    assert res.value["tp_bytes"] == 67_108_864, "one activation of b * s * h bf16 elements"
    assert math.isclose(res.value["dp_bytes"], 8.75e9, rel_tol=1e-9), "bf16 grads of this rank's share"


@pytest.mark.part("19.layouts")
@pytest.mark.concept("choose_order")
def test_tp_fastest_is_best(world: World) -> None:
    traffic = {"tp_bytes": 2**26, "tp_calls": 1280, "pp_bytes": 2**26, "pp_calls": 8, "dp_bytes": 8.75e9}
    rows = call(world, "placement", "rank_orders", JOB, cluster=SMALL_RAIL, traffic=traffic)
    assert [row[0] for row in rows][:2] == ["tp-dp-pp", "tp-pp-dp"], rows


@pytest.mark.part("19.layouts")
@pytest.mark.concept("hop_census")
def test_dp_fastest_puts_tp_on_the_spine(world: World) -> None:
    tp = call(world, "placement", "hop_counts", "tp", JOB, "dp-tp-pp", cluster=SMALL_RAIL)
    assert tp["spine"] > 0, f"with DP fastest, TP groups span nodes and rails: {tp}"
