"""What this catches: the first things to get right in each part. Run them with `grade exercise 03`.

The expected values are published figures or worked out by hand in README.md, never a reference solution.
The hidden suite checks every function on many more ranks, sizes and parameters, and times your benchmark.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from grader.harness import World

ALPHA, BETA = 5e-6, 1 / 50e9  # 5 us per message, 50 GB/s links (ground-truth.md §2)


def many(world: World, module: str, function: str, calls: list[tuple]) -> list[Any]:
    inputs = {"module": module, "function": function, "calls": [list(c) for c in calls]}
    [res] = world.run("rank_programs:call_many", inputs=inputs)
    return res.value


def near(got: Any, expected: float, what: str, rel: float = 1e-9) -> None:
    assert type(got) in (int, float), f"{what}: expected a number, got {got!r}"
    assert math.isclose(got, expected, rel_tol=rel), f"{what}: got {got!r}, expected {expected!r}"


@pytest.mark.part("03.alpha_beta")
@pytest.mark.concept("allreduce_costs")
def test_one_mebibyte_on_8_ranks(world: World) -> None:
    # ground-truth.md §2 / Appendix A, published to 0.01 us: ring 106.70 us, recursive doubling 77.91 us
    [ring] = many(world, "costs", "ring_allreduce_time", [(8, 1 << 20, ALPHA, BETA)])
    near(ring * 1e6, 106.70, "ring all-reduce of 1 MiB on 8 ranks, in us", rel=1e-4)
    [rd] = many(world, "costs", "recursive_doubling_allreduce_time", [(8, 1 << 20, ALPHA, BETA)])
    near(rd * 1e6, 77.91, "recursive doubling, 1 MiB on 8 ranks, in us", rel=1e-4)


@pytest.mark.part("03.bus_bandwidth")
@pytest.mark.concept("busbw_factor")
def test_all_reduce_perf_line(world: World) -> None:
    # all_reduce_perf, 8 ranks, 128 MiB of floats in 1 ms: algbw = 134.22 GB/s (GB = 1e9); busbw as printed
    [got] = many(world, "nccl_tests", "nccl_tests_bandwidth", [("AllReduce", 1 << 25, 4, 1e-3, 8)])
    near(got["algbw"], 134.217728, "algbw in GB/s")
    near(got["busbw"], 234.881024, "busbw in GB/s")


@pytest.mark.part("03.crossover")
@pytest.mark.concept("crossover_solve")
def test_ring_overtakes_recursive_doubling(world: World) -> None:
    # README.md, "The crossover": 2.2 MB on 8 ranks at 5 us and 50 GB/s
    [n] = many(world, "costs", "crossover_ring_recursive_doubling", [(8, ALPHA, BETA)])
    near(n, 2.2e6, "crossover on 8 ranks, bytes")


@pytest.mark.part("03.fit")
@pytest.mark.concept("weighted_fit")
def test_fit_a_clean_line(world: World) -> None:
    sizes = [1024, 65536, 1 << 20]
    [got] = many(world, "measure", "fit_alpha_beta", [(sizes, [40e-6 + s / 2.5e9 for s in sizes])])
    near(got[0], 40e-6, "alpha of t = 40 us + S / 2.5 GB/s")
    near(got[1], 1 / 2.5e9, "beta of t = 40 us + S / 2.5 GB/s")


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_sync")
def test_measure_returns_agreed_seconds(world: World) -> None:
    sizes = [1 << 10, 1 << 20]
    results = world.call(
        "measure", "measure_allreduce", args=[(sizes,)] * 2, kwargs={"iters": 3, "warmup": 1}
    )
    a, b = (r.returned for r in results)
    assert isinstance(a, list) and len(a) == 2, f"expected one time per size, got {a!r}"
    assert a == b, f"both ranks must return the same times (the max over ranks): {a} vs {b}"
    assert all(isinstance(t, float) and 0 < t < 1 for t in a), f"times in seconds, each well under 1 s: {a}"


@pytest.mark.part("03.measure")
@pytest.mark.parametrize("world", [2], indirect=True)
@pytest.mark.concept("bench_predicts")
def test_measured_latency_plot(world: World, artifact) -> None:  # type: ignore[no-untyped-def]
    """Measures gloo on 2 ranks with your code, fits a line to it, and saves the plot for you to read."""
    sizes = [1 << k for k in range(8, 23, 2)]  # 256 B .. 4 MiB
    (times, _) = (r.returned for r in world.call("measure", "measure_allreduce", args=[(sizes,)] * 2))
    assert isinstance(times, list) and len(times) == len(sizes), f"expected one time per size, got {times!r}"
    assert all(isinstance(t, float) and t > 0 for t in times), f"times must be positive seconds: {times}"
    # An unweighted line through the measurements from the standard library (so this check leans on
    # measure_allreduce alone, not on your fit).
    slope, intercept = statistics.linear_regression(sizes, times)
    fit = [max(intercept, 1e-9), max(slope, 1e-15)]  # alpha, beta; clamped for the log axes
    path = artifact("allreduce_latency.png", "a plot of your measured all-reduce latency and its fit")
    if path is not None:  # the plot helper ships with the exercise: trusted course code, not yours
        spec = importlib.util.spec_from_file_location("plot_fit_03", Path(__file__).parent / "plot_fit.py")
        plotter = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(plotter)  # type: ignore[union-attr]
        assert plotter.plot_fit(sizes, times, fit[0], fit[1], 2, path) is not None


# ------------------------------------------------------------------------------------------------------------
# 03.copy_model and 03.device_copies: a copy's alpha-beta line, in the units GPU figures are quoted in


@pytest.mark.part("03.copy_model")
@pytest.mark.concept("copy_units")
def test_copy_model_of_a_clean_line(world: World) -> None:
    # a made-up line: 8 us per copy and 50 GB/s (GB = 1e9 bytes), sampled without noise
    sizes = [4096, 65536, 1 << 20, 16 << 20]
    [got] = many(world, "measure", "copy_model", [(sizes, [8e-6 + s / 50e9 for s in sizes])])
    assert isinstance(got, dict), f"copy_model must return a dict, got {got!r}"
    near(got.get("alpha_us"), 8.0, "alpha_us of t = 8 us + S / 50 GB/s", rel=1e-6)
    near(got.get("bandwidth_gbs"), 50.0, "bandwidth_gbs of t = 8 us + S / 50 GB/s", rel=1e-6)


@pytest.mark.part("03.copy_model")
@pytest.mark.concept("half_performance")
def test_half_performance_length_of_a_clean_line(world: World) -> None:
    # at n_1/2 the latency and the bytes take the same time: 8 us = n / 50 GB/s
    sizes = [4096, 65536, 1 << 20, 16 << 20]
    [got] = many(world, "measure", "copy_model", [(sizes, [8e-6 + s / 50e9 for s in sizes])])
    assert isinstance(got, dict), f"copy_model must return a dict, got {got!r}"
    near(got.get("n_half_bytes"), 400_000.0, "n_half_bytes of t = 8 us + S / 50 GB/s", rel=1e-6)


@pytest.mark.part("03.device_copies")
@pytest.mark.concept("gpu_timing")
def test_copies_timed_on_the_gpu(world: World) -> None:
    """Runs on a GPU only. Your copy times next to the grader's own figure for the largest copy, taken
    just before and just after yours in the same run: they time the same bytes over the same link."""
    sizes = [4096, 1 << 20, 16 << 20]
    inputs = {"sizes": sizes, "iters": 10, "warmup": 2, "paired_copies": 10, "with_model": False}
    [res] = world.run("rank_programs:host_to_device_copies", inputs=inputs)
    times, paired = res.value["times"], res.value["paired"]
    assert times is not None, f"time_copies must return one float per size: {res.value.get('bad')}"
    assert all(t > 0 for t in times), f"times must be positive seconds: {times}"
    assert times[-1] > times[0], f"16 MiB must take longer than 4 KiB: {times}"
    # the same copy timed two ways agrees to a few percent; a factor 2 leaves room for any correct method
    low, high = min(paired) / 2, max(paired) * 2
    assert low <= times[-1] <= high, (
        f"your 16 MiB copy took {times[-1]!r} s; the grader's, timed around yours, {paired} s"
    )
