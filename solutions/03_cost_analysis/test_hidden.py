"""What this catches: wrong costs, wrong bus bandwidths, wrong crossovers, wrong fits, and benchmarks (gloo's
all-reduce, a GPU's copies) that do not measure what they claim.

- alpha_beta: log2 p where ceil/floor matter (p = 5, 6, 7, 12, 33), the fold of non-powers of two, gamma
  forgotten or counted per step, (p-1)/p dropped, Bruck's bytes for p not a power of two. Checked exactly
  against the reference and against the figures in ground-truth.md §2 (p = 8, alpha = 5 us, 50 GB/s), on a
  fixed grid and on p, n, alpha, beta, gamma drawn in the judge (a submission tuned to the public numbers
  fails). Rabenseifner off powers of two accepts MPICH's comment (p) and the exact count (2^floor(lg p)).
- bus_bandwidth: S per rank where nccl-tests uses the whole buffer, GiB instead of GB, 2(n-1)/n on the
  wrong collective; the lower bound against ground-truth.md's 62.5 ms for Llama-3 8B on 8 H100s.
- crossover: the closed forms, their 0 / inf edge cases, and that both costs really meet there.
- fit: weighted least squares to rel 1e-9 (every correct algorithm agrees to ~1e-14 on these data), weights
  used unsquared or ignored, alpha and beta swapped, the ring inversion.
- measure: on 2 ranks, the timing contract (barrier before every timed call, one all-reduce per call, ranks
  agreeing), the size of each message timed (the bytes the harness saw each all-reduce handed: a size
  taken as float32 elements moves 4x), seconds as the unit, and that a line fitted to some sizes predicts
  the others measured in the same runs within a factor of 3. Timing checks use the fastest of 3 runs per
  size and get 3 attempts, so a busy machine cannot fail them (see the note above the 03.measure tests).
- copy_model: alpha in seconds, GiB, an unweighted fit (against the student's OWN weighted fit, so a 03.fit
  mistake is not counted twice), n_1/2 from the quoted figures, on noiseless lines drawn in the judge.
- device_copies (GPU only): elapsed_time taken as seconds, a host clock around queued copies, events on
  another stream than the copies, elements for bytes, and at every size (not only the largest) a time off
  the grader's own CUDA-event time of that copy, or nearer a host clock around a synchronized copy than the
  GPU's time (the README asks for CUDA events). Judged against the student's own points and copies the
  rank program times before and after the sweep, never against fixed GB/s or microseconds.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from grader.harness import World
from grader.harness.outcomes import RankFailure


def many(world: World, module: str, function: str, calls: list[tuple]) -> list[Any]:
    """`module.function(*args)` for each args tuple, on the one rank, in a single round trip."""
    inputs = {"module": module, "function": function, "calls": [list(c) for c in calls]}
    [res] = world.run("rank_programs:call_many", inputs=inputs)
    return res.value


def number(value: Any, what: str) -> float:
    if type(value) not in (int, float):
        raise AssertionError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    return value


def close(got: Any, expected: float, what: str, rel: float = 1e-9, abs_: float = 0.0) -> None:
    """rel 1e-9 for closed forms: float rounding only."""
    number(got, what)
    if got == expected or math.isclose(got, expected, rel_tol=rel, abs_tol=abs_):
        return
    raise AssertionError(f"{what}: got {got!r}, expected {expected!r}")


ALPHA, BETA = 5e-6, 1 / 50e9  # ground-truth.md §2: 5 us per message, 50 GB/s links
SEED = 20260316  # the judge's draws: fixed, so a failure can be reproduced, and never shown to students


def draws(salt: int, k: int, pmax: int = 200) -> list[tuple[int, float, float, float, float]]:
    """k (p, n, alpha, beta, gamma): p in 2..pmax (powers of two and not), n log-uniform in 1 B..64 GB,
    alpha 0.1 us..1 ms, beta for 0.1..1000 GB/s, gamma 0 or for 1..1000 GB/s."""
    rng = random.Random(SEED + salt)
    out = []
    for i in range(k):
        p = 1 << rng.randint(1, 7) if i % 4 == 0 else rng.randint(2, pmax)
        n = 10 ** rng.uniform(0, 10.8)
        alpha = 10 ** rng.uniform(-7, -3)
        beta = 1 / 10 ** rng.uniform(8, 12)
        gamma = 0.0 if i % 3 == 0 else 1 / 10 ** rng.uniform(9, 12)
        out.append((p, n, alpha, beta, gamma))
    return out


def accepted(ref: Any, name: str, args: tuple) -> list[float]:
    """The values a correct derivation may give. Rabenseifner off powers of two: MPICH's source comment writes
    the core's counts with p; the exact count uses the power-of-two core, p' = 2^floor(lg p)."""
    want = [getattr(ref, name)(*args)]
    p = args[0]
    if name == "rabenseifner_allreduce_time" and p & (p - 1):
        n, alpha, beta = args[1:4]
        gamma = args[4] if len(args) > 4 else 0.0
        k = p.bit_length() - 1
        share = ((1 << k) - 1) / (1 << k)
        want.append((2 * k + 2) * alpha + (2 * share + 2) * n * beta + (1 + share) * n * gamma)
    return want


def close_any(got: Any, wants: list[float], what: str) -> None:
    number(got, what)
    if any(got == w or math.isclose(got, w, rel_tol=1e-9) for w in wants):
        return
    raise AssertionError(f"{what}: got {got!r}, expected {wants[0]!r}")


ALLREDUCES = (
    "ring_allreduce_time",
    "tree_allreduce_time",
    "recursive_doubling_allreduce_time",
    "rabenseifner_allreduce_time",
)

# ------------------------------------------------------------------------------------------------------------
# 03.alpha_beta


@pytest.mark.part("03.alpha_beta")
@pytest.mark.concept("allreduce_costs")
def test_ground_truth_regimes(world: World) -> None:
    # ground-truth.md §2 / Appendix A: p = 8, alpha = 5 us, B = 50 GB/s, gamma = 0, in us to 2 decimals
    table = {
        8: (70.00, 15.00, 30.00),
        1048576: (106.70, 77.91, 66.70),
        1073741824: (37650.96, 64439.51, 37610.96),
    }
    names = ("ring_allreduce_time", "recursive_doubling_allreduce_time", "rabenseifner_allreduce_time")
    for name, column in zip(names, zip(*table.values(), strict=True), strict=True):
        got = many(world, "costs", name, [(8, n, ALPHA, BETA) for n in table])
        for n, value, published in zip(table, got, column, strict=True):
            # 0.006 us: the published figures are rounded to 0.01 us
            close(number(value, name) * 1e6, published, f"{name}(8, {n} B) in us", rel=0, abs_=0.006)


@pytest.mark.part("03.alpha_beta")
@pytest.mark.parametrize("name", ALLREDUCES)
@pytest.mark.concept("allreduce_costs")
def test_allreduce_costs(world: World, reference, name: str) -> None:
    ref = reference("costs")
    calls = [
        (p, n, a, b, g)
        for p in (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 33, 64)
        for n in (0, 8, 1000, 1 << 20, 1e9)
        for a, b, g in ((ALPHA, BETA, 0.0), (2e-6, 1e-10, 3e-11), (1.0, 1.0, 1.0))
    ]
    for args, value in zip(calls, many(world, "costs", name, calls), strict=True):
        close_any(value, accepted(ref, name, args), f"{name}{args}")


@pytest.mark.part("03.alpha_beta")
@pytest.mark.parametrize("name", ALLREDUCES)
@pytest.mark.concept("allreduce_costs")
def test_allreduce_costs_unseen(world: World, reference, name: str) -> None:
    ref = reference("costs")
    calls = draws(ALLREDUCES.index(name), 40)
    for args, value in zip(calls, many(world, "costs", name, calls), strict=True):
        close_any(value, accepted(ref, name, args), f"{name}{args} (drawn by the judge)")


@pytest.mark.part("03.alpha_beta")
@pytest.mark.concept("gamma_default")
def test_gamma_is_optional(world: World, reference) -> None:
    # without gamma, YOUR cost with gamma = 0: whether the cost itself is right is allreduce_costs' question
    # (issue 41: a wrong formula costs that concept, not this one too)
    for name in ALLREDUCES:
        without, zero = many(world, "costs", name, [(6, 4096, ALPHA, BETA), (6, 4096, ALPHA, BETA, 0.0)])
        close(without, number(zero, f"{name}(6, 4096, alpha, beta, 0.0)"), f"{name}(6, 4096, alpha, beta)")


@pytest.mark.part("03.alpha_beta")
@pytest.mark.parametrize("name", ["pairwise_alltoall_time", "bruck_alltoall_time"])
@pytest.mark.concept("alltoall_costs")
def test_alltoall_costs(world: World, reference, name: str) -> None:
    ref = getattr(reference("costs"), name)
    calls = [(p, m, a, b) for p in (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 33) for m in (0, 64, 1 << 20) for a, b in
             ((ALPHA, BETA), (1.0, 1.0))]  # fmt: skip
    calls += [(p, n / p, a, b) for p, n, a, b, _ in draws(10 + len(name), 20, pmax=100)]  # drawn
    for args, value in zip(calls, many(world, "costs", name, calls), strict=True):
        close(value, ref(*args), f"{name}{args}")


@pytest.mark.part("03.alpha_beta")
@pytest.mark.concept("alltoall_costs")
def test_bruck_power_of_two_is_mpich_formula(world: World) -> None:
    # MPICH alltoall_intra_brucks.c: lgp.alpha + (n/2).lgp.beta, n = p * block
    calls = [(p, 1000, ALPHA, BETA) for p in (2, 4, 8, 16, 64)]
    for (p, m, a, b), value in zip(calls, many(world, "costs", "bruck_alltoall_time", calls), strict=True):
        lg = p.bit_length() - 1
        close(value, lg * a + p * m / 2 * lg * b, f"bruck_alltoall_time({p}, {m}) against MPICH's formula")


# ------------------------------------------------------------------------------------------------------------
# 03.bus_bandwidth

COLLECTIVES = (
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "AlltoAll",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "Gather",
    "Scatter",
    "HyperCube",
)


@pytest.mark.part("03.bus_bandwidth")
@pytest.mark.concept("busbw_factor")
def test_factors_from_nccl_tests(world: World) -> None:
    # nccl-tests src/*.cu GetBw (ground-truth.md §1), n = 8
    expected = (1.75, 0.875, 0.875, 0.875, 1.0, 1.0, 1.0, 0.875, 0.875, 1.0)
    got = many(world, "nccl_tests", "busbw_factor", [(c, 8) for c in COLLECTIVES])
    for c, value, want in zip(COLLECTIVES, got, expected, strict=True):
        close(value, want, f"busbw_factor({c!r}, 8)")
    # and at rank counts drawn by the judge, including odd ones
    ns = random.Random(SEED + 70).sample(range(2, 300), 6)
    twice = {"AllReduce"}
    once = {"AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"}
    calls = [(c, n) for c in COLLECTIVES for n in ns]
    for (c, n), value in zip(calls, many(world, "nccl_tests", "busbw_factor", calls), strict=True):
        want = 2 * (n - 1) / n if c in twice else (n - 1) / n if c in once else 1.0
        close(value, want, f"busbw_factor({c!r}, {n})")


@pytest.mark.part("03.bus_bandwidth")
@pytest.mark.concept("algbw_bytes")
@pytest.mark.generated
def test_bandwidths_against_reference(world: World, reference) -> None:
    ref = reference("nccl_tests")
    shapes = [(1 << 25, 4, 1e-3, 8), (1000, 2, 3.5e-5, 3), (7, 8, 1e-6, 16), (1 << 20, 1, 0.25, 2)]
    rng = random.Random(SEED + 60)  # and shapes drawn by the judge: any count, dtype, time and nranks
    for _ in range(4):
        count, size = rng.randint(1, 1 << 28), rng.choice((1, 2, 4, 8))
        shapes.append((count, size, 10 ** rng.uniform(-6, 0), rng.randint(2, 97)))
    calls = [(c, *shape) for c in COLLECTIVES for shape in shapes]
    got = many(world, "nccl_tests", "nccl_tests_bandwidth", calls)
    for args, value in zip(calls, got, strict=True):
        if not isinstance(value, dict) or set(value) != {"algbw", "busbw"}:
            raise AssertionError(f"nccl_tests_bandwidth{args}: expected {{'algbw', 'busbw'}}, got {value!r}")
        want = ref.nccl_tests_bandwidth(*args)
        got_v = number(value["algbw"], f"nccl_tests_bandwidth{args}['algbw']")
        hint = " (GB is 1e9 bytes, not 2**30)" if math.isclose(got_v * 2**30, want["algbw"] * 1e9) else ""
        close(got_v, want["algbw"], f"nccl_tests_bandwidth{args}['algbw']{hint}")
    # busbw: YOUR algbw times YOUR factor (which factor is busbw_factor's question, issue 41)
    factors = many(world, "nccl_tests", "busbw_factor", [(c[0], c[4]) for c in calls])
    for args, value, factor in zip(calls, got, factors, strict=True):
        close(value["busbw"], value["algbw"] * number(factor, f"busbw_factor{args[0], args[4]}"),
              f"nccl_tests_bandwidth{args}['busbw'] = algbw x busbw_factor")  # fmt: skip
    sizes = many(world, "nccl_tests", "nccl_tests_bytes", [c[:3] + c[4:] for c in calls])
    for args, value in zip(calls, sizes, strict=True):
        want = ref.nccl_tests_bytes(*args[:3], args[4])
        assert value == want, (
            f"nccl_tests_bytes{args[:3] + args[4:]}: got {value!r}, expected S = {want} bytes"
        )


@pytest.mark.part("03.bus_bandwidth")
@pytest.mark.concept("algbw_bytes")
def test_all_gather_counts_the_whole_buffer(world: World) -> None:
    # all_gather_perf with 8 ranks, count = 1 Mi floats per rank, 1 ms: S = 32 MiB, algbw 33.55 GB/s
    [got] = many(world, "nccl_tests", "nccl_tests_bandwidth", [("AllGather", 1 << 20, 4, 1e-3, 8)])
    close(got["algbw"], 8 * 4 * (1 << 20) / 1e9 / 1e-3, "AllGather algbw (S = count * typesize * nranks)")
    [factor] = many(world, "nccl_tests", "busbw_factor", [("AllGather", 8)])
    close(got["busbw"], got["algbw"] * number(factor, "busbw_factor('AllGather', 8)"), "AllGather busbw")


@pytest.mark.part("03.bus_bandwidth")
@pytest.mark.concept("lower_bound")
def test_lower_bound(world: World, reference) -> None:
    ref = reference("nccl_tests")
    calls = [(n, p, bw) for n in (8, 1e6, 16_060_522_496) for p in (2, 3, 8, 64) for bw in (50e9, 450e9)]
    calls += [(n, p, 1 / b) for p, n, _, b, _ in draws(40, 12)]  # drawn by the judge
    for args, value in zip(calls, many(world, "nccl_tests", "allreduce_lower_bound", calls), strict=True):
        close(value, ref.allreduce_lower_bound(*args), f"allreduce_lower_bound{args}")
    # ground-truth.md Appendix A: Llama-3 8B bf16 gradients (16.06 GB) on 8 H100s at 450 GB/s: t >= 62.5 ms
    [t] = many(world, "nccl_tests", "allreduce_lower_bound", [(16_060_522_496, 8, 450e9)])
    close(t * 1e3, 62.5, "8B gradients on 8 GPUs at 450 GB/s, in ms (published to 0.1 ms)", rel=0, abs_=0.05)


@pytest.mark.part("03.bus_bandwidth")
@pytest.mark.concept("unknown_collective")
def test_unknown_collective(world: World) -> None:
    try:
        [res] = world.call("nccl_tests", "busbw_factor", args=[("AllToAll", 8)])  # nccl-tests spells AlltoAll
    except RankFailure as failure:
        assert "ValueError" in str(failure), f"expected a ValueError, got: {failure}"
        return
    raise AssertionError(f"busbw_factor('AllToAll', 8) should raise ValueError, returned {res.returned!r}")


# ------------------------------------------------------------------------------------------------------------
# 03.crossover


@pytest.mark.part("03.crossover")
@pytest.mark.concept("crossover_solve")
def test_crossovers_against_reference(world: World, reference) -> None:
    ref = reference("costs")
    calls = [(p, a, b, g) for p in (2, 3, 4, 5, 6, 8, 12, 16, 33, 64) for a, b, g in
             ((ALPHA, BETA, 0.0), (2e-6, 1e-10, 3e-11), (1.0, 1.0, 1.0))]  # fmt: skip
    drawn = [(p, a, b, g) for p, _, a, b, g in draws(20, 30)]
    for name in ("crossover_ring_tree", "crossover_ring_recursive_doubling"):
        for args, value in zip(calls + drawn, many(world, "costs", name, calls + drawn), strict=True):
            want = getattr(ref, name)(*args)
            if math.isinf(want):
                assert value == want, f"{name}{args}: got {value!r}, expected {want!r}"
            else:
                close(value, want, f"{name}{args}")


@pytest.mark.part("03.crossover")
@pytest.mark.concept("crossover_solve")
def test_costs_meet_at_the_crossover(world: World, reference) -> None:
    ref = reference("costs")
    for name, other in (
        ("crossover_ring_tree", ref.tree_allreduce_time),
        ("crossover_ring_recursive_doubling", ref.recursive_doubling_allreduce_time),
    ):
        calls = [(p, ALPHA, BETA, 1e-11) for p in (4, 6, 8, 32)]
        calls += [(p, a, b, g) for p, _, a, b, g in draws(30, 6) if p > 3]
        for (p, a, b, g), n in zip(calls, many(world, "costs", name, calls), strict=True):
            ring, them = ref.ring_allreduce_time(p, n, a, b, g), other(p, n, a, b, g)
            close(ring, them, f"{name}({p}): ring and the other algorithm at n* = {n!r} B", rel=1e-9)


@pytest.mark.part("03.crossover")
@pytest.mark.concept("crossover_solve")
def test_ground_truth_crossover(world: World) -> None:
    # p = 8, 5 us, 50 GB/s: ring 14 alpha + 1.75 n beta, RD 3 alpha + 3 n beta -> n* = 11 alpha / 1.25 beta
    [n] = many(world, "costs", "crossover_ring_recursive_doubling", [(8, ALPHA, BETA)])
    close(n, 2.2e6, "ring vs recursive doubling, p = 8 (2.2 MB: between §2's 1 MiB and 1 GiB regimes)")


@pytest.mark.part("03.crossover")
@pytest.mark.concept("crossover_edges")
def test_edge_cases(world: World) -> None:
    # p = 2 only: at p = 3 it is the count of rounds that decides, crossover_solve's question (issue 41)
    got = many(world, "costs", "crossover_ring_tree", [(2, ALPHA, BETA)])
    assert got == [0.0], f"p = 2: a tree has as many latencies as the ring, ring always wins: {got}"
    got = many(
        world, "costs", "crossover_ring_recursive_doubling", [(2, ALPHA, BETA), (2, ALPHA, BETA, 1e-10)]
    )
    assert got[0] == math.inf, f"p = 2, gamma = 0: recursive doubling is never slower, expected inf: {got[0]}"
    close(got[1], 2 * ALPHA / 1e-10, "p = 2, gamma = 1e-10: n* = 2 alpha / gamma")
    got = many(world, "costs", "crossover", [(1.0, 1.0), (0.0, -1.0), (-1.0, 0.0), (-1.0, -2.0), (-3.0, 2.0)])
    assert got == [0.0, 0.0, math.inf, math.inf, 1.5], f"crossover(d_alpha, d_bytes) edge cases: got {got}"


# ------------------------------------------------------------------------------------------------------------
# 03.fit: synthetic "measurements": a gloo-like line with a reproducible +-15 % wobble


def synthetic(alpha: float, beta: float, seed: int) -> tuple[list[int], list[float]]:
    sizes = [2**k for k in range(6, 27)]
    wobble = [((seed * 7919 + 104729 * k) % 1000) / 1000 - 0.5 for k in range(len(sizes))]
    return sizes, [(alpha + beta * s) * (1 + 0.3 * w) for s, w in zip(sizes, wobble, strict=True)]


@pytest.mark.part("03.fit")
@pytest.mark.concept("weighted_fit")
def test_fit_recovers_a_clean_line(world: World) -> None:
    sizes = [1024, 4096, 65536, 1 << 20, 1 << 24]
    times = [40e-6 + s / 2.5e9 for s in sizes]
    [got] = many(world, "measure", "fit_alpha_beta", [(sizes, times)])
    assert isinstance(got, (list, tuple)) and len(got) == 2, (
        f"fit_alpha_beta must return [alpha, beta]: {got!r}"
    )
    close(got[0], 40e-6, "alpha of a noiseless line", rel=1e-9)
    close(got[1], 1 / 2.5e9, "beta of a noiseless line", rel=1e-9)


@pytest.mark.part("03.fit")
@pytest.mark.concept("weighted_fit")
def test_fit_matches_least_squares(world: World, reference) -> None:
    ref = reference("measure")
    calls = []
    for seed, (a, b) in enumerate([(45e-6, 1 / 2.5e9), (3e-4, 1 / 8e8), (1e-6, 1 / 40e9)]):
        sizes, times = synthetic(a, b, seed)
        calls += [
            (sizes, times),
            (sizes, times, [1 / t**2 for t in times]),
            (sizes, times, list(range(1, 22))),
        ]
    for args, value in zip(calls, many(world, "measure", "fit_alpha_beta", calls), strict=True):
        want = ref.fit_alpha_beta(*args)
        what = "weighted" if len(args) == 3 else "unweighted"
        for i, name in enumerate(("alpha", "beta")):
            close(value[i], want[i], f"{what} fit on {len(args[0])} sizes: {name}")


@pytest.mark.part("03.fit")
@pytest.mark.concept("link_params")
def test_link_parameters(world: World, reference) -> None:
    ref = reference("measure")
    calls = [(a, b, p) for a in (1e-4, 3e-5) for b in (1e-9, 4e-10) for p in (2, 3, 4, 8)]
    calls += [(a, b, p) for p, _, a, b, _ in draws(50, 12)]  # drawn by the judge
    for args, value in zip(calls, many(world, "measure", "link_alpha_beta", calls), strict=True):
        want = ref.link_alpha_beta(*args)
        close(value[0], want[0], f"link_alpha_beta{args}: alpha_link")
        close(value[1], want[1], f"link_alpha_beta{args}: beta_link")


# ------------------------------------------------------------------------------------------------------------
# 03.measure, on 2 ranks: float32 tensors of 1 KiB..4 MiB (above that, caches make the line bend).
# Other processes on a shared machine only ever ADD time, so the judge takes, for each size, the fastest of
# RUNS runs of your benchmark (each a median of 5 calls): on a 2-core machine at load 10, that kept every
# prediction within a factor of 2.1 in 40 trials, where a single run missed a factor 3 one time in three.
# A check that misses measures RUNS more and judges the fastest of all its runs so far (ATTEMPTS in all):
# with every core busy and the load at 30, independent attempts still failed the reference once in 50
# gradings (benchmarks/bench_timing_checks.py; docs/authoring.md, "Timing checks").

FIT_SIZES = [1 << k for k in (10, 12, 14, 16, 18, 20, 22)]
HELD_OUT = [1 << 13, 1 << 17, 1 << 21]
RUNS = 3
ATTEMPTS = 3  # and a timing check passes if one of three attempts does


def measure(world: World, sizes: list[int], iters: int = 5, warmup: int = 1) -> list:
    return world.call(
        "measure",
        "measure_allreduce",
        args=[(sizes,)] * world.size,
        kwargs={"iters": iters, "warmup": warmup},
    )


def fastest(world: World, sizes: list[int], so_far: list[float] | None = None) -> list[float]:
    """For each size, the least of RUNS measurements (rank 0's answer; the ranks agree) and of ``so_far``."""
    runs = [measure(world, sizes)[0].returned for _ in range(RUNS)]
    for run in runs:
        if not isinstance(run, list) or len(run) != len(sizes) or not all(type(t) is float for t in run):
            raise AssertionError(f"measure_allreduce({sizes}) must return one float per size, got {run!r}")
    return [min(times) for times in zip(*runs, *([so_far] if so_far else []), strict=True)]


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_sync")
def test_timing_contract(world: World) -> None:
    sizes = [1 << 10, 1 << 16, 1 << 20]
    results = measure(world, sizes, iters=4, warmup=2)
    times = [r.returned for r in results]
    for r, t in zip(results, times, strict=True):
        assert isinstance(t, list) and len(t) == len(sizes), f"rank {r.rank}: expected 3 times, got {t!r}"
        assert all(type(x) is float and x > 0 for x in t), (
            f"rank {r.rank}: times must be positive floats: {t}"
        )
        calls = r.comm.collectives
        assert calls.count("all_reduce") >= len(sizes) * 6, (
            f"rank {r.rank}: {calls.count('all_reduce')} all_reduce calls for 3 sizes x (2 warmup + 4 timed)"
        )
        assert calls.count("barrier") >= len(sizes) * 4, (
            f"rank {r.rank}: {calls.count('barrier')} barriers; each timed call starts right after one"
        )
    assert times[0] == times[1], (
        f"the ranks must agree on every time (max over ranks): {times[0]} vs {times[1]}"
    )


def byte_sizes(rng: random.Random) -> list[int]:
    """Three message sizes in bytes (under 64 KiB: cheap), multiples of 4 that are not powers of two, no
    one 4 or 8 times another."""
    sizes: list[int] = []
    while len(sizes) < 3:
        size = 4 * rng.randint(3, 16000)
        related = {size * f for f in (4, 8)} | {size // f for f in (4, 8) if size % f == 0}
        if size & (size - 1) and size not in sizes and not related & set(sizes):
            sizes.append(size)
    return sorted(sizes)


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_message_size")
@pytest.mark.generated
def test_times_the_bytes_asked_for(world: World) -> None:
    # the harness records the bytes of the tensor each dist.all_reduce was handed: each size asked for must
    # be timed on a message of exactly that many bytes (other all-reduces, such as the ranks' agreement,
    # may come on top). Sizes drawn here: multiples of 4 and not powers of two, so that a size in float32
    # elements (4x the bytes) or in float64 ones (8x) never lands on another size of the list.
    sizes = byte_sizes(random.Random(SEED + 80))
    iters = 3
    for res in measure(world, sizes, iters=iters, warmup=1):
        moved = res.comm.collective_sizes("all_reduce")
        wrong = {s: moved.count(s) for s in sizes if moved.count(s) < iters}
        assert not wrong, (
            f"rank {res.rank}: measure_allreduce({sizes}, iters={iters}) must time all-reduces of those many "
            f"BYTES; all-reduces of {wrong} bytes were called {list(wrong.values())} times, and the "
            f"all-reduces it called moved these sizes (bytes): {sorted(set(moved))}"
        )


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_per_call")
def test_seconds_and_growth(world: World) -> None:
    failures, best = [], None
    for _ in range(ATTEMPTS):
        small, large = best = fastest(world, [1 << 10, 1 << 22], best)
        # a 1 KiB all-reduce between two processes takes at least a loopback round trip, tens of us, never
        # under 1 us (load only adds time; too large a unit is test_time_is_per_call's). 4 MiB took 15-60x
        # of 1 KiB in most single runs, 2x is asked; times handed back in another order than the sizes' invert
        # this. Under load a single run fell to 1.3x: hence the fastest of several, and more on a miss.
        if 1e-6 <= small and large > 2 * small:
            return
        failures.append(f"1 KiB: {small!r} s, 4 MiB: {large!r} s")
    raise AssertionError(
        "times must be in seconds (1 KiB at least 1e-6 s) and grow with the size, in the order of the sizes "
        f"(4 MiB > 2 x 1 KiB); in {ATTEMPTS} attempts: " + "; ".join(failures)
    )


PER_CALL_ITERS = 32


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_per_call")
def test_time_is_per_call(world: World) -> None:
    # Judged on each rank's own clock around your measure_allreduce, not against another timing: its 32 timed
    # calls lie inside that span, so their median is at most 2 x span / 32 on any machine, idle or loaded (a
    # correct benchmark can never fail this). A sum over the 32 calls, or milliseconds, is 16 or 1000 times
    # over it; measured on the 2-core CI box, a sum came out at 7x the bound or more with every core busy.
    # Three runs; one over the bound is enough (load only makes a run longer, never a bound tighter).
    sizes, iters = [1 << 20], PER_CALL_ITERS
    for _ in range(RUNS):
        results = world.run(
            "rank_programs:enclosed_measure", inputs={"sizes": sizes, "iters": iters, "warmup": 2}
        )
        for res in results:
            if res.value["times"] is None:
                raise AssertionError(
                    f"measure_allreduce({sizes}) must return one float per size: {res.value['bad']}"
                )
        bound = 2 * max(res.value["span"] for res in results) / iters
        got = results[0].value["times"][0]
        assert got <= bound, (
            f"measure_allreduce([1 MiB], iters={iters}) returned {got!r} s, but the whole call took "
            f"{bound * iters / 2:.4g} s on the slowest rank, so the median of its {iters} timed calls is at "
            f"most {bound:.4g} s: times must be in seconds, and the time of ONE call (the median over "
            "iters), not their sum"
        )


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_predicts")
def test_fit_predicts_held_out_sizes(world: World, reference) -> None:
    ref = reference("measure")
    sizes = sorted(FIT_SIZES + HELD_OUT)  # interleaved, measured in the same runs
    failures, best = [], None
    for _ in range(ATTEMPTS):
        best = fastest(world, sizes, best)
        times = dict(zip(sizes, best, strict=True))
        fit = [times[s] for s in FIT_SIZES]
        alpha, beta = ref.fit_alpha_beta(FIT_SIZES, fit, [1 / t**2 for t in fit])  # relative-error fit
        ratios = {s: (alpha + beta * s) / times[s] for s in HELD_OUT}
        # factor 3 either way: measured 1.3 typical and 2.1 worst on a loaded 2-core machine (see above); a
        # benchmark that times the wrong thing (no barrier, wrong sizes, another call) misses by far more
        if all(1 / 3 <= r <= 3 for r in ratios.values()):
            return
        failures.append(", ".join(f"{s} B: predicted/measured {r:.2f}" for s, r in ratios.items()))
    raise AssertionError(
        f"a line fitted to {FIT_SIZES} should predict the held-out sizes within a factor of 3; in {ATTEMPTS} "
        f"attempts, each the fastest of all runs so far ({ATTEMPTS * RUNS} in the end): "
        + "; ".join(failures)
    )


# ------------------------------------------------------------------------------------------------------------
# 03.copy_model: noiseless lines drawn by the judge, and the gloo-like wobbly data of 03.fit


def copy_lines(salt: int, k: int) -> list[tuple[list[int], list[float], float, float]]:
    """k noiseless (sizes, times, alpha, beta): alpha 0.5..50 us, bandwidth 2..5000 GB/s, 12 sizes from a
    random start in 100 B..10 KB, spaced by 2.2x (never powers of two)."""
    rng = random.Random(SEED + salt)
    lines = []
    for _ in range(k):
        alpha, beta = 10 ** rng.uniform(-6.3, -4.3), 1 / 10 ** rng.uniform(9.3, 12.7)
        sizes = [int(10 ** rng.uniform(2, 4) * 2.2**i) for i in range(12)]
        lines.append((sizes, [alpha + beta * s for s in sizes], alpha, beta))
    return lines


def model_value(got: Any, key: str, what: str) -> float:
    if not isinstance(got, dict) or key not in got:
        raise AssertionError(f"copy_model must return a dict with {key!r}: got {got!r}")
    return number(got[key], f"{what}: {key}")


@pytest.mark.part("03.copy_model")
@pytest.mark.concept("copy_units")
def test_copy_model_units(world: World) -> None:
    lines = copy_lines(60, 8)
    got = many(world, "measure", "copy_model", [(sizes, times) for sizes, times, _, _ in lines])
    for (_, _, alpha, beta), value in zip(lines, got, strict=True):
        what = f"a noiseless line of {alpha * 1e6:.3g} us and {1 / beta / 1e9:.4g} GB/s"
        # rel 1e-7: the fit of a noiseless line is exact up to rounding (1e-12 in every correct algorithm)
        close(model_value(value, "alpha_us", what), alpha * 1e6, f"{what}: alpha_us", rel=1e-7)
        close(model_value(value, "bandwidth_gbs", what), 1 / beta / 1e9, f"{what}: bandwidth_gbs", rel=1e-7)


@pytest.mark.part("03.copy_model")
@pytest.mark.concept("copy_units")
def test_copy_model_fits_relative_error(world: World) -> None:
    # wobbly data over 64 B..64 MiB: only a fit by relative error matches your own fit_alpha_beta weighted by
    # 1/t^2 here; it is compared with YOUR fit_alpha_beta, so a mistake in 03.fit is not counted twice
    data = [synthetic(a, b, seed) for seed, (a, b) in enumerate([(6e-6, 1 / 25e9), (2e-5, 1 / 400e9)])]
    fits = many(world, "measure", "fit_alpha_beta", [(s, t, [1 / x**2 for x in t]) for s, t in data])
    got = many(world, "measure", "copy_model", data)
    for (alpha, beta), value in zip(fits, got, strict=True):
        what = "copy_model of measured-looking data"
        close(model_value(value, "alpha_us", what), alpha * 1e6, f"{what}: alpha_us (your fit x 1e6)")
        close(
            model_value(value, "bandwidth_gbs", what), 1 / beta / 1e9, f"{what}: bandwidth_gbs (1/beta/1e9)"
        )


@pytest.mark.part("03.copy_model")
@pytest.mark.concept("half_performance")
def test_half_performance_length(world: World) -> None:
    lines = copy_lines(61, 8)
    got = many(world, "measure", "copy_model", [(sizes, times) for sizes, times, _, _ in lines])
    for (_, _, alpha, beta), value in zip(lines, got, strict=True):
        what = f"a noiseless line of {alpha * 1e6:.3g} us and {1 / beta / 1e9:.4g} GB/s"
        n_half = model_value(value, "n_half_bytes", what)
        # there, latency and bytes cost the same: the copy takes 2 alpha and moves at half of 1/beta
        close(alpha + beta * n_half, 2 * alpha, f"{what}: the time of a copy of n_half_bytes", rel=1e-7)


# ------------------------------------------------------------------------------------------------------------
# 03.device_copies, on a GPU only. What the judge trusts: the student's own points, and the grader's paired
# figure for the largest copy (throughput of back-to-back copies from pinned memory, host clock between two
# synchronizations) taken right before and right after the student's sweep, on the same GPU in the same run.
# Nothing is compared with a fixed number of GB/s or microseconds. Sizes are not powers of two and span
# 1.5 KB..48 MB, across the half-performance length of any PCIe or C2C link (alpha 1..20 us, 5..500 GB/s).

COPY_SIZES = [1536, 5_000, 16_000, 50_000, 160_000, 500_000, 1_600_000, 5_000_000, 16_000_000, 48_000_000]
PAIRED_BAND = 2.0  # the same copy timed two ways agrees to a few percent; any correct method is well inside


def copies(world: World, with_model: bool) -> dict[str, Any]:
    inputs = {"sizes": COPY_SIZES, "iters": 15, "warmup": 3, "paired_copies": 10, "with_model": with_model}
    [res] = world.run("rank_programs:host_to_device_copies", inputs=inputs)
    if res.value["times"] is None:
        raise AssertionError(f"time_copies must return one float per size: {res.value['bad']}")
    return res.value


def timing_problems(value: dict[str, Any]) -> list[str]:
    times, paired = value["times"], value["paired"]
    if not all(t > 0 for t in times):
        return [f"times must be positive seconds: {times}"]
    problems = []
    # 48 MB against 1.5 KB: 31000x the bytes; even alpha = 20 us at 500 GB/s makes that 5.8x the time
    if times[-1] < 3 * times[0]:
        problems.append(f"48 MB took {times[-1]:.3g} s, 1.5 KB {times[0]:.3g} s: the bytes cost nothing?")
    if not min(paired) / PAIRED_BAND <= times[-1] <= max(paired) * PAIRED_BAND:
        problems.append(
            f"your 48 MB copy took {times[-1]:.4g} s; the grader's, timed around yours: "
            f"{paired[0]:.4g} s and {paired[1]:.4g} s"
        )
    return problems


@pytest.mark.part("03.device_copies")
@pytest.mark.concept("gpu_timing")
def test_copy_times_against_the_paired_copy(world: World) -> None:
    failures = []
    for _ in range(ATTEMPTS):
        problems = timing_problems(copies(world, with_model=False))
        if not problems:
            return
        failures.append("; ".join(problems))
    raise AssertionError(
        "time_copies must return the GPU's time of one copy in seconds (seconds, not ms; the copy finished, "
        f"not just queued; the bytes asked for). In {ATTEMPTS} attempts: " + " | ".join(failures)
    )


HOST_GAP = 1.5  # where a host clock around a synchronized copy reads at least this much more than events


def size_problems(value: dict[str, Any]) -> list[str]:
    """Every size against the grader's own CUDA-event time of the same copy, taken before and after the
    sweep: within PAIRED_BAND of it, and, where the host clock with synchronize reads clearly more than the
    events (small copies, where the host's launch and wait are most of the time), nearer the events."""
    (before, after), host_synced = value["events"], value["host_synced"]
    problems = []
    for size, t, b, a, host in zip(COPY_SIZES, value["times"], before, after, host_synced, strict=True):
        low, high = min(b, a), max(b, a)
        if not low / PAIRED_BAND <= t <= high * PAIRED_BAND:
            problems.append(
                f"{size} B took {t:.3g} s by yours, {b:.3g} s and {a:.3g} s by the grader's events"
            )
        elif host >= HOST_GAP * high and t >= math.sqrt(high * host):
            problems.append(
                f"{size} B took {t:.3g} s by yours: nearer a host clock around a synchronized copy "
                f"({host:.3g} s) than the GPU's time of the copy ({high:.3g} s)"
            )
    return problems


@pytest.mark.part("03.device_copies")
@pytest.mark.concept("gpu_timing")
def test_every_copy_size_against_the_graders_events(world: World) -> None:
    failures = []
    for _ in range(ATTEMPTS):
        problems = size_problems(copies(world, with_model=False))
        if not problems:
            return
        failures.append("; ".join(problems[:3]))
    raise AssertionError(
        "time_copies must return, for every size, the GPU's time of one copy: CUDA events around the copy on "
        "its stream (a host clock, even with synchronize, adds the host's launch and wait, which is most of "
        f"a small copy). In {ATTEMPTS} attempts: " + " | ".join(failures)
    )


def line_problems(value: dict[str, Any]) -> list[str]:
    sizes, times, model, paired = COPY_SIZES, value["times"], value["model"], value["paired"]
    if model is None:
        return [f"times must be positive seconds: {times}"]
    alpha = model_value(model, "alpha_us", "copy_model of your copies") * 1e-6
    bandwidth = model_value(model, "bandwidth_gbs", "copy_model of your copies") * 1e9
    n_half = model_value(model, "n_half_bytes", "copy_model of your copies")
    problems = []
    if not 0 < alpha <= 1.5 * min(times):
        problems.append(f"alpha {alpha:.3g} s must be positive and no more than your fastest copy")
    if bandwidth <= 0:
        return [*problems, f"bandwidth {bandwidth:.4g} B/s must be positive"]
    # the line through your own points: each within 50 % (a clean link is within a few percent)
    worst = max(abs(alpha + s / bandwidth - t) / t for s, t in zip(sizes, times, strict=True))
    if worst > 0.5:
        problems.append(f"the fitted line misses one of your points by {worst:.0%}")
    link = max(sizes) / min(paired)  # the grader's bytes per second on the largest copy
    if not link / PAIRED_BAND <= bandwidth <= link * PAIRED_BAND:
        problems.append(
            f"fitted {bandwidth / 1e9:.4g} GB/s against {link / 1e9:.4g} GB/s measured by the grader"
        )
    # where your copies cross half of the fitted bandwidth, read off your points, against n_half
    share = [s / t / bandwidth for s, t in zip(sizes, times, strict=True)]
    below = [s for s, r in zip(sizes, share, strict=True) if r < 0.5]
    above = [s for s, r in zip(sizes, share, strict=True) if r >= 0.5]
    if (below and n_half < max(below) / 4) or (above and n_half > min(above) * 4):
        problems.append(
            f"n_half_bytes {n_half:.4g}: your copies reach half of {bandwidth / 1e9:.4g} GB/s between "
            f"{max(below, default=0)} and {min(above, default=math.inf)} B"
        )
    return problems


@pytest.mark.part("03.device_copies")
@pytest.mark.concept("copy_line")
def test_copies_follow_the_alpha_beta_line(world: World) -> None:
    failures = []
    for _ in range(ATTEMPTS):
        problems = line_problems(copies(world, with_model=True))
        if not problems:
            return
        failures.append("; ".join(problems))
    raise AssertionError(
        "copy_model of your time_copies should describe your copies and the link. In "
        f"{ATTEMPTS} attempts: " + " | ".join(failures)
    )
