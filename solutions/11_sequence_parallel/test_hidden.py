"""What this catches: sequence-parallel blocks with the right numbers for the wrong reasons, or wrong ones.

- regions: all-gathers that put the shards in the wrong order, reduce-scatters built from an all-reduce (the
  right values for t times the traffic), backward passes that swap the two collectives or forget the sum,
  a sequence length that does not split evenly accepted without a word.
- linear: a column-parallel linear that keeps the gathered input alive for backward (no memory saved at
  all), forgets to reduce-scatter the input gradient, or gets the weight gradient from the shard alone.
- mlp_block: a block that still all-reduces, gathers twice, loses a gradient, or saves activations on all
  S tokens. Its activation memory is MEASURED (bytes of the tensors autograd saves, from
  saved_tensors_hooks in rank_programs.py) and must equal, byte for byte, Korthikanti et al.'s accounting.
- dropout_grads: one dropout seed for all ranks (every shard gets the same mask), masks drawn for the full
  sequence, LayerNorm or fc2-bias gradients left as per-rank partial sums, sharded gradients summed too.

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

from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from grader.harness import RankFailure, World, assert_close, assert_equal

TOL = dict(rtol=1e-10, atol=1e-12)  # float64; sums over F (or over ranks) run in another order than the
# dense matmul's, ~1e-16 relative per addition. A wrong shard or a missing rank's share is off by O(1).
TP_SEED_OFFSET = 2718  # Megatron-LM model_parallel_cuda_manual_seed: seed + 2718 + tp_rank
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
            got = (kinds(res.value["fwd"]), kinds(res.value["bwd"]))
            assert got == (Counter({fwd: 1}), Counter({bwd: 1})), (
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
        assert bwd == Counter({AG: 1, RS: 1}), (
            f"rank {res.rank}/{t}: backward called {res.value['bwd']}; it takes one all-gather (the input, "
            "again, for grad W) and one reduce-scatter (grad X back to the shards)"
        )


# ---------------------------------------------------------------------------------------------------------
# the block: 11.mlp_block and 11.dropout_grads

S_PER_RANK, BATCH, HIDDEN, FFN = 2, 2, 8, 16


def dense_params(seed: int = 7) -> dict[str, torch.Tensor]:
    h, f = HIDDEN, FFN
    return {
        "norm.weight": 1 + randn((h,), seed, 0.2),
        "norm.bias": randn((h,), seed + 1, 0.2),
        "fc1.weight": randn((f, h), seed + 2, h**-0.5),
        "fc1.bias": randn((f,), seed + 3, 0.1),
        "fc2.weight": randn((h, f), seed + 4, f**-0.5),
        "fc2.bias": randn((h,), seed + 5, 0.1),
    }


def dense_mlp(params: dict, x: torch.Tensor, p: float, seed: int, t: int) -> torch.Tensor:
    """The unsplit block; the dropout mask of token rows r*s.. is drawn from seed + 2718 + r."""
    h = F.layer_norm(x, x.shape[-1:], params["norm.weight"], params["norm.bias"])
    h = F.gelu(F.linear(h, params["fc1.weight"], params["fc1.bias"]))
    h = F.linear(h, params["fc2.weight"], params["fc2.bias"])
    s = x.shape[0] // t
    gens = [torch.Generator().manual_seed(seed + TP_SEED_OFFSET + r) for r in range(t)]
    keep = torch.cat([torch.rand((s, *x.shape[1:]), generator=g, dtype=x.dtype) for g in gens]) >= p
    return x + h * keep / (1 - p)


def run_mlp(world: World, *, p: float, sync: bool = False, baseline: bool = False, forbid=NO_ALL_REDUCE):
    """Run the block on every rank; return (results, dense output, dense grads by parameter name, x grad)."""
    t = world.size
    params, seed = dense_params(), 11
    x, dy = randn((t * S_PER_RANK, BATCH, HIDDEN), 20), randn((t * S_PER_RANK, BATCH, HIDDEN), 21)
    inputs = dict(dense=params, x=x, dy=dy, p_drop=p, seed=seed, sync=sync, baseline=baseline)
    results = world.run("rank_programs:mlp", inputs=inputs, forbid=forbid)
    leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
    xl = x.clone().requires_grad_()
    y = dense_mlp(leaves, xl, p, seed, t)
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


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_matches_dense")
def test_block_forward(world: World) -> None:
    t = world.size
    results, y, _, _ = run_mlp(world, p=0.0)
    for res in results:
        assert_close(
            res.value["y"],
            rows(y, t, res.rank),
            rank=res.rank,
            world_size=t,
            what="block output (s, B, H)",
            **TOL,
        )


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_block_matches_dense")
def test_block_backward(world: World) -> None:
    t = world.size
    results, _, grads, x_grad = run_mlp(world, p=0.0)
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


@pytest.mark.part("11.mlp_block")
@pytest.mark.concept("sp_activation_memory")
def test_activation_memory_against_plain_tp(world: World) -> None:
    t, s, b, h, f = world.size, S_PER_RANK, BATCH, HIDDEN, FFN
    results, y, _, _ = run_mlp(world, p=0.1, baseline=True, forbid=())
    want_sp = saved_bytes(t, s, b, h, f, sequence_parallel=True)
    want_tp = saved_bytes(t, s, b, h, f, sequence_parallel=False)
    for res in results:
        v = res.value
        # the baseline is course code; if it disagrees with the accounting above, the course is wrong
        assert v["tp_saved_bytes"] == want_tp, (
            f"course bug: plain TP saved {v['tp_saved_bytes']} != {want_tp}"
        )
        assert_close(
            v["tp_y"], rows(y, t, res.rank), rank=res.rank, world_size=t, what="course TP baseline", **TOL
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


# --- 11.dropout_grads


@pytest.mark.part("11.dropout_grads")
@pytest.mark.concept("per_rank_dropout_stream")
def test_dropout_mask_is_this_ranks_own(world: World) -> None:
    t, p, seed = world.size, 0.5, 3
    shape = (4, 2, 3)
    results = world.run(
        "rank_programs:dropout", inputs={"x": torch.ones(shape, dtype=torch.float64), "p": p, "seed": seed}
    )
    for res in results:
        g = torch.Generator().manual_seed(seed + TP_SEED_OFFSET + res.rank)
        keep = torch.rand(shape, generator=g, dtype=torch.float64) >= p
        assert_equal(
            res.value,
            keep.double() / (1 - p),
            rank=res.rank,
            world_size=t,
            what=f"dropout of ones (mask from seed + 2718 + rank = {seed + TP_SEED_OFFSET + res.rank})",
        )


@pytest.mark.part("11.dropout_grads")
@pytest.mark.concept("per_rank_dropout_stream")
def test_block_with_dropout_matches_dense(world: World) -> None:
    t = world.size
    results, y, _, x_grad = run_mlp(world, p=0.3)
    for res in results:
        ok = dict(rank=res.rank, world_size=t, **TOL)
        assert_close(res.value["y"], rows(y, t, res.rank), what="block output with dropout p = 0.3", **ok)
        assert_close(res.value["x_grad"], rows(x_grad, t, res.rank), what="input grad with dropout", **ok)


@pytest.mark.part("11.dropout_grads")
@pytest.mark.concept("replicated_grad_sync")
def test_grads_after_sync(world: World) -> None:
    t = world.size
    results, _, grads, _ = run_mlp(world, p=0.3, sync=True, forbid=())
    for res in results:
        r, v = res.rank, res.value
        assert kinds(v["sync"]) == Counter({"all_reduce": 1}), (
            f"rank {r}/{t}: allreduce_sequence_parallel_grads called {v['sync']}; it takes ONE all-reduce "
            "of all the replicated parameters' gradients, flattened together"
        )
        for name, student in STUDENT_NAMES.items():
            want = my_slice(name, grads[name], t, r)
            what = f"{name}.grad after allreduce_sequence_parallel_grads"
            what += (
                " (replicated: the sum over ranks)" if name in REPLICATED else " (a shard: leave it alone)"
            )
            assert_close(v["grads"][student], want, rank=r, world_size=t, what=what, **TOL)
