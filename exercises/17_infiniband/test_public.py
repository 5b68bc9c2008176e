"""What this catches: answers far from published figures. Public self-checks: `grade exercise 17` runs them.

Each check compares your fabric.py with a figure someone published (sources next to each number), not with
the reference solution; the hidden suite checks every function exactly, on many more inputs.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from grader.harness import World


def call(world: World, function: str, *args: Any) -> Any:
    """`fabric.function(*args)` on the one rank."""
    [res] = world.call("fabric", function, args=[args])
    return res.returned


@pytest.mark.part("17.fat_tree")
@pytest.mark.concept("host_capacity")
def test_radix_64(world: World) -> None:
    # Al-Fares et al. 2008, §3: radix 64, 2,048 hosts in 2 tiers, 65,536 in 3 (ground-truth.md §7.2, App. A)
    assert call(world, "two_tier_hosts", 64) == 2048, "2-tier hosts for radix 64"
    assert call(world, "three_tier_hosts", 64) == 65536, "3-tier hosts for radix 64"


@pytest.mark.part("17.sizing")
@pytest.mark.concept("tier_sizing")
def test_superpod_b200_four_units(world: World) -> None:
    # NVIDIA DGX SuperPOD B200 reference architecture, scaling table: 4 SUs = 1024 GPUs -> 32 leaf, 16 spine
    got = call(world, "fabric_size", 1024, 64)
    assert isinstance(got, dict), f"fabric_size must return a dict, got {got!r}"
    assert (got.get("leaves"), got.get("spines"), got.get("cores")) == (32, 16, 0), f"1024 GPUs: got {got}"


@pytest.mark.part("17.rails")
@pytest.mark.concept("rail_locality")
def test_same_rail_stays_on_its_leaf(world: World) -> None:
    # rail-optimized: GPU 3 of nodes 0 and 5 share leaf 3 of their 32-node unit; GPU 3 -> GPU 4 does not
    assert call(world, "path", [0, 3], [5, 3], 8, 64) == ["leaf"], "same rail, same unit"
    assert call(world, "path", [0, 3], [5, 4], 8, 64) == ["spine"], "different rails"


@pytest.mark.part("17.nics")
@pytest.mark.concept("injection_share")
def test_dgx_h100_injection(world: World) -> None:
    # scaling book gpus.md: 8 x 400 Gb/s NICs per DGX H100 -> 400 GB/s per node, 50 GB/s per GPU
    got = call(world, "per_gpu_injection_gb_s", "dgx_h100")
    assert type(got) in (int, float) and math.isclose(got, 50.0), (
        f"per-GPU injection: got {got!r}, expected 50"
    )


@pytest.mark.part("17.nics")
@pytest.mark.concept("nvlink_gap")
def test_dgx_h100_nvlink_gap(world: World) -> None:
    # scaling book gpus.md: 50 GB/s per GPU on the fabric against 450 GB/s of NVLink per GPU per direction
    got = call(world, "nvlink_to_network_ratio", "dgx_h100")
    assert type(got) in (int, float) and math.isclose(got, 9.0), f"NVLink/network: got {got!r}, expected 9"
