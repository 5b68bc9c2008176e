"""What this catches: misreading a topology, one question at a time (each test: one question, one machine).

- parse_smi: multi-word headers ("CPU Affinity") read as device columns, " X " lost when splitting, ANSI
  escapes left in the header, the NIC legend ignored, older drivers' "mlx5_0" rows, "N/A" NUMA as a number.
- smi_questions: NODE counted as SYS (it stays on one socket), "NV2" read as 1 link, a partial NVLink mesh
  (DGX-1) taken for an NVSwitch, the nearest NIC picked by string order instead of the PIX < ... < SYS ladder.
- cluster_yaml: NVL72 trays not merged into one NVLink domain, routes through another node's NIC, a GPU
  without
  a NIC treated as reachable, the DGX-1 mesh treated as all-to-all.
- layouts: TP groups checked as rings (i -> i + 1) instead of cliques, unreachable pipelines and DP rings.
The question functions get the reference's parse of each machine, so a parsing bug costs parse_smi only.

Beside the shipped samples, every concept is checked on machines and clusters drawn here from fixed seeds and
rendered to text in formats the samples do not show: the older two-column "CPU Affinity / NUMA Affinity"
header, one-GPU boxes, NIC labels without a legend and old mlx5_k labels, spaces of any width instead of tabs,
trailing whitespace, CRLF, a blank line above, and flow- or block-style YAML. The parse is compared with the
truth the judge drew, not with another parser's reading of the text.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

import coursekit
from coursekit.hardware import load
from grader.harness import World

DATA = Path(coursekit.__file__).parent / "data"
SMI = {
    name: (DATA / f"topo_{name}.txt").read_text()
    for name in ("dgx_h100", "4x4090", "dgx1_v100", "2socket_l40s")
}
CLUSTERS = {
    name: (DATA / f"cluster_{name}.yml").read_text()
    for name in ("dgx_h100_rail", "gb200_nvl72", "rtx4090_pair", "dgx1_v100_pair")
}
HW = load()


def call(world: World, module: str, function: str, *args: Any) -> Any:
    [res] = world.call(module, function, args=[args])
    return res.returned


def same(got: Any, want: Any, what: str) -> None:
    """Exact equality of plain data (tuples and lists alike), with the first difference named."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            raise AssertionError(f"{what}: expected keys {sorted(want)}, got {got!r:.300}")
        for k in want:
            same(got[k], want[k], f"{what}[{k!r}]")
    elif isinstance(want, list | tuple):
        if not isinstance(got, list | tuple) or len(got) != len(want):
            raise AssertionError(f"{what}: expected {want!r:.300}, got {got!r:.300}")
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{what}[{i}]")
    elif got != want or type(got) is not type(want):
        raise AssertionError(f"{what}: expected {want!r}, got {got!r}")


# ------------------------------------------------------------------------------------------------------------
# Machines nobody has shown the student: topologies drawn from a seed, rendered to `nvidia-smi topo -m` text
# in the styles different drivers and terminals produce, parsed by the student's code and compared with the
# truth the judge drew (not with a parser's opinion of the text).

PCIE_LADDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
AFFINITY_STYLES = (
    ("CPU Affinity",),  # the oldest drivers (the DGX-1 sample)
    ("CPU Affinity", "NUMA Affinity"),  # the two-column header of the 450-515 era
    ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"),  # current drivers
)
LEGEND_LINES = {
    "X": "Self",
    "SYS": "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "NODE": (
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"
    ),
    "PHB": "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "PXB": "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "PIX": "Connection traversing at most a single PCIe bridge",
    "NV#": "Connection traversing a bonded set of # NVLinks",
}


def draw_topology(seed: int, *, gpus: int | None = None) -> tuple[str, dict]:
    """A random machine as (text, truth): truth has parse_topo's keys and values."""
    r = random.Random(2000 + seed)
    n_gpus = gpus if gpus is not None else r.choice([1, 2, 3, 4, 5, 6, 8])
    n_nics = r.choice([0, 1, 2, 3, 4])
    style = r.choice(
        ["legend", "no_legend", "mlx5"]
    )  # NIC labels: NICk with a legend, without, or old mlx5_k
    nic_labels = [f"mlx5_{i}" if style == "mlx5" else f"NIC{i}" for i in range(n_nics)]
    names = {label: (f"mlx5_{i}" if style == "legend" else label) for i, label in enumerate(nic_labels)}
    devices = [f"GPU{i}" for i in range(n_gpus)] + nic_labels
    matrix: dict[str, dict[str, str]] = {d: {d: "X"} for d in devices}
    for a, b in itertools.combinations(devices, 2):
        if a.startswith("GPU") and b.startswith("GPU") and r.random() < 0.5:
            code = f"NV{r.choice([1, 2, 4, 6, 12, 18])}"
        else:
            code = r.choice(PCIE_LADDER)
        matrix[a][b] = matrix[b][a] = code
    columns = r.choice(AFFINITY_STYLES)
    sockets = r.choice([1, 2])
    cpu, numa = {}, {}
    for i in range(n_gpus):
        node = i * sockets // n_gpus
        cpu[f"GPU{i}"] = r.choice(
            [
                f"{32 * node}-{32 * node + 31}",
                f"{28 * node}-{28 * node + 27},{56 + 28 * node}-{83 + 28 * node}",
            ]
        )
        numa[f"GPU{i}"] = None if r.random() < 0.15 else node
    truth = {
        "devices": devices,
        "gpus": devices[:n_gpus],
        "nics": nic_labels,
        "matrix": matrix,
        "cpu_affinity": cpu,
        "numa_affinity": numa if "NUMA Affinity" in columns else {},
        "legend": dict(LEGEND_LINES),
        "nic_names": names,
    }
    # rendering: tabs (as nvidia-smi prints) or spaces of varying width (as pasted), ANSI or not, CRLF or not
    sep = r.choice(["\t", "tabs_expanded", "spaces"])
    width = r.randint(2, 9)

    def row(cells: list[str]) -> str:
        if sep == "spaces":
            return (" " * width).join(cells)
        return "\t".join(cells)

    header = row(["", *devices, *columns])
    if r.random() < 0.5:
        header = "\x1b[4m" + header + "\x1b[0m"
    lines = [header]
    for d in devices:
        cells = [d, *(" X " if d == e else matrix[d][e] for e in devices)]
        if d.startswith("GPU"):
            extra = [cpu[d], "N/A" if numa[d] is None else str(numa[d]), "N/A"][: len(columns)]
            cells += extra
        lines.append(row(cells) + (" " * r.randint(0, 3)))
    lines += ["", "Legend:", ""]
    lines += [f"  {code:<4} = {text}" for code, text in LEGEND_LINES.items()]
    if style == "legend" and n_nics:
        lines += ["", "NIC Legend:", ""] + [f"  {label}: {names[label]}" for label in nic_labels]
    text = "\n".join(lines) + "\n"
    if sep == "tabs_expanded":
        text = text.expandtabs(8)
    if r.random() < 0.3:
        text = text.replace("\n", "\r\n")
    if r.random() < 0.3:
        text = "\n" + text  # a blank line above, as `nvidia-smi topo -m | tee` in a log
    return text, truth


def draw_cluster(seed: int) -> str:
    """A random cluster YAML: nodes of 1-8 GPUs with all, none or some NVLinks, 0 or more NICs (shared or one
    per GPU), an optional NVLink domain over two nodes, a rail or top-of-rack leaf layer under one or two
    spines, sometimes a node left uncabled. Written block-style or flow-style."""
    r = random.Random(2100 + seed)
    nodes, links, switches = [], [], []
    n_nodes = r.randint(1, 4)
    leaves = r.randint(1, 3)
    spines = r.randint(1, 2)
    switches += [{"name": f"leaf{j}", "tier": "leaf"} for j in range(leaves)]
    switches += [{"name": f"spine{j}", "tier": "spine"} for j in range(spines)]
    for i in range(n_nodes):
        gpus = r.choice([1, 2, 4, 6, 8])
        node: dict[str, Any] = {"name": f"n{i}", "gpus": gpus}
        kind = r.choice(["all", "none", "pairs"])
        if kind == "pairs" and gpus > 1:
            pairs = [[a, b] for a, b in itertools.combinations(range(gpus), 2) if r.random() < 0.4]
            node["nvlink"] = pairs
        elif kind == "all":
            node["nvlink"] = "all"
        nics = r.choice([0, 1, gpus // 2 or 1, gpus])
        node["nics"] = nics
        if nics and r.random() < 0.3:
            node["gpu_nic"] = [r.randrange(nics) for _ in range(gpus)]
        nodes.append(node)
        if r.random() < 0.15:
            continue  # uncabled
        for k in range(nics):
            links.append([f"n{i}:nic{k}", f"leaf{(k if r.random() < 0.5 else i) % leaves}"])
    for j in range(leaves):
        for s in range(spines):
            if leaves > 1 and r.random() < 0.9:
                links.append([f"leaf{j}", f"spine{s}"])
    raw: dict[str, Any] = {"name": f"drawn-{seed}", "nodes": nodes, "switches": switches, "links": links}
    if n_nodes >= 2 and r.random() < 0.3:
        raw["nvlink_domains"] = [["n0", "n1"]]
    return yaml.safe_dump(raw, default_flow_style=r.choice([False, None]), sort_keys=False)


# ------------------------------------------------------------------------------------------------------------
# 20.parse_smi: one test per machine


LEGENDS = ("legend", "nic_names")  # graded by their own concept: the matrix is what the questions need


def _without(topo: Any, keys: tuple[str, ...]) -> Any:
    return {k: v for k, v in topo.items() if k not in keys} if isinstance(topo, dict) else topo


@pytest.mark.part("20.parse_smi")
class TestParseSmi:
    @pytest.mark.concept("matrix_parse")
    @pytest.mark.parametrize("machine", list(SMI))
    def test_sample(self, world: World, reference, machine: str) -> None:
        want = reference("smi_topo").parse_topo(SMI[machine])
        got = call(world, "smi_topo", "parse_topo", SMI[machine])
        same(_without(got, LEGENDS), _without(want, LEGENDS), f"parse_topo(topo_{machine}.txt)")

    @pytest.mark.concept("legends")
    @pytest.mark.parametrize("machine", list(SMI))
    def test_sample_legends(self, world: World, reference, machine: str) -> None:
        want = reference("smi_topo").parse_topo(SMI[machine])
        got = call(world, "smi_topo", "parse_topo", SMI[machine])
        if not isinstance(got, dict):
            raise AssertionError(f"parse_topo must return a dict, got {got!r:.200}")
        for key in LEGENDS:
            same(got.get(key), want[key], f"parse_topo(topo_{machine}.txt)[{key!r}]")

    @pytest.mark.concept("matrix_parse")
    @pytest.mark.generated
    def test_drawn_machines(self, world: World) -> None:
        for seed in range(10):
            text, truth = draw_topology(seed)
            got = call(world, "smi_topo", "parse_topo", text)
            same(
                _without(got, LEGENDS),
                _without(truth, LEGENDS),
                f"parse_topo of drawn machine {seed}:\n{text}",
            )

    @pytest.mark.concept("matrix_parse")
    @pytest.mark.generated
    def test_one_gpu_boxes(self, world: World) -> None:
        for seed in (100, 101, 102):
            text, truth = draw_topology(seed, gpus=1)
            got = call(world, "smi_topo", "parse_topo", text)
            same(_without(got, LEGENDS), _without(truth, LEGENDS), f"parse_topo of a one-GPU box:\n{text}")

    @pytest.mark.concept("matrix_parse")
    def test_two_column_affinity_header(self, world: World) -> None:
        # the 450-515 drivers' header: "CPU Affinity" and "NUMA Affinity", no "GPU NUMA ID"
        text = (
            "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV12\tSYS\t0-63\t0\n"
            "GPU1\tNV12\t X \tPXB\t64-127\t1\n"
            "NIC0\tSYS\tPXB\t X \n"
        )
        got = call(world, "smi_topo", "parse_topo", text)
        want = {
            "devices": ["GPU0", "GPU1", "NIC0"],
            "gpus": ["GPU0", "GPU1"],
            "nics": ["NIC0"],
            "matrix": {
                "GPU0": {"GPU0": "X", "GPU1": "NV12", "NIC0": "SYS"},
                "GPU1": {"GPU0": "NV12", "GPU1": "X", "NIC0": "PXB"},
                "NIC0": {"GPU0": "SYS", "GPU1": "PXB", "NIC0": "X"},
            },
            "cpu_affinity": {"GPU0": "0-63", "GPU1": "64-127"},
            "numa_affinity": {"GPU0": 0, "GPU1": 1},
        }
        same(_without(got, LEGENDS), want, "parse_topo of a two-column affinity header")

    @pytest.mark.concept("legends")
    @pytest.mark.generated
    def test_drawn_legends(self, world: World) -> None:
        # NIC labels with a legend, without one (the label names itself), and old mlx5_k labels
        for seed in range(10, 18):
            text, truth = draw_topology(seed)
            got = call(world, "smi_topo", "parse_topo", text)
            if not isinstance(got, dict):
                raise AssertionError(f"parse_topo must return a dict, got {got!r:.200}")
            for key in LEGENDS:
                same(got.get(key), truth[key], f"parse_topo(drawn machine {seed})[{key!r}]:\n{text}")

    @pytest.mark.concept("pasted_text")
    def test_as_pasted_into_an_issue(self, world: World, reference) -> None:
        # what people paste: a title line, tabs expanded to spaces, Windows line ends
        text = "NVIDIA Topology:\r\n" + SMI["dgx_h100"].expandtabs(8).replace("\n", "\r\n")
        want = reference("smi_topo").parse_topo(SMI["dgx_h100"])
        same(call(world, "smi_topo", "parse_topo", text), want, "parse_topo of the pasted DGX H100 output")


# ------------------------------------------------------------------------------------------------------------
# 20.smi_questions: the reference's parse in, one question per test


@pytest.fixture
def parsed(reference) -> dict[str, dict]:
    return {name: reference("smi_topo").parse_topo(text) for name, text in SMI.items()}


# A 4-GPU box where only GPU1-GPU2-GPU3 are NVLinked to each other, and two NICs equally near GPU3
PARTIAL = {
    "devices": ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"],
    "gpus": ["GPU0", "GPU1", "GPU2", "GPU3"],
    "nics": ["NIC0", "NIC1"],
    "matrix": {
        "GPU0": {"GPU0": "X", "GPU1": "NV4", "GPU2": "PHB", "GPU3": "SYS", "NIC0": "PXB", "NIC1": "SYS"},
        "GPU1": {"GPU0": "NV4", "GPU1": "X", "GPU2": "NV2", "GPU3": "NV2", "NIC0": "NODE", "NIC1": "SYS"},
        "GPU2": {"GPU0": "PHB", "GPU1": "NV2", "GPU2": "X", "GPU3": "NV4", "NIC0": "SYS", "NIC1": "PHB"},
        "GPU3": {"GPU0": "SYS", "GPU1": "NV2", "GPU2": "NV4", "GPU3": "X", "NIC0": "NODE", "NIC1": "NODE"},
        "NIC0": {"GPU0": "PXB", "GPU1": "NODE", "GPU2": "SYS", "GPU3": "NODE", "NIC0": "X", "NIC1": "SYS"},
        "NIC1": {"GPU0": "SYS", "GPU1": "SYS", "GPU2": "PHB", "GPU3": "NODE", "NIC0": "SYS", "NIC1": "X"},
    },
    "cpu_affinity": {},
    "numa_affinity": {},
    "legend": {},
    "nic_names": {"NIC0": "mlx5_0", "NIC1": "mlx5_bond_0"},
}


@pytest.mark.part("20.smi_questions")
class TestSmiQuestions:
    @pytest.mark.concept("link_ladder")
    def test_link_kinds(self, world: World, parsed) -> None:
        cases = [
            ("dgx_h100", "GPU0", "GPU7", "nvlink"),
            ("dgx_h100", "GPU0", "NIC5", "pcie"),
            ("dgx_h100", "GPU0", "NIC6", "sys"),
            ("4x4090", "GPU0", "GPU2", "pcie"),
            ("dgx1_v100", "GPU0", "GPU5", "sys"),
            ("dgx1_v100", "GPU2", "mlx5_0", "pcie"),
            ("2socket_l40s", "GPU0", "GPU3", "pcie"),
            ("2socket_l40s", "GPU3", "GPU4", "sys"),
            ("dgx_h100", "NIC4", "NIC4", "self"),
        ]
        for machine, a, b, want in cases:
            same(call(world, "smi_topo", "link_kind", parsed[machine], a, b), want, f"{machine}: {a} - {b}")

    @pytest.mark.concept("link_ladder")
    def test_nvlink_counts(self, world: World, parsed) -> None:
        cases = [
            ("dgx_h100", "GPU3", "GPU4", 18),
            ("dgx1_v100", "GPU0", "GPU3", 2),
            ("dgx1_v100", "GPU0", "GPU1", 1),
            ("dgx1_v100", "GPU0", "GPU5", 0),
            ("4x4090", "GPU0", "GPU1", 0),
        ]
        for machine, a, b, want in cases:
            same(
                call(world, "smi_topo", "nvlink_count", parsed[machine], a, b),
                want,
                f"{machine}: NVLinks {a}-{b}",
            )

    @pytest.mark.parametrize("machine", ["dgx1_v100", "2socket_l40s", "4x4090"])
    @pytest.mark.concept("link_ladder")
    def test_gpu_pairs(self, world: World, reference, parsed, machine: str) -> None:
        want = reference("smi_topo").gpu_pairs(parsed[machine])
        same(call(world, "smi_topo", "gpu_pairs", parsed[machine]), want, f"gpu_pairs on {machine}")

    @pytest.mark.concept("nvlink_clique")
    def test_largest_nvlink_group(self, world: World, parsed) -> None:
        cases = {
            "dgx_h100": [f"GPU{i}" for i in range(8)],
            "dgx1_v100": ["GPU0", "GPU1", "GPU2", "GPU3"],
            "4x4090": ["GPU0"],
            "2socket_l40s": ["GPU0"],
        }
        for machine, want in cases.items():
            same(call(world, "smi_topo", "largest_nvlink_group", parsed[machine]), want, f"{machine}")
        same(
            call(world, "smi_topo", "largest_nvlink_group", PARTIAL), ["GPU1", "GPU2", "GPU3"], "partial mesh"
        )

    @pytest.mark.concept("link_ladder")
    @pytest.mark.generated
    def test_drawn_pairs(self, world: World, reference) -> None:
        ref = reference("smi_topo")
        for seed in range(20, 26):
            _, topo = draw_topology(seed)
            same(call(world, "smi_topo", "gpu_pairs", topo), ref.gpu_pairs(topo), f"gpu_pairs, drawn {seed}")
            a, b = topo["devices"][0], topo["devices"][-1]
            want = ref.nvlink_count(topo, a, b)
            same(
                call(world, "smi_topo", "nvlink_count", topo, a, b),
                want,
                f"nvlink_count {a}-{b}, drawn {seed}",
            )

    @pytest.mark.concept("nvlink_clique")
    @pytest.mark.generated
    def test_drawn_cliques(self, world: World, reference) -> None:
        ref = reference("smi_topo")
        for seed in range(30, 38):
            _, topo = draw_topology(seed, gpus=random.Random(seed).choice([3, 5, 6, 7, 8]))
            want = ref.largest_nvlink_group(topo)
            same(call(world, "smi_topo", "largest_nvlink_group", topo), want, f"largest group, drawn {seed}")

    @pytest.mark.concept("nearest_nic")
    @pytest.mark.generated
    def test_drawn_nearest_nics(self, world: World, reference) -> None:
        ref = reference("smi_topo")
        # 56: a GPU whose nearest NICs are PHB away and the next ones NODE, rungs no shipped machine compares
        for seed in (*range(40, 46), 56):
            _, topo = draw_topology(seed)
            for gpu in topo["gpus"]:
                want = ref.nearest_nics(topo, gpu)
                same(call(world, "smi_topo", "nearest_nics", topo, gpu), want, f"NICs of {gpu}, drawn {seed}")

    @pytest.mark.concept("nearest_nic")
    def test_nearest_nics(self, world: World, parsed) -> None:
        cases = [
            ("dgx_h100", "GPU2", ["mlx5_2"]),
            ("dgx_h100", "GPU5", ["mlx5_7"]),
            ("4x4090", "GPU3", ["mlx5_0"]),
            ("dgx1_v100", "GPU6", ["mlx5_0"]),
            ("2socket_l40s", "GPU5", ["mlx5_1"]),
            ("2socket_l40s", "GPU2", ["mlx5_0"]),
        ]
        for machine, gpu, want in cases:
            same(
                call(world, "smi_topo", "nearest_nics", parsed[machine], gpu),
                want,
                f"{machine}: NICs of {gpu}",
            )
        for gpu, want in [
            ("GPU0", ["mlx5_0"]),
            ("GPU2", ["mlx5_bond_0"]),
            ("GPU3", ["mlx5_0", "mlx5_bond_0"]),
        ]:
            same(call(world, "smi_topo", "nearest_nics", PARTIAL, gpu), want, f"partial box: NICs of {gpu}")


# ------------------------------------------------------------------------------------------------------------
# 20.cluster_yaml


UNCABLED = """
name: half-cabled
nodes:
  - {name: a, gpus: 2, nvlink: all, nics: 1}
  - {name: b, gpus: 2, nvlink: all, nics: 1}
  - {name: c, gpus: 2, nvlink: none, nics: 0}
  - {name: d, gpus: 1, nics: 1}
switches:
  - {name: tor, tier: leaf}
  - {name: other, tier: leaf}
links:
  - [a:nic0, tor]
  - [b:nic0, other]
  - [d:nic0, tor]
  - [d:nic0, other]
"""


RING = """
name: bridged-ring
nodes:
  - {name: ws, gpus: 4, nvlink: [[0, 1], [1, 2], [2, 3], [3, 0]], nics: 0}
"""


@pytest.fixture
def clusters(reference) -> dict[str, dict]:
    load_cluster = reference("cluster").load_cluster
    return {name: load_cluster(text) for name, text in CLUSTERS.items()} | {
        "uncabled": load_cluster(UNCABLED)
    }


@pytest.mark.part("20.cluster_yaml")
class TestClusterYaml:
    @pytest.mark.concept("cluster_model")
    @pytest.mark.parametrize("name", [*CLUSTERS, "uncabled"])
    def test_load(self, world: World, clusters, name: str) -> None:
        text = CLUSTERS.get(name, UNCABLED)
        same(call(world, "cluster", "load_cluster", text), clusters[name], f"load_cluster({name})")

    @pytest.mark.concept("cluster_model")
    def test_catalogue_agrees_with_the_samples(self, world: World, clusters) -> None:
        # the sample files follow coursekit/hardware.yml's node designs
        assert (
            len(clusters["gb200_nvl72"]["nvlink"])
            == 72 * 71 // 2
            == HW.nodes["gb200_nvl72"].nvlink_domain_gpus * 71 // 2
        )
        assert len(clusters["dgx_h100_rail"]["gpus"]) == 4 * HW.nodes["dgx_h100"].gpus
        got = call(world, "cluster", "gpu_path", clusters["gb200_nvl72"], "tray00:0", "tray17:3")
        same(got, {"kind": "nvlink", "tiers": []}, "NVL72: tray 0 to tray 17 stays on NVLink")

    @pytest.mark.concept("gpu_paths")
    def test_paths(self, world: World, clusters) -> None:
        leaf_spine_leaf = {"kind": "network", "tiers": ["leaf", "spine", "leaf"]}
        cases = [
            ("dgx_h100_rail", "dgx0:0", "dgx0:5", {"kind": "nvlink", "tiers": []}),
            ("dgx_h100_rail", "dgx0:3", "dgx2:3", {"kind": "network", "tiers": ["leaf"]}),
            ("dgx_h100_rail", "dgx0:3", "dgx2:4", leaf_spine_leaf),
            ("gb200_nvl72", "tray04:1", "tray04:1", {"kind": "self", "tiers": []}),
            ("rtx4090_pair", "box0:0", "box0:3", {"kind": "pcie", "tiers": []}),
            ("rtx4090_pair", "box0:2", "box1:1", {"kind": "network", "tiers": ["leaf"]}),
            ("dgx1_v100_pair", "dgx1a:0", "dgx1a:5", {"kind": "pcie", "tiers": []}),
            ("dgx1_v100_pair", "dgx1a:6", "dgx1a:2", {"kind": "nvlink", "tiers": []}),
            ("dgx1_v100_pair", "dgx1a:0", "dgx1b:7", {"kind": "network", "tiers": ["leaf"]}),
        ]
        for name, a, b, want in cases:
            same(call(world, "cluster", "gpu_path", clusters[name], a, b), want, f"{name}: {a} -> {b}")

    @pytest.mark.concept("cluster_model")
    @pytest.mark.generated
    def test_drawn_clusters(self, world: World, reference) -> None:
        for seed in range(8):
            text = draw_cluster(seed)
            want = reference("cluster").load_cluster(text)
            same(
                call(world, "cluster", "load_cluster", text), want, f"load_cluster of drawn cluster:\n{text}"
            )

    @pytest.mark.concept("gpu_paths")
    @pytest.mark.generated
    def test_drawn_paths(self, world: World, reference) -> None:
        ref = reference("cluster")
        for seed in range(10, 16):
            c = ref.load_cluster(draw_cluster(seed))
            r = random.Random(seed)
            for _ in range(4):
                a, b = r.choice(c["gpus"]), r.choice(c["gpus"])
                same(
                    call(world, "cluster", "gpu_path", c, a, b),
                    ref.gpu_path(c, a, b),
                    f"drawn {seed}: {a} -> {b}",
                )

    @pytest.mark.concept("gpu_paths")
    def test_unreachable(self, world: World, clusters) -> None:
        # d's NIC is cabled to both switches (a dual-homed host), but hosts do not forward: a and b cannot
        # reach each other through it, while each of them reaches d; c has no NIC at all
        c = clusters["uncabled"]
        cases = [("a:0", "b:1", "unreachable"), ("a:1", "c:0", "unreachable"), ("c:1", "c:0", "pcie")]
        for a, b, kind in cases:
            same(
                call(world, "cluster", "gpu_path", c, a, b),
                {"kind": kind, "tiers": []},
                f"uncabled: {a} -> {b}",
            )
        for a in ("a:0", "b:1"):
            got = call(world, "cluster", "gpu_path", c, a, "d:0")
            same(got, {"kind": "network", "tiers": ["leaf"]}, f"uncabled: {a} -> d:0 through one switch")


# ------------------------------------------------------------------------------------------------------------
# 20.layouts


@pytest.mark.part("20.layouts")
class TestLayouts:
    @pytest.mark.concept("tp_on_nvlink")
    def test_largest_tp_degree(self, world: World, clusters) -> None:
        for name, want in [
            ("dgx_h100_rail", 8),
            ("gb200_nvl72", 72),
            ("rtx4090_pair", 1),
            ("dgx1_v100_pair", 4),
        ]:
            same(
                call(world, "cluster", "largest_tp_degree", clusters[name]),
                want,
                f"largest TP degree, {name}",
            )

    @pytest.mark.concept("layout_feasibility")
    @pytest.mark.parametrize("name", ["dgx_h100_rail", "gb200_nvl72", "dgx1_v100_pair"])
    def test_supported_layouts(self, world: World, reference, clusters, name: str) -> None:
        want = reference("cluster").supported_layouts(clusters[name])
        same(call(world, "cluster", "supported_layouts", clusters[name]), want, f"supported layouts, {name}")

    @pytest.mark.concept("tp_on_nvlink")
    @pytest.mark.generated
    def test_drawn_tp_degrees(self, world: World, reference) -> None:
        ref = reference("cluster")
        for seed in range(20, 28):
            c = ref.load_cluster(draw_cluster(seed))
            same(call(world, "cluster", "largest_tp_degree", c), ref.largest_tp_degree(c), f"drawn {seed}")

    @pytest.mark.concept("layout_feasibility")
    @pytest.mark.generated
    def test_drawn_layouts(self, world: World, reference) -> None:
        ref = reference("cluster")
        # 63: DP neighbours that reach each other along a chain, but not across the ring's closing hop
        for seed in (*range(30, 36), 63):
            c = ref.load_cluster(draw_cluster(seed))
            same(call(world, "cluster", "supported_layouts", c), ref.supported_layouts(c), f"drawn {seed}")

    @pytest.mark.concept("layout_feasibility")
    def test_no_layout_without_a_network(self, world: World, clusters) -> None:
        # 7 GPUs: only tp 7, pp 7 or dp 7 multiply to 7, and each needs a and b to reach each other
        same(
            call(world, "cluster", "supported_layouts", clusters["uncabled"]),
            [],
            "layouts of a cut-off cluster",
        )

    @pytest.mark.concept("tp_on_nvlink")
    def test_a_ring_of_bridges_is_not_a_clique(self, world: World, reference) -> None:
        # 4 GPUs joined in a ring by NVLink bridges (0-1-2-3-0): 0-2 and 1-3 have no NVLink, so TP 4 would
        # route half its traffic over PCIe; TP 2 on {0, 1} and {2, 3} stays on NVLink
        ring = reference("cluster").load_cluster(RING)
        same(
            call(world, "cluster", "largest_tp_degree", ring),
            2,
            "largest TP degree on a ring of NVLink bridges",
        )
        want = [[1, 1, 4], [1, 2, 2], [1, 4, 1], [2, 1, 2], [2, 2, 1]]
        same(call(world, "cluster", "supported_layouts", ring), want, "layouts on the ring")
