"""What this catches: the first things to get right in each part. Run them with `grade exercise 14`.

- routing: the capacity formula, and dropping when every token wants the same expert.
- dispatch: with one expert per token, every rank receives exactly the rows routed to its experts, in the
  documented order, and combine brings them back.
- moe_layer: with no token dropped, your layer equals a dense MoE computed here on one process.
The hidden suite adds top-2 and top-3 routing with drops, empty splits, the tokens per expert, and the bytes
of each all-to-all.
"""

from __future__ import annotations

import pytest
import torch

from grader.harness import World, assert_close, assert_equal

FORBID = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter", "all_to_all"]


@pytest.mark.part("14.routing")
@pytest.mark.concept("capacity_formula")
def test_capacity(world: World) -> None:
    for args, expected in [((16, 4, 2, 1.25), 10), ((10, 4, 1, 1.0), 3)]:  # (T, E, k, cf) -> C
        [res] = world.call("moe", "expert_capacity", args=[args])
        assert res.returned == expected, f"expert_capacity{args}: got {res.returned!r}, expected {expected}"


@pytest.mark.part("14.routing")
@pytest.mark.concept("first_choices_first")
def test_everyone_wants_expert_0(world: World) -> None:
    logits = torch.tensor([[3.0, 0.0]] * 4, dtype=torch.float64)  # 4 tokens, 2 experts, capacity 2
    [res] = world.call("moe", "route", args=[(logits, 1, 2)])
    experts, gates, keep = res.returned
    assert_equal(experts, torch.zeros(4, 1, dtype=torch.int64), what="experts")
    assert_equal(
        keep, torch.tensor([[True], [True], [False], [False]]), what="keep: first come, first served"
    )
    assert_close(gates, torch.ones(4, 1, dtype=torch.float64), rtol=1e-12, atol=0, what="gates (k = 1)")


@pytest.mark.part("14.dispatch")
@pytest.mark.concept("dispatch_layout")
def test_one_expert_per_token(world: World) -> None:
    p, T = world.size, 5
    E = 2 * p  # two experts per rank: rank r holds experts 2r and 2r+1
    inputs = []
    for r in range(p):
        x = (100 * r + 10 * torch.arange(T).unsqueeze(1) + torch.arange(3)).to(torch.float64)  # (T, 3)
        experts = ((torch.arange(T) * 3 + r) % E).unsqueeze(1)  # (T, 1): token t -> expert (3t + r) % E
        keep = torch.ones(T, 1, dtype=torch.bool)
        gates = torch.ones(T, 1, dtype=torch.float64)
        inputs.append({"x": x, "experts": experts, "keep": keep, "gates": gates, "num_experts": E})
    results = world.run("rank_programs:dispatch_combine", inputs=inputs, forbid=FORBID)
    for res in results:
        r = res.rank
        # rows for my experts: by source rank, then by my local expert, then in the source's token order
        expected = torch.cat([a["x"][a["experts"][:, 0] == e] for a in inputs for e in (2 * r, 2 * r + 1)])
        assert_equal(res.value["recv_x"], expected, rank=r, world_size=p, what="received rows")
        # the trusted expert multiplies each row by (its expert + 1); the gate is 1
        y = inputs[r]["x"] * (inputs[r]["experts"] + 1).to(torch.float64)
        assert_close(res.value["y"], y, rtol=1e-12, atol=0, rank=r, world_size=p, what="y after combine")


@pytest.mark.part("14.moe_layer")
@pytest.mark.concept("moe_matches_dense")
def test_no_drops_matches_dense(world: World) -> None:
    p, T, H, F, k = world.size, 6, 4, 5, 2
    E = 2 * p
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(T, H, generator=g, dtype=torch.float64) for _ in range(p)]
    router = torch.randn(H, E, generator=g, dtype=torch.float64)
    w1 = torch.randn(E, H, F, generator=g, dtype=torch.float64)
    w2 = torch.randn(E, F, H, generator=g, dtype=torch.float64)
    cf = E / k  # capacity = T: nothing is dropped
    inputs = [
        {
            "x": xs[r],
            "router_weight": router,
            "w1": w1[2 * r : 2 * r + 2],
            "w2": w2[2 * r : 2 * r + 2],
            "k": k,
            "capacity_factor": cf,
        }
        for r in range(p)
    ]
    results = world.run("rank_programs:moe_layer", inputs=inputs, forbid=FORBID)
    for res in results:
        x = xs[res.rank]
        top, experts = torch.softmax(x @ router, dim=-1).topk(k, dim=-1)
        gates = top / top.sum(dim=-1, keepdim=True)
        y = torch.zeros_like(x)  # the dense MoE: every token through its k experts, on one process
        for t in range(T):
            for j in range(k):
                e = int(experts[t, j])
                y[t] += gates[t, j] * (torch.relu(x[t] @ w1[e]) @ w2[e])
        # float64; experts run on other row counts than here and the k terms add in another order
        assert_close(
            res.value["y"], y, rtol=1e-10, atol=1e-12, rank=res.rank, world_size=p, what="MoE output"
        )
