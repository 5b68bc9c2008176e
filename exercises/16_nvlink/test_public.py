"""What this catches: answers far from published figures. Public self-checks: `grade exercise 16` runs them.

Each check compares your nvlink.py with a figure someone published (the sources are next to each number), not
with the reference solution; the hidden suite checks every function exactly, on many more inputs.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from grader.harness import World


def call(world: World, function: str, *args: Any) -> Any:
    """`nvlink.function(*args)` on the one rank."""
    [res] = world.call("nvlink", function, args=[args])
    return res.returned


def near(got: Any, expected: float, what: str, rel: float = 1e-9) -> None:
    if type(got) not in (int, float):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if not math.isclose(got, expected, rel_tol=rel):
        hint = ""
        if expected and (math.isclose(got / expected, 2) or math.isclose(got / expected, 0.5)):
            hint = " (off by exactly 2x: per-direction and bidirectional mixed up?)"
        raise AssertionError(f"{what}: got {got!r}, expected {expected!r}{hint}")


@pytest.mark.part("16.bandwidth")
@pytest.mark.concept("per_direction")
def test_h100_nvlink_both_conventions(world: World) -> None:
    # NVIDIA: H100 "900 GB/s" (18 links x 50 GB/s, both ways); scaling book gpus.md: 450 GB/s full-duplex
    near(call(world, "nvlink_gpu_gb_s", "nvlink4", "bidirectional"), 900, "H100 NVLink, bidirectional")
    near(call(world, "nvlink_gpu_gb_s", "nvlink4", "per-direction"), 450, "H100 NVLink, per direction")


@pytest.mark.part("16.allreduce")
@pytest.mark.concept("ring_cost")
def test_allreduce_in_a_dgx_h100(world: World) -> None:
    # nccl-tests PERFORMANCE.md's bound for 1 GB over the 8 H100s of a DGX H100 at 450 GB/s per direction
    near(call(world, "domain_allreduce_time_s", 1e9, "dgx_h100"), 3.8889e-3, "1 GB in a DGX H100", rel=1e-4)


@pytest.mark.part("16.bisection")
@pytest.mark.concept("bisection_both_ways")
def test_dgx_h100_bisection(world: World) -> None:
    # scaling book gpus.md, Quiz 2: "8 * 450GB/s ... or 3.6TB/s of bisection bandwidth" (both directions)
    near(call(world, "domain_bisection_gb_s", "dgx_h100", "bidirectional"), 3600, "DGX H100 bisection")


@pytest.mark.part("16.tp_domain")
@pytest.mark.concept("tp_degree_limits")
def test_tp_in_an_nvl72(world: World) -> None:
    # 72 GPUs share one NVLink domain, but TP=72 cannot split 64 heads, and TP=16 cannot tile 72 GPUs
    assert call(world, "max_tp_degree", 72, 64) == 8, "largest TP for 64 heads in an NVL72"


@pytest.mark.part("16.tp_domain")
@pytest.mark.concept("layer_comm")
def test_llama_70b_tp8_layer(world: World) -> None:
    # ground-truth.md §10.2: 70B (h = 8192), TP=8, s=8192, b=1, bf16, on NVLink at 450 GB/s: 2.09 ms per layer
    got = call(world, "tp_layer_comm_time_s", 8192, 1, 8192, 8, 8, 450.0, 50.0)
    near(got, 2.088e-3, "70B TP=8 layer on NVLink", rel=1e-3)  # 0.1%: the published figure has 4 digits
