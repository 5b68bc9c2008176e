"""What this catches: MoE layers that route, drop, ship or sum tokens wrongly, or move more bytes than needed.

- routing: capacity rounded down or without k, top-k gates not renormalized (or renormalized after dropping),
  tokens dropped in token order across all choices instead of first choices first, an off-by-one capacity.
- dispatch: rows sent to the wrong rank or in the wrong order, receive buffers sized from the send side,
  splits counted per expert instead of per rank, combine that forgets the gates or overwrites instead of
  adding a token's k rows, send/recv or all-gathers instead of all_to_all_single; dispatch or combine that
  modify the caller's tensors (dropped slots marked in `experts` in place) or return a view of them.
- moe_layer: against a dense single-process MoE computed here in the judge with the same routing; the tokens
  each local expert processed; the bytes of every all-to-all, which equal T*k*h*8 when nothing is dropped.
Routing and dispatch layouts are compared exactly; float results with the tolerance written at each check.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
import torch

from grader.harness import World, assert_close, assert_equal

FORBID = [  # all_to_all_single is the one collective an EP layer needs
    "broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "barrier", "all_gather_object",
    "broadcast_object_list", "gather_object", "scatter_object_list",
]  # fmt: skip


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------------------------
# 14.routing


@pytest.mark.part("14.routing")
@pytest.mark.concept("capacity_formula")
def test_capacity(world: World) -> None:
    # ceil(k T cf / E): Megatron-LM get_capacity(num_tokens=T*k); every product here is exact in binary
    cases = [
        ((16, 4, 2, 1.25), 10),
        ((10, 4, 1, 1.0), 3),
        ((8, 8, 2, 1.0), 2),
        ((6, 4, 1, 1.5), 3),
        ((5, 8, 2, 0.5), 1),
        ((4096, 256, 8, 1.0), 128),
        ((7, 3, 2, 2.0), 10),
    ]
    for args, expected in cases:
        [res] = world.call("moe", "expert_capacity", args=[args])
        assert res.returned == expected and type(res.returned) is int, (
            f"expert_capacity{args}: got {res.returned!r}, expected {expected} = ceil(k T cf / E), an int"
        )


def route(world: World, logits: torch.Tensor, k: int, capacity: int) -> tuple[torch.Tensor, ...]:
    [res] = world.call("moe", "route", args=[(logits, k, capacity)])
    got = res.returned
    if not isinstance(got, list) or len(got) != 3:
        raise AssertionError(f"route must return (experts, gates, keep), got {got!r:.200}")
    return tuple(got)


def check_route(world: World, reference, logits: torch.Tensor, k: int, capacity: int, what: str) -> None:
    experts, gates, keep = route(world, logits, k, capacity)
    ref_experts, ref_gates, ref_keep = reference("moe").route(logits, k, capacity)
    assert_equal(experts, ref_experts, what=f"experts, {what}")
    # float64 softmax and top-k renormalisation: only rounding may differ (e.g. softmax of the top-k logits)
    assert_close(gates, ref_gates, rtol=1e-12, atol=1e-15, what=f"gates, {what}")
    assert_equal(keep, ref_keep, what=f"keep, {what}")


@pytest.mark.part("14.routing")
@pytest.mark.concept("topk_gates")
def test_top_k_without_drops(world: World, reference) -> None:
    logits = torch.randn(12, 6, generator=gen(0), dtype=torch.float64)
    for k in (1, 2, 3):
        check_route(world, reference, logits, k, capacity=12 * k, what=f"k={k}, capacity large enough")


@pytest.mark.part("14.routing")
@pytest.mark.concept("first_choices_first")
def test_first_choices_before_second_choices(world: World) -> None:
    # 4 tokens, 3 experts, k = 2, capacity 2. Token 0 and 1 pick (0, 1); tokens 2 and 3 pick (1, 0).
    # Expert 1's queue: first choices of tokens 2, 3 come first, then second choices of tokens 0, 1: both
    # dropped. Dropping in plain token order would keep token 0's and token 1's instead.
    logits = torch.tensor(
        [[2.0, 1.0, -5], [2.0, 1.0, -5], [1.0, 2.0, -5], [1.0, 2.0, -5]], dtype=torch.float64
    )
    experts, gates, keep = route(world, logits, 2, 2)
    assert_equal(experts, torch.tensor([[0, 1], [0, 1], [1, 0], [1, 0]]), what="experts (largest first)")
    expected = torch.tensor([[True, False], [True, False], [True, False], [True, False]])
    assert_equal(keep, expected, what="keep: each expert's 2 slots go to 1st choices before any 2nd choice")
    g = math.exp(2) / (math.exp(2) + math.exp(1))  # renormalized over the two chosen, before dropping
    assert_close(
        gates[:, 0],
        torch.full((4,), g, dtype=torch.float64),
        rtol=1e-12,
        atol=0,
        what="gates: top-k probabilities / their sum, not changed by dropping",
    )


@pytest.mark.part("14.routing")
@pytest.mark.concept("first_choices_first")
def test_drops_under_skewed_load(world: World, reference) -> None:
    logits = torch.randn(16, 4, generator=gen(1), dtype=torch.float64)
    logits[:, 0] += 2.0  # expert 0 is everyone's favourite: its queue overflows
    for k, cf in [(1, 1.0), (2, 1.0), (2, 1.25), (3, 0.5)]:
        capacity = math.ceil(k * 16 * cf / 4)
        check_route(world, reference, logits, k, capacity, what=f"k={k}, capacity {capacity}")


# ------------------------------------------------------------------------------------------------------------
# 14.dispatch: dispatch + a trusted expert + combine, checked against what each rank must hold


def routing_inputs(p: int, T: int, E: int, k: int, seed: int, skew: bool = False) -> list[dict[str, Any]]:
    """Per rank: integer-valued x (exact to compare), k distinct experts per token, a random keep mask."""
    inputs = []
    for r in range(p):
        g = gen(100 * seed + r)
        x = (1000 * r + 10 * torch.arange(T).unsqueeze(1) + torch.arange(3)).to(torch.float64)  # (T, 3)
        if skew:  # every first choice is expert 0, on rank 0; the others are distinct from it
            experts = torch.stack(
                [
                    torch.cat(
                        [torch.zeros(1, dtype=torch.int64), 1 + torch.randperm(E - 1, generator=g)[: k - 1]]
                    )
                    for _ in range(T)
                ]
            )
        else:
            experts = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])  # (T, k) distinct
        keep = torch.rand(T, k, generator=g) > 0.25  # some assignments dropped
        gates = torch.rand(T, k, generator=g, dtype=torch.float64) + 0.1
        inputs.append({"x": x, "experts": experts, "keep": keep, "gates": gates, "num_experts": E})
    return inputs


def expected_dispatch(inputs: list[dict[str, Any]], r: int, E: int) -> dict[str, Any]:
    """What rank r must receive: by source rank, then local expert, then the source's token order."""
    p, local = len(inputs), E // len(inputs)
    rows, counts = [], torch.zeros(p, local, dtype=torch.int64)
    for i, a in enumerate(inputs):
        for e in range(local):
            mine = ((a["experts"] == r * local + e) & a["keep"]).any(dim=1)  # (T,) tokens of rank i for e
            rows.append(a["x"][mine])
            counts[i, e] = int(mine.sum())

    def rows_from_to(i: int, j: int) -> int:  # kept assignments of rank i to experts of rank j
        return int(((inputs[i]["experts"] // local == j) & inputs[i]["keep"]).sum())

    return {
        "recv_x": torch.cat(rows),
        "recv_counts": counts,
        "input_splits": [rows_from_to(r, j) for j in range(p)],
        "output_splits": [rows_from_to(i, r) for i in range(p)],
    }


def token_calls(res: Any, h: int) -> list[dict[str, Any]]:
    """The recorded all_to_all_single calls that moved token rows (float, (N, h))."""
    calls = res.value["calls"]
    seen = res.comm.collectives.count("all_to_all_single")
    assert len(calls) == seen, (
        f"rank {res.rank}: {seen} all_to_all_single calls, {len(calls)} made through dist.all_to_all_single; "
        "call it as dist.all_to_all_single(...), not through a name imported before the call"
    )
    return [
        c for c in calls if c["dtype"].startswith("float") and len(c["shape"]) == 2 and c["shape"][1] == h
    ]


def check_combined(res: Any, a: dict[str, Any]) -> None:
    """combine's y on this rank: each kept row back at its token, scaled by its gate, the k rows summed."""
    # (T, k): the trusted expert multiplies its rows by (expert id + 1); dropped slots add nothing
    scale = (a["experts"] + 1).to(torch.float64) * a["gates"] * a["keep"]
    y = (scale.unsqueeze(2) * a["x"].unsqueeze(1)).sum(dim=1)  # (T, 3)
    # k <= 3 gated rows per token summed in another order: float64 rounding only
    assert_close(
        res.value["y"],
        y,
        rtol=1e-12,
        atol=1e-12,
        rank=res.rank,
        world_size=len(res.value["input_splits"]),
        what="combined output y",
    )


def dispatched_right(value: dict[str, Any], exp: dict[str, Any]) -> bool:
    """Whether this rank received exactly the rows and counts the routing asks for."""
    got = [value.get("recv_counts"), value.get("recv_x")]
    want = [exp["recv_counts"], exp["recv_x"]]
    return all(
        isinstance(g, torch.Tensor) and g.shape == w.shape and torch.equal(g.to(w.dtype), w)
        for g, w in zip(got, want, strict=True)
    )


def run_dispatch(world: World, inputs: list[dict[str, Any]], check: str = "layout") -> list[Any]:
    """Dispatch, a trusted expert, combine; check the dispatch ("layout") or what combine returns."""
    p, E = world.size, inputs[0]["num_experts"]
    results = world.run("rank_programs:dispatch_combine", inputs=inputs, forbid=FORBID)
    if check == "combine":
        # combine returns what the dispatch delivered: judged where every rank's dispatch is right (a wrong
        # layout is dispatch_layout's loss, issue 41)
        if all(dispatched_right(res.value, expected_dispatch(inputs, res.rank, E)) for res in results):
            for res in results:
                check_combined(res, inputs[res.rank])
        return results
    for res in results:
        r, exp, v = res.rank, expected_dispatch(inputs, res.rank, E), res.value
        assert not res.comm.events, f"rank {r}/{p}: moved data with send/recv; use dist.all_to_all_single"
        splits = (v["input_splits"], v["output_splits"])
        assert all(isinstance(s, list) and all(type(n) is int for n in s) for s in splits), (
            f"rank {r}/{p}: plan.input_splits and plan.output_splits must be lists of ints, got {splits}"
        )
        assert v["input_splits"] == exp["input_splits"] and v["output_splits"] == exp["output_splits"], (
            f"rank {r}/{p}: splits (in {v['input_splits']}, out {v['output_splits']}), expected "
            f"(in {exp['input_splits']}, out {exp['output_splits']}): rows to / from each RANK, not expert"
        )
        assert_equal(v["recv_counts"], exp["recv_counts"], rank=r, world_size=p, what="plan.recv_counts")
        assert_equal(v["recv_x"], exp["recv_x"], rank=r, world_size=p, what="received rows")
        rows = token_calls(res, 3)
        assert len(rows) == 2, f"rank {r}/{p}: {len(rows)} all-to-alls of token rows; dispatch 1, combine 1"
        sent = sum(exp["input_splits"])
        want = [
            (exp["input_splits"], exp["output_splits"], sent),
            (exp["output_splits"], exp["input_splits"], sum(exp["output_splits"])),
        ]
        for call, (ins, outs, n), name in zip(rows, want, ("dispatch", "combine"), strict=True):
            assert call["input_split_sizes"] == ins and call["output_split_sizes"] == outs, (
                f"rank {r}/{p}: {name} all-to-all got splits in={call['input_split_sizes']} "
                f"out={call['output_split_sizes']}, expected in={ins} out={outs}"
            )
            nbytes = call["shape"][0] * call["shape"][1] * call["element_size"]
            assert nbytes == n * 3 * 8, (
                f"rank {r}/{p}: the {name} all-to-all moved {nbytes} B, expected {n} rows x 3 x 8 B = "
                f"{n * 3 * 8} B (kept assignments only, no padding to capacity)"
            )
    return results


@pytest.mark.part("14.dispatch")
@pytest.mark.concept("dispatch_layout")
def test_dispatch_top2(world: World) -> None:
    run_dispatch(world, routing_inputs(world.size, T=6, E=2 * world.size, k=2, seed=1))


@pytest.mark.part("14.dispatch")
@pytest.mark.concept("dispatch_layout")
def test_dispatch_top1_and_top3(world: World) -> None:
    run_dispatch(world, routing_inputs(world.size, T=7, E=2 * world.size, k=1, seed=2))
    run_dispatch(world, routing_inputs(world.size, T=5, E=4 * world.size, k=3, seed=3))


@pytest.mark.part("14.dispatch")
@pytest.mark.concept("dispatch_layout")
def test_uneven_and_empty_splits(world: World) -> None:
    # every first choice goes to expert 0 on rank 0; with one expert per rank some splits are 0
    run_dispatch(world, routing_inputs(world.size, T=6, E=world.size, k=1, seed=4, skew=True))
    run_dispatch(world, routing_inputs(world.size, T=4, E=world.size, k=2, seed=5, skew=True))


@pytest.mark.part("14.dispatch")
@pytest.mark.concept("combine_gated_sum")
def test_combine_sums_gated_rows(world: World) -> None:
    # the same routings as the dispatch checks; here only what combine hands back to each token counts
    run_dispatch(world, routing_inputs(world.size, T=6, E=2 * world.size, k=2, seed=1), check="combine")
    run_dispatch(world, routing_inputs(world.size, T=5, E=4 * world.size, k=3, seed=3), check="combine")
    run_dispatch(
        world, routing_inputs(world.size, T=4, E=world.size, k=2, seed=5, skew=True), check="combine"
    )


@pytest.mark.part("14.dispatch")
@pytest.mark.concept("caller_tensors_untouched")
@pytest.mark.generated
def test_dispatch_and_combine_leave_their_inputs_alone(world: World) -> None:
    # The docstrings: dispatch leaves x, experts and keep unchanged, combine leaves expert_out and gates
    # unchanged, and each returns a new tensor. A caller reuses the routing after dispatch (the gates in
    # combine, the expert ids for load balancing), so marking dropped slots in `experts` in place, or scaling
    # the caller's rows in place, corrupts the next user of those tensors. Sizes and seeds drawn here; each
    # routing drops some assignments (keep is drawn with a quarter False).
    rng = random.Random(1410 + world.size)
    for skew in (False, True, False):
        E = rng.choice([1, 2, 3]) * world.size
        T, k = rng.randint(3, 8), min(2, E)
        inputs = routing_inputs(world.size, T=T, E=E, k=k, seed=rng.randrange(1000), skew=skew and k == 2)
        for res in world.run("rank_programs:dispatch_combine", inputs=inputs, forbid=FORBID):
            r, v, p = res.rank, res.value, world.size
            for name in ("x", "experts", "keep", "gates"):
                assert_equal(
                    v["after"][name], inputs[r][name], rank=r, world_size=p,
                    what=f"the caller's {name} after dispatch and combine (they must not modify it)",
                )  # fmt: skip
            assert_equal(
                v["after"]["expert_out"], v["expert_out_before"], rank=r, world_size=p,
                what="the expert output after combine (combine must not modify it)",
            )  # fmt: skip
            for name, shared in v["shared"].items():
                assert not shared, (
                    f"rank {r}/{p}: the {name} returned lives in the memory of a tensor the caller passed "
                    "in; dispatch and combine return new tensors"
                )


# ------------------------------------------------------------------------------------------------------------
# 14.moe_layer: the whole layer against a dense single-process MoE


H, F = 4, 6  # hidden width, expert width


def moe_inputs(p: int, T: int, E: int, k: int, cf: float, seed: int) -> dict[str, Any]:
    g = gen(seed)
    xs = [torch.randn(T, H, generator=g, dtype=torch.float64) for _ in range(p)]
    for x in xs:
        x[:, 0] = 1.0 + 0.1 * x[:, 0]  # a near-constant feature ...
    router = torch.randn(H, E, generator=g, dtype=torch.float64)
    router[0, 0] += 1.5  # ... that favours expert 0, so its queue overflows when capacity is tight
    w1 = torch.randn(E, H, F, generator=g, dtype=torch.float64) * 0.5
    w2 = torch.randn(E, F, H, generator=g, dtype=torch.float64) * 0.5
    return {"xs": xs, "router": router, "w1": w1, "w2": w2, "k": k, "cf": cf}


def dense_moe(
    reference, d: dict[str, Any], x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One rank's tokens through every expert on one process: y, and (experts, keep) of its routing."""
    ref, E = reference("moe"), d["router"].shape[1]
    capacity = ref.expert_capacity(x.shape[0], E, d["k"], d["cf"])
    experts, gates, keep = ref.route(x @ d["router"], d["k"], capacity)
    y = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(d["k"]):
            if keep[t, j]:
                e = int(experts[t, j])
                y[t] += gates[t, j] * ref.expert_mlp(x[t : t + 1], d["w1"][e], d["w2"][e])[0]
    return y, experts, keep


def run_layer(world: World, reference, T: int, E: int, k: int, cf: float, seed: int) -> list[dict[str, Any]]:
    p, d = world.size, moe_inputs(world.size, T, E, k, cf, seed)
    local = E // p
    results = world.run("rank_programs:moe_layer", inputs=layer_inputs(p, d, E, k, cf), forbid=FORBID)
    dense = [dense_moe(reference, d, x) for x in d["xs"]]
    report = []
    for res in results:
        r = res.rank
        y, experts, keep = dense[r]
        # float64; each expert runs on a different number of rows than here, and k rows add in another order
        assert_close(
            res.value["y"], y, rtol=1e-10, atol=1e-12, rank=r, world_size=p, what=f"MoE output (k={k})"
        )
        per_expert = torch.stack(
            [
                ((e_ == r * local + torch.arange(local).view(-1, 1, 1)) & kp).sum(dim=(1, 2))
                for _, e_, kp in dense
            ]
        ).sum(dim=0)
        assert_equal(
            res.value["tokens_per_expert"],
            per_expert,
            rank=r,
            world_size=p,
            what="tokens_per_expert (rows each local expert processed, from all ranks)",
        )
        assert not res.comm.events, f"rank {r}/{p}: moved data with send/recv; use dist.all_to_all_single"
        rows = token_calls(res, H)
        assert len(rows) == 2, f"rank {r}/{p}: {len(rows)} all-to-alls of token rows; dispatch 1, combine 1"
        report.append(
            {
                "rank": r,
                "kept": int(keep.sum()),
                "dispatch": rows[0],
                "combine": rows[1],
                "experts": experts,
                "keep": keep,
            }
        )
    return report


def layer_inputs(p: int, d: dict[str, Any], E: int, k: int, cf: float) -> list[dict[str, Any]]:
    local = E // p
    return [
        {
            "x": d["xs"][r],
            "router_weight": d["router"],
            "w1": d["w1"][r * local : (r + 1) * local],
            "w2": d["w2"][r * local : (r + 1) * local],
            "k": k,
            "capacity_factor": cf,
        }
        for r in range(p)
    ]


@pytest.mark.part("14.moe_layer")
@pytest.mark.concept("layer_inputs_untouched")
@pytest.mark.generated
def test_layer_leaves_the_callers_tokens_and_experts_alone(world: World) -> None:
    # Two calls in a row on inputs drawn here, three or four experts per rank: the caller's tokens, router
    # and experts must be as it handed them over after each layer call (an optimizer, the next microbatch
    # and the checkpoint read them), and the second call must give the first call's output.
    rng = random.Random(1400 + world.size)
    k, local = rng.choice([1, 2]), rng.choice([3, 4])
    E = local * world.size
    d = moe_inputs(world.size, rng.randint(6, 10), E, k, cf=2.0, seed=rng.randrange(1000))
    inputs = layer_inputs(world.size, d, E, k, 2.0)
    for res in world.run("rank_programs:moe_layer_twice", inputs=inputs, forbid=FORBID):
        r, v = res.rank, res.value
        for call, after in enumerate(v["afters"], start=1):
            for name in ("x", "router_weight", "w1", "w2"):
                assert_equal(
                    after[name], inputs[r][name], rank=r, world_size=world.size,
                    what=f"the caller's {name} after call {call} (not to be modified nor reordered)",
                )  # fmt: skip
        assert_equal(
            v["ys"][1],
            v["ys"][0],
            rank=r,
            world_size=world.size,
            what="the second call's output (as the first's)",
        )


@pytest.mark.part("14.moe_layer")
@pytest.mark.concept("moe_matches_dense")
def test_top2_with_drops_matches_dense(world: World, reference) -> None:
    for r in run_layer(world, reference, T=8, E=2 * world.size, k=2, cf=1.0, seed=11):
        n = r["dispatch"]["shape"][0]
        assert n == r["kept"], f"rank {r['rank']}: dispatched {n} rows, kept assignments {r['kept']}"


@pytest.mark.part("14.moe_layer")
@pytest.mark.concept("moe_matches_dense")
def test_top1_matches_dense(world: World, reference) -> None:
    run_layer(world, reference, T=9, E=world.size, k=1, cf=1.25, seed=12)


@pytest.mark.part("14.moe_layer")
@pytest.mark.concept("moe_bytes")
def test_bytes_without_drops_are_T_k_h(world: World, reference) -> None:
    p, T, k, E = world.size, 8, 2, 2 * world.size
    # cf = E / k makes the capacity T: nothing is dropped, and each rank ships all T*k assignments
    for r in run_layer(world, reference, T=T, E=E, k=k, cf=E / k, seed=13):
        call = r["dispatch"]
        sent = call["shape"][0] * call["shape"][1] * call["element_size"]
        assert sent == T * k * H * 8, (
            f"rank {r['rank']}/{p}: the dispatch all-to-all carries {sent} B, expected T*k*h*8 = "
            f"{T * k * H * 8} B"
        )
        local = E // p
        to_self = int((r["experts"] // local == r["rank"]).sum())
        splits = call["input_split_sizes"]
        leaving = (sum(splits) - splits[r["rank"]]) * H * 8
        assert leaving == (T * k - to_self) * H * 8, (
            f"rank {r['rank']}/{p}: {leaving} B leave the rank, expected (T*k - rows for my own experts)"
            f" * h * 8 = {(T * k - to_self) * H * 8} B"
        )
        back = r["combine"]
        assert back["input_split_sizes"] == call["output_split_sizes"], (
            "combine must reverse the dispatch splits"
        )


# ------------------------------------------------------------------------------------------------------------
# unseen inputs: sizes, routers and a world size (3) drawn here in the judge, never shown to the student


@pytest.mark.part("14.routing")
@pytest.mark.concept("capacity_formula")
def test_capacity_drawn(world: World, reference) -> None:
    rng = random.Random(1401)
    for _ in range(6):
        # E a power of two and cf dyadic: k T cf / E is exact in binary in any order of operations
        args = (
            rng.randint(1, 300),
            rng.choice([2, 4, 8, 16, 64]),
            rng.randint(1, 4),
            rng.choice([1.0, 1.25, 1.5, 2.0]),
        )
        [res] = world.call("moe", "expert_capacity", args=[args])
        expected = reference("moe").expert_capacity(*args)
        assert res.returned == expected and type(res.returned) is int, (
            f"expert_capacity{args}: got {res.returned!r}, expected {expected}"
        )


@pytest.mark.part("14.routing")
@pytest.mark.concept("first_choices_first")
def test_routing_drawn(world: World, reference) -> None:
    rng = random.Random(1402)
    for i in range(3):
        T, E, k = rng.randint(5, 20), rng.randint(3, 9), rng.randint(1, 3)
        logits = torch.randn(T, E, generator=gen(1402 + i), dtype=torch.float64)
        logits[:, rng.randrange(E)] += 1.5  # one favourite expert, so its queue overflows
        capacity = max(1, (T * k) // E)
        check_route(world, reference, logits, k, capacity, what=f"T={T}, E={E}, k={k}, capacity {capacity}")


@pytest.mark.part("14.dispatch")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("dispatch_layout")
def test_dispatch_3_ranks(world: World) -> None:
    run_dispatch(world, routing_inputs(3, T=7, E=6, k=2, seed=14))
    run_dispatch(world, routing_inputs(3, T=5, E=3, k=1, seed=15, skew=True))


@pytest.mark.part("14.dispatch")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("combine_gated_sum")
def test_combine_3_ranks(world: World) -> None:
    run_dispatch(world, routing_inputs(3, T=7, E=6, k=2, seed=14), check="combine")


@pytest.mark.part("14.moe_layer")
@pytest.mark.parametrize("world", [3], indirect=True)
@pytest.mark.concept("moe_matches_dense")
def test_moe_3_ranks_drawn(world: World, reference) -> None:
    rng = random.Random(1403)
    run_layer(world, reference, T=rng.randint(6, 10), E=3 * rng.randint(1, 2), k=2, cf=1.0, seed=1403)
