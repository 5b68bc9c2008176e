"""What this catches: fabric sizing that does not match the fat-tree arithmetic or NVIDIA's SuperPOD tables.

- fat_tree: k^2 instead of k^2/2 (a leaf has only k/2 ports down), k^3/8 or k^3/2 instead of k^3/4, the
  core switches forgotten in 5k^2/4, floats where counts are integers.
- sizing: floor where ceil is needed (a partly filled leaf is still a leaf), as many spines as leaves in 2
  tiers, the wrong tier chosen at k^2/2 and k^3/4, cables counted without the switch-to-switch links; checked
  against every row of the DGX SuperPOD B200 scaling table.
- rails: one leaf per rail for the whole cluster (radix ignored), PXN that moves data over NVLink but not to
  the destination's rail, a ring that is not closed.
- nics: Gb/s taken for GB/s, NVLink's bidirectional headline against a per-direction NIC rate, one NIC
  per node, and PCIe's bidirectional figure taken as the slot's rate.
Beside the published tables, every concept is also checked on fabrics, rings and nodes drawn here from fixed
seeds (radixes, endpoint counts, node sizes, NIC counts and rates), so code that only knows the shipped
examples loses it.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from grader.harness import RankFailure, World

NODES = ("dgx_h100", "dgx_b200", "gb200_nvl72", "rtx4090_pcie_4x", "rtx4090_pcie_8x")


def rng(seed: int) -> random.Random:
    """The judge's own draws: fixed seeds, so the reference is stable and every run grades the same cases."""
    return random.Random(1700 + seed)


def call(world: World, function: str, *args: Any) -> Any:
    """`fabric.function(*args)` on the one rank of this world."""
    [res] = world.call("fabric", function, args=[args])
    return res.returned


def own_pxn_path(world: World, src: list[int], dst: list[int], g: int, k: int) -> list[str]:
    """PXN's path judged on the student's own non-PXN paths (rail_locality's to grade), so that a leaf
    numbering slip costs that concept and not this one: the same node is ["nvlink"]; another rail first
    crosses NVLink to the GPU on dst's rail, then goes as that GPU's path goes."""
    if src[0] == dst[0]:
        return ["nvlink"]
    if src[1] == dst[1]:
        return call(world, "path", src, dst, g, k, False)
    rest = call(world, "path", [src[0], dst[1]], dst, g, k, False)
    return ["nvlink", *rest] if isinstance(rest, list) else rest


def own_crossings(world: World, ring: list[list[int]], g: int, k: int, pxn: bool) -> int:
    """The ring's hops (the last back to the first) whose path, as the student's own path gives it, crosses
    a spine: the count judged on the student's paths, which rail_locality and pxn grade."""
    hops = zip(ring, ring[1:] + ring[:1], strict=True)
    return sum("spine" in call(world, "path", src, dst, g, k, pxn) for src, dst in hops)


def integer(got: Any, expected: int, what: str) -> None:
    assert type(got) is int, f"{what}: expected an int, got {type(got).__name__} {got!r}"
    assert got == expected, f"{what}: got {got}, expected {expected}"


def check(got: Any, expected: float, *, what: str, rel: float = 1e-9) -> None:
    """`got` within `rel` of `expected`; 1e-9 for closed forms (float rounding only). Names common slips."""
    if type(got) not in (int, float):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if math.isclose(got, expected, rel_tol=rel):
        return
    hint = ""
    if expected and got:
        ratio = got / expected
        if math.isclose(ratio, 8) or math.isclose(ratio, 1 / 8):
            hint = " (8x off: bits and bytes mixed up?)"
        elif math.isclose(ratio, 2) or math.isclose(ratio, 0.5):
            hint = " (2x off: per-direction and bidirectional mixed up?)"
    raise AssertionError(f"{what}: got {got!r}, expected {expected!r}{hint}")


# ------------------------------------------------------------------------------------------------------------
# 17.fat_tree


# ground-truth.md Appendix A: radix 32 -> 512 / 8192 hosts, 1280 switches; radix 40 -> 800 /
# 16000, 2000; radix 64 -> 2048 / 65536, 5120; radix 128 -> 8192 / 524288, 20480.
# Al-Fares §3: k = 4 -> 16 hosts, 20 switches
PUBLISHED = {32: (512, 8192, 1280), 40: (800, 16000, 2000), 64: (2048, 65536, 5120), 4: (8, 16, 20)}
PUBLISHED[128] = (8192, 524288, 20480)


@pytest.mark.part("17.fat_tree")
class TestFatTree:
    RADIXES = (4, 8, 16, 32, 36, 40, 48, 64, 128, 144)

    @pytest.mark.concept("host_capacity")
    def test_two_tier(self, world: World) -> None:
        for k in self.RADIXES:
            integer(call(world, "two_tier_hosts", k), k * k // 2, f"two_tier_hosts({k})")

    @pytest.mark.concept("host_capacity")
    def test_three_tier(self, world: World) -> None:
        for k in self.RADIXES:
            integer(call(world, "three_tier_hosts", k), k**3 // 4, f"three_tier_hosts({k})")

    @pytest.mark.concept("core_tier")
    def test_three_tier_switches(self, world: World) -> None:
        for k in self.RADIXES:
            integer(call(world, "three_tier_switches", k), 5 * k * k // 4, f"three_tier_switches({k})")

    @pytest.mark.concept("host_capacity")
    def test_drawn_radixes(self, world: World, reference) -> None:
        ref, r = reference("fabric"), rng(1)
        for k in (6, 10, 14, *(2 * r.randint(3, 150) for _ in range(4))):
            integer(call(world, "two_tier_hosts", k), ref.two_tier_hosts(k), f"two_tier_hosts({k})")
            integer(call(world, "three_tier_hosts", k), ref.three_tier_hosts(k), f"three_tier_hosts({k})")

    @pytest.mark.concept("core_tier")
    def test_drawn_radix_switches(self, world: World, reference) -> None:
        ref, r = reference("fabric"), rng(2)
        for k in (6, 10, *(2 * r.randint(3, 150) for _ in range(4))):
            got = call(world, "three_tier_switches", k)
            integer(got, ref.three_tier_switches(k), f"three_tier_switches({k})")

    @pytest.mark.concept("host_capacity")
    def test_published_hosts(self, world: World) -> None:
        for k, (two, three, _) in PUBLISHED.items():
            integer(call(world, "two_tier_hosts", k), two, f"two_tier_hosts({k})")
            integer(call(world, "three_tier_hosts", k), three, f"three_tier_hosts({k})")

    @pytest.mark.concept("core_tier")
    def test_published_switches(self, world: World) -> None:
        for k, (_, _, switches) in PUBLISHED.items():
            integer(call(world, "three_tier_switches", k), switches, f"three_tier_switches({k})")


# ------------------------------------------------------------------------------------------------------------
# 17.sizing


def size(world: World, n: int, k: int) -> dict[str, Any]:
    got = call(world, "fabric_size", n, k)
    keys = {"tiers", "leaves", "spines", "cores", "switches", "cables"}
    if not isinstance(got, dict) or set(got) != keys:
        raise AssertionError(
            f"fabric_size({n}, {k}) must return a dict with keys {sorted(keys)}, got {got!r}"
        )
    return got


@pytest.mark.part("17.sizing")
class TestSizing:
    @pytest.mark.concept("tier_sizing")
    def test_superpod_b200_table(self, world: World) -> None:
        # docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-b200, scaling table
        # (ground-truth.md §7.2): SUs of 32 DGX B200 (256 GPUs, one 400 Gb/s NIC each), QM9700 radix 64
        table = {2: (16, 8, 0), 4: (32, 16, 0), 8: (64, 32, 0), 16: (128, 128, 64), 32: (256, 256, 128)}
        table[64] = (512, 512, 256)
        for units, (leaves, spines, cores) in table.items():
            got = size(world, units * 256, 64)
            want = {"leaves": leaves, "spines": spines, "cores": cores}
            assert {key: got[key] for key in want} == want, f"{units} SUs ({units * 256} GPUs): got {got}"
            assert got["tiers"] == (2 if cores == 0 else 3), f"{units} SUs: tiers {got['tiers']}"

    @pytest.mark.concept("tier_sizing")
    def test_h100_superpod_switches(self, world: World) -> None:
        # scaling book gpus.md: 1024 H100s, 32 leaves, 16 spines
        got = size(world, 1024, 64)
        assert (got["leaves"], got["spines"], got["switches"]) == (32, 16, 48), f"1024 GPUs: got {got}"

    @pytest.mark.concept("cable_count")
    def test_h100_superpod_cables(self, world: World) -> None:
        # scaling book gpus.md: 1024 H100s; "8 * 16 * 2" leaf-spine cables per SU, plus one per GPU
        got = size(world, 1024, 64)
        assert got["cables"] == 1024 + 4 * 8 * 16 * 2, f"1024 GPUs: cables {got['cables']}"

    @pytest.mark.concept("tier_sizing")
    def test_full_al_fares(self, world: World) -> None:
        got = size(world, 65536, 64)
        assert (got["tiers"], got["switches"]) == (3, 5120), f"65,536 endpoints on radix 64: got {got}"

    @pytest.mark.concept("cable_count")
    def test_full_al_fares_cables(self, world: World) -> None:
        got = size(world, 65536, 64)
        assert got["cables"] == 3 * 65536, f"a full k-ary fat tree has k^3/4 links per layer: {got}"

    CASES = (1, 7, 16, 17, 40, 41, 64, 65, 100, 799, 800, 801, 1000, 2047, 2048, 2049, 5000, 16000, 65536)

    def _against_reference(self, world: World, reference, keys: tuple[str, ...]) -> None:
        ref = reference("fabric")
        for k in (16, 40, 64):
            for n in self.CASES:
                if n > k**3 // 4:
                    continue
                got, expected = size(world, n, k), ref.fabric_size(n, k)
                got, expected = {x: got[x] for x in keys}, {x: expected[x] for x in keys}
                assert got == expected, f"fabric_size({n}, {k}): got {got}, expected {expected}"

    @pytest.mark.concept("tier_sizing")
    def test_matches_reference(self, world: World, reference) -> None:
        self._against_reference(world, reference, ("tiers", "leaves", "spines", "cores", "switches"))

    @pytest.mark.concept("cable_count")
    def test_cables_match_reference(self, world: World, reference) -> None:
        self._against_reference(world, reference, ("cables",))

    def _drawn(self, world: World, reference, keys: tuple[str, ...], seed: int) -> None:
        # fabrics the README never sized: radixes from 6 to 160, endpoint counts in every tier's range
        ref, r = reference("fabric"), rng(seed)
        for _ in range(10):
            k = 2 * r.randint(3, 80)
            tier_top = r.choice([k, k * k // 2, k**3 // 4])
            n = r.randint(1, tier_top)
            got, expected = size(world, n, k), ref.fabric_size(n, k)
            got, expected = {x: got[x] for x in keys}, {x: expected[x] for x in keys}
            assert got == expected, f"fabric_size({n}, {k}): got {got}, expected {expected}"

    @pytest.mark.concept("tier_sizing")
    def test_drawn_fabrics(self, world: World, reference) -> None:
        self._drawn(world, reference, ("tiers", "leaves", "spines", "cores", "switches"), 3)

    @pytest.mark.concept("cable_count")
    def test_drawn_fabric_cables(self, world: World, reference) -> None:
        self._drawn(world, reference, ("cables",), 4)

    @pytest.mark.concept("capacity_limit")
    def test_drawn_too_big(self, world: World) -> None:
        r = rng(5)
        for k in (10, 2 * r.randint(3, 60)):
            n = k**3 // 4 + r.randint(1, 1000)
            try:
                sized = call(world, "fabric_size", n, k)
            except RankFailure as raised:
                assert "ValueError" in str(raised), f"fabric_size({n}, {k}) raised, but not a ValueError"
            else:
                raise AssertionError(f"fabric_size({n}, {k}) returned {sized!r}: more than 3 tiers can hold")

    @pytest.mark.concept("capacity_limit")
    def test_too_big(self, world: World) -> None:
        try:
            sized = call(world, "fabric_size", 65537, 64)
        except RankFailure as raised:
            assert "ValueError" in str(raised), (
                f"fabric_size(65537, 64) raised, but not a ValueError: {raised}"
            )
        else:
            raise AssertionError(
                f"fabric_size(65537, 64) returned {sized!r}: no three-tier radix-64 fat tree holds 65537 "
                "endpoints, so it must raise ValueError"
            )


# ------------------------------------------------------------------------------------------------------------
# 17.rails


@pytest.mark.part("17.rails")
class TestRails:
    @pytest.mark.concept("rail_locality")
    def test_leaf_of(self, world: World) -> None:
        for k, g in ((64, 8), (16, 4), (40, 8)):
            for node in (0, 1, k // 2 - 1, k // 2, 3 * k // 2 + 5):
                for gpu in range(g):
                    expected = (node // (k // 2)) * g + gpu
                    integer(
                        call(world, "leaf_of", node, gpu, g, k), expected, f"leaf_of({node}, {gpu}, {g}, {k})"
                    )

    @pytest.mark.concept("rail_locality")
    def test_drawn_leaves(self, world: World, reference) -> None:
        ref, r = reference("fabric"), rng(6)
        for _ in range(8):
            k, g = 2 * r.randint(2, 72), r.choice([1, 2, 4, 5, 6, 7, 8])
            node, gpu = r.randint(0, 5 * k), r.randrange(g)
            got = call(world, "leaf_of", node, gpu, g, k)
            integer(got, ref.leaf_of(node, gpu, g, k), f"leaf_of({node}, {gpu}, {g}, {k})")

    def _drawn_paths(self, world: World, reference, pxn: bool, seed: int) -> None:
        ref, r = reference("fabric"), rng(seed)
        for _ in range(10):
            k, g = r.choice([8, 12, 16, 40, 64]), r.choice([2, 4, 6, 8])
            unit = k // 2
            src = [r.randrange(3 * unit), r.randrange(g)]
            dst = [r.choice([src[0], r.randrange(3 * unit), src[0] + 1]), r.choice([src[1], r.randrange(g)])]
            got = call(world, "path", src, dst, g, k, pxn)
            expected = own_pxn_path(world, src, dst, g, k) if pxn else ref.path(src, dst, g, k)
            assert got == expected, f"path({src}, {dst}, {g}, {k}, pxn={pxn}): got {got}, expected {expected}"

    @pytest.mark.concept("rail_locality")
    def test_drawn_paths(self, world: World, reference) -> None:
        self._drawn_paths(world, reference, False, 7)

    @pytest.mark.concept("pxn")
    def test_drawn_pxn_paths(self, world: World, reference) -> None:
        self._drawn_paths(world, reference, True, 8)

    @pytest.mark.concept("ring_crossings")
    def test_drawn_rings(self, world: World) -> None:
        r = rng(9)
        for _ in range(4):
            k, g = r.choice([8, 16, 40]), r.choice([4, 6, 8])
            ring = [[r.randrange(2 * k), r.randrange(g)] for _ in range(r.randint(2, 24))]
            for pxn in (False, True):
                got = call(world, "ring_spine_crossings", ring, g, k, pxn)
                expected = own_crossings(world, ring, g, k, pxn)
                assert got == expected, f"ring_spine_crossings({ring}, {g}, {k}, {pxn}): got {got}"

    def _paths(self, world: World, reference, pxn: bool) -> None:
        ref = reference("fabric")
        gpus = [[0, 0], [0, 3], [1, 3], [1, 5], [31, 3], [32, 3], [40, 7], [63, 0]]
        for src in gpus:
            for dst in gpus:
                if src == dst:
                    continue
                got = call(world, "path", src, dst, 8, 64, pxn)
                expected = own_pxn_path(world, src, dst, 8, 64) if pxn else ref.path(src, dst, 8, 64)
                assert got == expected, (
                    f"path({src}, {dst}, 8, 64, pxn={pxn}): got {got}, expected {expected}"
                )

    @pytest.mark.concept("rail_locality")
    def test_paths_match_reference(self, world: World, reference) -> None:
        self._paths(world, reference, pxn=False)

    @pytest.mark.concept("pxn")
    def test_pxn_paths_match_reference(self, world: World, reference) -> None:
        self._paths(world, reference, pxn=True)

    @pytest.mark.concept("pxn")
    def test_pxn_published_idea(self, world: World) -> None:
        # Juniper JVD "Rail Optimized Fabric", NCCL PXN: cross-rail traffic moves over NVLink to a GPU on the
        # destination rail first, so it stays off the spines
        for src, dst, what in (([0, 3], [5, 4], "same unit"), ([0, 3], [40, 4], "other unit")):
            want = own_pxn_path(world, src, dst, 8, 64)
            assert call(world, "path", src, dst, 8, 64, True) == want, f"PXN, {what}: expected {want}"
        assert call(world, "path", [2, 1], [2, 6], 8, 64, True) == ["nvlink"], "same node"

    @pytest.mark.concept("ring_crossings")
    def test_rings(self, world: World) -> None:
        # Counted on the student's own paths (a leaf slip is rail_locality's): with right leaves, a ring on
        # one rail of one unit crosses no spine, a rail ring over two units 2 (it closes back), a ring that
        # changes rail every hop 32, and the same ring with PXN none.
        dp_rail = [[n, 0] for n in range(32)]  # GPU 0 of 32 nodes in one unit: the DP ring of TP=8 jobs
        two_units = [[n, 2] for n in range(64)]  # closes back from node 63 to node 0
        zigzag = [[n, n % 8] for n in range(32)]  # every hop changes rail
        for ring, pxn, what in (
            (dp_rail, False, "a ring on one rail of one unit"),
            (two_units, False, "a rail ring over two units"),
            (zigzag, False, "a ring that changes rail every hop"),
            (zigzag, True, "the same ring with PXN"),
        ):
            want = own_crossings(world, ring, 8, 64, pxn)
            assert call(world, "ring_spine_crossings", ring, 8, 64, pxn) == want, f"{what}: expected {want}"

    @pytest.mark.concept("ring_crossings")
    def test_rings_own_paths(self, world: World) -> None:
        rings = [
            [[n, (3 * n) % 4] for n in range(20)],
            [[n // 4, n % 4] for n in range(40)],
            [[5, 1], [9, 1]],
        ]
        for ring in rings:
            for pxn in (False, True):
                got, expected = (
                    call(world, "ring_spine_crossings", ring, 4, 16, pxn),
                    own_crossings(world, ring, 4, 16, pxn),
                )
                assert got == expected, (
                    f"ring_spine_crossings({ring}, 4, 16, {pxn}): got {got}, expected {expected}"
                )


# ------------------------------------------------------------------------------------------------------------
# 17.nics


@pytest.mark.part("17.nics")
class TestNICs:
    @pytest.mark.concept("injection_share")
    def test_injection(self, world: World, reference) -> None:
        ref = reference("fabric")
        for node in NODES:
            check(
                call(world, "per_gpu_injection_gb_s", node),
                ref.per_gpu_injection_gb_s(node),
                what=f"per_gpu_injection_gb_s({node!r})",
            )
        # scaling book gpus.md: NVL72 rack egress 4 x 18 x 400 / 8 = 3.6 TB/s over 72 GPUs = 50 GB/s each
        check(call(world, "per_gpu_injection_gb_s", "gb200_nvl72"), 50, what="NVL72 per-GPU injection")
        check(
            call(world, "per_gpu_injection_gb_s", "rtx4090_pcie_8x"), 100 / 8 / 8, what="8x4090, one 100GbE"
        )

    @pytest.mark.concept("nvlink_gap")
    def test_ratio(self, world: World) -> None:
        # per direction: H100 450 / 50 = 9; B200 900 / 50 = 18 (scaling book gpus.md, node table)
        for node, ratio in (("dgx_h100", 9), ("dgx_b200", 18), ("gb200_nvl72", 18)):
            check(
                call(world, "nvlink_to_network_ratio", node), ratio, what=f"nvlink_to_network_ratio({node!r})"
            )

    @pytest.mark.concept("injection_share")
    def test_nics_for_target(self, world: World) -> None:
        cases = {(8, 50.0, 400.0): 8, (8, 450.0, 400.0): 72, (8, 50.0, 800.0): 4, (72, 50.0, 400.0): 72}
        cases |= {(4, 12.5, 200.0): 2, (8, 10.0, 100.0): 7, (1, 0.1, 400.0): 1}
        for args, expected in cases.items():
            integer(call(world, "nics_for_target", *args), expected, f"nics_for_target{args}")

    @pytest.mark.concept("injection_share")
    def test_drawn_nic_targets(self, world: World, reference) -> None:
        ref, r = reference("fabric"), rng(10)
        for _ in range(8):
            args = (
                r.randint(1, 72),
                r.choice([6.25, 12.5, 25.0, 37.5, 50.0, 100.0, 200.0]),
                r.choice([100.0, 200.0, 400.0, 800.0]),
            )
            integer(
                call(world, "nics_for_target", *args), ref.nics_for_target(*args), f"nics_for_target{args}"
            )

    @pytest.mark.concept("node_egress")
    def test_drawn_internode(self, world: World, reference) -> None:
        ref, r = reference("fabric"), rng(11)
        for _ in range(8):
            args = (
                r.uniform(1e5, 3e10),
                r.randint(2, 300),
                r.randint(1, 16),
                r.choice([100.0, 200.0, 400.0, 800.0]),
            )
            check(
                call(world, "internode_allreduce_time_s", *args),
                ref.internode_allreduce_time_s(*args),
                what=f"internode_allreduce_time_s{args}",
            )

    @pytest.mark.concept("pcie_slot")
    def test_drawn_slots(self, world: World, reference) -> None:
        ref, r = reference("fabric"), rng(12)
        for _ in range(8):
            args = (
                r.choice([25.0, 50.0, 100.0, 200.0, 400.0, 800.0]),
                r.choice(["gen3", "gen4", "gen5"]),
                r.choice([1, 2, 4, 8, 16]),
            )
            got = call(world, "nic_fits_pcie", *args)
            assert got is ref.nic_fits_pcie(*args), f"nic_fits_pcie{args}: got {got!r}"

    @pytest.mark.concept("node_egress")
    def test_internode_allreduce(self, world: World, reference) -> None:
        ref = reference("fabric")
        for nbytes in (1 << 20, 1e9, 16.06e9):
            for nodes in (2, 4, 16, 128):
                for nics, gbit in ((8, 400.0), (1, 400.0), (4, 800.0), (1, 100.0)):
                    args = (nbytes, nodes, nics, gbit)
                    check(
                        call(world, "internode_allreduce_time_s", *args),
                        ref.internode_allreduce_time_s(*args),
                        what=f"internode_allreduce_time_s{args}",
                    )
        # 1 GB over 16 DGX H100: 2(15/16) x 1 GB / 400 GB/s = 4.69 ms with 8 NICs, 37.5 ms with one
        check(
            call(world, "internode_allreduce_time_s", 1e9, 16, 8, 400.0), 1.875 / 400, what="16 nodes, 8 NICs"
        )
        check(
            call(world, "internode_allreduce_time_s", 1e9, 16, 1, 400.0), 1.875 / 50, what="16 nodes, 1 NIC"
        )

    @pytest.mark.concept("pcie_slot")
    def test_nic_fits_pcie(self, world: World) -> None:
        # x16 per direction: Gen3 15.75, Gen4 31.5, Gen5 63.0 GB/s (128b/130b; ground-truth.md §7.1)
        cases = {(400.0, "gen5", 16): True, (400.0, "gen4", 16): False, (200.0, "gen4", 16): True}
        cases |= {(800.0, "gen5", 16): False, (100.0, "gen3", 16): True, (400.0, "gen5", 8): False}
        cases |= {(200.0, "gen5", 8): True, (200.0, "gen5", 4): False, (200.0, "gen3", 16): False}
        for (gbit, gen, lanes), expected in cases.items():
            got = call(world, "nic_fits_pcie", gbit, gen, lanes)
            assert got is expected, (
                f"nic_fits_pcie({gbit}, {gen!r}, lanes={lanes}): got {got!r}, expected {expected}"
            )
