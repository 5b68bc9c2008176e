"""What this catches: the first mistakes in each part of exercise 08.

Run them with `grade exercise 08`. The analyzer gets two of the dumps shipped in coursekit/data (fr_*.json);
the fixed programs run on 2 and 3 ranks and must finish with the right values; three symptoms are checked
for their variable. At submission: every shipped and many generated dumps, more shapes, message counts,
and the variable for each of the fifteen symptoms.
"""

from __future__ import annotations

import re

import pytest
import torch

from coursekit import fr_scenarios as fr
from grader.harness import World, assert_equal, peers

# The keys of SYMPTOMS in env_vars.py (the judge never imports your code, so they are listed here).
SYMPTOMS = [
    "nccl_init_details",
    "nccl_network_lines_only",
    "nccl_log_per_process",
    "collective_shape_check",
    "flight_recorder_on",
    "dump_on_timeout",
    "dump_location",
    "desync_report",
    "consumer_gpu_p2p",
    "bootstrap_interface",
    "ib_retry_timeout",
    "force_ring",
    "cpp_logs_missing",
    "nan_after_allreduce",
    "blocking_wait",
]


@pytest.mark.concept("seq_alignment")
@pytest.mark.part("08.flight_recorder")
@pytest.mark.parametrize("world", [1], indirect=True)
@pytest.mark.parametrize("name", ["skipped_allreduce", "broadcast_vs_allreduce", "healthy"])
def test_shipped_dumps(world: World, name: str) -> None:
    scenario = fr.load(name)  # coursekit/data/fr_<name>.json: story, every rank's dump, expected finding
    [res] = world.call("analyzer", "find_mismatches", args=[(scenario.dumps,)])
    assert res.returned == scenario.expected, (
        f"{name}: got {res.returned!r}, expected {scenario.expected!r} ({scenario.story})"
    )


HALO = peers("a halo exchange", lambda r, p: {(r - 1) % p, (r + 1) % p}, messages=2)
"""One message to each neighbour (left may be right), on the periodic array."""


@pytest.mark.concept("break_the_send_cycle")
@pytest.mark.part("08.halo_exchange")
def test_halo_stencil_finishes(world: World) -> None:
    p = world.size
    parts = [torch.arange(4) * (r + 1) for r in range(p)]
    full = torch.cat(parts)
    want = torch.split(torch.roll(full, 1) + full + torch.roll(full, -1), 4)
    world.expect(HALO)  # what a failure's space-time diagram compares your messages with
    for res in world.call("hangs", "halo_stencil", args=[(x,) for x in parts]):
        assert_equal(res.returned, want[res.rank], rank=res.rank, world_size=p, what="stencil")


@pytest.mark.concept("agree_on_step_count")
@pytest.mark.part("08.uneven_microbatches")
@pytest.mark.parametrize("world", [2], indirect=True)
def test_microbatches_finish(world: World) -> None:
    grads = [[torch.tensor([1, 2]), torch.tensor([3, 4])], [torch.tensor([10, 20])]]  # 2 and 1 micro-batches
    results = world.call(
        "hangs", "sum_microbatches", args=[(g, torch.zeros(2, dtype=torch.int64)) for g in grads]
    )
    for res in results:
        assert isinstance(res.returned, list) and len(res.returned) == 2, f"rank {res.rank}: {res.returned!r}"
        assert_equal(
            res.returned[0], torch.tensor([11, 22]), rank=res.rank, world_size=2, what="micro-batch 0"
        )
        assert_equal(res.returned[1], torch.tensor([3, 4]), rank=res.rank, world_size=2, what="micro-batch 1")


@pytest.mark.concept("pad_then_trim")
@pytest.mark.part("08.uneven_gather")
@pytest.mark.parametrize("world", [2], indirect=True)
def test_gather_uneven_finishes(world: World) -> None:
    parts = [torch.arange(3), torch.arange(5) + 10]
    for res in world.call("hangs", "gather_uneven", args=[(x,) for x in parts]):
        assert_equal(res.returned, torch.cat(parts), rank=res.rank, world_size=2, what="gathered tensor")


@pytest.mark.concept("setting_format")
@pytest.mark.part("08.env_vars")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_every_answer_is_a_setting(world: World) -> None:
    # Only the form is checked here: NAME=value, with an NCCL_ or TORCH_ name. Which one: at submission.
    for symptom in SYMPTOMS:
        [res] = world.call("env_vars", "diagnose", args=[(symptom,)])
        got = res.returned
        assert isinstance(got, str) and re.fullmatch(r"(NCCL|TORCH)_[A-Z0-9_]+=\S+", got.replace(" ", "")), (
            f"{symptom}: got {got!r}; expected 'NAME=value', e.g. 'NCCL_IB_HCA=mlx5_0'"
        )
