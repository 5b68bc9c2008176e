"""What this catches: communication estimates that are off by a link, a factor of 2, or an overlap rule.

- collectives: NCCL's ring latency with 2(n-1) steps where all-gather has n-1, every step priced at the
  network latency, all-to-all paying n-1 latencies, the bidirectional NVLink figure, the wrong busbw factor,
  node designs the group splits unevenly kept in the per-interconnect table. Published: the scaling book's
  Quiz 5 (B/514e9 in a node vs B/800e9 across 2 nodes), its SU all-gather (413 GB/s) and its in-node and
  cross-node all-to-all formulas.
- dp: buckets that drop the remainder, readiness measured from the start of backward in bucket counts rather
  than bytes, a stream that lets buckets overtake each other or ignores the previous bucket, exposed time
  counted from the start of the step. Published: the scaling book's critical batch (2475 tokens per GPU
  across nodes) and ground-truth.md's 62.5 ms for Llama-3 8B on 8 H100s.
- tp: 2 collectives per layer instead of 4, SP counted as twice the bytes, the recomputed forward forgotten.
  Published: 134 MB per all-reduce and 167 ms per step for Llama-3 70B at TP 8 (ground-truth.md §10.2).
- pp: hops counted once per micro-batch instead of (m + p - 2) on the critical path, backward forgotten, the
  hop priced on NVLink when stages sit on different nodes. Published: the scaling book's PP formula.
- ep: dispatch bytes without top_k, combine's precision used for the dispatch, recomputation ignored.
  Published: DeepEP's benchmark configuration (469.8 MB FP8 dispatch, 939.5 MB BF16 combine per GPU).
- step: gradients of the whole model instead of one stage, experts reduced over the full DP group, overlap
  with the whole step instead of the last micro-batch, ZeRO-3 gathered once per step, tokens not split by SP.
Closed forms: relative 1e-9 (float rounding only). Published figures: the tolerance next to each.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from typing import Any

import pytest

from coursekit.budget import MFU
from coursekit.cluster import Cluster
from coursekit.models import MODELS, ModelSpec
from grader.harness import World

GB = 1e9
REL = 1e-9  # float rounding only

# Every node design of the catalogue, alone and several together
CLUSTERS = [
    Cluster("dgx_h100", 1), Cluster("dgx_h100", 2), Cluster("dgx_h100", 4), Cluster("dgx_b200", 2),
    Cluster("gb200_nvl72", 1), Cluster("gb200_nvl72", 2), Cluster("rtx4090_pcie_4x", 2),
    Cluster("rtx4090_pcie_8x", 1), Cluster("rtx4090_pcie_8x", 2),
]  # fmt: skip
OPS = "all_reduce", "all_gather", "reduce_scatter", "all_to_all"  # as collective_time.OPS


def groups(cluster: Cluster) -> list[tuple[int, int]]:
    """(size, stride) of groups of rank 0 that split evenly: TP-like, DP-like and PP-like."""
    out = []
    for stride in (1, 2, 4, 8, 9, 36):
        for size in (1, 2, 3, 4, 8, 16):
            if (size - 1) * stride < cluster.world and cluster.tiles(size, stride):
                out.append((size, stride))
    return out


# ------------------------------------------------------------------------------------------------------------
# plumbing: coursekit objects travel as plain data; the reference modules import each other by name


def wire(value: Any) -> Any:
    if isinstance(value, Cluster):
        return {"cluster": [value.node, value.nodes]}
    if isinstance(value, ModelSpec):
        return {"model": value.to_dict()}
    return value


def spec(module: str, function: str, *args: Any, **kwargs: Any) -> dict:
    return {
        "module": module,
        "function": function,
        "args": [wire(a) for a in args],
        "kwargs": {k: wire(v) for k, v in kwargs.items()},
    }


def run(world: World, module: str, function: str, *args: Any, **kwargs: Any) -> Any:
    [res] = world.run("rank_programs:call", inputs=spec(module, function, *args, **kwargs))
    return res.value


def run_many(world: World, calls: list[dict]) -> list[Any]:
    [res] = world.run("rank_programs:call_many", inputs={"calls": calls})
    return res.value


@pytest.fixture
def ref(reference) -> dict[str, Any]:
    """The three reference modules. strategies.py and step.py import their siblings by name, so those names
    point at the reference only while it loads, never while a student's module could see them."""
    mods: dict[str, Any] = {}
    for name in ("collective_time", "strategies", "step"):
        saved = {k: sys.modules.get(k) for k in mods}
        sys.modules.update(mods)
        try:
            mods[name] = reference(name)
        finally:
            for k, v in saved.items():
                if v is None:
                    del sys.modules[k]
                else:
                    sys.modules[k] = v
    return mods


def expect(ref: dict, calls: list[dict]) -> list[Any]:
    """What the reference answers to the same calls."""
    return [getattr(ref[c["module"]], c["function"])(*map(unwire, c["args"]), **c["kwargs"]) for c in calls]


def unwire(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"cluster"}:
        return Cluster(*value["cluster"])
    if isinstance(value, dict) and set(value) == {"model"}:
        return ModelSpec.from_dict(value["model"])
    return value


def same(got: Any, want: Any, what: str, rel: float = REL) -> None:
    """got == want: same keys and lengths, numbers within rel; names the usual slips."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            keys = sorted(got) if isinstance(got, dict) else got
            raise AssertionError(f"{what}: expected a dict with keys {sorted(want)}, got {keys!r}")
        for k in want:
            same(got[k], want[k], f"{what}[{k!r}]", rel)
        return
    if isinstance(want, list | tuple):
        if not isinstance(got, list) or len(got) != len(want):
            raise AssertionError(f"{what}: expected a list of {len(want)}, got {got!r}")
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{what}[{i}]", rel)
        return
    if type(got) not in (int, float) or isinstance(got, bool):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if math.isclose(got, want, rel_tol=rel, abs_tol=1e-18):
        return
    hint = ""
    if want and got:
        r = got / want
        if math.isclose(r, 2, rel_tol=1e-6) or math.isclose(r, 0.5, rel_tol=1e-6):
            hint = " (exactly 2x off: per-direction vs bidirectional, or forward/backward counted once?)"
        elif math.isclose(r, 1e9, rel_tol=1e-6) or math.isclose(r, 1e6, rel_tol=1e-6):
            hint = " (a unit slip: seconds and bytes, never ms or GB)"
    raise AssertionError(f"{what}: got {got!r}, expected {want!r}{hint}")


def against_reference(
    world: World, ref: dict, calls: list[dict], what: str, keys: tuple[str, ...] | None = None
) -> None:
    """Each call against the reference; with `keys`, only those keys of a dict result (the documented ones:
    the reference may return more)."""
    for c, got, want in zip(calls, run_many(world, calls), expect(ref, calls), strict=True):
        args = ", ".join(repr(unwire(a)) for a in c["args"])
        if keys is not None:
            assert isinstance(got, dict) and all(k in got for k in keys), (
                f"{what}: expected keys {keys}, got {got!r}"
            )
            got, want = {k: got[k] for k in keys}, {k: want[k] for k in keys}
        same(got, want, f"{what}: {c['function']}({args}, {c['kwargs']})")


# ------------------------------------------------------------------------------------------------------------
# 23.collectives


@pytest.mark.part("23.collectives")
class TestCollectives:
    @pytest.mark.concept("nccl_ring_latency")
    def test_latency_by_hand(self, world: World) -> None:
        # NCCL tuning.cc ring model, Simple protocol: base 8.4 us, NVLink 3.4 us a step, network 14.0 us
        one, two = Cluster("dgx_h100", 1), Cluster("dgx_h100", 2)
        cases = [
            (("all_reduce", one, 8, 1), 8.4e-6 + 14 * 3.4e-6),  # 2(8-1) NVLink steps
            (("all_gather", one, 8, 1), 8.4e-6 + 7 * 3.4e-6),  # n-1 steps
            (("all_reduce", two, 16, 1), 8.4e-6 + 28 * 3.4e-6 + 2 * 14e-6),  # 30 steps, 2 between nodes
            (("reduce_scatter", two, 2, 8), 8.4e-6 + 1 * 14e-6),  # one GPU per node: every step crosses
            (("all_to_all", two, 16, 1), 8.4e-6 + 14e-6),  # one step, at the slowest level's latency
            (("all_reduce", Cluster("rtx4090_pcie_8x", 1), 8, 1), 8.4e-6 + 14 * 5.7e-6),  # PCIe, no NVLink
            (("all_reduce", one, 1, 1), 0.0),
        ]
        calls = [spec("collective_time", "latency_s", *args) for args, _ in cases]
        for (args, want), got in zip(cases, run_many(world, calls), strict=True):
            same(got, want, f"latency_s{args[:1] + args[2:]} on {args[1].node} x {args[1].nodes}")

    @pytest.mark.concept("slowest_level_bandwidth")
    def test_times_match_reference(self, world: World, ref: dict) -> None:
        # bandwidth terms only: the latency is nccl_ring_latency's (issue 41: a latency mistake costs that)
        calls = [
            spec("collective_time", "collective_s", op, nbytes, cluster, size, stride, latency=False)
            for cluster in CLUSTERS
            for size, stride in groups(cluster)
            for op in OPS
            for nbytes in (8, 25 * 2**20, 1e9, 16.06e9)
        ]
        against_reference(world, ref, calls, "collectives")

    @pytest.mark.concept("nccl_ring_latency")
    def test_latencies_match_reference(self, world: World, ref: dict) -> None:
        # latency_s against the reference; collective_s with latency = YOUR bandwidth term + YOUR latency_s
        cases = [(op, c, size, stride) for c in CLUSTERS for size, stride in groups(c) for op in OPS]
        against_reference(world, ref, [spec("collective_time", "latency_s", *a) for a in cases], "latency_s")
        nbytes = 25 * 2**20
        calls = []
        for op, c, size, stride in cases:
            calls += [
                spec("collective_time", "collective_s", op, nbytes, c, size, stride),
                spec("collective_time", "collective_s", op, nbytes, c, size, stride, latency=False),
                spec("collective_time", "latency_s", op, c, size, stride),
            ]
        got = run_many(world, calls)
        for (op, c, size, stride), total, bandwidth, lat in zip(
            cases, got[0::3], got[1::3], got[2::3], strict=True
        ):
            what = f"collective_s({op!r}, 25 MiB, {c.node} x {c.nodes}, {size}, {stride})"
            assert all(type(x) in (int, float) for x in (total, bandwidth, lat)), (
                f"{what}: numbers expected, got {total!r}, {bandwidth!r} (latency=False), latency_s {lat!r}"
            )
            same(total, bandwidth + lat, f"{what}: with latency, your bandwidth term + your latency_s")

    @pytest.mark.concept("slowest_level_bandwidth")
    def test_scaling_book_quiz_5_two_nodes_are_node_bound(self, world: World) -> None:
        # jax-ml/scaling-book gpus.md, Quiz 4 Q5 ("precise cost" of an AllGather of B bytes over 2 DGX H100
        # nodes): "B * 7 / (8 * 450e9) = B / 514e9" in the node, "B * (2-1) / (2 * 400e9) = B / 800e9"
        # beyond; the node level bounds it. Bandwidth only, so a closed form: 1e-9.
        got = run(world, "collective_time", "collective_s", "all_gather", 1e9, Cluster("dgx_h100", 2), 16, 1,
                  latency=False)  # fmt: skip
        same(got, 1e9 * 7 / (8 * 450e9), "all-gather of 1 GB over 2 DGX H100 nodes (B/514e9)")

    @pytest.mark.concept("slowest_level_bandwidth")
    def test_scaling_book_su_allgather(self, world: World) -> None:
        # scaling book gpus.md: an SU of 32 DGX H100 nodes all-gathers at min(514, 413) GB/s = 413 GB/s
        # (400e9 x 32/31 = 412.9). 0.1%: the book rounds to 3 digits.
        t = run(world, "collective_time", "collective_s", "all_gather", 1e12, Cluster("dgx_h100", 32), 256, 1,
                latency=False)  # fmt: skip
        assert isinstance(t, float) and t > 0, f"collective_s returned {t!r}"
        assert math.isclose(1e12 / t / GB, 413, rel_tol=1e-3), (
            f"SU all-gather at {1e12 / t / GB:.1f} GB/s, not 413"
        )

    @pytest.mark.concept("slowest_level_bandwidth")
    def test_scaling_book_alltoall_formulas(self, world: World) -> None:
        # scaling book gpus.md: in a node T = B (N-1) / (W N^2), W = 450e9 per GPU; across M nodes
        # T = B (M-1) / (M^2 W_node), W_node = 400e9; B = all bytes of the all-to-all = per-GPU bytes x GPUs
        per_gpu = 1e9
        got = run(world, "collective_time", "collective_s", "all_to_all", per_gpu, Cluster("dgx_h100", 1), 8,
                  1, latency=False)  # fmt: skip
        same(got, per_gpu * 8 * 7 / (450e9 * 64), "all-to-all in a DGX H100")
        m = 4
        got = run(world, "collective_time", "collective_s", "all_to_all", per_gpu, Cluster("dgx_h100", m),
                  8 * m, 1, latency=False)  # fmt: skip
        same(got, per_gpu * 8 * m * (m - 1) / (m * m * 400e9), "all-to-all over 4 DGX H100 nodes")

    @pytest.mark.concept("slowest_level_bandwidth")
    def test_send(self, world: World, ref: dict) -> None:
        # a pipeline hop between nodes: 50 GB/s per GPU (8 x 400 Gb/s per node), + 8.4 + 14.0 us
        got = run(world, "collective_time", "send_s", 1e8, Cluster("dgx_h100", 2), 8)
        same(got, 1e8 / 50e9 + 8.4e-6 + 14e-6, "send_s of 100 MB to the next node")
        calls = [
            spec("collective_time", "send_s", n, c, stride, latency=lat)
            for c in CLUSTERS
            for stride in (1, 4, 8, 72)
            if stride < c.world
            for n in (1e3, 1e8)
            for lat in (True, False)
        ]
        against_reference(world, ref, calls, "send_s")

    @pytest.mark.concept("bus_bandwidth")
    def test_bus_bandwidth(self, world: World, ref: dict) -> None:
        # 16 GB in one DGX H100: latency is 56 us of 62 ms, so busbw is 450 GB/s within 0.1%. nccl-tests
        # measures ~370 (scaling book gpus.md): the model is an upper bound, and must not fall below that.
        got = run(
            world, "collective_time", "bus_bandwidth_gb_s", "all_reduce", 16e9, Cluster("dgx_h100", 1), 8, 1
        )
        assert isinstance(got, float) and math.isclose(got, 450, rel_tol=1e-3), (
            f"busbw {got!r}, not ~450 GB/s"
        )
        calls = [
            spec("collective_time", "bus_bandwidth_gb_s", op, n, c, size, stride)
            for c in CLUSTERS[:6]
            for size, stride in groups(c)
            if size > 1
            for op in OPS
            for n in (1e6, 1e9)
        ]
        against_reference(world, ref, calls, "bus_bandwidth_gb_s")

    @pytest.mark.concept("bus_bandwidth")
    def test_per_interconnect(self, world: World, ref: dict) -> None:
        # ground-truth.md §10.1: 16.06 GB of Llama-3 8B gradients, ring all-reduce in 8 H100s: >= 62.5 ms
        got = run(world, "collective_time", "per_interconnect", "all_reduce", 16.06e9, 8)
        assert isinstance(got, dict) and "dgx_h100" in got, f"per_interconnect returned {got!r}"
        assert math.isclose(got["dgx_h100"], 62.5e-3, rel_tol=2e-3), f"{got['dgx_h100']!r} s, not ~62.5 ms"
        calls = [
            spec("collective_time", "per_interconnect", op, n, g)
            for op in OPS
            for n in (1e9,)
            for g in (4, 6, 8, 16, 72)
        ]
        against_reference(world, ref, calls, "per_interconnect")


# ------------------------------------------------------------------------------------------------------------
# 23.dp


@pytest.mark.part("23.dp")
class TestDataParallel:
    @pytest.mark.concept("bucket_schedule")
    def test_buckets(self, world: World, ref: dict) -> None:
        cases = [(100.0, 25.0), (101.0, 25.0), (10.0, 25.0), (0.0, 25.0), (16.06e9, 25 * 2**20), (50.0, 50.0)]
        same(
            run(world, "strategies", "bucket_sizes", 101.0, 25.0), [25.0] * 4 + [1.0], "bucket_sizes(101, 25)"
        )
        calls = [spec("strategies", "bucket_sizes", *c) for c in cases]
        calls += [
            spec("strategies", "bucket_ready_s", s, 2.0) for s in ([25.0] * 4 + [1.0], [1.0], [3.0, 1.0])
        ]
        against_reference(world, ref, calls, "buckets")

    @pytest.mark.concept("bucket_overlap")
    def test_overlap_by_hand(self, world: World) -> None:
        cases = [
            (
                ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], 3.0),
                1.0,
            ),  # each bucket hides behind the next: the last shows
            (([2.0, 2.0, 2.0], [1.0, 2.0, 3.0], 3.0), 4.0),  # the stream is the bottleneck: ends at 7
            (([0.5], [3.0], 3.0), 0.5),
            (([1.0, 1.0], [0.0, 5.0], 6.0), 0.0),  # both finish before compute does
            (([3.0, 0.1], [1.0, 1.5], 2.0), 2.1),  # the second waits for the first, not for its gradients
        ]
        calls = [spec("strategies", "overlap", *args) for args, _ in cases]
        for (args, exposed), got in zip(cases, run_many(world, calls), strict=True):
            same(got, {"total_s": sum(args[0]), "exposed_s": exposed}, f"overlap{args}")

    @pytest.mark.concept("bucket_overlap")
    def test_uniform_buckets_closed_form(self, world: World) -> None:
        # n equal buckets, latency off, each taking c while backward makes one every t = B/n:
        # c >= t: exposed = n (c - t) + t (the stream is busy from the first bucket on); c < t: exposed = c
        cluster, grads, n = Cluster("dgx_h100", 1), 8e9, 40
        ar = 2 * 7 / 8 * grads / n / 450e9
        for backward in (0.002, 1.0):
            got = run(world, "strategies", "dp_allreduce", grads, backward, cluster, 8, 1, grads / n, False)
            t = backward / n
            exposed = n * (ar - t) + t if ar >= t else ar
            same(
                got,
                {"buckets": n, "total_s": n * ar, "exposed_s": exposed},
                f"dp_allreduce, backward {backward} s",
            )

    @pytest.mark.concept("bucket_overlap")
    def test_dp_allreduce_matches_reference(self, world: World, ref: dict) -> None:
        calls = [
            spec("strategies", "dp_allreduce", g, bwd, c, size, stride, bb, lat)
            for c in CLUSTERS[1:8:2]
            for size, stride in groups(c)[1::2]
            for g, bb in ((1e8, 25 * 2**20), (2e9, 25 * 2**20), (16.06e9, 1e9))
            for bwd in (0.05, 2.0)
            for lat in (True, False)
        ]
        against_reference(world, ref, calls, "dp_allreduce")

    @pytest.mark.concept("bucket_overlap")
    def test_llama3_8b_on_8_h100(self, world: World) -> None:
        # ground-truth.md §10.1 [D]: bf16 grads of Llama-3 8B (16.06 GB), ring all-reduce at 450 GB/s:
        # >= 62.5 ms. One bucket, latency off, no backward to hide behind. 0.1%: the figure is rounded.
        got = run(
            world, "strategies", "dp_allreduce", 16.06e9, 0.0, Cluster("dgx_h100", 1), 8, 1, 1e12, False
        )
        assert isinstance(got, dict) and math.isclose(got.get("exposed_s", 0), 62.5e-3, rel_tol=1e-3), got

    @pytest.mark.concept("critical_batch")
    def test_critical_batch(self, world: World) -> None:
        # scaling book gpus.md: DP is compute-bound above C / W_collective tokens per GPU: "Within an SU or at
        # the spine level, BS > 990e12 / 400e9 = 2475". 1024 nodes: (X-1)/X = 0.999; the catalogue's 989.4
        # TF vs the book's 990: 0.5% covers both.
        got = run(world, "strategies", "dp_critical_tokens_per_gpu", Cluster("dgx_h100", 1024), 8192, 1)
        assert isinstance(got, float) and math.isclose(got, 2475, rel_tol=5e-3), f"{got!r}, not ~2475"
        # In a node the book rounds to "990e12 / 450e9 = 2200", dropping (N-1)/N = 7/8: exactly C x 7/(8 W).
        # Over 2 nodes the node level still bounds it (Quiz 5), so the answer does not change.
        in_node = 989.4e12 * 7 / (8 * 450e9)
        for nodes in (1, 2):
            got = run(
                world, "strategies", "dp_critical_tokens_per_gpu", Cluster("dgx_h100", nodes), 8 * nodes, 1
            )
            same(got, in_node, f"critical tokens per GPU, DP over {nodes} DGX H100 node(s)")


# ------------------------------------------------------------------------------------------------------------
# 23.tp


@pytest.mark.part("23.tp")
class TestTensorParallel:
    @pytest.mark.concept("tp_on_critical_path")
    def test_collectives_per_layer(self, world: World) -> None:
        want = {
            (False, "none"): {"all_reduce": 4},  # Megatron mappings.py: f and g, in two blocks
            (False, "selective"): {"all_reduce": 4},
            (False, "full"): {"all_reduce": 6},  # the forward runs again in backward
            (True, "none"): {"all_gather": 4, "reduce_scatter": 4},
            (True, "full"): {"all_gather": 6, "reduce_scatter": 6},
        }
        calls = [spec("strategies", "tp_collectives_per_layer", sp, rc) for sp, rc in want]
        for (key, expected), got in zip(want.items(), run_many(world, calls), strict=True):
            issued = {op: n for op, n in got.items() if n} if isinstance(got, dict) else got  # 0 = not issued
            assert issued == expected, f"tp_collectives_per_layer{key}: got {got!r}, expected {expected!r}"

    @pytest.mark.concept("tp_on_critical_path")
    def test_llama3_70b_tp8(self, world: World) -> None:
        # ground-truth.md §10.2 [D]: 70B, TP 8, s 8192, b 1, bf16: 134.2 MB per all-reduce, 522 us at
        # 450 GB/s, 4 per layer: 167 ms over 80 layers. Bytes exact; time 0.1% (the figure is rounded).
        got = run(world, "strategies", "tp_step", 8192, 1, 8192, 80, 1, Cluster("dgx_h100", 1), 8, False,
                  "none", False)  # fmt: skip
        assert isinstance(got, dict), f"tp_step returned {got!r}"
        same(got.get("message_bytes"), 134_217_728, "message_bytes")
        assert math.isclose(got.get("total_s", 0), 0.167, rel_tol=1e-3), f"total_s {got.get('total_s')!r}"
        same(got["exposed_s"], got["total_s"], "exposed_s (nothing hides TP's all-reduces)")

    @pytest.mark.concept("sp_extra_launch")
    def test_sequence_parallel_pays_one_more_base_latency_per_pair(self, world: World) -> None:
        # an all-gather + reduce-scatter moves the bytes of one all-reduce and takes the same 2(n-1) steps,
        # but launches twice: one more NCCL base latency (8.4 us) for each all-reduce a layer replaces. How
        # many that is (4) is tp_on_critical_path's question: here, as many as YOUR count says (issue 41)
        c = Cluster("dgx_h100", 1)
        counts = run(world, "strategies", "tp_collectives_per_layer", False, "none")
        pairs = counts.get("all_reduce") if isinstance(counts, dict) else None
        assert type(pairs) is int, f"tp_collectives_per_layer(False, 'none') gave {counts!r}"
        no_sp, sp = (
            run(world, "strategies", "tp_step", 4096, 1, 4096, 1, 1, c, 8, flag) for flag in (False, True)
        )
        same(sp["total_s"] - no_sp["total_s"], pairs * 8.4e-6, "SP minus no-SP, one layer", rel=1e-6)

    @pytest.mark.concept("tp_on_critical_path")
    def test_tp_step_matches_reference(self, world: World, ref: dict) -> None:
        calls = [
            spec("strategies", "tp_step", 4096, b, 8192, 20, m, c, tp, sp, rc, lat)
            for c in CLUSTERS
            for tp in (1, 2, 4, 8)
            if tp <= c.world and c.tiles(tp, 1)
            for b, m in ((1, 8), (2, 3))
            for sp in (False, True)
            for rc in ("none", "full")
            for lat in (True, False)
        ]
        against_reference(world, ref, calls, "tp_step")


# ------------------------------------------------------------------------------------------------------------
# 23.pp


@pytest.mark.part("23.pp")
class TestPipelineParallel:
    @pytest.mark.concept("pipeline_critical_hops")
    def test_scaling_book_formula(self, world: World) -> None:
        # scaling book gpus.md: "T_total PP comms = 2BD / (W N_MB) (N_MB + N_stages - 2)" for the forward
        # activations (2 = bytes of bf16, B = tokens of the batch); the gradients retrace it backward.
        s, b, d, m, p = 4096, 2, 8192, 12, 4
        c = Cluster("dgx_h100", 4)  # stages 8 ranks apart: a different node, 50 GB/s per GPU
        got = run(world, "strategies", "pp_step", s, b, d, p, m, c, 8, False)
        tokens = s * b * m
        forward = 2 * tokens * d / (50e9 * m) * (m + p - 2)
        assert isinstance(got, dict), f"pp_step returned {got!r}"
        same(got.get("exposed_s"), 2 * forward, "exposed_s (forward + backward)")
        same(got["total_s"], 2 * m * 2 * s * b * d / 50e9, "total_s: m activations + m gradients")

    @pytest.mark.concept("pipeline_critical_hops")
    def test_one_stage_sends_nothing(self, world: World) -> None:
        got = run(world, "strategies", "pp_step", 4096, 1, 4096, 1, 8, Cluster("dgx_h100", 1), 8)
        assert got["total_s"] == got["exposed_s"] == 0, f"pp = 1: {got!r}"

    @pytest.mark.concept("pipeline_critical_hops")
    def test_pp_step_matches_reference(self, world: World, ref: dict) -> None:
        calls = [
            spec("strategies", "pp_step", 2048, b, 4096, p, m, c, stride, lat)
            for c in CLUSTERS
            for p, stride in ((2, 1), (2, 4), (4, 2), (4, 8), (8, 1))
            if (p - 1) * stride < c.world
            for b, m in ((1, 1), (4, 16))
            for lat in (True, False)
        ]
        against_reference(world, ref, calls, "pp_step", keys=("total_s", "exposed_s"))  # its docstring's keys


# ------------------------------------------------------------------------------------------------------------
# 23.ep


@pytest.mark.part("23.ep")
class TestExpertParallel:
    @pytest.mark.concept("dispatch_volume")
    def test_deepep_configuration(self, world: World) -> None:
        # DeepEP README benchmark: "8K tokens per batch, 7168 hidden, top-8 experts, FP8 dispatching and
        # BF16 combining" -> per GPU and MoE layer 469.8 MB dispatched, 939.5 MB combined (ground-truth §10.5)
        got = run_many(world, [spec("strategies", "ep_dispatch_bytes", 8192, 7168, 8, n) for n in (1, 2)])
        same(got, [469_762_048, 939_524_096], "DeepEP dispatch (FP8) and combine (BF16) bytes")

    @pytest.mark.concept("ep_all_to_alls")
    def test_mixed_precision_and_recompute(self, world: World, ref: dict) -> None:
        c = Cluster("dgx_h100", 4)
        a2a = ref["collective_time"].collective_s
        one, two = (a2a("all_to_all", 4096 * 8 * 7168 * n, c, 32, 1) for n in (1, 2))
        got = run(world, "strategies", "ep_step", 4096, 7168, 8, 1, 1, c, 32, 1, "none", 1, 2)
        same(got, {"total_s": 2 * (one + two), "exposed_s": 2 * (one + two)}, "fp8 dispatch + bf16 combine")
        got = run(world, "strategies", "ep_step", 4096, 7168, 8, 1, 1, c, 32, 1, "full", 1, 2)
        same(got["total_s"], 3 * (one + two), "with full recomputation (the forward pair again)")

    @pytest.mark.concept("ep_all_to_alls")
    def test_ep_step_matches_reference(self, world: World, ref: dict) -> None:
        calls = [
            spec("strategies", "ep_step", t, 7168, 8, 58, m, c, ep, stride, rc, 1, 2, lat)
            for c in CLUSTERS
            for ep, stride in ((2, 1), (8, 1), (8, 2), (16, 1), (4, 8))
            if (ep - 1) * stride < c.world and c.tiles(ep, stride)
            for t, m in ((4096, 1), (512, 7))
            for rc in ("none", "full")
            for lat in (True, False)
        ]
        against_reference(world, ref, calls, "ep_step")


# ------------------------------------------------------------------------------------------------------------
# 23.step


def plan(tp: int, pp: int, dp: int, ep: int, zero: int, recompute: str, mbs: int, m: int) -> dict:
    return {
        "tp": tp, "pp": pp, "dp": dp, "ep": ep, "zero_stage": zero, "recompute": recompute,
        "micro_batch_size": mbs, "num_microbatches": m,
    }  # fmt: skip


STEP_CASES = [
    ("llama3_8b", Cluster("dgx_h100", 1), plan(1, 1, 8, 1, 1, "selective", 1, 16), 4096),
    ("llama3_8b", Cluster("dgx_h100", 1), plan(1, 1, 8, 1, 3, "full", 2, 4), 4096),
    ("llama3_8b", Cluster("rtx4090_pcie_8x", 2), plan(1, 2, 8, 1, 2, "full", 1, 32), 4096),
    ("llama3_70b", Cluster("dgx_h100", 4), plan(8, 4, 1, 1, 0, "selective", 1, 64), 4096),
    ("llama3_70b", Cluster("dgx_h100", 4), plan(8, 1, 4, 1, 3, "selective", 1, 16), 8192),
    ("llama3_70b", Cluster("gb200_nvl72", 1), plan(8, 1, 9, 1, 1, "none", 1, 4), 4096),
    ("deepseek_v3", Cluster("dgx_h100", 32), plan(8, 8, 4, 4, 1, "selective", 1, 16), 4096),
    ("deepseek_v3", Cluster("dgx_h100", 32), plan(1, 16, 16, 16, 3, "full", 2, 8), 4096),
    ("deepseek_v3", Cluster("dgx_h100", 32), plan(2, 4, 32, 8, 2, "none", 1, 2), 4096),
]


def compute(model: ModelSpec, cluster: Cluster, p: dict, seq: int) -> float:
    """The step's compute on one GPU, as exercise 21's step_time computes it (the judge passes it in): 6 flops
    per active parameter and token, 8 with full recomputation (Kaplan et al. 2020 §2.1; Narayanan et al.
    2021 §5.1), at MFU 0.40 (coursekit.budget) of the GPU's peak."""
    tokens = p["dp"] * p["micro_batch_size"] * p["num_microbatches"] * seq
    flops = (8 if p["recompute"] == "full" else 6) * model.active_params * tokens
    return flops / (cluster.world * cluster.peak_flops * MFU)


def step_spec(model: ModelSpec, cluster: Cluster, p: dict, seq: int, **kwargs: Any) -> dict:
    return spec(
        "step", "step_comm", model, cluster, p, seq, compute_s=compute(model, cluster, p, seq), **kwargs
    )


@pytest.mark.part("23.step")
class TestStep:
    @pytest.mark.concept("step_assembly")
    def test_step_matches_reference(self, world: World, ref: dict) -> None:
        calls = []
        for name, cluster, p, seq in STEP_CASES:
            calls.append(step_spec(MODELS[name], cluster, p, seq))
            calls.append(step_spec(MODELS[name], cluster, p, seq, latency=False))
            calls.append(step_spec(MODELS[name], cluster, p, seq, bucket_bytes=4e9))
        against_reference(world, ref, calls, "step_comm")

    @pytest.mark.concept("step_assembly")
    def test_dense_models_have_no_ep_traffic(self, world: World) -> None:
        [got] = run_many(world, [step_spec(MODELS["llama3_8b"], Cluster("dgx_h100", 1),
                                           plan(1, 1, 8, 1, 1, "none", 1, 4), 4096)])  # fmt: skip
        assert got["ep"] == {"total_s": 0.0, "exposed_s": 0.0}, f"ep of a dense model: {got['ep']!r}"

    @pytest.mark.concept("zero3_per_microbatch")
    def test_zero3_gathers_every_microbatch(self, world: World, ref: dict) -> None:
        # doubling the micro-batches (same micro-batch size, twice the global batch) doubles ZeRO-3's traffic
        # and leaves ZeRO-1's (one all-reduce per step) as it is
        model, c = MODELS["llama3_70b"], Cluster("dgx_h100", 4)
        for zero, factor in ((3, 2.0), (1, 1.0)):
            a, b = run_many(
                world, [step_spec(model, c, plan(8, 1, 4, 1, zero, "none", 1, m), 4096) for m in (4, 8)]
            )
            same(b["dp"]["total_s"] / a["dp"]["total_s"], factor, f"ZeRO-{zero} DP traffic, m 8 vs m 4", 1e-9)

    @pytest.mark.concept("expert_replicas")
    def test_experts_reduce_over_their_replicas(self, world: World, ref: dict) -> None:
        # the step of a DeepSeek-V3 plan against one with the experts moved into the dense part: the expert
        # gradients must go over the dp/ep ranks that share them, not over the whole DP group
        model, c, p = MODELS["deepseek_v3"], Cluster("dgx_h100", 32), plan(8, 8, 4, 4, 1, "selective", 1, 16)
        dense = dataclasses.replace(model, expert_params=0, n_experts=0, top_k=0, moe_layers=0)
        t = compute(model, c, p, 4096)  # the same compute for both: only the gradient groups differ
        got = [
            r["dp"]
            for r in run_many(world, [step_spec(m, c, p, 4096, latency=False) for m in (model, dense)])
        ]
        want = [
            ref["step"].step_comm(m, c, p, 4096, compute_s=t, latency=False)["dp"] for m in (model, dense)
        ]
        same(got, want, "DP traffic of DeepSeek-V3, with its experts and with them counted as dense")

    @pytest.mark.concept("plan_validation")
    def test_bad_plans_are_refused(self, world: World) -> None:
        bad = [plan(8, 1, 2, 1, 1, "none", 1, 4), plan(8, 1, 4, 3, 1, "none", 1, 4)]  # 16 of 32 GPUs; ep 3
        for p in bad:
            [res] = world.run(
                "rank_programs:raises",
                inputs=spec(
                    "step", "step_comm", MODELS["deepseek_v3"], Cluster("dgx_h100", 4), p, 4096, compute_s=1.0
                ),
            )
            assert res.value == "ValueError", f"step_comm({p}) should raise ValueError, got {res.value!r}"


# ------------------------------------------------------------------------------------------------------------
# generated in the judge from seeds: clusters of node counts no README uses, odd group sizes, random models


def generated_cluster(rng: random.Random) -> Cluster:
    node = rng.choice(["dgx_h100", "dgx_b200", "gb200_nvl72", "rtx4090_pcie_8x", "rtx4090_pcie_4x"])
    return Cluster(node, rng.choice([1, 3, 5, 6]) if node != "gb200_nvl72" else rng.choice([1, 3]))


def generated_groups(rng: random.Random, cluster: Cluster, k: int) -> list[tuple[int, int]]:
    """k (size, stride) groups of rank 0 that tile the cluster, sizes 3, 5, 6, 7 among them where they can."""
    options = [
        (size, stride)
        for size in (2, 3, 5, 6, 7, 12, 24)
        for stride in (1, 2, 3, 4, 8, 24)
        if (size - 1) * stride < cluster.world and cluster.tiles(size, stride)
    ]
    return rng.sample(options, min(k, len(options)))


GENERATED_SEEDS = range(2300, 2306)


@pytest.mark.part("23.collectives")
class TestGeneratedCollectives:
    @pytest.mark.concept("nccl_ring_latency")
    def test_generated_latencies(self, world: World, ref: dict) -> None:
        calls = []
        for seed in GENERATED_SEEDS:
            rng = random.Random(seed)
            cluster = generated_cluster(rng)
            for size, stride in generated_groups(rng, cluster, 4):
                calls += [spec("collective_time", "latency_s", op, cluster, size, stride) for op in OPS]
        against_reference(world, ref, calls, "latency_s on generated clusters")

    @pytest.mark.concept("slowest_level_bandwidth")
    def test_generated_times(self, world: World, ref: dict) -> None:
        calls = []
        for seed in GENERATED_SEEDS:
            rng = random.Random(seed)
            cluster = generated_cluster(rng)
            for size, stride in generated_groups(rng, cluster, 4):
                nbytes = 10 ** rng.uniform(3, 10)
                calls += [
                    spec("collective_time", "collective_s", op, nbytes, cluster, size, stride, latency=False)
                    for op in OPS
                ]
                calls.append(spec("collective_time", "send_s", nbytes, cluster, stride, latency=False))
        against_reference(world, ref, calls, "bandwidth terms on generated clusters")

    @pytest.mark.concept("bus_bandwidth")
    def test_generated_bus_bandwidth(self, world: World, ref: dict) -> None:
        calls = []
        for seed in GENERATED_SEEDS:
            rng = random.Random(seed)
            cluster = generated_cluster(rng)
            for size, stride in generated_groups(rng, cluster, 3):
                calls += [
                    spec(
                        "collective_time",
                        "bus_bandwidth_gb_s",
                        op,
                        10 ** rng.uniform(4, 10),
                        cluster,
                        size,
                        stride,
                    )
                    for op in OPS
                ]
        against_reference(world, ref, calls, "bus_bandwidth_gb_s on generated clusters")


def generated_model(rng: random.Random) -> ModelSpec:
    """A Llama-like model, or an MoE on it; the counts only need to be consistent, not any real model's."""
    n_heads = rng.choice([16, 24, 32, 48])
    dim, n_layers = 128 * n_heads, rng.randint(8, 60)
    dense = n_layers * 12 * dim * dim + 2 * 64_000 * dim
    if rng.random() < 0.5:
        return ModelSpec(
            name="generated", n_layers=n_layers, dim=dim, n_heads=n_heads, n_kv_heads=8, ffn_dim=4 * dim,
            vocab_size=64_000, params=dense, active_params=dense,
        )  # fmt: skip
    n_experts, top_k, moe_layers = (
        rng.choice([8, 16, 64]),
        rng.choice([1, 2, 6]),
        n_layers - rng.randint(0, 3),
    )
    expert = 3 * dim * 128 * rng.randint(4, 12)
    routed = moe_layers * n_experts * expert
    return ModelSpec(
        name="generated-moe", n_layers=n_layers, dim=dim, n_heads=n_heads, n_kv_heads=8, ffn_dim=4 * dim,
        vocab_size=64_000, params=dense + routed, active_params=dense + moe_layers * top_k * expert,
        n_experts=n_experts, top_k=top_k, moe_layers=moe_layers, expert_params=routed,
    )  # fmt: skip


def generated_plan(rng: random.Random, model: ModelSpec, cluster: Cluster) -> dict:
    """A random plan whose every group splits evenly over the cluster's nodes (what a layout must do)."""
    while True:
        tp = rng.choice([t for t in (1, 2, 4, 8) if cluster.domain_gpus % t == 0])
        pp = rng.choice([p for p in (1, 2, 3, 4, 5, 6) if cluster.world % (tp * p) == 0])
        dp = cluster.world // (tp * pp)
        ep = rng.choice([e for e in (1, 2, 4, 8) if dp % e == 0]) if model.is_moe else 1
        groups = [(tp, 1), (dp, tp), (ep, tp), (dp // ep, tp * ep)]
        if pp <= model.n_layers and all(cluster.tiles(size, stride) for size, stride in groups):
            return plan(tp, pp, dp, ep, rng.randint(0, 3), rng.choice(["none", "selective", "full"]),
                        rng.randint(1, 2), rng.randint(1, 12))  # fmt: skip


@pytest.mark.part("23.step")
class TestGeneratedSteps:
    @pytest.mark.concept("step_assembly")
    def test_generated_plans(self, world: World, ref: dict) -> None:
        calls = []
        for seed in GENERATED_SEEDS:
            rng = random.Random(seed)
            cluster = generated_cluster(rng)
            model = generated_model(rng)
            p = generated_plan(rng, model, cluster)
            calls.append(
                step_spec(model, cluster, p, rng.choice([1024, 2048, 8192]), latency=rng.random() < 0.5)
            )
        against_reference(world, ref, calls, "step_comm on generated plans")
