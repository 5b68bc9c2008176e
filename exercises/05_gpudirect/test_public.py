"""What this catches: the first things to get right, checked against published facts and hand arithmetic.

Run them with `grade exercise 05`. Each test sends a shipped topology (coursekit/pcie_topologies.yml) to a
rank, which calls your gdr.py or gds.py on it. The hidden suite checks every function on every topology,
on made-up ones, and with many more NCCL environment settings. The copies.py checks at the end: your answers'
form, and, on a GPU only (`grade exercise 05 --device cuda`), your buffers, bytes, ratio and units at two
sizes; the hidden suite adds other sizes and your time_copy against the judge's clock.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from coursekit import pcie
from grader.harness import World


def call(world: World, module: str, function: str, topology: str, *args: Any, **kwargs: Any) -> Any:
    inputs = {
        "module": module,
        "function": function,
        "topology": pcie.load(topology).to_dict(),
        "args": list(args),
        "kwargs": kwargs,
    }
    [res] = world.run("rank_programs:with_topology", inputs=inputs)
    return res.value


@pytest.mark.part("05.paths")
@pytest.mark.concept("path_class")
def test_dgx2_classes_match_nvidia_smi(world: World) -> None:
    # `nvidia-smi topo -m` on a DGX-2 (NVIDIA/nccl-tests issue #78): GPU0 - mlx5_0 PIX (same switch),
    # mlx5_1 PXB (two switches), mlx5_4 SYS (the other socket)
    for nic, cls in [("nic0", "PIX"), ("nic1", "PXB"), ("nic4", "SYS")]:
        got = call(world, "gdr", "path_type", "dgx2_like", "gpu0", nic)
        assert got == cls, f"DGX-2 gpu0-{nic}: got {got!r}, nvidia-smi says {cls}"


@pytest.mark.part("05.paths")
@pytest.mark.concept("bounce_path")
def test_bounce_adds_two_hops_on_a_pix_pair(world: World) -> None:
    # H100 box, GPU and NIC on one switch: GDR goes GPU -> switch -> NIC; without it the bytes climb to
    # host memory and come back down the same switch
    direct = call(world, "gdr", "data_path", "hgx_h100_like", "gpu0", "nic0", gdr=True)
    bounced = call(world, "gdr", "data_path", "hgx_h100_like", "gpu0", "nic0", gdr=False)
    assert direct["nodes"] == ["gpu0", "sw0", "nic0"] and direct["hops"] == 2, direct
    assert bounced["nodes"] == ["gpu0", "sw0", "cpu0", "sw0", "nic0"] and bounced["hops"] == 4, bounced
    assert (direct["bounce_buffers"], bounced["bounce_buffers"]) == (0, 1)


@pytest.mark.part("05.gdr_level")
@pytest.mark.concept("level_parsing")
def test_legacy_integers_from_the_nccl_docs(world: World) -> None:
    # NCCL docs, env.rst, NCCL_NET_GDR_LEVEL "Integer Values (Legacy)": LOC 0, PIX 1, PXB 2, PHB 3, SYS 4;
    # "Values greater than 4 will be interpreted as SYS"
    for value, level in [("0", "LOC"), ("1", "PIX"), ("2", "PXB"), ("3", "PHB"), ("4", "SYS"), ("9", "SYS")]:
        [res] = world.call("gdr", "parse_gdr_level", args=[(value,)])
        assert res.returned == level, f"NCCL_NET_GDR_LEVEL={value} means {level}, got {res.returned!r}"


@pytest.mark.part("05.gdr_level")
@pytest.mark.concept("gdr_decision")
def test_workstation_needs_phb(world: World) -> None:
    # GPU and NIC on separate root ports: the path crosses the CPU (PHB), farther than NCCL's default level
    assert call(world, "gdr", "gdr_enabled", "workstation", "gpu0", "nic0", {}, read=False) is False
    env = {"NCCL_NET_GDR_LEVEL": "PHB"}
    assert call(world, "gdr", "gdr_enabled", "workstation", "gpu0", "nic0", env, read=False) is True


@pytest.mark.part("05.checkpoint")
@pytest.mark.concept("checkpoint_size")
def test_llama3_8b_checkpoint_is_112_gb(world: World) -> None:
    # 8,030,261,248 parameters x (2 B bf16 weights + 12 B fp32 master, Adam m, v) = 112.4 GB
    [res] = world.call("gds", "checkpoint_bytes", args=[(8_030_261_248,)])
    assert res.returned == 112_423_657_472, res.returned


@pytest.mark.part("05.checkpoint")
@pytest.mark.concept("bounce_phases")
def test_ten_gb_to_a_workstation_drive(world: World) -> None:
    # The drive writes 3.5 GB/s, slower than its PCIe Gen4 x4 link (7.88 GB/s): with GDS 10 GB take 10/3.5 s.
    # Without GDS the GPU first copies 10 GB into host memory over its Gen4 x16 link (31.5 GB/s).
    x16 = 16 * 16 * 128 / 130 / 8 * 1e9
    kw = {"total_bytes": 1e10, "placement": {"gpu0": ["nvme0"]}, "op": "save"}
    with_gds = call(world, "gds", "checkpoint_seconds", "workstation", gds=True, **kw)
    without = call(world, "gds", "checkpoint_seconds", "workstation", gds=False, **kw)
    assert math.isclose(with_gds, 1e10 / 3.5e9, rel_tol=1e-9), with_gds  # 1e-9: float rounding only
    assert math.isclose(without, 1e10 / 3.5e9 + 1e10 / x16, rel_tol=1e-9), without


# ------------------------------------------------------------------------------------------------------------
# copies.py. 05.staging runs anywhere; 05.host_copies needs a GPU (`grade exercise 05 --device cuda`) and is
# reported blocked on a CPU. Every timing is compared with the judge's own measurement of the same copies,
# taken in the same run (rank_programs.py); no absolute GB/s or ms is graded.

DIRECTIONS = ("h2d", "d2h")
KINDS = ("pageable", "pinned")


@pytest.mark.part("05.staging")
@pytest.mark.concept("staging_copy")
def test_every_staging_question_has_a_choice(world: World) -> None:
    [res] = world.call("copies", "staging_answers", args=[()])
    [questions] = [r.value for r in world.run("rank_programs:staging_questions", inputs={})]
    got = res.returned
    assert isinstance(got, dict) and sorted(got) == sorted(questions), f"answer exactly {sorted(questions)}"
    for key, choices in questions.items():
        assert got[key] in choices, f"{key}: one of {sorted(choices)}, got {got[key]!r}"


@pytest.mark.part("05.host_copies")
@pytest.mark.concept("pinned_buffer")
def test_host_buffer_pins_when_asked(world: World) -> None:
    [res] = world.run("rank_programs:host_buffer_facts", inputs={"sizes": [4096, 1 << 20]})
    for fact in res.value:
        what = f"host_buffer({fact['nbytes']}, pinned={fact['pinned']})"
        assert fact["type"] == "Tensor" and fact["device"] == "cpu", f"{what}: a CPU torch.Tensor, got {fact}"
        assert (fact["dtype"], fact["shape"]) == ("torch.uint8", [fact["nbytes"]]), f"{what}: got {fact}"
        assert fact["is_pinned"] == fact["pinned"], f"{what}.is_pinned() is {fact['is_pinned']}"


@pytest.mark.part("05.host_copies")
@pytest.mark.concept("copy_timing")
def test_time_copy_delivers_the_bytes(world: World) -> None:
    inputs = {"nbytes": (1 << 20) + 3, "seed": 5, "repeats": 2}
    [res] = world.run("rank_programs:copies_move_bytes", inputs=inputs)
    for case, got in res.value.items():
        assert isinstance(got["seconds"], float) and got["seconds"] > 0, f"{case}: seconds {got['seconds']}"
        assert got["ok"], f"time_copy ({case}): the destination does not hold the source's bytes on return"


def bandwidth_runs(world: World, nbytes: int, rounds: int) -> tuple[list[Any], list[Any]]:
    """(your copy_bandwidth figures, the judge's), ``rounds`` of each, interleaved, after the byte check."""
    inputs = {"nbytes": nbytes, "repeats": 3, "rounds": rounds}
    [res] = world.run("rank_programs:paired_bandwidth", inputs=inputs)
    for case, got in res.value["bytes"].items():
        assert got["ok"], f"time_copy ({case}): the destination does not hold the source's bytes on return"
    for run in res.value["student"]:
        assert not isinstance(run, str), run  # the rank program's word on figures of the wrong shape
    return res.value["student"], res.value["judge"]


def ratio(runs: list[Any], direction: str) -> float:
    """Pinned over pageable bandwidth in ``direction``, from the median figures over the runs."""
    pinned = statistics.median(r[direction]["pinned"]["gbps"] for r in runs)
    pageable = statistics.median(r[direction]["pageable"]["gbps"] for r in runs)
    return pinned / pageable


@pytest.mark.part("05.host_copies")
@pytest.mark.concept("pinned_speedup")
def test_pinned_to_pageable_ratio_matches_the_judge(world: World) -> None:
    # 64 MiB each way. The judge times the same copies with its own clock in the same run; your ratio of
    # pinned to pageable bandwidth must be within a factor of 2 of its ratio, in each direction. A miss is
    # measured once more before it counts (a busy machine); a bug misses both times.
    misses: list[str] = []
    for _ in range(2):
        mine, judge = bandwidth_runs(world, 64 << 20, rounds=2)
        misses = [
            f"{d}: pinned/pageable {ratio(mine, d):.2f}x, the judge measured {ratio(judge, d):.2f}x"
            for d in DIRECTIONS
            if not ratio(judge, d) / 2 <= ratio(mine, d) <= ratio(judge, d) * 2
        ]
        if not misses:
            return
    raise AssertionError("; ".join(misses))


@pytest.mark.part("05.host_copies")
@pytest.mark.concept("bandwidth_units")
def test_figures_are_gb_per_second(world: World) -> None:
    nbytes = 16 << 20
    mine, _ = bandwidth_runs(world, nbytes, rounds=1)
    for d in DIRECTIONS:
        for k in KINDS:
            fig = mine[0][d][k]
            want = nbytes / fig["seconds"] / 1e9  # GB = 1e9 bytes
            assert math.isclose(fig["gbps"], want, rel_tol=1e-6), (
                f"{d}/{k}: gbps {fig['gbps']}, expected {want}"
            )
