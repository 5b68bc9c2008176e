"""What this catches: the first questions you would ask a topology. Run them with `grade exercise 20`.

Each check reads one of the course's sample machines (coursekit/data/topo_*.txt, cluster_*.yml) with YOUR
parser and asks YOUR question function about it; the answers are read off the files by hand. The hidden
suite asks more questions on every machine, one test per question, and feeds them the reference's parse.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import coursekit
from grader.harness import World

DATA = Path(coursekit.__file__).parent / "data"


def cluster(world: World, name: str, function: str, *args: Any) -> Any:
    text = (DATA / f"cluster_{name}.yml").read_text()
    inputs = {"text": text, "function": function, "args": list(args)}
    [res] = world.run("rank_programs:cluster_question", inputs=inputs)
    return res.value


@pytest.mark.part("20.parse_smi")
@pytest.mark.concept("matrix_parse")
def test_parse_dgx_h100(world: World) -> None:
    [res] = world.call("smi_topo", "parse_topo", args=[((DATA / "topo_dgx_h100.txt").read_text(),)])
    topo = res.returned
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)], topo["gpus"]
    assert len(topo["nics"]) == 12, f"12 NICs (8 compute, 4 storage ports), got {topo['nics']}"
    assert topo["matrix"]["GPU0"]["GPU7"] == "NV18" and topo["matrix"]["GPU3"]["GPU3"] == "X"
    assert topo["numa_affinity"]["GPU4"] == 1, topo["numa_affinity"]


@pytest.mark.part("20.parse_smi")
@pytest.mark.concept("legends")
def test_nic_legend_dgx_h100(world: World) -> None:
    [res] = world.call("smi_topo", "parse_topo", args=[((DATA / "topo_dgx_h100.txt").read_text(),)])
    assert res.returned["nic_names"]["NIC11"] == "mlx5_11", res.returned["nic_names"]


# topo_dgx1_v100.txt as parse_topo returns it (written out by hand, so that these checks do not depend on your
# parser): the hybrid cube-mesh of a DGX-1, where each V100 has NVLinks to 4 of its 7 peers
DGX1_ROWS = """
GPU0    X    NV1  NV1  NV2  NV2  SYS  SYS  SYS  NODE
GPU1    NV1  X    NV2  NV1  SYS  NV2  SYS  SYS  NODE
GPU2    NV1  NV2  X    NV2  SYS  SYS  NV1  SYS  PIX
GPU3    NV2  NV1  NV2  X    SYS  SYS  SYS  NV1  PIX
GPU4    NV2  SYS  SYS  SYS  X    NV1  NV1  NV2  SYS
GPU5    SYS  NV2  SYS  SYS  NV1  X    NV2  NV1  SYS
GPU6    SYS  SYS  NV1  SYS  NV1  NV2  X    NV2  SYS
GPU7    SYS  SYS  SYS  NV1  NV2  NV1  NV2  X    SYS
mlx5_0  NODE NODE PIX  PIX  SYS  SYS  SYS  SYS  X
"""
DEVICES = [row.split()[0] for row in DGX1_ROWS.strip().splitlines()]
DGX1 = {
    "devices": DEVICES,
    "gpus": DEVICES[:8],
    "nics": ["mlx5_0"],
    "matrix": {
        r.split()[0]: dict(zip(DEVICES, r.split()[1:], strict=True)) for r in DGX1_ROWS.strip().splitlines()
    },
    "cpu_affinity": {f"GPU{i}": "0-19,40-59" if i < 4 else "20-39,60-79" for i in range(8)},
    "numa_affinity": {},
    "legend": {},
    "nic_names": {"mlx5_0": "mlx5_0"},
}


@pytest.mark.part("20.smi_questions")
@pytest.mark.concept("nvlink_clique")
def test_dgx1_is_not_an_nvswitch(world: World) -> None:
    [res] = world.call("smi_topo", "largest_nvlink_group", args=[(DGX1,)])
    assert res.returned == ["GPU0", "GPU1", "GPU2", "GPU3"], f"GPUs 0-3 are all NVLinked; got {res.returned}"


@pytest.mark.part("20.smi_questions")
@pytest.mark.concept("link_ladder")
def test_dgx1_codes(world: World) -> None:
    [res] = world.call("smi_topo", "link_kind", args=[(DGX1, "GPU0", "mlx5_0")])
    assert res.returned == "pcie", f"NODE stays inside one socket's PCIe: got {res.returned}"
    [res] = world.call("smi_topo", "nvlink_count", args=[(DGX1, "GPU0", "GPU4")])
    assert res.returned == 2, f"NV2 is two bonded links: got {res.returned}"


@pytest.mark.part("20.cluster_yaml")
@pytest.mark.concept("gpu_paths")
def test_rail_change_goes_through_a_spine(world: World) -> None:
    got = cluster(world, "dgx_h100_rail", "gpu_path", "dgx0:0", "dgx1:1")
    assert got == {"kind": "network", "tiers": ["leaf", "spine", "leaf"]}, got
    got = cluster(world, "dgx_h100_rail", "gpu_path", "dgx0:1", "dgx1:1")
    assert got == {"kind": "network", "tiers": ["leaf"]}, f"same rail, one leaf: {got}"


def dgx_pair(nvlink: bool) -> dict:
    """Two 8-GPU nodes on one switch, as load_cluster returns them (built here, not by your parser)."""
    gpus = [f"n{n}:{i}" for n in range(2) for i in range(8)]
    return {
        "name": "pair",
        "gpus": gpus,
        "node_of": {g: g.split(":")[0] for g in gpus},
        "nvlink": [[a, b] for a, b in itertools.combinations(gpus, 2) if nvlink and a[:2] == b[:2]],
        "nic_of": {g: f"{g.split(':')[0]}:nic0" for g in gpus},
        "tiers": {"sw": "leaf"},
        "cables": {"n0:nic0": ["sw"], "n1:nic0": ["sw"], "sw": ["n0:nic0", "n1:nic0"]},
    }


@pytest.mark.part("20.layouts")
@pytest.mark.concept("tp_on_nvlink")
def test_tensor_parallelism_needs_nvlink(world: World) -> None:
    [res] = world.call("cluster", "largest_tp_degree", args=[(dgx_pair(nvlink=True),)])
    assert res.returned == 8, f"two NVSwitch nodes: TP up to 8, got {res.returned}"
    [res] = world.call("cluster", "supported_layouts", args=[(dgx_pair(nvlink=False),)])
    want = [[1, 1, 16], [1, 2, 8], [1, 4, 4], [1, 8, 2], [1, 16, 1]]
    assert res.returned == want, f"no NVLink: only TP 1, got {res.returned}"
