"""What this catches: the first things to get right in data-parallel training, on 2 and 4 ranks.

Run them with `grade exercise 09`. Each rank trains the same small float64 model on its own rows of a batch
with your synchronization; the check trains one process on the whole batch with plain torch and compares the
weights. The hidden suite checks more: broadcast, frozen layers, all-reduce counts, exact bucket boundaries,
and the order and timing of every bucket's all-reduce (see rank_programs.py for how that is observed).

09.streams needs a GPU (`grade exercise 09 --device cuda`; without one it is reported blocked): the bytes your
side-stream copy delivers, the overlap fraction of paired serial and overlapped timings taken by
rank_programs.py in the same run (gated on those bytes), and your event timer against ours.
"""

from __future__ import annotations

import itertools
import statistics

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


# ---------------------------------------------------------------------------------------------------------
# 09.streams (GPU): every figure below is a CUDA-event time that rank_programs.py took, in the same run.

NUMEL = (
    32 * 2**20
)  # a 128 MiB fp32 bucket: about 2.5 ms over PCIe Gen5 (63 GB/s per direction, ground truth §7.1)
OVERLAP_MIN = 0.5  # share of the shorter of copy and matmuls that overlap must hide (a correct copy: ~0.9)
TIMER_RATIO = (0.5, 2.0)  # your median GPU time over ours, for the same step in the same run


def overlap_fractions(
    serial: list[float], overlapped: list[float], copy: list[float], compute: list[float]
) -> list[float]:
    """Per repeat i, the share of the shorter of copy and compute that overlap took off the serial step:
    (S_i - O_i) / min(C_i, M_i). 1: hidden entirely (O = max(C, M)); 0: none (O = C + M); < 0: slower."""
    assert len(serial) == len(overlapped) == len(copy) == len(compute) > 0, "one figure per repeat"
    return [(s - o) / min(c, m) for s, o, c, m in zip(serial, overlapped, copy, compute, strict=True)]


def timer_ratio(student: list[float], trusted: list[float]) -> float:
    """The student's median GPU time of a step over ours for the same step: 1 when both measure it."""
    return statistics.median(student) / statistics.median(trusted)


def host_problem(host: dict, *, need_pinned: bool = True) -> str | None:
    """What is wrong with host_buffer_like's tensor for an asynchronous copy, or None. Pageable memory still
    receives the right bytes; it only loses the overlap, so the correctness checks pass need_pinned=False."""
    if not host["ok"]:
        return (
            f"host_buffer_like returned {host['what']}; expected a CPU tensor of the bucket's shape and dtype"
        )
    if need_pinned and not host["pinned"]:
        return (
            "host_buffer_like returned pageable memory: a device-to-host copy into it holds the host thread "
            "until it is done, so nothing queued after it can overlap it"
        )
    return None


# The values rank_programs.py plants around the bucket (its STALE, SENTINEL, NEXT): a wrong element that holds
# one of them says which ordering was missing.
WHY_WRONG = {
    1000.0: "the bucket's value from BEFORE the compute stream's queued work wrote it: the copy did not wait "
    "for that work",
    -1000.0: "the host buffer's old value: the returned event completed before the copy had written there",
    500.0: "the NEXT bucket's value: the bucket's memory was handed to the compute stream's next tensor "
    "while the copy was still reading it",
}


def copy_problem(check: dict) -> str | None:
    """What is wrong with the bytes the student's copy delivered (see rank_programs._read_after_event)."""
    if check.get("event") is not None:
        return f"start_copy_to_host returned {check['event']}"
    if check["wrong"]:
        why = WHY_WRONG.get(check["got"], "")
        return (
            f"{check['wrong']} of {check['numel']} elements of the host buffer were wrong once the returned "
            f"event had completed; e.g. at flat index {check['first_wrong']}: got {check['got']}, "
            f"expected {check['want']}" + (f", which is {why}" if why else "")
        )
    if not check.get("matmul_ok", True):
        return "the compute stream's matmul result differs from the serial run's"
    if not check.get("bucket_intact", True):
        return "the bucket itself changed: copy it to the host buffer, not the other way"
    return None


@pytest.mark.concept("producer_before_copy")
@pytest.mark.part("09.streams")
def test_streams_copy_delivers_the_produced_bucket(world: World) -> None:
    [res] = world.run("rank_programs:copy_round", inputs=[dict(shape=[NUMEL], dtype="float32", seed=0)])
    problem = host_problem(res.value["host"], need_pinned=False) or copy_problem(res.value)
    assert problem is None, problem


@pytest.mark.concept("copy_hidden_behind_compute")
@pytest.mark.part("09.streams")
def test_streams_copy_hides_behind_the_matmuls(world: World) -> None:
    [res] = world.run("rank_programs:copy_overlap", inputs=[dict(numel=NUMEL, repeats=15, seed=1)])
    v = res.value
    problem = host_problem(v["host"]) or copy_problem(v["check"])
    assert problem is None, f"{problem}; overlap counts only for a copy that delivers the right bytes"
    fractions = overlap_fractions(v["serial_ms"], v["overlapped_ms"], v["copy_ms"], v["matmul_ms"])
    got = statistics.median(fractions)
    med = {k: statistics.median(v[k]) for k in ("serial_ms", "overlapped_ms", "copy_ms", "matmul_ms")}
    assert got >= OVERLAP_MIN, (
        f"overlap fraction {got:.2f} < {OVERLAP_MIN} (median of {len(fractions)} paired runs): serial "
        f"step {med['serial_ms']:.2f} ms, yours {med['overlapped_ms']:.2f} ms, copy alone "
        f"{med['copy_ms']:.2f} ms, {v['reps']} matmuls alone {med['matmul_ms']:.2f} ms; a hidden copy "
        f"makes yours about {max(med['copy_ms'], med['matmul_ms']):.2f} ms"
    )


@pytest.mark.concept("event_timing")
@pytest.mark.part("09.streams")
def test_streams_event_timer_agrees_with_ours(world: World) -> None:
    [res] = world.run("rank_programs:event_timer", inputs=[dict(numel=NUMEL, rounds=4, per_round=3, seed=2)])
    v = res.value
    assert v["problem"] is None, f"gpu_times_ms returned {v['problem']}"
    ratio = timer_ratio(v["student_ms"], v["trusted_ms"])
    low, high = TIMER_RATIO
    assert low <= ratio <= high, (
        f"gpu_times_ms measured a median {statistics.median(v['student_ms']):.3f} ms for a step that our "
        f"CUDA events time at {statistics.median(v['trusted_ms']):.3f} ms (ratio {ratio:.3f}, allowed "
        f"{low}-{high}): time the GPU's work, in milliseconds, not how long queueing it took"
    )
