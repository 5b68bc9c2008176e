"""coursekit.pcie: shipped topologies load, bandwidths are the PCI-SIG ones, and paths are shortest."""

from __future__ import annotations

import math

import pytest

from coursekit import pcie


def test_pcie_rates() -> None:
    # PCI-SIG: 8/16/32 GT/s per lane for Gen3/4/5, 128b/130b encoding; per direction, GB/s
    assert math.isclose(pcie.pcie_gbps(3, 16), 15.754, rel_tol=1e-4)
    assert math.isclose(pcie.pcie_gbps(4, 16), 31.508, rel_tol=1e-4)
    assert math.isclose(pcie.pcie_gbps(5, 16), 63.015, rel_tol=1e-4)
    assert math.isclose(pcie.pcie_gbps(4, 4), 7.877, rel_tol=1e-4)


@pytest.mark.parametrize("name", pcie.names())
def test_shipped_topologies(name: str) -> None:
    topo = pcie.load(name)
    assert pcie.Topology.from_dict(topo.to_dict()).to_dict() == topo.to_dict()  # survives the rank boundary
    for gpu in topo.of_kind("GPU"):
        assert {"cc", "gdr", "nvlink"} <= set(topo.nodes[gpu].attrs), gpu
        for other in topo.nodes:
            path = topo.path(gpu, other)  # everything is reachable
            assert path[0] == gpu and path[-1] == other and len(set(path)) == len(path)
    for drive in topo.of_kind("NVME"):
        assert {"read_gbps", "write_gbps"} <= set(topo.nodes[drive].attrs), drive
    for nic in topo.of_kind("NIC"):
        assert "gbps" in topo.nodes[nic].attrs, nic


def test_paths_and_local_cpu() -> None:
    topo = pcie.load("dgx2_like")
    assert topo.path("gpu0", "nic1") == ["gpu0", "leaf0", "up0", "leaf1", "nic1"]
    assert topo.path("gpu0", "nic4") == ["gpu0", "leaf0", "up0", "cpu0", "cpu1", "up2", "leaf4", "nic4"]
    assert topo.local_cpu("gpu0") == "cpu0" and topo.local_cpu("gpu15") == "cpu1"
    a100 = pcie.load("dgx_a100_like")  # four NUMA nodes, each a direct SYS link from every other
    assert a100.path("gpu0", "nic6") == ["gpu0", "sw0", "numa0", "numa3", "sw3", "nic6"]
    assert a100.link("numa0", "numa3").kind == "SYS" and a100.link("sw0", "gpu0").spec == "gen4x16"


def test_bad_data_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown node"):
        pcie.Topology.from_dict({"nodes": {"a": {"kind": "CPU"}}, "links": [["a", "b", "gen4x16"]]})
    with pytest.raises(ValueError, match="gen4x16"):
        pcie.Topology.from_dict(
            {"nodes": {"a": {"kind": "CPU"}, "b": {"kind": "GPU"}}, "links": [["a", "b", "x16"]]}
        )
    with pytest.raises(ValueError, match="SYS link"):
        pcie.Topology.from_dict(
            {"nodes": {"a": {"kind": "CPU"}, "b": {"kind": "GPU"}}, "links": [["a", "b", "sys", 1]]}
        )
    with pytest.raises(KeyError):
        pcie.load("no such machine")
