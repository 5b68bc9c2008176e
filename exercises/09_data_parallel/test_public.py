"""What this catches: the first things to get right in data-parallel training, on 2 and 4 ranks.

Run them with `grade exercise 09`. Each rank trains the same small float64 model on its own rows of a batch
with your synchronization; the check trains one process on the whole batch with plain torch and compares the
weights. The hidden suite checks more: broadcast, frozen layers, all-reduce counts, exact bucket boundaries,
and the order and timing of every bucket's all-reduce (see rank_programs.py for how that is observed).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from coursekit.toy_models import linear_chain, train_sgd
from grader.harness import World, assert_close

# float64: the ranks add the same gradients in another order than one process does, a few ulps apart;
# 1e-9 leaves room for that and for nothing else.
RTOL, ATOL = 1e-9, 1e-12
SGD = dict(lr=0.2, momentum=0.9)


def run(world: World, program: str, steps: int, **extra) -> tuple[list, list[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    widths = [4, 6, 5, 3]  # Linear(4,6) tanh Linear(6,5) tanh Linear(5,3)
    weights = []
    for fan_in, fan_out in itertools.pairwise(widths):
        weights += [
            torch.randn(fan_out, fan_in, generator=g, dtype=torch.float64),
            torch.zeros(fan_out).double(),
        ]
    x = torch.randn(3 * world.size, 4, generator=g, dtype=torch.float64)  # 3 rows per rank
    y = torch.randn(3 * world.size, 3, generator=g, dtype=torch.float64)
    expected = train_sgd(linear_chain(weights), x, y, steps=steps, **SGD)
    inputs = [
        dict(weights=weights, x=xs, y=ys, steps=steps, **SGD, **extra)
        for xs, ys in zip(x.chunk(world.size), y.chunk(world.size), strict=True)
    ]
    return world.run(program, inputs=inputs), expected


def check(results: list, expected: list[torch.Tensor]) -> None:
    for res in results:
        for j, (got, want) in enumerate(zip(res.value["params"], expected, strict=True)):
            assert_close(
                got,
                want,
                rtol=RTOL,
                atol=ATOL,
                rank=res.rank,
                world_size=len(results),
                what=f"parameter {j} (vs one process on the full batch)",
            )


@pytest.mark.concept("gradient_mean")
@pytest.mark.part("09.naive")
def test_naive_matches_one_process(world: World) -> None:
    check(*run(world, "rank_programs:train_naive", steps=2))


@pytest.mark.concept("reverse_fill")
@pytest.mark.part("09.buckets")
def test_buckets_docstring_example(world: World) -> None:
    [res] = world.call("ddp", "assign_buckets", args=[([8, 8, 16, 4], 20)])
    assert res.returned == [[3, 2], [1, 0]], f"assign_buckets([8, 8, 16, 4], 20) returned {res.returned}"


@pytest.mark.concept("bucketed_mean")
@pytest.mark.part("09.overlap")
def test_bucketed_matches_one_process(world: World) -> None:
    results, expected = run(world, "rank_programs:train_bucketed", steps=2, cap_bytes=200)
    check(results, expected)
    for res in results:
        for log in res.value["logs"]:
            started = [ev for ev in log if ev[0] == "launch"]
            assert len(started) == len(res.value["buckets"]), "one all-reduce per bucket per step"
            assert all(ev[3] for ev in started), "start each bucket's all-reduce with async_op=True"
