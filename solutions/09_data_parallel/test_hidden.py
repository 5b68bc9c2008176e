"""What this catches: gradients summed but not averaged, or averaged twice; a broadcast from the wrong rank or
into a copy; frozen parameters that crash the sync or get synchronized anyway; buckets filled front to back,
closed one parameter early or late, or ignoring the cap; one all-reduce per parameter instead of per bucket;
buckets launched in the order their gradients arrive instead of bucket order; all-reduces that block
(async_op=False), are never waited on, are waited on right after launch (no overlap), or are all launched at
the end of backward; bucket state that is not reset, so the second step syncs nothing; a `group` ignored
(the collective or the divisor over the world); a bucket that never completed passing silently. Also on 5
ranks, with chains and caps drawn from seeds here. 09.streams (GPU): a bucket freed right after the call
whose memory the compute stream's next tensor would take, a bf16 matrix bucket of an odd size, and a timer
whose figures are not each run's own (runs of different lengths: a mean for every run fails).

Every expected value is computed here, in the judge, by one process training on the full batch (plain torch,
coursekit.toy_models). Each rank trains on its own rows of that batch with the student's synchronization.
The order checks read a log the rank program makes by wrapping dist.all_reduce (see rank_programs.py).
"""

from __future__ import annotations

import itertools
import random
import statistics
from typing import Any

import pytest
import torch

from coursekit.toy_models import linear_chain, train_sgd
from grader.harness import World, assert_close, assert_equal

# float64 everywhere. The data-parallel mean adds R per-rank mean gradients, where one process sums the whole
# batch at once: the same numbers in another order, a few ulps (~1e-16 relative) apart per step, which three
# SGD steps cannot grow anywhere near 1e-9. Real bugs (a missing 1/R, a bucket left unsynchronized, a stale
# gradient) move the weights by 1e-3 or more.
RTOL, ATOL = 1e-9, 1e-12
CHAIN = [4, 6, 5, 3]  # Linear(4,6) tanh Linear(6,5) tanh Linear(5,3): 24+6, 30+5, 15+3 elements
PAIR = [4, 5, 3]  # head_first: head = Linear(5,3) registered before body = Linear(4,5)
ROWS = 3  # rows of the batch per rank
SGD = dict(lr=0.2, momentum=0.9)
F64 = 8  # bytes per float64 gradient element


def weights_for(widths: list[int], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for fan_in, fan_out in itertools.pairwise(widths):
        out += [torch.randn(fan_out, fan_in, generator=g, dtype=torch.float64) * 0.7]
        out += [torch.randn(fan_out, generator=g, dtype=torch.float64) * 0.3]
    return out


def batch(widths: list[int], rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, widths[0], generator=g, dtype=torch.float64)
    return x, torch.randn(rows, widths[-1], generator=g, dtype=torch.float64)


def reference_params(weights, x, y, *, steps, head_first=False, frozen_first=False) -> list[torch.Tensor]:
    model = linear_chain(weights, head_first=head_first)
    if frozen_first:
        for p in list(model.parameters())[:2]:
            p.requires_grad_(False)
    return train_sgd(model, x, y, steps=steps, **SGD)


def setup(world: World, widths: list[int], seed: int, steps: int, **flags: Any) -> tuple[list, list[dict]]:
    """Weights and data; per-rank inputs (rank r gets rows r*ROWS..); the expected parameters."""
    weights = weights_for(widths, seed)
    x, y = batch(widths, ROWS * world.size, seed + 1)
    expected = reference_params(weights, x, y, steps=steps, **flags)
    inputs = [
        dict(weights=weights, x=xs, y=ys, steps=steps, **SGD, **flags)
        for xs, ys in zip(x.chunk(world.size), y.chunk(world.size), strict=True)
    ]
    return expected, inputs


def check_params(results: list, expected: list[torch.Tensor], what: str) -> None:
    """Every rank's parameters are close to the single process's and bit-identical across ranks."""
    p = len(results)
    for res in results:
        for j, (got, want) in enumerate(zip(res.value["params"], expected, strict=True)):
            assert_close(
                got, want, rtol=RTOL, atol=ATOL, rank=res.rank, world_size=p, what=f"parameter {j} {what}"
            )
    for res in results[1:]:
        for j, (got, rank0) in enumerate(zip(res.value["params"], results[0].value["params"], strict=True)):
            # The all-reduce hands every rank the same sum; identical steps then keep the replicas identical.
            assert_equal(got, rank0, rank=res.rank, world_size=p, what=f"parameter {j} vs rank 0's {what}")


# ---------------------------------------------------------------------------------------------------------
# 09.naive


@pytest.mark.concept("gradient_mean")
@pytest.mark.part("09.naive")
def test_naive_three_steps_match_full_batch(world: World) -> None:
    expected, inputs = setup(world, CHAIN, seed=1, steps=3)
    check_params(world.run("rank_programs:train_naive", inputs=inputs), expected, "after 3 SGD steps")


@pytest.mark.concept("gradient_mean")
@pytest.mark.part("09.naive")
def test_naive_grad_is_full_batch_mean(world: World) -> None:
    weights = weights_for(CHAIN, seed=2)
    x, y = batch(CHAIN, ROWS * world.size, seed=3)
    model = linear_chain(weights)
    torch.nn.functional.mse_loss(model(x), y).backward()
    inputs = [
        dict(weights=weights, x=xs, y=ys, steps=1, **SGD)
        for xs, ys in zip(x.chunk(world.size), y.chunk(world.size), strict=True)
    ]
    for res in world.run("rank_programs:train_naive", inputs=inputs):
        for j, (got, p) in enumerate(zip(res.value["last_grads"], model.parameters(), strict=True)):
            if isinstance(got, torch.Tensor) and torch.allclose(got, p.grad * world.size, rtol=RTOL):
                raise AssertionError(
                    f"rank {res.rank}/{world.size}: parameter {j}'s grad is the SUM over ranks, R = "
                    f"{world.size} times the mean; divide by the world size after the all-reduce"
                )
            assert_close(
                got,
                p.grad,
                rtol=RTOL,
                atol=ATOL,
                rank=res.rank,
                world_size=world.size,
                what=f"parameter {j}'s .grad after allreduce_gradients (the full-batch gradient)",
            )


@pytest.mark.concept("identical_start")
@pytest.mark.part("09.naive")
def test_naive_broadcast_from_rank0(world: World) -> None:
    # Only the broadcast is judged here: what training does after it is gradient_mean's.
    _, inputs = setup(world, CHAIN, seed=4, steps=2)
    for r, inp in enumerate(inputs):  # every rank starts from different weights; rank 0's must win
        inp["weights"] = [w + 0.5 * r for w in inp["weights"]]
    results = world.run("rank_programs:train_naive", inputs=inputs)
    for res in results:
        for j, (got, want) in enumerate(zip(res.value["after_broadcast"], inputs[0]["weights"], strict=True)):
            assert_equal(
                got,
                want,
                rank=res.rank,
                world_size=world.size,
                what=f"parameter {j} after broadcast_parameters (rank 0's value)",
            )


@pytest.mark.concept("identical_start")
@pytest.mark.part("09.naive")
@pytest.mark.generated
def test_naive_broadcast_overwrites_buffers(world: World) -> None:
    # A BatchNorm after the chain: its running statistics and step counter are buffers, not parameters, and
    # a replica that keeps its own would normalise differently from the others. The source rank and every
    # buffer's values are drawn here, so no rank and no value is special.
    rng = random.Random(900 + world.size)
    src = rng.randrange(world.size)
    weights = weights_for(CHAIN, seed=8)
    width = CHAIN[-1]
    inputs = []
    for r in range(world.size):
        buffers = [
            torch.tensor([rng.uniform(-5, 5) for _ in range(width)], dtype=torch.float64),  # running_mean
            torch.tensor([rng.uniform(0.5, 3) for _ in range(width)], dtype=torch.float64),  # running_var
            torch.tensor(rng.randrange(1000), dtype=torch.int64),  # num_batches_tracked
        ]
        inputs.append(dict(weights=[w + 0.25 * r for w in weights], buffers=buffers, src=src))
    for res in world.run("rank_programs:broadcast_state", inputs=inputs):
        assert res.value["same_tensors"], (
            f"rank {res.rank}/{world.size}: after broadcast_parameters the module holds other parameter or "
            "buffer objects than before; overwrite the existing tensors in place (an optimizer built before "
            "the broadcast holds the old ones)"
        )
        want_params = inputs[src]["weights"]
        for j, (got, want) in enumerate(zip(res.value["params"], want_params, strict=False)):
            assert_equal(
                got, want, rank=res.rank, world_size=world.size, what=f"parameter {j} (rank {src}'s value)"
            )
        for name, got, want in zip(
            ["running_mean", "running_var", "num_batches_tracked"],
            res.value["buffers"],
            inputs[src]["buffers"],
            strict=True,
        ):
            assert_equal(
                got,
                want,
                rank=res.rank,
                world_size=world.size,
                what=f"buffer {name} after broadcast_parameters(src={src}): buffers are state too",
            )


@pytest.mark.concept("one_allreduce_per_gradient")
@pytest.mark.part("09.naive")
def test_naive_one_blocking_allreduce_per_parameter(world: World) -> None:
    steps = 2
    _, inputs = setup(world, CHAIN, seed=5, steps=steps)
    for res in world.run("rank_programs:train_naive", inputs=inputs):
        n = res.comm.collectives.count("all_reduce")
        assert n == steps * 6, (
            f"rank {res.rank}/{world.size} called dist.all_reduce {n} times in {steps} steps of a model "
            f"with 6 parameters; the naive scheme makes one all-reduce per parameter per step ({steps * 6})"
        )


@pytest.mark.concept("one_allreduce_per_gradient")
@pytest.mark.part("09.naive")
def test_naive_frozen_first_layer(world: World) -> None:
    # The collectives only (the values of a frozen model's training are gradient_mean's): a frozen
    # parameter has no gradient, so no all-reduce, and must not crash the scheme.
    _, inputs = setup(world, CHAIN, seed=6, steps=2, frozen_first=True)
    for res in world.run("rank_programs:train_naive", inputs=inputs):
        n = res.comm.collectives.count("all_reduce")
        assert n == 2 * 4, f"rank {res.rank}: {n} all-reduces; frozen parameters (grad None) need none, so 8"


# ---------------------------------------------------------------------------------------------------------
# 09.buckets


def buckets(world: World, nbytes: list[int], cap: int) -> Any:
    [res] = world.call("ddp", "assign_buckets", args=[(nbytes, cap)])
    return res.returned


@pytest.mark.concept("exact_cap")
@pytest.mark.part("09.buckets")
@pytest.mark.parametrize(
    ("nbytes", "cap", "want"),
    [
        ([8, 8, 16, 4], 20, [[3, 2], [1, 0]]),  # the docstring's example
        ([10, 10], 20, [[1, 0]]),  # exactly at the cap: still fits
        ([10, 11], 20, [[1], [0]]),  # one byte over: a new bucket
        ([4, 100, 4], 10, [[2], [1], [0]]),  # bigger than the cap: alone
        ([], 10, []),
        ([0, 8, 0], 8, [[2, 1, 0]]),  # empty tensors take no room
        ([192, 48, 240, 40, 120, 24], 200, [[5, 4, 3], [2], [1], [0]]),  # the chain model, float64, 200 B
        ([192, 48, 240, 40, 120, 24], 25 * 2**20, [[5, 4, 3, 2, 1, 0]]),  # DDP's default cap: one bucket
    ],
)
def test_bucket_examples(world: World, nbytes: list[int], cap: int, want: list[list[int]]) -> None:
    got = buckets(world, nbytes, cap)
    assert got == want, (
        f"assign_buckets({nbytes}, cap_bytes={cap}) returned {got}, expected {want}: walk from the last "
        "parameter to the first; a parameter joins the open bucket while its total stays <= the cap"
    )


@pytest.mark.concept("reverse_fill")
@pytest.mark.part("09.buckets")
def test_bucket_random_against_reference(world: World, reference: Any) -> None:
    rng = random.Random(9)
    for trial in range(40):
        nbytes = [rng.choice([0, 2, 4, 8]) * rng.randint(1, 40) for _ in range(rng.randint(1, 25))]
        cap = rng.choice([1, 16, 64, 100, 256, 10**6])
        want = reference("ddp").assign_buckets(nbytes, cap)
        got = buckets(world, nbytes, cap)
        assert got == want, f"trial {trial}: assign_buckets({nbytes}, {cap}) returned {got}, expected {want}"


# ---------------------------------------------------------------------------------------------------------
# 09.overlap


def numels(widths: list[int], frozen_first: bool = False, head_first: bool = False) -> list[int]:
    """Element counts of the parameters that require grad, in model.parameters() order."""
    sizes = [n for a, b in itertools.pairwise(widths) for n in (a * b, b)]
    if head_first:  # the head (second layer) is registered first
        sizes = sizes[2:] + sizes[:2]
    return sizes[2:] if frozen_first else sizes


def bucketed(
    world: World, widths: list[int], *, cap: int, seed: int, steps: int = 3, values: bool = True, **flags: Any
) -> list:
    """BucketedDDP's training run and its bucket plan; with ``values`` (bucketed_mean's tests only) also the
    parameters it trained, so a wrong mean costs that concept and not those of the launch log."""
    expected, inputs = setup(world, widths, seed=seed, steps=steps, **flags)
    for inp in inputs:
        inp["cap_bytes"] = cap
    results = world.run("rank_programs:train_bucketed", inputs=inputs)
    if values:
        check_params(results, expected, f"after {steps} steps of BucketedDDP (cap {cap} B)")
    for res in results:
        check_bucket_partition(res, numels(widths, **flags), cap)
    return results


def check_bucket_partition(res: Any, sizes: list[int], cap: int) -> None:
    b = res.value["buckets"]
    assert isinstance(b, list), f"BucketedDDP.buckets must be a list of lists of ints, got {b}"
    flat = sorted(i for bucket in b for i in bucket)
    assert flat == list(range(len(sizes))), (
        f"rank {res.rank}: BucketedDDP.buckets = {b} must hold each of the {len(sizes)} parameters that "
        "require grad exactly once"
    )
    for bucket in b:
        nbytes = sum(sizes[i] for i in bucket) * F64
        assert len(bucket) == 1 or nbytes <= cap, f"bucket {bucket} holds {nbytes} B, over the cap of {cap} B"


def launches(log: list[list[Any]]) -> list[tuple[int, list[Any]]]:
    return [(pos, ev) for pos, ev in enumerate(log) if ev[0] == "launch"]


@pytest.mark.concept("bucketed_mean")
@pytest.mark.part("09.overlap")
def test_bucketed_three_steps_match_full_batch(world: World) -> None:
    bucketed(world, CHAIN, cap=200, seed=11)


@pytest.mark.concept("bucketed_mean")
@pytest.mark.part("09.overlap")
def test_bucketed_default_cap_one_bucket(world: World) -> None:
    for res in bucketed(world, CHAIN, cap=25 * 2**20, seed=12, steps=2):
        for step, log in enumerate(res.value["logs"]):
            got = [ev[2] for _, ev in launches(log)]
            assert got == [83], (
                f"rank {res.rank}, step {step}: all-reduces of {got} elements; with a 25 MiB cap the 6 "
                "gradients (83 elements) fit one bucket, so one all-reduce of 83 elements"
            )


@pytest.mark.concept("bucket_index_order")
@pytest.mark.part("09.overlap")
def test_one_allreduce_per_bucket_in_bucket_order(world: World) -> None:
    sizes = numels(CHAIN)
    for res in bucketed(world, CHAIN, cap=200, seed=13, values=False):
        want = [sum(sizes[i] for i in bucket) for bucket in res.value["buckets"]]
        for step, log in enumerate(res.value["logs"]):
            got = [ev[2] for _, ev in launches(log)]
            assert got == want, (
                f"rank {res.rank}, step {step}: dist.all_reduce was called on tensors of {got} elements; "
                f"your buckets {res.value['buckets']} need one all-reduce per bucket, in bucket order: {want}"
            )


@pytest.mark.concept("async_overlap")
@pytest.mark.part("09.overlap")
def test_allreduces_async_and_waited_before_step(world: World) -> None:
    for res in bucketed(world, CHAIN, cap=200, seed=14, values=False):
        for step, log in enumerate(res.value["logs"]):
            where = f"rank {res.rank}, step {step}"
            started = launches(log)
            assert started and all(ev[3] for _, ev in started), (
                f"{where}: every bucket's all-reduce must be started with async_op=True, so that backward "
                f"goes on while it runs; got async_op={[ev[3] for _, ev in started]}"
            )
            waits = [(pos, ev[1]) for pos, ev in enumerate(log) if ev[0] == "wait"]
            step_pos = log.index(["step"])
            missing = set(range(len(started))) - {n for _, n in waits}
            assert not missing, f"{where}: the handles of all-reduces {sorted(missing)} were never waited on"
            assert all(pos < step_pos for pos, _ in waits), f"{where}: a handle was waited on after the step"
            last_launch = started[-1][0]
            early = [n for pos, n in waits if pos < last_launch]
            assert not early, (
                f"{where}: all-reduce {early[0]} was waited on before the last bucket was launched; waiting "
                "right after launching makes the all-reduce blocking again: wait for them all after backward"
            )


@pytest.mark.concept("async_overlap")
@pytest.mark.part("09.overlap")
def test_each_bucket_launched_as_soon_as_complete(world: World) -> None:
    for res in bucketed(world, CHAIN, cap=200, seed=15, values=False):
        b = res.value["buckets"]
        for step, log in enumerate(res.value["logs"]):
            ready = {ev[1]: pos for pos, ev in enumerate(log) if ev[0] == "ready"}
            done = log.index(["backward_done"])
            started = launches(log)
            assert len(started) == len(b), f"rank {res.rank}: {len(started)} launches for {len(b)} buckets"
            for k, (pos, _) in enumerate(started):
                complete = max(ready[i] for bucket in b[: k + 1] for i in bucket)
                after = [p for p in ready.values() if p > complete] + [done]
                assert complete < pos < min(after), (
                    f"rank {res.rank}, step {step}: bucket {k} became launchable when its last gradient "
                    f"arrived (log entry {complete}) but was launched at entry {pos}: launch it from the "
                    "hook that completes it, before backward produces the next gradient, to overlap backward"
                )


@pytest.mark.concept("bucket_index_order")
@pytest.mark.part("09.overlap")
def test_head_first_model_launches_in_bucket_order(world: World) -> None:
    # Parameters: head.w (15), head.b (3), body.w (20), body.b (5). Cap 200 B: buckets [[3, 2], [1, 0]]
    # of 25 and 18 elements. Backward finishes the head's bucket 1 first, but bucket 0 must go first.
    sizes = numels(PAIR, head_first=True)
    for res in bucketed(world, PAIR, cap=200, seed=16, head_first=True, values=False):
        want = [sum(sizes[i] for i in bucket) for bucket in res.value["buckets"]]
        for step, log in enumerate(res.value["logs"]):
            got = [ev[2] for _, ev in launches(log)]
            assert got == want, (
                f"rank {res.rank}, step {step}: all-reduces of {got} elements, expected {want}: launch "
                "bucket b only after buckets 0..b-1, even when its gradients are ready first, so every rank "
                "issues the same all-reduces in the same order"
            )


@pytest.mark.concept("bucketed_mean")
@pytest.mark.part("09.overlap")
def test_bucketed_frozen_first_layer(world: World) -> None:
    bucketed(world, CHAIN, cap=200, seed=17, frozen_first=True)


# ---------------------------------------------------------------------------------------------------------
# unseen inputs: 5 ranks, models and caps drawn here from seeds, sub-groups, a parameter without a gradient


def drawn_widths(seed: int) -> list[int]:
    """A chain of 2-4 Linear layers with widths 2-7, drawn from `seed` (never shipped)."""
    rng = random.Random(seed)
    return [rng.randint(2, 7) for _ in range(rng.randint(3, 5))]


@pytest.mark.concept("gradient_mean")
@pytest.mark.part("09.naive")
@pytest.mark.parametrize("world", [5], indirect=True)
def test_naive_drawn_model_five_ranks(world: World) -> None:
    widths = drawn_widths(40)
    expected, inputs = setup(world, widths, seed=41, steps=2)
    check_params(world.run("rank_programs:train_naive", inputs=inputs), expected, f"(chain {widths})")


def group_setup(world: World, widths: list[int], groups: list[list[int]], seed: int, **extra: Any) -> tuple:
    """Per-rank inputs, and each group's expected parameters: one process on the rows of its ranks alone."""
    weights = weights_for(widths, seed)
    x, y = batch(widths, ROWS * world.size, seed + 1)
    xs, ys = x.chunk(world.size), y.chunk(world.size)
    expected = {}
    for ranks in groups:
        gx, gy = torch.cat([xs[r] for r in ranks]), torch.cat([ys[r] for r in ranks])
        want = reference_params(weights, gx, gy, steps=2)
        expected.update({r: want for r in ranks})
    inputs = [
        dict(weights=weights, x=xs[r], y=ys[r], steps=2, **SGD, groups=groups, **extra)
        for r in range(world.size)
    ]
    return inputs, expected


def check_groups(results: list, expected: dict, what: str) -> None:
    for res in results:
        for j, (got, want) in enumerate(zip(res.value["params"], expected[res.rank], strict=True)):
            assert_close(
                got,
                want,
                rtol=RTOL,
                atol=ATOL,
                rank=res.rank,
                world_size=len(results),
                what=f"parameter {j} {what}: the mean over this rank's group only",
            )


GROUPS = [[0, 1, 2], [3]]  # on 4 ranks: a group of 3 and a group of 1


@pytest.mark.concept("gradient_mean")
@pytest.mark.part("09.naive")
@pytest.mark.parametrize("world", [4], indirect=True)
def test_naive_averages_over_its_group(world: World) -> None:
    inputs, expected = group_setup(world, CHAIN, GROUPS, seed=42)
    results = world.run("rank_programs:train_naive", inputs=inputs)
    check_groups(results, expected, "with allreduce_gradients(model, group) for groups [[0, 1, 2], [3]]")


@pytest.mark.concept("bucketed_mean")
@pytest.mark.part("09.overlap")
@pytest.mark.parametrize("world", [5], indirect=True)
def test_bucketed_drawn_model_and_cap_five_ranks(world: World) -> None:
    widths = drawn_widths(50)
    sizes = numels(widths)
    cap = F64 * random.Random(51).randint(min(sizes), sum(sizes))  # from one parameter to all of them
    for res in bucketed(world, widths, cap=cap, seed=52, steps=2):
        want = [sum(sizes[i] for i in bucket) for bucket in res.value["buckets"]]
        for step, log in enumerate(res.value["logs"]):
            got = [ev[2] for _, ev in launches(log)]
            assert got == want, (
                f"rank {res.rank}, step {step}: all-reduces of {got} elements for buckets "
                f"{res.value['buckets']} of chain {widths} (cap {cap} B); expected one per bucket: {want}"
            )


@pytest.mark.concept("bucketed_mean")
@pytest.mark.part("09.overlap")
@pytest.mark.parametrize("world", [4], indirect=True)
def test_bucketed_averages_over_its_group(world: World) -> None:
    inputs, expected = group_setup(world, CHAIN, GROUPS, seed=53, cap_bytes=200)
    results = world.run("rank_programs:train_bucketed", inputs=inputs)
    check_groups(results, expected, "with BucketedDDP(model, group=...) for groups [[0, 1, 2], [3]]")


@pytest.mark.concept("incomplete_bucket_refused")
@pytest.mark.part("09.overlap")
@pytest.mark.parametrize("world", [2], indirect=True)
def test_finish_refuses_a_bucket_that_never_completed(world: World) -> None:
    weights = weights_for(CHAIN, seed=54)
    x, _ = batch(CHAIN, ROWS * world.size, seed=55)
    inputs = [dict(weights=weights, x=xs, cap_bytes=200) for xs in x.chunk(world.size)]
    for res in world.run("rank_programs:bucketed_missing_gradient", inputs=inputs):
        assert res.value["raised"] == "RuntimeError", (
            f"rank {res.rank}/{world.size}: a parameter got no gradient in backward, so its bucket never "
            "completed; finish_gradient_synchronization must raise RuntimeError, got "
            f"{res.value['raised'] or 'no exception'} {res.value['message']}"
        )


# ---------------------------------------------------------------------------------------------------------
# 09.streams (GPU): the bucket's memory freed right after the call; a bf16 matrix bucket of an odd size

STREAMS_NUMEL = 32 * 2**20  # 128 MiB of fp32: a copy of a few ms, as in the public checks
PLANTED = {1000.0: "the stale bucket", -1000.0: "the host buffer's old value", 500.0: "the next bucket"}


def streams_problem(value: dict, shape: list[int], dtype: str) -> str | None:
    host = value["host"]
    if not host["ok"]:
        return f"host_buffer_like returned {host['what']}, expected a CPU tensor of shape {shape}, {dtype}"
    if value.get("event") is not None:
        return f"start_copy_to_host returned {value['event']}"
    if value["wrong"]:
        return (
            f"{value['wrong']} of {value['numel']} host elements wrong after the event; e.g. at "
            f"{value['first_wrong']}: got {value['got']} ({PLANTED.get(value['got'], 'garbage')}), "
            f"expected {value['want']}"
        )
    if not value["matmul_ok"]:
        return "the compute stream's matmul result differs from the serial run's"
    return None


@pytest.mark.concept("freed_bucket_lifetime")
@pytest.mark.part("09.streams")
def test_streams_freed_bucket_is_not_reused_during_the_copy(world: World) -> None:
    shape = [STREAMS_NUMEL]
    [res] = world.run(
        "rank_programs:copy_round", inputs=[dict(shape=shape, dtype="float32", seed=3, reuse=True)]
    )
    problem = streams_problem(res.value, shape, "float32")
    assert problem is None, (
        f"{problem}. The caller dropped the bucket right after start_copy_to_host and allocated the next "
        "bucket of the same size on the compute stream, as the docstring allows"
    )


@pytest.mark.concept("producer_before_copy")
@pytest.mark.part("09.streams")
def test_streams_bf16_matrix_bucket(world: World) -> None:
    shape = [3, 5_000_011]  # bf16, 30 MB, not a power of two
    [res] = world.run("rank_programs:copy_round", inputs=[dict(shape=shape, dtype="bfloat16", seed=4)])
    problem = streams_problem(res.value, shape, "bfloat16")
    assert problem is None, problem
    assert res.value["bucket_intact"], "the bucket itself changed: copy it to the host, not the other way"


# The timer: runs of different lengths, so that each figure must be its own run's time. Within a round every
# second run does TIMER_LONG_REPS times the matmuls (about 3-5x as long as the others on any GPU).
TIMER_LONG_REPS = 5
TIMER_PER_ROUND = 4
TIMER_SPREAD = 1.5  # your long-over-short ratio against ours: both time the same runs, a few % apart


def per_run_problem(student: list[float], trusted: list[float], per_round: int) -> str | None:
    """What is wrong with the student's per-run figures, or None: the long runs over the short ones (median
    of each), theirs against ours. A timer that returns every run's mean gives 1; one that times the runs in
    another order gives its inverse. A machine whose long runs are not clearly longer proves nothing."""

    def long_over_short(times: list[float]) -> float:
        long = [t for i, t in enumerate(times) if i % per_round % 2]
        short = [t for i, t in enumerate(times) if not i % per_round % 2]
        return statistics.median(long) / statistics.median(short)

    ours, yours = long_over_short(trusted), long_over_short(student)
    if ours < TIMER_SPREAD or ours / TIMER_SPREAD <= yours <= ours * TIMER_SPREAD:
        return None
    return (
        f"gpu_times_ms must give each run its own time: the 2nd and 4th runs of each call take "
        f"{ours:.2f}x as long as the 1st and 3rd by our CUDA events, {yours:.2f}x by yours (1.00x: every run "
        "got the same figure, such as a total spread evenly over the runs)"
    )


@pytest.mark.concept("event_timing")
@pytest.mark.part("09.streams")
def test_streams_timer_gives_each_run_its_own_time(world: World) -> None:
    inputs = dict(numel=8 * 2**20, rounds=3, per_round=TIMER_PER_ROUND, seed=5, long_reps=TIMER_LONG_REPS)
    [res] = world.run("rank_programs:event_timer", inputs=[inputs])
    value = res.value
    assert value["problem"] is None, f"gpu_times_ms: {value['problem']}"
    problem = per_run_problem(value["student_ms"], value["trusted_ms"], TIMER_PER_ROUND)
    assert problem is None, problem
