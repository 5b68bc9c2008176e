"""What this catches: GPUDirect paths classed or routed wrong, GDR decisions that do not follow NCCL, and
checkpoint times that forget a link, a direction or a phase.

- paths: a switch-to-switch hop taken for PIX, a CPU hop or a CPU-CPU hop not seen, the last or first hop
  used instead of the farthest, the bounce buffer put anywhere but the GPU's own NUMA node, hops counted as
  nodes. Checked on every shipped topology and on made-up ones, against the reference and against the
  classes nvidia-smi topo -m prints for a DGX-2 (NVIDIA/nccl-tests#78) and an 8-NIC H100 box.
- gdr_level: NCCL_NET_GDR_LEVEL read case-insensitively, legacy integers taken as today's PATH_* numbers,
  "-1" or junk taken as a level, the pre-Ampere GDR-read rule missed, a default other than PXB/P2C,
  "<" instead of "<=". Exact, against NCCL's own source (paths.cc ncclGetLevel / ncclTopoCheckGdr).
- checkpoint: gradients saved, link loads summed over both directions (PCIe is full duplex), time summed
  over links instead of maxed, phases overlapped, drive write rate used for a restore, the bounce copy left
  out. Relative tolerance 1e-9: closed forms, only float rounding differs.
- staging: each question on its own: the staging copy in both directions, non_blocking on pageable memory,
  what pinning costs.
- host_copies (a GPU only): a buffer never pinned, a copy timed up to when a queued call returned or read
  before its end event completed, pinned and pageable swapped, GiB or seconds of all repeats. Judged against
  the judge's own measurement of the same copies in the same run, gated on the bytes (see 05.host_copies).
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from coursekit import pcie
from grader.harness import World

REL = 1e-9  # closed forms: the reference and a right answer differ only by float rounding

# Made-up machines, so answers cannot be learned from the shipped ones: a chain of three switches, a CPU
# with a device on a root port and a two-socket box where the NIC sits on the other socket.
CHAIN = {
    "nodes": {
        "cpu0": {"kind": "CPU"},
        "cpu1": {"kind": "CPU"},
        "s1": {"kind": "PCI"},
        "s2": {"kind": "PCI"},
        "s3": {"kind": "PCI"},
        "g": {"kind": "GPU", "cc": 90, "gdr": True, "nvlink": False},
        "h": {"kind": "GPU", "cc": 75, "gdr": True, "nvlink": False},
        "n": {"kind": "NIC", "gdr": True, "gbps": 50.0},
        "m": {"kind": "NIC", "gdr": False, "gbps": 25.0},
        "d": {"kind": "NVME", "read_gbps": 6.0, "write_gbps": 2.0},
        "e": {"kind": "NVME", "read_gbps": 3.0, "write_gbps": 1.5},
    },
    "links": [
        ["cpu0", "cpu1", "sys", 20.0],
        ["cpu0", "s1", "gen5x16"],
        ["s1", "s2", "gen4x16"],
        ["s2", "s3", "gen4x8"],
        ["s3", "g", "gen4x16"],
        ["s1", "n", "gen5x16"],
        ["cpu0", "m", "gen3x16"],
        ["cpu1", "h", "gen4x16"],
        ["s2", "d", "gen4x4"],
        ["cpu1", "e", "gen3x4"],
    ],
}


def drawn(seed: int) -> dict[str, Any]:
    """A server drawn by the judge: 1-3 sockets, root switches with nested switches, and GPUs (cc 70-100,
    with or without GDR and NVLink), NICs and drives hung off switches or straight off a CPU's root port."""
    rng = random.Random(seed)
    nodes: dict[str, dict[str, Any]] = {}
    links: list[list[Any]] = []
    cpus = [f"cpu{i}" for i in range(rng.randint(1, 3))]
    for i, cpu in enumerate(cpus):
        nodes[cpu] = {"kind": "CPU"}
        if i:
            links.append([cpus[i - 1], cpu, "sys", rng.choice([20.0, 40.0, 64.0])])
    parents = list(cpus)
    for s in range(rng.randint(1, 6)):
        nodes[f"sw{s}"] = {"kind": "PCI"}
        links.append([rng.choice(parents), f"sw{s}", f"gen{rng.randint(3, 5)}x{rng.choice([8, 16])}"])
        parents.append(f"sw{s}")
    counts = {"GPU": rng.randint(1, 6), "NIC": rng.randint(1, 4), "NVME": rng.randint(1, 3)}
    for kind, count in counts.items():
        for i in range(count):
            name = f"{kind.lower()}{i}"
            if kind == "GPU":
                attrs = {"cc": rng.choice([70, 75, 80, 90, 100]), "gdr": rng.random() < 0.85}
                attrs["nvlink"] = rng.random() < 0.5
            elif kind == "NIC":
                attrs = {"gdr": rng.random() < 0.85, "gbps": rng.choice([12.5, 25.0, 50.0])}
            else:
                attrs = {"read_gbps": rng.choice([3.0, 6.5, 13.0]), "write_gbps": rng.choice([1.5, 3.5, 9.0])}
            nodes[name] = {"kind": kind, **attrs}
            links.append([rng.choice(parents), name, f"gen{rng.randint(3, 5)}x{rng.choice([4, 8, 16])}"])
    return {"nodes": nodes, "links": links}


DRAWN = {f"drawn{s}": pcie.Topology.from_dict(drawn(20260316 + s), f"drawn{s}") for s in range(4)}
TOPOLOGIES = (
    {name: pcie.load(name) for name in pcie.names()} | {"chain": pcie.Topology.from_dict(CHAIN)} | DRAWN
)


def many(world: World, module: str, function: str, topo: pcie.Topology, calls: list[tuple]) -> list[Any]:
    """[module.function(topo, *args, **kwargs) for (args, kwargs) in calls] on the one rank."""
    inputs = {
        "module": module,
        "function": function,
        "topology": topo.to_dict(),
        "calls": [[list(args), kwargs] for args, kwargs in calls],
    }
    [res] = world.run("rank_programs:with_topology_many", inputs=inputs)
    return res.value


def pairs(topo: pcie.Topology, a_kind: str, b_kind: str) -> list[tuple[str, str]]:
    return [(a, b) for a in topo.of_kind(a_kind) for b in topo.of_kind(b_kind) if a != b]


def close(got: Any, expected: float, what: str) -> None:
    if type(got) not in (int, float):
        raise AssertionError(f"{what}: expected a number of seconds, got {type(got).__name__} {got!r}")
    if not math.isclose(got, expected, rel_tol=REL, abs_tol=1e-15):
        ratio = f" ({got / expected:.4g}x the right answer)" if expected and got else ""
        raise AssertionError(f"{what}: got {got!r}, expected {expected!r}{ratio}")


# ------------------------------------------------------------------------------------------------------------
# 05.paths


@pytest.mark.part("05.paths")
class TestPaths:
    @pytest.mark.concept("hop_class")
    def test_every_hop_type(self, world: World, reference) -> None:
        ref = reference("gdr")
        for name, topo in TOPOLOGIES.items():
            calls = [((ln.a, ln.b), {}) for ln in topo.links] + [((ln.b, ln.a), {}) for ln in topo.links]
            for ((a, b), _), got in zip(calls, many(world, "gdr", "hop_type", topo, calls), strict=True):
                assert got == ref.hop_type(topo, a, b), f"{name}: hop_type({a}, {b}) = {got!r}"

    @pytest.mark.concept("path_class")
    def test_every_path_type(self, world: World, reference) -> None:
        ref = reference("gdr")
        for name, topo in TOPOLOGIES.items():
            ends = pairs(topo, "GPU", "NIC") + pairs(topo, "GPU", "GPU") + pairs(topo, "NVME", "GPU")
            calls = [((a, b), {}) for a, b in ends] + [(("n" if name == "chain" else "nic0",) * 2, {})]
            for ((a, b), _), got in zip(calls, many(world, "gdr", "path_type", topo, calls), strict=True):
                assert got == ref.path_type(topo, a, b), f"{name}: path_type({a}, {b}) = {got!r}"

    @pytest.mark.concept("path_class")
    def test_nvidia_smi_classes(self, world: World) -> None:
        # nvidia-smi topo -m on a DGX-2 (NVIDIA/nccl-tests#78): GPU0 - mlx5_0..3 PIX PXB NODE NODE (NODE is
        # PHB to NCCL), then SYS; on 8-NIC H100/H800 boxes (deepseek-ai/DeepEP#128, NVIDIA/nccl#933): GPU i -
        # NIC i PIX, across sockets SYS; a DGX A100 shows PXB for GPU0-NIC0, which NCCL flattens to PIX
        for name, ends, expected in [
            (
                "dgx2_like",
                [("gpu0", f"nic{i}") for i in (0, 1, 2, 3, 4)],
                ["PIX", "PXB", "PHB", "PHB", "SYS"],
            ),
            ("dgx_a100_like", [("gpu0", "nic0"), ("gpu0", "nic2")], ["PIX", "SYS"]),
            ("hgx_h100_like", [("gpu3", "nic3"), ("gpu3", "nic5")], ["PIX", "SYS"]),
        ]:
            got = many(world, "gdr", "path_type", TOPOLOGIES[name], [(e, {}) for e in ends])
            assert got == expected, f"{name} {ends}: got {got}, nvidia-smi says {expected}"

    @pytest.mark.concept("bounce_path")
    def test_data_paths(self, world: World, reference) -> None:
        ref = reference("gdr")
        for name, topo in TOPOLOGIES.items():
            calls = [((g, n), {"gdr": gdr}) for g, n in pairs(topo, "GPU", "NIC") for gdr in (True, False)]
            for ((g, n), kw), got in zip(calls, many(world, "gdr", "data_path", topo, calls), strict=True):
                expected = ref.data_path(topo, g, n, **kw)
                if not isinstance(got, dict) or set(got) != set(expected):
                    raise AssertionError(
                        f"data_path must return a dict with keys {sorted(expected)}, got {got!r}"
                    )
                for key in expected:
                    assert got[key] == expected[key], (
                        f"{name}: data_path({g}, {n}, gdr={kw['gdr']})[{key!r}] = {got[key]!r}, "
                        f"expected {expected[key]!r}"
                    )

    @pytest.mark.concept("bounce_path")
    def test_bounce_costs_on_an_h100_box(self, world: World) -> None:
        topo = TOPOLOGIES["hgx_h100_like"]
        calls = [(("gpu0", "nic0"), {"gdr": g}) for g in (True, False)] + [(("gpu0", "nic6"), {"gdr": False})]
        direct, bounced, far = many(world, "gdr", "data_path", topo, calls)
        # GDR: GPU -> switch -> NIC. Without: GPU -> switch -> CPU (host memory) -> switch -> NIC, 4 hops
        assert (direct["hops"], direct["bounce_buffers"], direct["host_bridge_crossings"]) == (2, 0, 0), (
            direct
        )
        assert (bounced["hops"], bounced["bounce_buffers"], bounced["host_bridge_crossings"]) == (4, 1, 1), (
            bounced
        )
        assert bounced["nodes"] == ["gpu0", "sw0", "cpu0", "sw0", "nic0"], bounced["nodes"]
        # NIC 6 hangs off the other socket: the buffer stays on gpu0's socket, the bytes cross UPI once
        assert (far["smp_crossings"], far["host_bridge_crossings"], far["path_type"]) == (1, 2, "SYS"), far


# ------------------------------------------------------------------------------------------------------------
# 05.gdr_level

# (value, class) straight from ncclGetLevel in NVIDIA/nccl src/graph/paths.cc
LEVELS = {
    "LOC": "LOC", "PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "SYS": "SYS", "NVL": "NVL", "P2C": "P2C",
    "PXN": "PXN", "0": "LOC", "1": "PIX", "2": "PXB", "3": "PHB", "4": "SYS", "5": "SYS", "7": "SYS",
    "12": "SYS", "2abc": "PXB", "pxb": None, "Phb": None, "-1": None, "": None, "NET": None, "DIS": None,
    " 2": None, "x": None,
}  # fmt: skip


@pytest.mark.part("05.gdr_level")
class TestGdrLevel:
    @pytest.mark.concept("level_parsing")
    def test_parse_every_form(self, world: World) -> None:
        for value, expected in [*LEVELS.items(), (None, None)]:
            [res] = world.call("gdr", "parse_gdr_level", args=[(value,)])
            assert res.returned == expected, (
                f"parse_gdr_level({value!r}) = {res.returned!r}, NCCL reads it as {expected!r}"
            )

    @pytest.mark.concept("gdr_decision")
    def test_decisions_match_nccl(self, world: World, reference) -> None:
        ref = reference("gdr")
        envs = [{}, {"NCCL_NET_GDR_READ": "1"}, {"NCCL_NET_GDR_READ": "0"}, {"NCCL_NET_GDR_C2C": "0"}] + [
            {"NCCL_NET_GDR_LEVEL": v} for v in ("LOC", "PIX", "PXB", "PHB", "SYS", "3", "1", "pxb", "NVL")
        ]
        for name, topo in TOPOLOGIES.items():
            ends = pairs(topo, "GPU", "NIC")[:12]
            calls = [((g, n, env), {"read": read}) for g, n in ends for env in envs for read in (True, False)]
            got_all = many(world, "gdr", "gdr_enabled", topo, calls)
            for ((g, n, env), kw), got in zip(calls, got_all, strict=True):
                expected = ref.gdr_enabled(topo, g, n, env, **kw)
                assert got is expected, f"{name}: gdr_enabled({g}, {n}, {env}, read={kw['read']}) = {got!r}"

    @pytest.mark.concept("gdr_decision")
    def test_known_decisions(self, world: World) -> None:
        cases = [  # (topology, gpu, nic, env, read, expected, why)
            ("workstation", "gpu0", "nic0", {}, False, False, "PHB is past the default PXB/P2C level"),
            ("workstation", "gpu0", "nic0", {"NCCL_NET_GDR_LEVEL": "PHB"}, True, True, "PHB allows PHB"),
            ("workstation", "gpu0", "nic0", {"NCCL_NET_GDR_LEVEL": "3"}, False, True, "legacy 3 is PHB"),
            ("pcie_v100_like", "gpu0", "nic0", {}, True, False, "V100, no NVLink: no GDR reads by default"),
            ("pcie_v100_like", "gpu0", "nic0", {}, False, True, "receives still use GDR on PIX"),
            ("pcie_v100_like", "gpu0", "nic0", {"NCCL_NET_GDR_READ": "1"}, True, True, "forced on"),
            (
                "hgx_h100_like",
                "gpu0",
                "nic0",
                {"NCCL_NET_GDR_LEVEL": "pxb"},
                True,
                True,
                "lower case ignored",
            ),
            ("hgx_h100_like", "gpu0", "nic0", {"NCCL_NET_GDR_LEVEL": "LOC"}, False, False, "LOC: never"),
            ("hgx_h100_like", "gpu0", "nic4", {}, True, False, "SYS: other socket"),
            ("hgx_h100_like", "gpu0", "nic4", {"NCCL_NET_GDR_LEVEL": "SYS"}, True, True, "SYS: always"),
            ("dgx2_like", "gpu0", "nic1", {"NCCL_NET_GDR_LEVEL": "1"}, True, False, "legacy 1 is PIX"),
            ("dgx2_like", "gpu0", "nic1", {"NCCL_NET_GDR_LEVEL": "2"}, True, True, "legacy 2 is PXB"),
            ("dgx2_like", "gpu0", "nic0", {}, True, True, "V100 with NVLink peers may read"),
            ("chain", "g", "m", {"NCCL_NET_GDR_LEVEL": "SYS"}, False, False, "this NIC has no GDR"),
            (
                "chain",
                "h",
                "n",
                {"NCCL_NET_GDR_LEVEL": "SYS"},
                True,
                False,
                "cc 75, no NVLink peer: no reads",
            ),
        ]
        for name, gpu, nic, env, read, expected, why in cases:
            [got] = many(world, "gdr", "gdr_enabled", TOPOLOGIES[name], [((gpu, nic, env), {"read": read})])
            assert got is expected, f"{name} {gpu}-{nic} env={env} read={read}: got {got!r} ({why})"


# ------------------------------------------------------------------------------------------------------------
# 05.checkpoint

LLAMA3_8B, LLAMA3_70B = 8_030_261_248, 70_553_706_496  # exercise 22's counts (ground-truth.md Appendix A)


def placements(name: str) -> dict[str, dict[str, list[str]]]:
    topo = TOPOLOGIES[name]
    gpus, drives, nics = topo.of_kind("GPU"), topo.of_kind("NVME"), topo.of_kind("NIC")
    out = {"striped": {g: drives for g in gpus}, "first_drive": {g: drives[:1] for g in gpus}}
    out["own_nic"] = {g: [nics[i % len(nics)]] for i, g in enumerate(gpus)}  # a remote file system per NIC
    out["one_gpu"] = {gpus[-1]: drives[-1:]}
    return out


@pytest.mark.part("05.checkpoint")
class TestCheckpoint:
    @pytest.mark.concept("checkpoint_size")
    def test_checkpoint_bytes(self, world: World) -> None:
        cases = [
            (LLAMA3_8B, True, 112_423_657_472),
            (LLAMA3_70B, True, 987_751_890_944),
            (LLAMA3_70B, False, 141_107_412_992),
            (1, True, 14),
            (3, False, 6),
        ]
        for n, opt, expected in cases:
            [res] = world.call("gds", "checkpoint_bytes", args=[(n,)], kwargs={"optimizer": opt})
            assert res.returned == expected and type(res.returned) is int, (
                f"checkpoint_bytes({n}, optimizer={opt}) = {res.returned!r}, expected {expected} "
                "(bf16 weights 2 B + fp32 master, m, v 12 B per parameter; gradients are not saved)"
            )

    @pytest.mark.concept("phase_bottleneck")
    def test_phase_seconds(self, world: World, reference) -> None:
        ref = reference("gds")
        cases = {
            "workstation": [
                [],
                [("gpu0", "cpu0", 1e10)],
                [("gpu0", "cpu0", 1e10), ("cpu0", "gpu0", 1e10)],
                [("gpu0", "nvme0", 7e9), ("gpu1", "nvme0", 7e9)],
                [("nvme0", "gpu1", 3e9)],
            ],
            "chain": [
                [("g", "d", 4e9), ("n", "g", 8e9)],
                [("d", "cpu1", 1e9), ("e", "g", 2e9), ("h", "n", 5e9)],
            ],
            "dgx_a100_like": [[("gpu0", "numa0", 5e9), ("gpu1", "numa0", 5e9), ("numa0", "nvme0", 1e10)]],
        }
        for name, flow_sets in cases.items():
            topo = TOPOLOGIES[name]
            calls = [(([list(f) for f in flows],), {}) for flows in flow_sets]
            got = many(world, "gds", "phase_seconds", topo, calls)
            for flows, value in zip(flow_sets, got, strict=True):
                close(value, ref.phase_seconds(topo, flows), f"{name}: phase_seconds({flows})")

    @pytest.mark.concept("phase_bottleneck")
    def test_full_duplex_and_max(self, world: World) -> None:
        # 10 GB each way over one Gen4 x16 root port: 10e9 / 31.5e9 s, not twice that (the two directions are
        # separate lanes); a drive at 3.5 GB/s write bounds a second flow harder than the link does
        topo = TOPOLOGIES["workstation"]
        flows = [[["gpu0", "cpu0", 1e10], ["cpu0", "gpu0", 1e10]], [["gpu0", "nvme0", 1e10]]]
        up_down, to_drive = many(world, "gds", "phase_seconds", topo, [((f,), {}) for f in flows])
        close(up_down, 1e10 / (pcie.pcie_gbps(4, 16) * 1e9), "10 GB up and 10 GB down a Gen4 x16 link")
        close(to_drive, 1e10 / 3.5e9, "10 GB into a drive that writes 3.5 GB/s")

    @pytest.mark.concept("bounce_phases")
    def test_checkpoint_seconds(self, world: World, reference) -> None:
        ref = reference("gds")
        for name, topo in TOPOLOGIES.items():
            total = ref.checkpoint_bytes(LLAMA3_70B if len(topo.of_kind("GPU")) > 4 else LLAMA3_8B)
            calls = [
                ((), {"total_bytes": total, "placement": pl, "gds": gds, "op": op})
                for pl in placements(name).values()
                for gds in (True, False)
                for op in ("save", "restore")
            ]
            for (_, kw), got in zip(
                calls, many(world, "gds", "checkpoint_seconds", topo, calls), strict=True
            ):
                close(got, ref.checkpoint_seconds(topo, **kw), f"{name}: checkpoint_seconds({kw})")

    @pytest.mark.concept("bounce_phases")
    def test_gds_on_the_workstation_by_hand(self, world: World) -> None:
        # 10 GB from gpu0 to its drive. GDS: the drive writes 3.5 GB/s (PM9A3), slower than its Gen4 x4 link
        # (7.88) and the GPU's x16 (31.5): 10/3.5 s. Without: + the copy into host memory, 10/31.5 s first.
        # Restore reads at 6.5 GB/s.
        topo, x16 = TOPOLOGIES["workstation"], pcie.pcie_gbps(4, 16) * 1e9
        base = {"total_bytes": 1e10, "placement": {"gpu0": ["nvme0"]}}
        calls = [((), base | {"gds": g, "op": op}) for op in ("save", "restore") for g in (True, False)]
        got = many(world, "gds", "checkpoint_seconds", topo, calls)
        expected = [1e10 / 3.5e9, 1e10 / 3.5e9 + 1e10 / x16, 1e10 / 6.5e9, 1e10 / 6.5e9 + 1e10 / x16]
        whats = ["save with GDS", "save without GDS", "restore with GDS", "restore without GDS"]
        for value, want, what in zip(got, expected, whats, strict=True):
            close(value, want, f"workstation, 10 GB: {what}")

    @pytest.mark.concept("bounce_phases")
    def test_shared_uplink_hurts_without_gds(self, world: World) -> None:
        # DGX A100: two GPUs per Gen4 x16 uplink, a 200 Gb/s NIC each as the path to remote storage. Without
        # GDS both GPUs' bytes cross the one uplink twice (up to host memory, down to the NICs).
        topo, x16 = TOPOLOGIES["dgx_a100_like"], pcie.pcie_gbps(4, 16) * 1e9
        pl = {f"gpu{i}": [f"nic{i}"] for i in range(8)}
        total = 8 * 1e11  # 100 GB per GPU
        kw = {"total_bytes": total, "placement": pl, "op": "save"}
        calls = [((), kw | {"gds": True}), ((), kw | {"gds": False})]
        direct, bounced = many(world, "gds", "checkpoint_seconds", topo, calls)
        close(direct, 1e11 / 25e9, "GDS: each GPU's 100 GB through its own 25 GB/s NIC")
        close(bounced, 2 * (2e11 / x16), "no GDS: 200 GB up the shared uplink, then 200 GB down it")

    @pytest.mark.concept("unknown_op")
    def test_unknown_op_is_an_error(self, world: World) -> None:
        inputs = {
            "module": "gds",
            "function": "checkpoint_seconds",
            "topology": TOPOLOGIES["workstation"].to_dict(),
            "kwargs": {"total_bytes": 1.0, "placement": {"gpu0": ["nvme0"]}, "gds": True, "op": "load"},
        }
        [res] = world.run("rank_programs:raises", inputs=inputs)
        assert res.value == "ValueError", (
            f"checkpoint_seconds(op='load') should raise ValueError, got {res.value}"
        )


# ------------------------------------------------------------------------------------------------------------
# 05.staging: one test per question, grouped by the concept the question asks about. Sources are in
# solutions/05_gpudirect/copies.py next to each answer.

STAGING_KEY = {
    "pageable_slower": "c",
    "d2h_pageable": "a",
    "non_blocking_pageable": "d",
    "pin_then_copy": "b",
    "pin_everything": "c",
}
STAGING_GROUPS = {
    "staging_copy": ["pageable_slower", "d2h_pageable"],
    "pageable_not_async": ["non_blocking_pageable"],
    "pinning_cost": ["pin_then_copy", "pin_everything"],
}
assert sorted(q for qs in STAGING_GROUPS.values() for q in qs) == sorted(STAGING_KEY)


def check_staging(world: World, question: str) -> None:
    [res] = world.call("copies", "staging_answers", args=[()])
    got = res.returned
    if not isinstance(got, dict):
        raise AssertionError(f"staging_answers() must return a dict, got {type(got).__name__}")
    assert question in got, f"no answer to {question!r}"
    assert got[question] == STAGING_KEY[question], f"{question}: {got[question]!r} is not the right choice"


@pytest.mark.part("05.staging")
class TestStaging:
    @pytest.mark.concept("staging_copy")
    @pytest.mark.parametrize("question", STAGING_GROUPS["staging_copy"])
    def test_staging_copy(self, world: World, question: str) -> None:
        check_staging(world, question)

    @pytest.mark.concept("pageable_not_async")
    @pytest.mark.parametrize("question", STAGING_GROUPS["pageable_not_async"])
    def test_pageable_not_async(self, world: World, question: str) -> None:
        check_staging(world, question)

    @pytest.mark.concept("pinning_cost")
    @pytest.mark.parametrize("question", STAGING_GROUPS["pinning_cost"])
    def test_pinning_cost(self, world: World, question: str) -> None:
        check_staging(world, question)


# ------------------------------------------------------------------------------------------------------------
# 05.host_copies, on one GPU: every timing is judged against the judge's own measurement of the same copies,
# taken in the same rank process and interleaved with the student's (rank_programs.py: the host's wall clock
# around a blocking copy_ and torch.cuda.synchronize(), median of several). Only ratios of such paired
# figures are graded, never an absolute GB/s or ms, and each only after the copies delivered the right bytes.
#
# Thresholds, and why a correct solution meets them on any GPU: the student's time_copy and the judge's clock
# time the SAME copy on the SAME buffers, so they agree to a few percent (a GPU event pair and a host clock
# around a synchronized copy differ by launch overhead, microseconds against milliseconds); a factor of 2 is
# left for noise. copy_bandwidth uses the student's own buffers, so its seconds get 2.5. The pinned/pageable
# ratio of two medians is judged within a factor of 2 of the judge's ratio. Pinned must beat pageable by 1.2x
# only where the judge's own ratio is at least 1.6 (expected 2-5x on a PCIe GPU, pinned DMA near the link's
# rate, pageable held to a CPU memcpy through the staging buffer; not yet measured on the course's GPU, see
# docs/gpu.md); on a machine whose own measurement shows no clear advantage (a coherent CPU-GPU link, say)
# only the agreement of the ratios is judged.
# A timing check that misses is measured once more (ATTEMPTS); a bug misses every time.

TIME_FACTOR = 2.0
SECONDS_FACTOR = 2.5
RATIO_FACTOR = 2.0
CLEAR_ADVANTAGE = 1.6
MARGIN = 1.2
ATTEMPTS = 2
UNIT_REL = 1e-6  # gbps * seconds * 1e9 == nbytes: only float rounding may differ
DIRECTIONS = ("h2d", "d2h")
KINDS = ("pageable", "pinned")


def bytes_problems(gate: dict[str, Any]) -> list[str]:
    """The copies of the correctness gate (rank_programs._bytes_check) that did not deliver the bytes."""
    problems = []
    for case, got in gate.items():
        if not isinstance(got["seconds"], float) or not got["seconds"] > 0:
            problems.append(
                f"time_copy ({case}) must return positive seconds as a float, got {got['seconds']}"
            )
        if not got["ok"]:
            problems.append(
                f"time_copy ({case}): the destination did not hold the source's bytes when it returned "
                "(a copy still in flight, or on another stream nobody waited for?)"
            )
    return problems


def median_figures(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per direction and kind, the median seconds and gbps over the runs."""
    return {
        d: {
            k: {key: statistics.median(run[d][k][key] for run in runs) for key in ("seconds", "gbps")}
            for k in KINDS
        }
        for d in DIRECTIONS
    }


def pinned_ratios(figures: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """Per direction, pinned bandwidth over pageable bandwidth."""
    return {d: figures[d]["pinned"]["gbps"] / figures[d]["pageable"]["gbps"] for d in DIRECTIONS}


def shape_problems(student: list[Any]) -> list[str]:
    """The rank program's word on figures that are not {direction: {kind: {seconds, gbps}}} (a str)."""
    return sorted({run for run in student if isinstance(run, str)})


def ratio_problems(student: list[Any], judge: list[Any], factor: float = RATIO_FACTOR) -> list[str]:
    """Directions whose student pinned/pageable ratio is not within ``factor`` of the judge's."""
    mine, ours = pinned_ratios(median_figures(student)), pinned_ratios(median_figures(judge))
    return [
        f"{d}: your pinned/pageable bandwidth ratio is {mine[d]:.2f}, the judge measured {ours[d]:.2f} "
        f"on the same GPU in the same run (must agree within a factor of {factor:g})"
        for d in DIRECTIONS
        if not ours[d] / factor <= mine[d] <= ours[d] * factor
    ]


def margin_problems(student: list[Any], judge: list[Any]) -> list[str]:
    """Where the judge's own ratio shows pinned clearly ahead (>= CLEAR_ADVANTAGE), the student's pinned must
    beat pageable by at least MARGIN. A direction without a clear advantage on this machine is not judged."""
    mine, ours = pinned_ratios(median_figures(student)), pinned_ratios(median_figures(judge))
    return [
        f"{d}: pinned must beat pageable by {MARGIN:g}x or more here (the judge measured {ours[d]:.2f}x), "
        f"your figures give {mine[d]:.2f}x"
        for d in DIRECTIONS
        if ours[d] >= CLEAR_ADVANTAGE and mine[d] < MARGIN
    ]


def unit_problems(student: list[Any], nbytes: int) -> list[str]:
    """Figures whose gbps is not nbytes / seconds / 1e9 (GB/s with GB = 1e9 bytes, for one copy)."""
    problems = []
    for run in student:
        for d in DIRECTIONS:
            for k in KINDS:
                fig = run[d][k]
                got, want = fig["gbps"], nbytes / fig["seconds"] / 1e9
                if not math.isclose(got, want, rel_tol=UNIT_REL):
                    problems.append(
                        f"{d}/{k}: gbps {got:.6g} is not {nbytes} bytes / {fig['seconds']:.6g} s in GB/s "
                        f"(GB = 1e9 bytes) = {want:.6g} ({got / want:.4g}x)"
                    )
    return problems[:4]


def seconds_problems(student: list[Any], judge: list[Any], factor: float = SECONDS_FACTOR) -> list[str]:
    """Figures whose median seconds is not within ``factor`` of the judge's for the same copy."""
    mine, ours = median_figures(student), median_figures(judge)
    return [
        f"{d}/{k}: {mine[d][k]['seconds']:.4g} s per copy, the judge measured {ours[d][k]['seconds']:.4g} s "
        f"for the same copy (must agree within a factor of {factor:g}: seconds of ONE copy)"
        for d in DIRECTIONS
        for k in KINDS
        if not ours[d][k]["seconds"] / factor <= mine[d][k]["seconds"] <= ours[d][k]["seconds"] * factor
    ]


def time_problems(paired: dict[str, Any], factor: float = TIME_FACTOR) -> list[str]:
    """Cases where time_copy's median is not within ``factor`` of the judge's clock on the same buffers."""
    problems = []
    for case, times in paired.items():
        if case == "bytes":
            continue
        bad = [t for t in times["student"] if not isinstance(t, float) or not t > 0]
        if bad:
            problems.append(f"time_copy ({case}) must return positive seconds as a float, got {bad[0]}")
            continue
        mine, ours = statistics.median(times["student"]), statistics.median(times["judge"])
        if not ours / factor <= mine <= ours * factor:
            problems.append(
                f"time_copy ({case}): {mine:.4g} s per copy, the judge's clock {ours:.4g} s on the same "
                f"buffers (must agree within a factor of {factor:g}; {mine / ours:.3g}x)"
            )
    return problems


def paired(world: World, program: str, **inputs: Any) -> dict[str, Any]:
    [res] = world.run(f"rank_programs:{program}", inputs=inputs)
    return res.value


def gated(result: dict[str, Any]) -> None:
    """Fail on the correctness gate and on malformed figures before any timing is judged."""
    problems = bytes_problems(result["bytes"]) + shape_problems(result.get("student", []))
    assert not problems, "; ".join(problems)


def judged_bandwidth(world: World, check, *, nbytes: int, repeats: int, rounds: int) -> None:
    """Measure paired, gate, and run ``check(student, judge)``; a miss is measured again, ATTEMPTS in all."""
    misses: list[str] = []
    for _ in range(ATTEMPTS):
        result = paired(world, "paired_bandwidth", nbytes=nbytes, repeats=repeats, rounds=rounds)
        gated(result)
        problems = check(result["student"], result["judge"])
        if not problems:
            return
        misses = problems
    raise AssertionError(f"in each of {ATTEMPTS} measurements: " + "; ".join(misses))


@pytest.mark.part("05.host_copies")
class TestHostCopies:
    @pytest.mark.concept("pinned_buffer")
    def test_host_buffer_odd_sizes(self, world: World) -> None:
        sizes = [1, 4097, (3 << 20) + 5]
        for fact in paired(world, "host_buffer_facts", sizes=sizes):
            what = f"host_buffer({fact['nbytes']}, pinned={fact['pinned']})"
            assert fact["type"] == "Tensor", f"{what} must return a torch.Tensor, got {fact['type']}"
            assert (fact["dtype"], fact["shape"], fact["device"]) == (
                "torch.uint8",
                [fact["nbytes"]],
                "cpu",
            ), (
                f"{what}: a 1-D torch.uint8 tensor of {fact['nbytes']} bytes on the CPU, got {fact['dtype']} "
                f"{fact['shape']} on {fact['device']}"
            )
            assert fact["is_pinned"] == fact["pinned"], (
                f"{what}.is_pinned() is {fact['is_pinned']}: page-locked exactly when pinned=True"
            )

    @pytest.mark.concept("copy_timing")
    def test_time_copy_delivers_odd_sized_random_bytes(self, world: World) -> None:
        gate = paired(world, "copies_move_bytes", nbytes=(5 << 20) + 7, seed=20260405, repeats=3)
        problems = bytes_problems(gate)
        assert not problems, "; ".join(problems)

    @pytest.mark.concept("copy_timing")
    def test_time_copy_agrees_with_the_judges_clock(self, world: World) -> None:
        misses: list[str] = []
        for _ in range(ATTEMPTS):
            result = paired(world, "paired_time_copy", nbytes=128 << 20, repeats=3, rounds=3)
            gated(result)
            misses = time_problems(result)
            if not misses:
                return
        raise AssertionError(f"in each of {ATTEMPTS} measurements: " + "; ".join(misses))

    @pytest.mark.concept("pinned_speedup")
    def test_ratio_agrees_with_the_judge_at_256_mib(self, world: World) -> None:
        judged_bandwidth(world, ratio_problems, nbytes=256 << 20, repeats=5, rounds=3)

    @pytest.mark.concept("pinned_speedup")
    def test_pinned_wins_by_a_margin(self, world: World) -> None:
        # a machine whose own measurement shows no clear advantage leaves only the agreement of the ratios
        # (the test above) to grade this concept: a student is not marked down for the hardware
        judged_bandwidth(world, margin_problems, nbytes=(160 << 20) + 4096, repeats=3, rounds=2)

    @pytest.mark.concept("bandwidth_units")
    def test_gb_per_second_of_one_copy(self, world: World) -> None:
        nbytes = (48 << 20) + 1000
        judged_bandwidth(
            world,
            lambda mine, ours: unit_problems(mine, nbytes) + seconds_problems(mine, ours),
            nbytes=nbytes,
            repeats=3,
            rounds=2,
        )
