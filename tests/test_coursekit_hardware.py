"""The hardware catalogue: it loads strictly, and its numbers agree with each other and with sources.

The published figures below are the ones ground-truth.md quotes with sources (§0, §7, §8, Appendix A); they
are typed here a second time on purpose, so that a slip in hardware.yml fails a test.

The arithmetic that ties an entry's figures together (per GPU = links x per link, a switch's aggregate, a
figure in the other convention) lives here, judge-side, and not in coursekit: converting NVLink figures
between the conventions and summing them over links is exercise 16's part `16.bandwidth`, and coursekit
ships to students. `test_no_bandwidth_conversion_in_coursekit` fails if such code comes back.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import pytest
import yaml

import coursekit
from coursekit import hardware
from coursekit.hardware import (
    BIDIRECTIONAL,
    CONVENTIONS,
    DEFAULT_PATH,
    PER_DIRECTION,
    Catalogue,
    HardwareCatalogueError,
    load,
    serving,
)

DUPLEX = {PER_DIRECTION: 1, BIDIRECTIONAL: 2}  # directions a figure of each convention counts
AGGREGATE_GB_S = {"Tbit/s": 1000 / 8, "TB/s": 1000.0}


def in_convention(gb_s: float, quoted: str, want: str) -> float:
    """The judge's conversion (ground-truth.md §0.3): a figure quoted in `quoted`, in `want`."""
    return gb_s / DUPLEX[quoted] * DUPLEX[want]


def gpu_nvlink(hw: Catalogue, gpu: str, want: str) -> float:
    """A GPU's NVLink bandwidth over its own links, in `want`; 0 without NVLink."""
    g = hw.gpus[gpu]
    if g.nvlink is None:
        return 0.0
    gen = hw.nvlink[g.nvlink]
    return g.nvlink_links * in_convention(gen.per_link_gb_s, gen.convention, want)


def port_gb_s(hw: Catalogue, switch: str, want: str = PER_DIRECTION) -> float:
    """One port of `switch`, in `want`."""
    s = hw.switches[switch]
    if s.port_kind == "nvlink":
        gen = hw.nvlink[s.port]
        return in_convention(gen.per_link_gb_s, gen.convention, want)
    return in_convention(hw.link_rate(s.port_kind, s.port).gb_s, PER_DIRECTION, want)


def arithmetic_errors(hw: Catalogue) -> list[str]:
    """Where an entry's figures disagree with each other (what the loader checked before it shipped)."""
    errors = []
    for k, n in hw.nvlink.items():
        if not math.isclose(n.per_gpu_gb_s, n.links_per_gpu * n.per_link_gb_s):
            errors.append(f"nvlink.{k}: per_gpu != links x per_link")
    for k, g in hw.gpus.items():
        if not math.isclose(g.nvlink_gb_s, gpu_nvlink(hw, k, PER_DIRECTION)):
            errors.append(f"gpus.{k}.nvlink_gb_s: not links x per-link rate, per direction")
    for k, s in hw.switches.items():
        if s.aggregate is not None:
            got = s.aggregate * AGGREGATE_GB_S[s.aggregate_unit]
            if not math.isclose(got, s.radix * port_gb_s(hw, k, s.convention)):
                errors.append(f"switches.{k}.aggregate: not radix x port rate")
    return errors


@pytest.fixture(scope="module")
def hw():
    return load()


# ------------------------------------------------------------------------------------------------------------
# the inventory is all there, under stable names


def test_inventory(hw) -> None:
    assert {"v100_sxm2", "a100_sxm_80gb", "h100_sxm", "h200", "b200", "rtx4090"} <= set(hw.gpus)
    assert {"nvlink2", "nvlink3", "nvlink4", "nvlink5"} <= set(hw.nvlink)
    assert {"gen3", "gen4", "gen5"} <= set(hw.pcie)
    assert {"hdr", "ndr", "xdr"} <= set(hw.infiniband)
    assert {"100g", "200g", "400g", "800g"} <= set(hw.ethernet)
    assert {"qm9700", "nvswitch_gen3", "nvlink_switch_tray"} <= set(hw.switches)
    assert {"dgx_h100", "gb200_nvl72", "rtx4090_pcie_4x", "rtx4090_pcie_8x"} <= set(hw.nodes)


def test_every_entry_cites_a_source_and_bandwidths_name_a_convention(hw) -> None:
    for table in ("gpus", "nvlink", "pcie", "infiniband", "ethernet", "switches", "nodes"):
        for key, entry in getattr(hw, table).items():
            assert len(entry.source) > 20, f"{table}.{key} has no real source"
            for name in entry.unverified:
                assert hasattr(entry, name), f"{table}.{key}.unverified names {name!r}"
    for table in ("nvlink", "pcie", "infiniband", "ethernet"):
        for key, entry in getattr(hw, table).items():
            assert entry.convention in CONVENTIONS, f"{table}.{key}"


def test_entries_are_frozen(hw) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.gpus["h100_sxm"].memory_gb = 96
    with pytest.raises(TypeError):
        hw.gpus["new"] = hw.gpus["h100_sxm"]


def test_load_is_cached(hw) -> None:
    assert load() is hw


# ------------------------------------------------------------------------------------------------------------
# published figures (ground-truth.md)


@pytest.mark.parametrize(
    ("gpu", "bidirectional", "per_direction"),
    [
        ("v100_sxm2", 300, 150),
        ("a100_sxm_80gb", 600, 300),
        ("h100_sxm", 900, 450),
        ("h200", 900, 450),
        ("b200", 1800, 900),
    ],
)
def test_nvlink_per_gpu_in_both_conventions(hw, gpu, bidirectional, per_direction) -> None:
    # §7.1: NVIDIA quotes bidirectional (900 GB/s H100), the scaling book per direction (450 GB/s)
    assert gpu_nvlink(hw, gpu, BIDIRECTIONAL) == bidirectional
    assert gpu_nvlink(hw, gpu, PER_DIRECTION) == per_direction
    assert hw.gpus[gpu].nvlink_gb_s == per_direction  # the stored figure coursekit.cluster uses


def test_nvlink_per_link(hw) -> None:
    # §7.1: scaling book 25 GB/s per link per direction for NVLink 3 and 4, 50 for NVLink 5; NVIDIA "18 NVLink
    # 100 GB/s connections" for B200 (bidirectional)
    for key, quoted, one_way in (("nvlink3", 50, 25), ("nvlink4", 50, 25), ("nvlink5", 100, 50)):
        gen = hw.nvlink[key]
        assert (gen.per_link_gb_s, gen.convention) == (quoted, BIDIRECTIONAL)
        assert in_convention(gen.per_link_gb_s, gen.convention, PER_DIRECTION) == one_way


def test_figures_agree_with_each_other(hw) -> None:
    assert arithmetic_errors(hw) == []


def test_no_nvlink_on_4090(hw) -> None:
    assert hw.gpus["rtx4090"].nvlink is None
    assert hw.gpus["rtx4090"].nvlink_gb_s == 0.0


def test_gpu_specs(hw) -> None:
    # §8: dense bf16, memory and bandwidth as the course uses them
    h100, h200, b200, r4090 = (hw.gpus[k] for k in ("h100_sxm", "h200", "b200", "rtx4090"))
    assert (h100.memory_gb, h100.memory_bandwidth_gb_s) == (80, 3350)
    assert math.isclose(h100.bf16_dense_tflops, 1979 / 2, rel_tol=1e-3)  # sparse 1,979 halved (§0.5)
    assert (h200.memory_gb, h200.memory_bandwidth_gb_s, h200.bf16_dense_tflops) == (141, 4800, 989.4)
    assert (b200.memory_gb, b200.memory_bandwidth_gb_s, b200.bf16_dense_tflops) == (180, 8000, 2250)
    assert "memory_gb" in b200.unverified  # 192 physical vs 180 exposed (§18.7)
    assert (r4090.memory_gb, r4090.memory_bandwidth_gb_s, r4090.bf16_dense_tflops) == (24, 1008, 165.2)
    assert hw.gpus["v100_sxm2"].bf16_dense_tflops is None
    assert hw.gpus["a100_sxm_80gb"].bf16_dense_tflops == 312


def test_pcie_x16_per_direction(hw) -> None:
    # §7.1: x16 per direction Gen3 15.7, Gen4 31.5, Gen5 63.0 GB/s (128b/130b)
    assert math.isclose(hw.pcie["gen3"].x16_gb_s, 15.754, rel_tol=1e-4)
    assert math.isclose(hw.pcie["gen4"].x16_gb_s, 31.508, rel_tol=1e-4)
    assert math.isclose(hw.pcie["gen5"].x16_gb_s, 63.015, rel_tol=1e-4)
    # NVIDIA's "PCIe Gen5: 128 GB/s" is both directions, raw (no 128b/130b): 2 x 32 GT/s x 16 / 8
    assert 2 * hw.pcie["gen5"].gt_s * 16 / 8 == 128


def test_network_rates(hw) -> None:
    # §5: 4x ports EDR 100, HDR 200, NDR 400, XDR 800 Gb/s; nccl-tests GB = 1e9 bytes (§0.1)
    assert [hw.infiniband[k].gbit_s for k in ("edr", "hdr", "ndr", "xdr")] == [100, 200, 400, 800]
    assert hw.infiniband["ndr"].gb_s == 50.0
    assert hw.infiniband["xdr"].lane_gbit_s == 200
    assert [hw.ethernet[k].gbit_s for k in ("100g", "200g", "400g", "800g")] == [100, 200, 400, 800]


def test_switches(hw) -> None:
    # §5: QM9700 64 x 400 Gb/s, 51.2 Tb/s counting both directions; Quantum-X800 144 x 800 Gb/s
    qm = hw.switches["qm9700"]
    assert (qm.radix, qm.port, qm.aggregate, qm.convention) == (64, "ndr", 51.2, BIDIRECTIONAL)
    assert hw.switches["q3400"].radix == 144
    # §7.1: NVLink Switch tray 144 ports, 14.4 TB/s; 9 x 14.4 = 72 x 1.8 = 129.6 TB/s (NVL72: "130 TB/s")
    tray = hw.switches["nvlink_switch_tray"]
    assert (tray.radix, tray.aggregate, tray.aggregate_unit) == (144, 14.4, "TB/s")
    assert math.isclose(9 * tray.aggregate, 72 * gpu_nvlink(hw, "b200", BIDIRECTIONAL) / 1000)
    assert hw.switches["nvswitch_gen3"].radix == 64
    assert port_gb_s(hw, "qm9700") == 50.0
    assert port_gb_s(hw, "nvswitch_gen3") == 25.0


def test_same_headline_different_conventions(hw) -> None:
    # the trap of §0.3 outside NVLink: QM9700 and SN5600 both say "51.2 Tb/s" with twice the port bandwidth
    # apart
    qm, sn = hw.switches["qm9700"], hw.switches["sn5600"]
    assert qm.aggregate == sn.aggregate == 51.2
    assert qm.convention == BIDIRECTIONAL and sn.convention == PER_DIRECTION
    assert port_gb_s(hw, "sn5600") == 2 * port_gb_s(hw, "qm9700")


def test_nodes(hw) -> None:
    # §7.1-7.2: DGX H100 = 8 GPUs, 4 NVSwitch chips, 8 x 400 Gb/s NICs, node egress 400 GB/s
    dgx = hw.nodes["dgx_h100"]
    assert (dgx.gpus, dgx.nvswitch_chips, dgx.nics, dgx.nic, dgx.nvlink_domain_gpus) == (8, 4, 8, "ndr", 8)
    assert hw.node_egress_gb_s("dgx_h100") == 400
    # NVL72: 72 GPUs in one NVLink domain, 9x an 8-GPU box; rack egress 4 x 18 x 400 / 8 = 3.6 TB/s
    nvl = hw.nodes["gb200_nvl72"]
    assert nvl.nvlink_domain_gpus == 72 == 9 * dgx.nvlink_domain_gpus
    assert hw.node_egress_gb_s("gb200_nvl72") == 3600
    assert math.isclose(nvl.hbm_total_gb, 13_400, rel_tol=0.03)  # 13.4-13.8 TB between sources (§18.7)
    # 4090 boxes: no NVLink, no P2P, PCIe 4.0
    for key, n in (("rtx4090_pcie_4x", 4), ("rtx4090_pcie_8x", 8)):
        box = hw.nodes[key]
        assert (box.gpus, box.nvlink_domain_gpus, box.gpu_p2p, box.pcie) == (n, 1, False, "gen4")


# ------------------------------------------------------------------------------------------------------------
# exercise 16's answer stays out of coursekit (issue 18: coursekit ships in the student release)

REMOVED = {
    hardware: ("convert",),
    hardware.NVLinkGeneration: ("link_gb_s", "gpu_gb_s"),
    Catalogue: ("gpu_nvlink_gb_s", "switch_port_gb_s"),
}


def test_no_bandwidth_conversion_in_coursekit() -> None:
    """No coursekit code converts a bandwidth between the conventions or takes a convention to convert to.

    The helpers that did (`convert`, `NVLinkGeneration.link_gb_s` / `gpu_gb_s`, `Catalogue.gpu_nvlink_gb_s`)
    computed exactly what 16's `to_convention` and `nvlink_gpu_gb_s` ask for. Code that needs a per-direction
    NVLink figure reads `gpus[...].nvlink_gb_s`, a published figure checked above.
    """
    for owner, names in REMOVED.items():
        for name in names:
            assert not hasattr(owner, name), f"{owner.__name__}.{name} is back: it is exercise 16's answer"
    constants = {"BIDIRECTIONAL", "PER_DIRECTION", BIDIRECTIONAL, PER_DIRECTION}
    for path in sorted(Path(coursekit.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text())
        defined = {  # the module-level definitions in hardware.py: PER_DIRECTION = ..., CONVENTIONS = (...)
            id(n)
            for stmt in tree.body
            if isinstance(stmt, ast.Assign) and path.name == "hardware.py"
            for n in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.arg):
                assert node.arg != "convention", (
                    f"{path.name}:{node.lineno}: a function takes a bandwidth convention ({node.arg})"
                )
            used = (isinstance(node, ast.Name) and node.id in constants) or (
                isinstance(node, ast.Constant) and node.value in constants
            )
            assert not used or id(node) in defined, (
                f"{path.name}:{node.lineno}: coursekit uses a bandwidth convention; converting is 16's answer"
            )


def test_a_catalogue_extended_with_unseen_hardware_is_served(hw) -> None:
    # how 16's judge shows a submission NVLink it has not seen (exercises/16_nvlink/rank_programs.py)
    gpu = dataclasses.asdict(hw.gpus["h100_sxm"]) | {"nvlink": "nvlink_x", "nvlink_links": 7}
    gpu["nvlink_gb_s"] = 70
    del gpu["key"]
    gpu["unverified"] = list(gpu["unverified"])
    gen = {"generation": 9, "first_gpu": "gpu_x", "links_per_gpu": 7, "per_link_gb_s": 10,
           "per_gpu_gb_s": 70, "convention": PER_DIRECTION, "source": "made up by the judge"}  # fmt: skip
    bigger = hw.extended({"gpus": {"gpu_x": gpu}, "nvlink": {"nvlink_x": gen}}, "judge")
    assert bigger.nvlink["nvlink_x"].per_link_gb_s == 10 and set(hw.nvlink) < set(bigger.nvlink)
    assert "nvlink_x" not in hw.nvlink
    assert arithmetic_errors(bigger) == []
    with serving(bigger):
        assert load() is bigger
    assert load() is hw
    with pytest.raises(HardwareCatalogueError, match="already in the catalogue"):
        hw.extended({"nvlink": {"nvlink4": gen}})
    with pytest.raises(HardwareCatalogueError, match=r"judge: nvlink\.nvlink_y: disagrees with gpus\.gpu_x"):
        hw.extended({"gpus": {"gpu_x": gpu}, "nvlink": {"nvlink_x": gen, "nvlink_y": gen}}, "judge")


# ------------------------------------------------------------------------------------------------------------
# strictness: a broken catalogue names the entry and the key


def raw_catalogue() -> dict:
    return yaml.safe_load(DEFAULT_PATH.read_text())


def error_of(tmp_path: Path, raw: dict) -> str:
    path = tmp_path / "hw.yml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(HardwareCatalogueError) as info:
        load(path)
    return str(info.value)


def test_copy_loads(tmp_path: Path) -> None:
    path = tmp_path / "hw.yml"
    path.write_text(yaml.safe_dump(raw_catalogue()))
    assert load(path).gpus["h100_sxm"].memory_gb == 80


def test_unknown_key(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["gpus"]["h100_sxm"]["memory_gib"] = 80
    assert "gpus.h100_sxm: unknown key(s) ['memory_gib']" in error_of(tmp_path, raw)


def test_missing_key(tmp_path: Path) -> None:
    raw = raw_catalogue()
    del raw["nodes"]["dgx_h100"]["nics"]
    assert "nodes.dgx_h100: missing key(s) ['nics']" in error_of(tmp_path, raw)


def test_wrong_type(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["switches"]["qm9700"]["radix"] = "64"
    assert "switches.qm9700.radix: expected int" in error_of(tmp_path, raw)


def test_unknown_convention(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["infiniband"]["ndr"]["convention"] = "unidirectional"
    assert "infiniband.ndr.convention" in error_of(tmp_path, raw)


def errors_of_copy(tmp_path: Path, raw: dict) -> list[str]:
    path = tmp_path / "hw.yml"
    path.write_text(yaml.safe_dump(raw))
    return arithmetic_errors(load(path))


def test_nvlink_arithmetic_is_checked(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["nvlink"]["nvlink4"]["per_gpu_gb_s"] = 450  # a per-direction figure under `convention: bidirectional`
    raw["gpus"]["b200"]["nvlink_gb_s"] = 1800  # NVIDIA's headline where the per-direction figure belongs
    assert errors_of_copy(tmp_path, raw) == [
        "nvlink.nvlink4: per_gpu != links x per_link",
        "gpus.b200.nvlink_gb_s: not links x per-link rate, per direction",
    ]


def test_switch_aggregate_is_checked(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["switches"]["qm9700"]["convention"] = PER_DIRECTION  # 64 x 400 Gb/s one way is 25.6, not 51.2
    assert errors_of_copy(tmp_path, raw) == ["switches.qm9700.aggregate: not radix x port rate"]


def test_nvlink_figure_needs_nvlink(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["gpus"]["rtx4090"]["nvlink_gb_s"] = 32
    assert "gpus.rtx4090: nvlink_links and nvlink_gb_s must be 0" in error_of(tmp_path, raw)


def test_dangling_reference(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["nodes"]["dgx_h100"]["gpu"] = "h100_pcie"
    assert "nodes.dgx_h100.gpu: 'h100_pcie' is not in gpus" in error_of(tmp_path, raw)


def test_unverified_names_a_field(tmp_path: Path) -> None:
    raw = raw_catalogue()
    raw["gpus"]["b200"]["unverified"] = ["memory"]
    assert "gpus.b200.unverified: 'memory' is not a field" in error_of(tmp_path, raw)
