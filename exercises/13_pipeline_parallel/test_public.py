"""What this catches: the first things to get right in each part. Run them with `grade exercise 13`.

- schedules: 1F1B's warm-up of min(p-r-1, m) forwards, and one interleaved schedule written out by hand.
- simulator: a GPipe step timed by hand, and the closed-form bubble (p-1)/m of Narayanan et al. 2021.
- executor: GPipe on your ranks gives the same outputs and gradients as the unsplit MLP, computed here.
The hidden suite checks every schedule against Megatron-LM's order, times random schedules, feeds the
simulator invalid ones, and runs 1F1B and interleaved schedules on 2 and 4 ranks.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import linear

from grader.harness import World, assert_close

FORBID = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_single"]


def ops(world: World, function: str, *args: int) -> list[str]:
    """Each rank's ops as a string such as 'FFBB' (checks the order of F and B only)."""
    [res] = world.call("schedules", function, args=[args])
    return ["".join(a[0] for a in actions) for actions in res.returned]


@pytest.mark.part("13.schedules")
@pytest.mark.concept("one_f_one_b")
def test_1f1b_warmup(world: World) -> None:
    p, m = 4, 6
    for r, got in enumerate(ops(world, "one_f_one_b_schedule", p, m)):
        w = min(p - r - 1, m)  # warm-up forwards: the last rank has none, the first p-1
        assert got == "F" * w + "FB" * (m - w) + "B" * w, f"rank {r}: got {got}"


@pytest.mark.part("13.schedules")
@pytest.mark.concept("interleaved_virtual_stages")
def test_interleaved_p2_m4_v2(world: World) -> None:
    [res] = world.call("schedules", "interleaved_schedule", args=[(2, 4, 2)])
    got = [[tuple(a) for a in actions] for actions in res.returned]
    # rank 1: w = 2(p-r-1) + (v-1)p = 2 warm-up forwards, then (F, B) pairs, then 2 backwards
    f = [
        ("F", 0, 0),
        ("F", 1, 0),
        ("F", 0, 1),
        ("F", 1, 1),
        ("F", 2, 0),
        ("F", 3, 0),
        ("F", 2, 1),
        ("F", 3, 1),
    ]
    b = [("B", mb, 1 - c) for _, mb, c in f]  # backward k: the same microbatch on chunk v-1-c
    expected = f[:2] + [x for k in range(6) for x in (f[k + 2], b[k])] + b[6:]
    assert got[1] == expected, f"rank 1: got {got[1]}, expected {expected}"


@pytest.mark.part("13.simulator")
@pytest.mark.concept("dependency_clock")
def test_hand_timed_gpipe(world: World) -> None:
    # p = 2, m = 2, t_f = 1, t_b = 2. Rank 1: F0 at 1, F1 at 2, B0 at 3, B1 at 5 (ends 7).
    # Rank 0: F0 at 0, F1 at 1; B0 waits for rank 1's B0 (ends 5), B1 for rank 1's B1 (ends 7).
    schedule = [[["F", 0, 0], ["F", 1, 0], ["B", 0, 0], ["B", 1, 0]]] * 2
    [res] = world.call("schedules", "simulate", args=[(schedule, 2)], kwargs={"t_f": 1.0, "t_b": 2.0})
    got = res.returned
    assert got["start"] == [[0, 1, 5, 7], [1, 2, 3, 5]], f"start times {got['start']}"
    assert got["makespan"] == 9 and got["ideal"] == 6, f"makespan {got['makespan']}, ideal {got['ideal']}"
    assert abs(got["bubble_ratio"] - 0.5) < 1e-9 and abs(got["bubble_share"] - 1 / 3) < 1e-9
    assert got["peak_in_flight"] == [2, 2]


@pytest.mark.part("13.simulator")
@pytest.mark.concept("bubble_definitions")
def test_gpipe_bubble_formula(world: World) -> None:
    p, m = 4, 8
    schedule = [[["F", i, 0] for i in range(m)] + [["B", i, 0] for i in range(m)] for _ in range(p)]
    [res] = world.call("schedules", "simulate", args=[(schedule, m)])
    # Narayanan et al. 2021 §2.2.1: bubble / ideal = (p-1)/m; GPipe §2.3: share (p-1)/(m+p-1)
    assert abs(res.returned["bubble_ratio"] - (p - 1) / m) < 1e-9, res.returned["bubble_ratio"]
    assert abs(res.returned["bubble_share"] - (p - 1) / (m + p - 1)) < 1e-9, res.returned["bubble_share"]


@pytest.mark.part("13.executor")
@pytest.mark.concept("pipeline_equals_unsplit")
def test_gpipe_matches_unsplit_mlp(world: World) -> None:
    p, m, h = world.size, 3, 4
    g = torch.Generator().manual_seed(0)
    data = {
        "weights": [torch.randn(h, h, generator=g, dtype=torch.float64) * 0.6 for _ in range(p)],
        "biases": [torch.randn(h, generator=g, dtype=torch.float64) * 0.1 for _ in range(p)],
        "inputs": [torch.randn(2, h, generator=g, dtype=torch.float64) for _ in range(m)],
        "targets": [torch.randn(2, h, generator=g, dtype=torch.float64) for _ in range(m)],
    }
    gpipe = [["F", i, 0] for i in range(m)] + [["B", i, 0] for i in range(m)]
    world.run("rank_programs:warm_up_autograd", inputs={})  # the first backward imports sympy: not your time
    results = world.run("rank_programs:pipeline", inputs={"actions": gpipe, **data}, forbid=FORBID)
    # the unsplit model: stage s = tanh(x W_s^T + b_s); loss = mean over microbatches of 0.5 |y - t|^2
    params = [
        (w.clone().requires_grad_(), b.clone().requires_grad_())
        for w, b in zip(data["weights"], data["biases"], strict=True)
    ]
    total = 0
    for i, (x, t) in enumerate(zip(data["inputs"], data["targets"], strict=True)):
        for w, b in params:
            x = torch.tanh(linear(x, w, b))
        if results[-1].value["outputs"]:
            assert_close(
                results[-1].value["outputs"][i], x.detach(), rtol=1e-12, atol=1e-12, what=f"output {i}"
            )
        total = total + 0.5 * ((x - t) ** 2).sum()
    (total / m).backward()
    assert results[-1].value["outputs"], "the last rank must return the last stage's outputs"
    for res in results:
        [[gw, gb]] = res.value["grads"]  # one chunk per rank: stage s = rank
        w, b = params[res.rank]
        # float64; microbatch gradients are summed in another order than here
        assert_close(gw, w.grad, rtol=1e-10, atol=1e-12, rank=res.rank, world_size=p, what="weight.grad")
        assert_close(gb, b.grad, rtol=1e-10, atol=1e-12, rank=res.rank, world_size=p, what="bias.grad")
