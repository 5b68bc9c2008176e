"""What this catches: sequence-parallel blocks with the right numbers for the wrong reasons, or wrong ones.

- regions: all-gathers that put the shards in the wrong order, reduce-scatters built from an all-reduce (the
  right values for t times the traffic), backward passes that swap the two collectives or forget the sum,
  a sequence length that does not split evenly accepted without a word.
- linear: a column-parallel linear that keeps the gathered input alive for backward (no memory saved at
  all), forgets to reduce-scatter the input gradient, or gets the weight gradient from the shard alone.
- mlp_block: a block that still all-reduces, gathers twice, loses a gradient, or saves activations on all
  S tokens. Its activation memory is MEASURED (bytes of the tensors autograd saves, from
  saved_tensors_hooks in rank_programs.py) and must equal, byte for byte, Korthikanti et al.'s accounting.
- dropout: one dropout seed for all ranks (every shard gets the same mask), masks that a rerun does not
  reproduce (the global RNG), no 1/(1-p) scaling, float masks. Graded by properties, not by Megatron's seed
  formula: the block is compared with the dense block built from the ranks' own masks.
- grad_sync: LayerNorm or fc2-bias gradients left as per-rank partial sums or averaged instead of summed,
  sharded gradients summed too, one all-reduce per parameter.
- unseen shapes: 3 ranks and shapes drawn from seeds, with hidden sizes that t does not divide.

Numbers: float64 everywhere. Collectives that only move or add small integers are compared exactly; anything
that goes through a matmul is compared with rtol 1e-10 / atol 1e-12 (see TOL).

Activation memory, per rank, of this block (float64: e = 8 bytes; masks are bool, 1 byte), s = S/t:
  sequence parallel  s*B*H*e  (LayerNorm input)  + 2*s*B*e (its mean and rstd)  + s*B*H*e (fc1's input shard)
                     + 2*S*B*(F/t)*e (GeLU input, fc2 input) + s*B*H (dropout mask)
  plain TP           the same with every s replaced by S: LayerNorm, fc1's input and the mask on all tokens.
Korthikanti et al. 2022 (arXiv 2205.05198) §4.1-4.2 count the same tensors in 16-bit (2 bytes), F = 4H,
and leave out the LayerNorm statistics: TP sbh(5 + 16/t) for LayerNorm + MLP, TP+SP sbh*21/t. With 8-byte
floats each 2-byte term is 4x larger and the 1-byte mask stays: TP sbh(17 + 64/t), TP+SP sbh*81/t.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from grader.harness import RankFailure, World, assert_close, assert_equal

TOL = dict(rtol=1e-10, atol=1e-12)  # float64; sums over F (or over ranks) run in another order than the
# dense matmul's, ~1e-16 relative per addition. A wrong shard or a missing rank's share is off by O(1).
F64 = 8
AG, RS = "all-gather", "reduce-scatter"
NO_ALL_REDUCE = ["all_reduce", "broadcast", "reduce", "all_to_all", "all_to_all_single", "scatter", "gather"]


def kinds(names: list[str]) -> Counter:
    """Collective names -> a Counter; either spelling of an all-gather or a reduce-scatter counts as one."""
    alias = {
        "all_gather": AG,
        "all_gather_into_tensor": AG,
        "reduce_scatter": RS,
        "reduce_scatter_tensor": RS,
    }
    return Counter(alias.get(n, n) for n in names)


def ints(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Small integers in float64: gathers and sums of them are exact in any order."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-50, 50, shape, generator=g).double()


def randn(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64) * scale


def rows(x: torch.Tensor, t: int, r: int) -> torch.Tensor:
    return x.chunk(t, dim=0)[r]


# ---------------------------------------------------------------------------------------------------------
# 11.regions


def run_region(world: World, which: str, xs: list[torch.Tensor], dys: list[torch.Tensor]) -> list:
    inputs = [{"which": which, "x": x, "dy": dy} for x, dy in zip(xs, dys, strict=True)]
    return world.run("rank_programs:region", inputs=inputs, forbid=NO_ALL_REDUCE)


@pytest.mark.part("11.regions")
@pytest.mark.concept("conjugate_collectives")
def test_gather_forward_and_backward(world: World) -> None:
    t, s, b, h = world.size, 3, 2, 5
    xs = [ints((s, b, h), seed=r) for r in range(t)]
    dys = [ints((t * s, b, h), seed=100 + r) for r in range(t)]  # each rank's own gradient of all S rows
    results = run_region(world, "gather", xs, dys)
    for res in results:
        r, v = res.rank, res.value
        assert_equal(
            v["y"], torch.cat(xs), rank=r, world_size=t, what="all-gathered (S, B, H) (shard j at rows j*s)"
        )
        want = rows(sum(dys), t, r)  # rows of rank r, summed over the ranks that used them
        assert_equal(v["x_grad"], want, rank=r, world_size=t, what="gradient of the shard (reduce-scatter)")


@pytest.mark.part("11.regions")
@pytest.mark.concept("conjugate_collectives")
def test_reduce_scatter_forward_and_backward(world: World) -> None:
    t, s, b, h = world.size, 2, 3, 4
    xs = [ints((t * s, b, h), seed=10 + r) for r in range(t)]  # partial sums of all S tokens
    dys = [ints((s, b, h), seed=200 + r) for r in range(t)]
    results = run_region(world, "scatter", xs, dys)
    for res in results:
        r, v = res.rank, res.value
        assert_equal(
            v["y"], rows(sum(xs), t, r), rank=r, world_size=t, what="reduce-scattered rows of the sum"
        )
        assert_equal(
            v["x_grad"], torch.cat(dys), rank=r, world_size=t, what="gradient (all-gather of the shards)"
        )


@pytest.mark.part("11.regions")
@pytest.mark.concept("one_collective_each_way")
def test_one_collective_each_way(world: World) -> None:
    t, s = world.size, 2
    for which, fwd, bwd in [("gather", AG, RS), ("scatter", RS, AG)]:
        n = t * s if which == "scatter" else s
        xs = [ints((n, 1, 3), seed=r) for r in range(t)]
        dys = [ints((t * s if which == "gather" else s, 1, 3), seed=50 + r) for r in range(t)]
        for res in run_region(world, which, xs, dys):
            # A budget: at most these, and no other collective. A region that skips its backward collective
            # computes a wrong gradient, which conjugate_collectives grades.
            got_f, got_b = kinds(res.value["fwd"]), kinds(res.value["bwd"])
            assert got_f <= Counter({fwd: 1}) and got_b <= Counter({bwd: 1}), (
                f"rank {res.rank}/{t}: the {which} region called {res.value['fwd']} forward and "
                f"{res.value['bwd']} backward; it takes one {fwd} forward and one {bwd} backward "
                f"(each is the other's backward: Megatron's g and g-bar)"
            )


@pytest.mark.part("11.regions")
@pytest.mark.concept("uneven_sequence_rejected")
def test_reduce_scatter_rejects_uneven_sequence(world: World) -> None:
    t = world.size
    x = [ints((t * 2 + 1, 1, 2), seed=r) for r in range(t)]
    with pytest.raises(RankFailure) as failure:
        world.call("sp_comm", "reduce_scatter_seq", args=[(xi,) for xi in x])
    assert "ValueError" in str(failure.value), (
        f"reduce_scatter_seq on S = {t * 2 + 1} tokens over {t} ranks should raise ValueError (S is not "
        f"divisible by t); it raised: {failure.value}"
    )


# ---------------------------------------------------------------------------------------------------------
# 11.linear


def run_linear(world: World, s: int = 2, b: int = 2, h: int = 6, o: int = 8) -> tuple[list, dict]:
    t = world.size
    d = {
        "x": randn((t * s, b, h), 1),
        "w": randn((o, h), 2, 0.3),
        "b": randn((o,), 3),
        "dy": randn((t * s, b, o), 4),
    }
    inputs = [
        {
            "x": rows(d["x"], t, r),
            "weight": d["w"].chunk(t, dim=0)[r],
            "bias": d["b"].chunk(t)[r],
            "dy": d["dy"].chunk(t, dim=2)[r],
        }
        for r in range(t)
    ]
    return world.run("rank_programs:linear", inputs=inputs, forbid=NO_ALL_REDUCE), d


@pytest.mark.part("11.linear")
@pytest.mark.concept("column_parallel_gradients")
def test_linear_forward_and_backward(world: World) -> None:
    t = world.size
    results, d = run_linear(world)
    x, w, b = (d[k].clone().requires_grad_() for k in ("x", "w", "b"))
    y = x @ w.t() + b  # the dense layer on all S tokens: (S, B, O)
    y.backward(d["dy"])
    for res in results:
        r, v = res.rank, res.value
        ok = dict(rank=r, world_size=t, **TOL)
        assert_close(
            v["y"], y.detach().chunk(t, dim=2)[r], what="Y (S, B, O/t): all S tokens, my O/t columns", **ok
        )
        assert_close(v["grads"]["weight"], w.grad.chunk(t)[r], what="grad of my weight rows (O/t, H)", **ok)
        assert_close(v["grads"]["bias"], b.grad.chunk(t)[r], what="grad of my bias (O/t,)", **ok)
        assert_close(v["grads"]["x"], rows(x.grad, t, r), what="grad of my input shard (s, B, H)", **ok)


@pytest.mark.part("11.linear")
@pytest.mark.concept("shard_saved_for_backward")
def test_linear_saves_only_the_shard(world: World) -> None:
    t, s, b, h = world.size, 2, 2, 6
    for res in run_linear(world, s=s, b=b, h=h)[0]:
        got, shard = res.value["saved_bytes"], s * b * h * F64
        hint = ""
        if got == t * shard:
            hint = ": that is the GATHERED input; save the shard and all-gather it again in backward"
        assert got == shard, (
            f"rank {res.rank}/{t}: AllGatherColumnLinear saved {got} bytes of activations for backward; "
            f"it should keep only its (s, B, H) = ({s}, {b}, {h}) float64 input shard, {shard} bytes{hint}"
        )


@pytest.mark.part("11.linear")
@pytest.mark.concept("linear_collectives")
def test_linear_collectives(world: World) -> None:
    t = world.size
    for res in run_linear(world)[0]:
        fwd, bwd = kinds(res.value["fwd"]), kinds(res.value["bwd"])
        assert fwd == Counter({AG: 1}), (
            f"rank {res.rank}/{t}: forward called {res.value['fwd']}; it takes exactly one all-gather"
        )
        # At most one all-gather: none only if the gathered input was saved, which shard_saved_for_backward
        # grades (the memory), not this budget.
        assert bwd.get(RS) == 1 and bwd <= Counter({AG: 1, RS: 1}), (
            f"rank {res.rank}/{t}: backward called {res.value['bwd']}; it takes one all-gather (the input, "
            "again, for grad W) and one reduce-scatter (grad X back to the shards)"
        )


# ---------------------------------------------------------------------------------------------------------
# shapes the public tests never show: a group of 3, a hidden size that t does not divide, drawn from seeds


def drawn_shape(seed: int, t: int) -> dict[str, int]:
    """s tokens per rank, batch, hidden (any), ffn (a multiple of t): drawn here, never shipped."""
    g = torch.Generator().manual_seed(seed)

    def pick(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    return {"s": pick(1, 3), "b": pick(1, 2), "h": pick(3, 7), "f": t * pick(1, 3)}


@pytest.mark.part("11.regions")
@pytest.mark.concept("conjugate_collectives")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_regions_drawn_shapes(world: World) -> None:
    t, d = world.size, drawn_shape(31, world.size)
    s, b, h = d["s"], d["b"], d["h"]
    xs = [ints((s, b, h), seed=300 + r) for r in range(t)]
    dys = [ints((t * s, b, h), seed=310 + r) for r in range(t)]
    for res in run_region(world, "gather", xs, dys):
        r, v = res.rank, res.value
        assert_equal(v["y"], torch.cat(xs), rank=r, world_size=t, what=f"all-gathered ({t * s}, {b}, {h})")
        assert_equal(v["x_grad"], rows(sum(dys), t, r), rank=r, world_size=t, what="gradient of the shard")
    xs = [ints((t * s, b, h), seed=320 + r) for r in range(t)]
    dys = [ints((s, b, h), seed=330 + r) for r in range(t)]
    for res in run_region(world, "scatter", xs, dys):
        r, v = res.rank, res.value
        assert_equal(v["y"], rows(sum(xs), t, r), rank=r, world_size=t, what="reduce-scattered rows")
        assert_equal(v["x_grad"], torch.cat(dys), rank=r, world_size=t, what="gradient of the partial sum")


@pytest.mark.part("11.linear")
@pytest.mark.concept("column_parallel_gradients")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_linear_drawn_shapes(world: World) -> None:
    t, d = world.size, drawn_shape(32, world.size)
    results, data = run_linear(world, s=d["s"], b=d["b"], h=d["h"], o=d["f"])
    x, w, b = (data[k].clone().requires_grad_() for k in ("x", "w", "b"))
    y = x @ w.t() + b
    y.backward(data["dy"])
    for res in results:
        r, v = res.rank, res.value
        ok = dict(rank=r, world_size=t, **TOL)
        assert_close(v["y"], y.detach().chunk(t, dim=2)[r], what="Y (S, B, O/t)", **ok)
        assert_close(v["grads"]["weight"], w.grad.chunk(t)[r], what="grad of my weight rows", **ok)
        assert_close(v["grads"]["bias"], b.grad.chunk(t)[r], what="grad of my bias", **ok)
        assert_close(v["grads"]["x"], rows(x.grad, t, r), what="grad of my input shard", **ok)


@pytest.mark.part("11.linear")
@pytest.mark.concept("shard_saved_for_backward")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_linear_saves_only_the_shard_drawn_shapes(world: World) -> None:
    t, d = world.size, drawn_shape(33, world.size)
    for res in run_linear(world, s=d["s"], b=d["b"], h=d["h"], o=d["f"])[0]:
        shard = d["s"] * d["b"] * d["h"] * F64
        assert res.value["saved_bytes"] == shard, (
            f"rank {res.rank}/{t}: AllGatherColumnLinear saved {res.value['saved_bytes']} bytes for "
            f"backward; only the ({d['s']}, {d['b']}, {d['h']}) float64 input shard, {shard} bytes, "
            "may be kept"
        )


# ---------------------------------------------------------------------------------------------------------
# the blocks: 11.dropout, 11.mlp_block, 11.grad_sync

S_PER_RANK, BATCH, HIDDEN, FFN = 2, 2, 8, 16
DENSE_SEED, DROP_SEED = 7, 11


def dense_params(seed: int = DENSE_SEED, h: int = HIDDEN, f: int = FFN) -> dict[str, torch.Tensor]:
    return {
        "norm.weight": 1 + randn((h,), seed, 0.2),
        "norm.bias": randn((h,), seed + 1, 0.2),
        "fc1.weight": randn((f, h), seed + 2, h**-0.5),
        "fc1.bias": randn((f,), seed + 3, 0.1),
        "fc2.weight": randn((h, f), seed + 4, f**-0.5),
        "fc2.bias": randn((h,), seed + 5, 0.1),
    }


def dense_mlp(params: dict, x: torch.Tensor, drop: torch.Tensor | None) -> torch.Tensor:
    """The unsplit block; `drop` is the dropout's factor per element (0 or 1 / (1 - p)), or None for p = 0."""
    h = F.layer_norm(x, x.shape[-1:], params["norm.weight"], params["norm.bias"])
    h = F.gelu(F.linear(h, params["fc1.weight"], params["fc1.bias"]))
    h = F.linear(h, params["fc2.weight"], params["fc2.bias"])
    return x + (h if drop is None else h * drop)


def baseline_drop(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """The full-sequence mask the course's plain-TP baseline (rank_programs.tp_mlp) draws, as a factor."""
    keep = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype) >= p
    return keep.to(x.dtype) / (1 - p)  # a bool / float would be float32


def run_mlp(
    world: World,
    *,
    p: float,
    sync: bool = False,
    baseline: bool = False,
    forbid=NO_ALL_REDUCE,
    shape: dict[str, int] | None = None,
):
    """Run the block on every rank; return (results, dense output, dense grads by parameter name, x grad).

    The dense block's dropout is the t ranks' own dropout factors side by side (what each rank's
    sequence_parallel_dropout multiplies by); whether those are good masks is graded in 11.dropout."""
    t = world.size
    d = shape or {"s": S_PER_RANK, "b": BATCH, "h": HIDDEN, "f": FFN}
    params = dense_params(h=d["h"], f=d["f"])
    x, dy = randn((t * d["s"], d["b"], d["h"]), 20), randn((t * d["s"], d["b"], d["h"]), 21)
    inputs = dict(dense=params, x=x, dy=dy, p_drop=p, seed=DROP_SEED, sync=sync, baseline=baseline)
    results = world.run("rank_programs:mlp", inputs=inputs, forbid=forbid)
    drop = torch.cat([res.value["drop"] for res in results]) if p > 0 else None
    leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
    xl = x.clone().requires_grad_()
    y = dense_mlp(leaves, xl, drop)
    y.backward(dy)
    grads = {k: v.grad for k, v in leaves.items()}
    return results, y.detach(), grads, xl.grad


def my_slice(name: str, grad: torch.Tensor, t: int, r: int) -> torch.Tensor:
    """The dense gradient of parameter `name` as rank r holds it."""
    if name.startswith("fc1"):
        return grad.chunk(t, dim=0)[r]
    if name == "fc2.weight":
        return grad.chunk(t, dim=1)[r]
    return grad  # replicated


STUDENT_NAMES = {
    "norm.weight": "norm.weight",
    "norm.bias": "norm.bias",
    "fc1.weight": "fc1_weight",
    "fc1.bias": "fc1_bias",
    "fc2.weight": "fc2_weight",
    "fc2.bias": "fc2_bias",
}
SHARDED = ["fc1.weight", "fc1.bias", "fc2.weight"]
REPLICATED = ["norm.weight", "norm.bias", "fc2.bias"]


# --- 11.dropout


def dropout_facts(world: World, shape: tuple[int, ...], p: float, seed: int) -> list:
    x = randn(shape, 40)
    return world.run("rank_programs:dropout_facts", inputs={"x": x, "p": p, "seed": seed}), x


@pytest.mark.part("11.dropout")
@pytest.mark.concept("per_rank_dropout_stream")
@pytest.mark.parametrize("world", [3, 4], indirect=True)
def test_dropout_stream_is_this_ranks_own(world: World) -> None:
    t = world.size
    results, _ = dropout_facts(world, (4, 2, 8), 0.5, seed=3)  # 64 elements: two equal masks by chance, 2^-64
    for a, b in itertools.combinations(results, 2):
        assert not torch.equal(a.value["first"], b.value["first"]), (
            f"ranks {a.rank} and {b.rank} of {t} drew the same dropout mask: with one shared random stream, "
            "token i of every shard is dropped together; each rank needs its own stream"
        )


@pytest.mark.part("11.dropout")
@pytest.mark.concept("dropout_mask_from_arguments")
@pytest.mark.parametrize("world", [3, 4], indirect=True)
def test_dropout_mask_depends_on_its_arguments_only(world: World) -> None:
    t, p = world.size, 0.5
    results, x = dropout_facts(world, (4, 2, 8), p, seed=3)
    for res in results:
        r, v = res.rank, res.value
        assert_equal(
            v["again"],
            v["first"],
            rank=r,
            world_size=t,
            what="dropout of ones, called again with the same seed (the global RNG reseeded in between): a "
            "mask must depend on (seed, rank, shape, p) only",
        )
        assert not torch.equal(v["other_seed"], v["first"]), (
            f"rank {r}/{t}: seed 3 and seed 4 drop exactly the same elements; the seed must pick the mask"
        )
        assert_close(
            v["on_x"], x * v["first"], rank=r, world_size=t, what="dropout of x vs x * dropout of ones", **TOL
        )


def dropout_call_list(rng: random.Random) -> list[dict[str, Any]]:
    """Calls in a row: a base call, then each argument changed alone (seed, p, shape), each followed by the
    base again, in the order drawn; shapes of 512 or more elements so that a keep rate can be read."""
    base = {"seed": rng.randrange(10**6), "shape": [rng.choice([8, 16]), 4, 16], "p": rng.choice([0.25, 0.5])}
    changed = [
        {**base, "seed": base["seed"] + rng.randrange(1, 1000)},
        {**base, "p": 0.75 - base["p"]},
        {**base, "shape": [base["shape"][0] * 2, 4, 16]},
    ]
    rng.shuffle(changed)
    return [base] + [c for other in changed for c in (other, base)]


@pytest.mark.part("11.dropout")
@pytest.mark.concept("dropout_mask_from_arguments")
@pytest.mark.generated
@pytest.mark.parametrize("world", [2, 3], indirect=True)
def test_dropout_masks_call_after_call(world: World) -> None:
    # Several calls in one process, arguments drawn here: a mask repeats exactly when its arguments repeat,
    # whatever came in between (a cached generator or mask leaks state from call to call), and is
    # drawn anew when any argument changes (a mask cached per seed repeats for another p or shape).
    calls = dropout_call_list(random.Random(1100 + world.size))
    for res in world.run("rank_programs:dropout_calls", inputs={"calls": calls}):
        masks, where = res.value, f"rank {res.rank}/{world.size}"
        for i, (call, mask) in enumerate(zip(calls, masks, strict=True)):
            first = calls.index(call)
            assert_equal(
                mask,
                masks[first],
                rank=res.rank,
                world_size=world.size,
                what=f"call {i + 1} {call} (as call {first + 1})",
            )
            if call != calls[0]:
                assert mask.shape != masks[0].shape or not torch.equal(mask, masks[0]), (
                    f"{where}: call {i + 1} {call} dropped exactly what call 1 {calls[0]} dropped; a mask is "
                    "drawn anew when the seed, p or the shape changes"
                )
            rate, n = (mask != 0).double().mean().item(), mask.numel()  # the scaling is graded on its own
            assert abs(rate - (1 - call["p"])) < 6 * (call["p"] * (1 - call["p"]) / n) ** 0.5, (
                f"{where}: call {i + 1} {call} kept {rate:.3f} of its elements, not about 1 - p"
            )


@pytest.mark.part("11.dropout")
@pytest.mark.concept("inverted_dropout_scaling")
def test_dropout_keeps_one_minus_p_scaled(world: World) -> None:
    t, p, n = world.size, 0.3, 16 * 4 * 16
    results, _ = dropout_facts(world, (16, 4, 16), p, seed=8)
    for res in results:
        got = res.value["first"]
        kept = got != 0
        scale = torch.full_like(got, 1 / (1 - p))
        assert_close(got[kept], scale[kept], rank=res.rank, world_size=t, what="kept elements of ones", **TOL)
        rate = kept.double().mean().item()
        # a fair Binomial(n, 1 - p) share lies within 6 standard deviations (~0.086 here) but for 1e-9
        assert abs(rate - (1 - p)) < 6 * ((p * (1 - p)) / n) ** 0.5, (
            f"rank {res.rank}/{t}: dropout with p = {p} kept {rate:.3f} of {n} elements; it keeps each one "
            f"with probability 1 - p = {1 - p}"
        )


@pytest.mark.part("11.dropout")
@pytest.mark.concept("dropout_mask_one_byte")
def test_dropout_keeps_a_one_byte_mask(world: World) -> None:
    t, shape = world.size, (3, 2, 5)
    results, _ = dropout_facts(world, shape, 0.25, seed=9)
    for res in results:
        got, n = res.value["saved_bytes"], 3 * 2 * 5
        assert got == n, (
            f"rank {res.rank}/{t}: sequence_parallel_dropout made autograd keep {got} bytes for {n} "
            f"elements; a bool mask is {n} bytes (a float64 one {8 * n})"
        )


# --- 11.mlp_block


def check_block_backward(results: list, grads: dict, x_grad: torch.Tensor, t: int) -> None:
    for res in results:
        r, v = res.rank, res.value
        ok = dict(rank=r, world_size=t, **TOL)
        assert_close(v["x_grad"], rows(x_grad, t, r), what="grad of the input shard (s, B, H)", **ok)
        for name in SHARDED:  # complete on every rank without any further communication
            want = my_slice(name, grads[name], t, r)
            assert v["shapes"][STUDENT_NAMES[name]] == list(want.shape), f"{name} is not sharded as given"
            assert_close(v["grads"][STUDENT_NAMES[name]], want, what=f"{name}.grad (a shard)", **ok)
    for name in REPLICATED:  # each rank holds the sum over its own tokens: together they make the dense grad
        total = sum(res.value["partial_grads"][STUDENT_NAMES[name]] for res in results)
        assert_close(total, grads[name], what=f"{name}.grad summed over ranks before any all-reduce", **TOL)


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_matches_dense")
def test_block_forward_and_backward(world: World) -> None:
    t = world.size
    results, y, grads, x_grad = run_mlp(world, p=0.0)
    for res in results:
        assert_close(
            res.value["y"], rows(y, t, res.rank), rank=res.rank, world_size=t, what="block output", **TOL
        )
    check_block_backward(results, grads, x_grad, t)


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_matches_dense")
def test_block_with_dropout_matches_dense(world: World) -> None:
    t = world.size
    results, y, grads, x_grad = run_mlp(world, p=0.3)
    for res in results:
        ok = dict(rank=res.rank, world_size=t, **TOL)
        assert_close(res.value["y"], rows(y, t, res.rank), what="block output with dropout p = 0.3", **ok)
    check_block_backward(results, grads, x_grad, t)


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_matches_dense")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_block_drawn_shapes_with_dropout(world: World) -> None:
    t = world.size
    results, y, grads, x_grad = run_mlp(world, p=0.2, shape=drawn_shape(34, t))
    for res in results:
        ok = dict(rank=res.rank, world_size=t, **TOL)
        assert_close(res.value["y"], rows(y, t, res.rank), what="block output (drawn shape)", **ok)
    check_block_backward(results, grads, x_grad, t)


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_collectives")
def test_block_collectives(world: World) -> None:
    t = world.size
    results, _, _, _ = run_mlp(world, p=0.0)
    for res in results:
        fwd, bwd = kinds(res.value["fwd"]), kinds(res.value["bwd"])
        assert fwd == Counter({AG: 1, RS: 1}), (
            f"rank {res.rank}/{t}: forward called {res.value['fwd']}; a sequence-parallel MLP takes one "
            "all-gather (into fc1) and one reduce-scatter (out of fc2), where plain TP takes one all-reduce"
        )
        assert bwd == Counter({AG: 2, RS: 1}), (
            f"rank {res.rank}/{t}: backward called {res.value['bwd']}; expected two all-gathers (the "
            "reduce-scatter's backward, and fc1's input gathered again for grad W) and one reduce-scatter "
            "(fc1's input gradient)"
        )


def saved_bytes(t: int, s: int, b: int, h: int, f: int, *, sequence_parallel: bool) -> int:
    """Bytes one rank saves for backward (see the module docstring)."""
    n = s if sequence_parallel else t * s  # tokens that LayerNorm, fc1's saved input and the mask cover
    tp_region = 2 * (t * s) * b * (f // t) * F64  # GeLU input and fc2 input, (S, B, F/t): same either way
    return n * b * h * F64 + 2 * n * b * F64 + n * b * h * F64 + tp_region + n * b * h


def check_memory(world: World, shape: dict[str, int] | None = None) -> None:
    t = world.size
    d = shape or {"s": S_PER_RANK, "b": BATCH, "h": HIDDEN, "f": FFN}
    s, b, h, f = d["s"], d["b"], d["h"], d["f"]
    results, _, _, _ = run_mlp(world, p=0.1, baseline=True, forbid=(), shape=shape)
    want_sp = saved_bytes(t, s, b, h, f, sequence_parallel=True)
    want_tp = saved_bytes(t, s, b, h, f, sequence_parallel=False)
    x = randn((t * s, b, h), 20)  # run_mlp's input: the baseline's output checks the course's own code
    y_tp = dense_mlp(dense_params(h=h, f=f), x, baseline_drop(x, 0.1, DROP_SEED))
    for res in results:
        v = res.value
        # the baseline is course code; if it disagrees with the accounting above, the course is wrong
        assert v["tp_saved_bytes"] == want_tp, (
            f"course bug: plain TP saved {v['tp_saved_bytes']} != {want_tp}"
        )
        assert_close(
            v["tp_y"], rows(y_tp, t, res.rank), rank=res.rank, world_size=t, what="course TP baseline", **TOL
        )
        got = v["saved_bytes"]
        hint = ""
        if got - want_sp == (t - 1) * s * b * h * F64:
            hint = "; the extra is one (S-s, B, H) float64 tensor: fc1 keeping the GATHERED input?"
        elif got - want_sp == 7 * s * b * h:
            hint = "; the extra is 7 bytes per mask element: a float64 dropout mask instead of a bool one?"
        assert got == want_sp, (
            f"rank {res.rank}/{t}: the block saved {got} bytes for backward; sequence parallelism saves "
            f"{want_sp} (plain TP saves {want_tp}): LayerNorm input + stats, fc1's input shard and the bool "
            f"mask on s = {s} tokens, GeLU and fc2 inputs on S = {t * s} tokens x F/t features{hint}"
        )
        saved = want_tp - got
        assert saved == (t - 1) * s * b * (2 * h * F64 + 2 * F64 + h), f"saved {saved} bytes, not the formula"


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_activation_memory")
def test_activation_memory_against_plain_tp(world: World) -> None:
    check_memory(world)


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_activation_memory")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_activation_memory_drawn_shapes(world: World) -> None:
    check_memory(world, drawn_shape(35, world.size))


# --- 11.grad_sync: p = 0, so that a dropout bug costs 11.dropout and not this part too


def synced(world: World, shape: dict[str, int] | None = None) -> tuple[list, dict]:
    results, _, grads, _ = run_mlp(world, p=0.0, sync=True, forbid=(), shape=shape)
    return results, grads


def check_synced(results: list, grads: dict, names: list[str], t: int) -> None:
    for res in results:
        r, v = res.rank, res.value
        for name in names:
            want = my_slice(name, grads[name], t, r)
            if name in REPLICATED:
                partial = v["partial_grads"][STUDENT_NAMES[name]]
                got = v["grads"][STUDENT_NAMES[name]]
                if t > 1 and torch.allclose(got * t, want, rtol=1e-9, atol=1e-12):
                    raise AssertionError(
                        f"rank {r}/{t}: {name}.grad after allreduce_sequence_parallel_grads is 1/{t} of the "
                        "dense gradient: the MEAN of the ranks' shares; each rank saw different tokens of "
                        "one sequence, and the sequence's gradient is their sum"
                    )
                if torch.equal(got, partial) and not torch.allclose(partial, want, **TOL):
                    raise AssertionError(
                        f"rank {r}/{t}: {name}.grad is still this rank's share alone after "
                        "allreduce_sequence_parallel_grads; this parameter was applied to this rank's tokens "
                        "only"
                    )
                what = f"{name}.grad after the sync (replicated: the dense gradient)"
            else:
                what = f"{name}.grad after the sync (a complete shard: leave it alone)"
            assert_close(v["grads"][STUDENT_NAMES[name]], want, rank=r, world_size=t, what=what, **TOL)


@pytest.mark.part("11.grad_sync")
@pytest.mark.concept("replicated_grads_summed")
def test_replicated_grads_after_sync(world: World) -> None:
    results, grads = synced(world)
    check_synced(results, grads, REPLICATED, world.size)


@pytest.mark.part("11.grad_sync")
@pytest.mark.concept("replicated_grads_summed")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_replicated_grads_after_sync_drawn_shapes(world: World) -> None:
    results, grads = synced(world, drawn_shape(36, world.size))
    check_synced(results, grads, REPLICATED, world.size)


@pytest.mark.part("11.grad_sync")
@pytest.mark.concept("sharded_grads_untouched")
@pytest.mark.parametrize("world", [4], indirect=True)
def test_sharded_grads_after_sync(world: World) -> None:
    results, grads = synced(world)
    check_synced(results, grads, SHARDED, world.size)


@pytest.mark.part("11.grad_sync")
@pytest.mark.concept("one_flat_all_reduce")
@pytest.mark.parametrize("world", [2], indirect=True)
def test_one_all_reduce_for_the_sync(world: World) -> None:
    t = world.size
    for res in synced(world)[0]:
        assert kinds(res.value["sync"]) == Counter({"all_reduce": 1}), (
            f"rank {res.rank}/{t}: allreduce_sequence_parallel_grads called {res.value['sync']}; it takes "
            "ONE all-reduce of all the gradients that need one, flattened together"
        )
