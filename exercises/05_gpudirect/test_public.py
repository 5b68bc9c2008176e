"""What this catches: the first things to get right, checked against published facts and hand arithmetic.

Run them with `grade exercise 05`. Each test sends a shipped topology (coursekit/pcie_topologies.yml) to a
rank, which calls your gdr.py or gds.py on it. The hidden suite checks every function on every topology,
on made-up ones, and with many more NCCL environment settings.
"""

from __future__ import annotations

import math
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
