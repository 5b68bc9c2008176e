"""What this catches: NVLink arithmetic that mixes conventions or miscounts an all-reduce.

- bandwidth: NVIDIA's bidirectional headline used as a sending rate (every time off by 2x), a conversion
  the wrong way round, the generation's link count used when fewer links are asked for.
- allreduce: reduce-scatter counted as a whole all-reduce, the (p-1)/p factor dropped, p-1 latencies instead
  of 2(p-1), the full buffer sent across the NICs instead of a 1/g shard, the wrong GPU or domain size.
- bisection: all n GPUs counted on one side of the cut, the two conventions confused.
- tp_domain: "fits" read as tp <= domain (TP=16 in a 72-GPU domain straddles racks), min() where gcd() is
  needed, off-by-one group boundaries, 2 all-reduces per layer instead of Megatron's 4.
Expected values come from the reference, and where one was published, from the publication too (the course
catalogue coursekit/hardware.yml holds the hardware figures with their sources). Beside the catalogue's named
machines, every concept is also checked on clusters drawn here from fixed seeds (domain sizes and counts, link
counts, rates, world sizes, TP degrees, head counts), so code that only knows the shipped examples loses it.
For 16.bandwidth the judge also makes up NVLink generations (per-link figure, link count and convention drawn
from seeds) and adds them to the catalogue the submission reads (exercises/16_nvlink/rank_programs.py), so
neither a table of the published figures nor the catalogue's per-direction `nvlink_gb_s` passes. coursekit
itself holds no conversion (tests/test_coursekit_hardware.py).
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from coursekit.hardware import BIDIRECTIONAL, PER_DIRECTION, load, serving
from grader.harness import World

GB = 1e9
CONVENTIONS = (PER_DIRECTION, BIDIRECTIONAL)
NODES = ("dgx_h100", "dgx_b200", "gb200_nvl72")
SIZES = (8, 1 << 20, 134_217_728, 1e9, 16.06e9)  # bytes: tiny, 1 MiB, one 70B TP message, 1 GB, 8B grads


def rng(seed: int) -> random.Random:
    """The judge's own draws: fixed seeds, so the reference is stable and every run grades the same cases."""
    return random.Random(1600 + seed)


def log_uniform(r: random.Random, lo: float, hi: float) -> float:
    return math.exp(r.uniform(math.log(lo), math.log(hi)))


def call(world: World, function: str, *args: Any) -> Any:
    """`nvlink.function(*args)` on the one rank of this world."""
    [res] = world.call("nvlink", function, args=[args])
    return res.returned


def made_up_generations(seed: int, n: int = 4) -> dict[str, dict[str, dict]]:
    """`n` NVLink generations no datasheet has, each with the GPU that introduced it, as hardware.yml
    entries: per-link figures, link counts and conventions drawn from `seed`."""
    r, added = rng(seed), {"gpus": {}, "nvlink": {}}
    for i in range(n):
        key, gpu = f"nvlink_j{seed}_{i}", f"gpu_j{seed}_{i}"
        links, per_link = r.randint(2, 40), round(r.uniform(4.0, 400.0), 2)
        convention = (PER_DIRECTION, BIDIRECTIONAL)[i % 2] if i < 2 else r.choice(CONVENTIONS)
        one_way = per_link / 2 if convention == BIDIRECTIONAL else per_link
        added["nvlink"][key] = {
            "generation": 6 + i,
            "first_gpu": gpu,
            "links_per_gpu": links,
            "per_link_gb_s": per_link,
            "per_gpu_gb_s": links * per_link,
            "convention": convention,
            "source": "made up by the judge",
        }
        added["gpus"][gpu] = {
            "name": f"judge GPU {seed}.{i}",
            "memory_gb": 96,
            "memory_type": "HBM3",
            "memory_bandwidth_gb_s": 4000,
            "bf16_dense_tflops": 1000,
            "fp16_dense_tflops": 1000,
            "nvlink": key,
            "nvlink_links": links,
            "nvlink_gb_s": links * one_way,
            "pcie": "gen5",
            "source": "made up by the judge",
        }
    return added


def check_unseen(world: World, reference, added: dict, calls: list[list], rel: float = 1e-9) -> None:
    """Each `[function, *args]` of `calls` on the submission and the reference, with `added` in load()."""
    [res] = world.run("rank_programs:call_unseen", inputs={"added": added, "calls": calls})
    ref = reference("nvlink")
    with serving(load().extended(added, origin="judge")):
        expected = [getattr(ref, function)(*args) for function, *args in calls]
    gens = added["nvlink"]
    for (function, *args), got, want in zip(calls, res.value, expected, strict=True):
        gen = next(gens[a] for a in args if isinstance(a, str) and a in gens)
        seen = f"per link {gen['per_link_gb_s']} GB/s {gen['convention']}, {gen['links_per_gpu']} links"
        check(got, want, what=f"{function}{tuple(args)} on a made-up generation ({seen})", rel=rel)


def number(value: Any, what: str) -> float:
    if type(value) not in (int, float):
        raise AssertionError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    return value


def check(got: Any, expected: float, *, what: str, rel: float = 1e-9) -> None:
    """`got` within `rel` of `expected`; 1e-9 for closed forms (float rounding only). Names common slips."""
    number(got, what)
    if math.isclose(got, expected, rel_tol=rel, abs_tol=0.0 if expected else 1e-15):
        return
    hint = ""
    if expected and got:
        ratio = got / expected
        if math.isclose(ratio, 2) or math.isclose(ratio, 0.5):
            hint = (
                " (exactly 2x off: per-direction vs bidirectional, or an all-reduce counted as half of one)"
            )
        elif math.isclose(ratio, 2**30 / 1e9) or math.isclose(ratio, 1e9 / 2**30):
            hint = " (GB is 1e9 bytes here, not 2**30)"
    raise AssertionError(f"{what}: got {got!r}, expected {expected!r}{hint}")


# ------------------------------------------------------------------------------------------------------------
# 16.bandwidth


@pytest.mark.part("16.bandwidth")
class TestBandwidth:
    @pytest.mark.concept("per_direction")
    def test_to_convention(self, world: World) -> None:
        for value in (25.0, 450.0, 1800.0, 3.0):
            for quoted in CONVENTIONS:
                for want in CONVENTIONS:
                    factor = 1 if quoted == want else (2 if want == BIDIRECTIONAL else 0.5)
                    check(
                        call(world, "to_convention", value, quoted, want),
                        value * factor,
                        what=f"to_convention({value}, {quoted!r}, {want!r})",
                    )

    @pytest.mark.concept("per_direction")
    @pytest.mark.parametrize(
        ("generation", "bidirectional"),
        [("nvlink2", 300), ("nvlink3", 600), ("nvlink4", 900), ("nvlink5", 1800)],
    )
    def test_per_gpu_published(self, world: World, generation: str, bidirectional: float) -> None:
        # NVIDIA NVLink page / whitepapers: V100 300, A100 600, H100 900, B200 1800 GB/s, both directions
        # summed; the scaling book's per-direction table halves them (ground-truth.md §7.1)
        got_bi = call(world, "nvlink_gpu_gb_s", generation, BIDIRECTIONAL)
        check(got_bi, bidirectional, what=f"nvlink_gpu_gb_s({generation!r}, 'bidirectional')")
        got_one = call(world, "nvlink_gpu_gb_s", generation, PER_DIRECTION)
        check(got_one, bidirectional / 2, what=f"nvlink_gpu_gb_s({generation!r}, 'per-direction')")

    @pytest.mark.concept("per_direction")
    def test_drawn_conversions(self, world: World) -> None:
        r = rng(4)
        for _ in range(6):
            value, quoted, want = round(log_uniform(r, 0.5, 5e4), 3), *r.sample(CONVENTIONS * 2, 2)
            factor = 1 if quoted == want else (2 if want == BIDIRECTIONAL else 0.5)
            check(
                call(world, "to_convention", value, quoted, want),
                value * factor,
                what=f"to_convention({value}, {quoted!r}, {want!r})",
            )

    @pytest.mark.concept("per_direction")
    def test_made_up_generations(self, world: World, reference) -> None:
        added = made_up_generations(5)
        calls = [["nvlink_gpu_gb_s", key, want] for key in added["nvlink"] for want in CONVENTIONS]
        check_unseen(world, reference, added, calls)

    @pytest.mark.concept("link_count")
    def test_per_link_counts(self, world: World) -> None:
        # Judged against your own one-link figure, so that a convention slip (per_direction's) costs only
        # that concept: n links carry n times one link, and no links argument means all of the GPU's.
        for generation, gen in load().nvlink.items():
            for want in CONVENTIONS:
                one = call(world, "nvlink_gpu_gb_s", generation, want, 1)
                for links in (2, 5, gen.links_per_gpu):
                    check(
                        call(world, "nvlink_gpu_gb_s", generation, want, links),
                        links * number(one, f"nvlink_gpu_gb_s({generation!r}, {want!r}, links=1)"),
                        what=f"nvlink_gpu_gb_s({generation!r}, {want!r}, links={links}): {links} x one link",
                    )
                check(
                    call(world, "nvlink_gpu_gb_s", generation, want),
                    gen.links_per_gpu * one,
                    what=f"nvlink_gpu_gb_s({generation!r}, {want!r}): all {gen.links_per_gpu} links",
                )

    @pytest.mark.concept("per_direction")
    def test_made_up_link_counts(self, world: World, reference) -> None:
        added, r = made_up_generations(6), rng(6)
        calls = [
            ["nvlink_gpu_gb_s", key, r.choice(CONVENTIONS), r.randint(1, gen["links_per_gpu"])]
            for key, gen in added["nvlink"].items()
            for _ in range(2)
        ]
        check_unseen(world, reference, added, calls)

    @pytest.mark.concept("per_direction")
    def test_one_link_per_direction(self, world: World) -> None:
        # scaling book gpus.md: NVLink 4 "25GB/s each way"; NVLink 5 50 GB/s (ground-truth.md §7.1)
        check(call(world, "nvlink_gpu_gb_s", "nvlink4", PER_DIRECTION, 1), 25, what="one NVLink 4 link")
        check(call(world, "nvlink_gpu_gb_s", "nvlink5", PER_DIRECTION, 1), 50, what="one NVLink 5 link")

    @pytest.mark.concept("per_direction")
    def test_p2p_time(self, world: World, reference) -> None:
        ref = reference("nvlink")
        for generation in ("nvlink3", "nvlink4", "nvlink5"):
            for nbytes in SIZES:
                for links in (None, 1, 4):
                    check(
                        call(world, "p2p_time_s", nbytes, generation, links),
                        ref.p2p_time_s(nbytes, generation, links),
                        what=f"p2p_time_s({nbytes}, {generation!r}, links={links})",
                    )
        # 1 GB between two H100s: 1e9 / 450e9 s = 2.22 ms, not the 1.11 ms the 900 GB/s headline suggests
        check(call(world, "p2p_time_s", 1e9, "nvlink4", None), 1 / 450, what="1 GB H100 -> H100")

    @pytest.mark.concept("link_count")
    def test_drawn_link_counts(self, world: World) -> None:
        r, gens = rng(1), sorted(load().nvlink)
        for _ in range(8):
            generation = r.choice(gens)
            links = r.randint(2, load().nvlink[generation].links_per_gpu)
            want = r.choice(CONVENTIONS)
            one = number(call(world, "nvlink_gpu_gb_s", generation, want, 1), "one link")
            check(
                call(world, "nvlink_gpu_gb_s", generation, want, links),
                links * one,
                what=f"nvlink_gpu_gb_s({generation!r}, {want!r}, links={links}): {links} x one link",
            )

    @pytest.mark.concept("per_direction")
    def test_drawn_copies(self, world: World, reference) -> None:
        ref, r, gens = reference("nvlink"), rng(2), sorted(load().nvlink)
        for _ in range(8):
            generation = r.choice(gens)
            links = r.choice([None, r.randint(1, load().nvlink[generation].links_per_gpu)])
            nbytes = round(log_uniform(r, 1e3, 1e11))
            check(
                call(world, "p2p_time_s", nbytes, generation, links),
                ref.p2p_time_s(nbytes, generation, links),
                what=f"p2p_time_s({nbytes}, {generation!r}, links={links})",
            )

    @pytest.mark.concept("per_direction")
    def test_made_up_copies(self, world: World, reference) -> None:
        added, r = made_up_generations(7), rng(7)
        calls = [
            ["p2p_time_s", round(log_uniform(r, 1e3, 1e11)), key, links]
            for key, gen in added["nvlink"].items()
            for links in (None, r.randint(1, gen["links_per_gpu"]))
        ]
        check_unseen(world, reference, added, calls)


# ------------------------------------------------------------------------------------------------------------
# 16.allreduce


@pytest.mark.part("16.allreduce")
class TestAllReduce:
    @pytest.mark.concept("ring_cost")
    def test_ring_matches_reference(self, world: World, reference) -> None:
        ref = reference("nvlink")
        for p in (2, 3, 8, 72):
            for gpu_gb_s in (25.0, 450.0, 900.0):
                for nbytes in (8, 1 << 20, 1e9):
                    check(
                        call(world, "ring_allreduce_time_s", nbytes, p, gpu_gb_s, 0.0),
                        ref.ring_allreduce_time_s(nbytes, p, gpu_gb_s, 0.0),
                        what=f"ring_allreduce_time_s({nbytes}, p={p}, {gpu_gb_s} GB/s, alpha=0)",
                    )

    @pytest.mark.concept("ring_cost")
    def test_ring_closed_form(self, world: World) -> None:
        # nccl-tests doc/PERFORMANCE.md: t = 2(n-1)/n * S/B
        check(call(world, "ring_allreduce_time_s", 1e9, 8, 450.0, 0.0), 1.75 / 450, what="1 GB, 8 GPUs")
        check(call(world, "ring_allreduce_time_s", 1e9, 72, 900.0), 2 * 71 / 72 / 900, what="1 GB, 72 GPUs")
        check(call(world, "ring_allreduce_time_s", 1e9, 1, 450.0, 1e-6), 0.0, what="one GPU")

    @pytest.mark.concept("ring_cost")
    def test_drawn_rings(self, world: World, reference) -> None:
        ref, r = reference("nvlink"), rng(3)
        for p in (5, 6, 7, *(r.randint(2, 600) for _ in range(5))):
            nbytes, gpu_gb_s = log_uniform(r, 1e4, 5e10), r.choice([12.5, 50.0, 150.0, 300.0, 640.0, 1000.0])
            check(
                call(world, "ring_allreduce_time_s", nbytes, p, gpu_gb_s, 0.0),
                ref.ring_allreduce_time_s(nbytes, p, gpu_gb_s, 0.0),
                what=f"ring_allreduce_time_s({nbytes}, p={p}, {gpu_gb_s} GB/s, alpha=0)",
            )

    @pytest.mark.concept("ring_latency")
    def test_ring_latency(self, world: World) -> None:
        # MPICH ring: 2(p-1) latency terms, added to the bandwidth term (judged as the difference alpha makes,
        # so a slip in the bandwidth term does not also cost this concept)
        got = call(world, "ring_allreduce_time_s", 0, 8, 450.0, 1e-6)
        check(got, 14e-6, what="an empty ring all-reduce over 8 GPUs with alpha = 1 us (2(p-1) steps)")
        for p in (2, 3, 8, 72):
            for alpha in (1e-6, 5e-6):
                for nbytes in (8, 1e9):
                    with_alpha = number(call(world, "ring_allreduce_time_s", nbytes, p, 450.0, alpha), "time")
                    without = number(call(world, "ring_allreduce_time_s", nbytes, p, 450.0, 0.0), "time")
                    check(
                        with_alpha - without,
                        2 * (p - 1) * alpha,
                        what=f"latency part of ring_allreduce_time_s({nbytes}, p={p}, alpha={alpha})",
                        rel=1e-6,  # a difference of two times: float rounding of the larger one shows
                    )

    @pytest.mark.concept("in_switch_reduction")
    def test_nvls(self, world: World, reference) -> None:
        ref = reference("nvlink")
        for nbytes in SIZES:
            for gpu_gb_s in (450.0, 900.0):
                check(
                    call(world, "nvls_allreduce_time_s", nbytes, gpu_gb_s),
                    ref.nvls_allreduce_time_s(nbytes, gpu_gb_s),
                    what=f"nvls_allreduce_time_s({nbytes}, {gpu_gb_s})",
                )

    @pytest.mark.concept("ring_cost")
    def test_domains(self, world: World, reference) -> None:
        ref = reference("nvlink")
        for node in NODES:
            for nbytes in SIZES:
                check(
                    call(world, "domain_allreduce_time_s", nbytes, node),
                    ref.domain_allreduce_time_s(nbytes, node),
                    what=f"domain_allreduce_time_s({nbytes}, {node!r})",
                )

    @pytest.mark.concept("ring_cost")
    def test_nvl72_against_an_8_gpu_box(self, world: World) -> None:
        # same per-GPU NVLink (B200, 900 GB/s per direction): 9x the GPUs cost only (71/72)/(7/8) = 1.127x
        h100 = call(world, "domain_allreduce_time_s", 1e9, "dgx_h100")
        b200 = call(world, "domain_allreduce_time_s", 1e9, "dgx_b200")
        nvl72 = call(world, "domain_allreduce_time_s", 1e9, "gb200_nvl72")
        check(h100, 2 * 7 / 8 / 450, what="1 GB in a DGX H100 (8 x 450 GB/s)")
        check(b200, 2 * 7 / 8 / 900, what="1 GB in a DGX B200 (8 x 900 GB/s)")
        check(nvl72, 2 * 71 / 72 / 900, what="1 GB in a GB200 NVL72 (72 x 900 GB/s)")

    @pytest.mark.concept("two_level")
    def test_two_level(self, world: World, reference) -> None:
        ref = reference("nvlink")
        for domains, g in ((9, 8), (2, 8), (4, 72), (3, 4)):
            for nvlink_gb_s, nic_gb_s in ((450.0, 50.0), (900.0, 50.0), (900.0, 100.0)):
                for nbytes in (1 << 20, 1e9):
                    args = (nbytes, domains, g, nvlink_gb_s, nic_gb_s)
                    check(
                        call(world, "two_level_allreduce_time_s", *args),
                        ref.two_level_allreduce_time_s(*args),
                        what=f"two_level_allreduce_time_s{args}",
                    )

    @pytest.mark.concept("two_level")
    def test_drawn_two_level(self, world: World, reference) -> None:
        ref, r = reference("nvlink"), rng(4)
        for _ in range(8):
            domains, g = r.randint(1, 40), r.choice([2, 3, 4, 5, 6, 7, 8, 16, 36, 72])
            nvlink_gb_s, nic_gb_s = (
                r.choice([150.0, 300.0, 450.0, 900.0]),
                r.choice([12.5, 25.0, 50.0, 100.0]),
            )
            args = (log_uniform(r, 1e5, 2e10), domains, g, nvlink_gb_s, nic_gb_s)
            check(
                call(world, "two_level_allreduce_time_s", *args),
                ref.two_level_allreduce_time_s(*args),
                what=f"two_level_allreduce_time_s{args}",
            )

    @pytest.mark.concept("two_level")
    def test_two_level_edges(self, world: World) -> None:
        # one domain: just the NVLink ring; one GPU per domain: just the ring over the NICs
        got = call(world, "two_level_allreduce_time_s", 1e9, 1, 8, 450.0, 50.0)
        check(got, 1.75 / 450, what="two levels with a single domain")
        got = call(world, "two_level_allreduce_time_s", 1e9, 8, 1, 450.0, 50.0)
        check(got, 1.75 / 50, what="two levels with one GPU per domain")
        # 72 B200s as 9 DGX B200 over NDR (50 GB/s per GPU): 1.94 ms on NVLink + 4.44 ms on the NICs
        # = 6.39 ms, 2.9x the NVL72's 2.19 ms
        got = call(world, "two_level_allreduce_time_s", 1e9, 9, 8, 900.0, 50.0)
        check(got, 1.75 / 900 + 2 * 8 / 9 / 8 / 50, what="1 GB over 9 x 8 B200 with NDR")


# ------------------------------------------------------------------------------------------------------------
# 16.bisection


@pytest.mark.part("16.bisection")
class TestBisection:
    def _closed_form(self, world: World, reference, want: str) -> None:
        ref = reference("nvlink")
        for n in (2, 8, 16, 72, 576):
            for gpu_gb_s in (50.0, 450.0, 900.0):
                check(
                    call(world, "bisection_gb_s", n, gpu_gb_s, want),
                    ref.bisection_gb_s(n, gpu_gb_s, want),
                    what=f"bisection_gb_s({n}, {gpu_gb_s}, {want!r})",
                )
        for node in NODES:
            check(
                call(world, "domain_bisection_gb_s", node, want),
                ref.domain_bisection_gb_s(node, want),
                what=f"domain_bisection_gb_s({node!r}, {want!r})",
            )

    @pytest.mark.concept("cut_capacity")
    def test_one_way(self, world: World, reference) -> None:
        self._closed_form(world, reference, PER_DIRECTION)

    @pytest.mark.concept("cut_capacity")
    def test_published_one_way(self, world: World) -> None:
        # scaling book gpus.md Quiz 2: one way across a DGX H100's cut, 4 GPUs x 450 = 1.8 TB/s; NVL72: 36
        # GPUs send 900 GB/s each way, 32.4 TB/s
        check(call(world, "domain_bisection_gb_s", "dgx_h100", PER_DIRECTION), 1800, what="DGX H100, one way")
        check(
            call(world, "domain_bisection_gb_s", "gb200_nvl72", PER_DIRECTION), 32_400, what="NVL72, one way"
        )

    @pytest.mark.concept("cut_capacity")
    def test_drawn_switches(self, world: World, reference) -> None:
        ref, r = reference("nvlink"), rng(5)
        for _ in range(6):
            n, gpu_gb_s = 2 * r.randint(1, 300), r.choice([25.0, 150.0, 300.0, 450.0, 900.0, 1234.5])
            check(
                call(world, "bisection_gb_s", n, gpu_gb_s, PER_DIRECTION),
                ref.bisection_gb_s(n, gpu_gb_s, PER_DIRECTION),
                what=f"bisection_gb_s({n}, {gpu_gb_s}, 'per-direction')",
            )

    @pytest.mark.concept("bisection_both_ways")
    def test_both_ways(self, world: World, reference) -> None:
        self._closed_form(world, reference, BIDIRECTIONAL)

    @pytest.mark.concept("bisection_both_ways")
    def test_published_both_ways(self, world: World) -> None:
        # scaling book gpus.md Quiz 2: 8xH100 bisection 3.6 TB/s counting both directions ("what NVIDIA
        # reports", NVSwitch Hot Chips 2022). NVIDIA's "130 TB/s" for NVL72 is 72 x 1.8 TB/s, every GPU both
        # ways; across a cut it is half of that: 64.8 TB/s
        check(
            call(world, "domain_bisection_gb_s", "dgx_h100", BIDIRECTIONAL), 3600, what="DGX H100, both ways"
        )
        check(call(world, "domain_bisection_gb_s", "gb200_nvl72", BIDIRECTIONAL), 64_800, what="NVL72, both")


# ------------------------------------------------------------------------------------------------------------
# 16.tp_domain


@pytest.mark.part("16.tp_domain")
class TestTPDomain:
    @pytest.mark.concept("group_alignment")
    def test_fits(self, world: World) -> None:
        for domain in (1, 4, 8, 72):
            for tp in (1, 2, 3, 4, 6, 8, 9, 12, 16, 24, 36, 72, 144):
                got = call(world, "tp_fits", tp, domain)
                assert isinstance(got, bool), f"tp_fits({tp}, {domain}) must return a bool, got {got!r}"
                # tiling ranks 0.. in groups of tp never straddles a domain boundary iff tp divides the domain
                assert got == (domain % tp == 0), f"tp_fits(tp={tp}, domain_gpus={domain}): got {got}"

    @pytest.mark.concept("group_alignment")
    def test_groups_crossing(self, world: World, reference) -> None:
        ref = reference("nvlink")
        cases = [(144, 16, 72), (48, 6, 8), (64, 8, 8), (144, 24, 72), (24, 12, 8), (216, 27, 72), (8, 8, 72)]
        for world_size, tp, domain in cases:
            got = call(world, "tp_groups_crossing", world_size, tp, domain)
            expected = ref.tp_groups_crossing(world_size, tp, domain)
            assert got == expected, (
                f"tp_groups_crossing({world_size}, {tp}, {domain}): got {got}, expected {expected}"
            )
        # two NVL72 racks with TP=16: group 4 is ranks 64..79, half in rack 0 and half in rack 1
        assert call(world, "tp_groups_crossing", 144, 16, 72) == [4], "TP=16 over two NVL72 racks"

    @pytest.mark.concept("group_alignment")
    def test_drawn_clusters(self, world: World, reference) -> None:
        # domains of 5, 6 or 7 GPUs, or a random size; TP degrees that do and do not tile them
        ref, r = reference("nvlink"), rng(6)
        for domain in (5, 6, 7, r.randint(2, 40), r.randint(2, 40), r.randint(2, 40)):
            tp = r.choice([d for d in range(1, 2 * domain + 1) if r.random() < 0.5] or [domain])
            world_size = tp * r.randint(1, 12)
            fits = call(world, "tp_fits", tp, domain)
            assert fits == ref.tp_fits(tp, domain), f"tp_fits({tp}, {domain}): got {fits!r}"
            got = call(world, "tp_groups_crossing", world_size, tp, domain)
            expected = ref.tp_groups_crossing(world_size, tp, domain)
            assert got == expected, (
                f"tp_groups_crossing({world_size}, {tp}, {domain}): got {got}, expected {expected}"
            )

    @pytest.mark.concept("tp_degree_limits")
    def test_drawn_degrees(self, world: World) -> None:
        r = rng(7)
        for _ in range(8):
            domain, heads = r.randint(1, 600), r.randint(1, 256)
            got = call(world, "max_tp_degree", domain, heads)
            assert got == math.gcd(domain, heads), f"max_tp_degree({domain}, {heads}): got {got}"

    @pytest.mark.concept("tp_degree_limits")
    def test_max_tp_degree(self, world: World) -> None:
        for domain in (1, 4, 8, 72):
            for heads in (8, 12, 32, 40, 48, 64, 96, 128):
                got = call(world, "max_tp_degree", domain, heads)
                assert got == math.gcd(domain, heads), f"max_tp_degree({domain}, {heads}): got {got}"
        assert call(world, "max_tp_degree", 72, 96) == 24, "GPT-3's 96 heads in an NVL72"

    @pytest.mark.concept("layer_comm")
    def test_layer_comm(self, world: World, reference) -> None:
        ref = reference("nvlink")
        for tp, domain in ((8, 8), (16, 8), (8, 72), (16, 72), (2, 8), (1, 8)):
            for seq, batch, hidden in ((8192, 1, 8192), (4096, 2, 4096)):
                args = (seq, batch, hidden, tp, domain, 450.0, 50.0)
                check(
                    call(world, "tp_layer_comm_time_s", *args),
                    ref.tp_layer_comm_time_s(*args),
                    what=f"tp_layer_comm_time_s{args}",
                )
        fp32 = (4096, 1, 4096, 4, 8, 900.0, 50.0, 4)
        check(
            call(world, "tp_layer_comm_time_s", *fp32),
            ref.tp_layer_comm_time_s(*fp32),
            what="fp32 activations",
        )

    @pytest.mark.concept("layer_comm")
    def test_drawn_layers(self, world: World, reference) -> None:
        ref, r = reference("nvlink"), rng(8)
        for _ in range(6):
            domain = r.choice([4, 6, 8, 16, 36, 72])
            tp = r.choice([1, 2, 3, 4, 6, 8, 12, 16, 24])
            seq, batch, hidden = r.choice([512, 4096, 12288]), r.randint(1, 4), r.choice([2048, 5120, 16384])
            rates = (r.choice([300.0, 450.0, 900.0]), r.choice([25.0, 50.0, 100.0]))
            args = (seq, batch, hidden, tp, domain, *rates, r.choice([1, 2, 4]))
            check(
                call(world, "tp_layer_comm_time_s", *args),
                ref.tp_layer_comm_time_s(*args),
                what=f"tp_layer_comm_time_s{args}",
            )

    @pytest.mark.concept("layer_comm")
    def test_leaving_nvlink_costs_9x(self, world: World) -> None:
        # 70B, s = 8192: 4 x 2(7/8) x 134 MB = 2.09 ms on NVLink (ground-truth.md §10.2); TP=16 over two
        # DGX H100 falls to the 50 GB/s NICs: 4 x 2(15/16) x 134 MB / 50 GB/s = 20.1 ms
        message = 8192 * 8192 * 2
        in_node = call(world, "tp_layer_comm_time_s", 8192, 1, 8192, 8, 8, 450.0, 50.0)
        check(in_node, 4 * 1.75 * message / 450e9, what="70B layer, TP=8 on NVLink")
        across = call(world, "tp_layer_comm_time_s", 8192, 1, 8192, 16, 8, 450.0, 50.0)
        check(across, 4 * 2 * 15 / 16 * message / 50e9, what="70B layer, TP=16 across two nodes")
