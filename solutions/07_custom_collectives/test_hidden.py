"""What this catches: hierarchical schedules that end with a wrong sum or a missing chunk (a phase one round
short, a copy where a reduce belongs or the other way round, a ring walked the wrong way, a phase dropped),
that read a chunk before it arrives, that take extra rounds, that run the phases in a costlier order
(intra-node first for the all-gather: g times the bytes through each NIC), that lose to the flat ring on two
H100 nodes, or that the simulator accepts but that go wrong when run for real over isend/irecv on 4 and 8
gloo ranks.

The judge simulates every schedule with coursekit.schedules (symbolic buffers: which ranks each chunk sums),
on the shipped shapes and on three drawn here from a seed, counts the chunks each GPU moves across nodes
against the stub's budget (one per round, n-1 or 2(n-1) in all), and costs it with the alpha-beta port
model on coursekit.schedules.H100_2X4 and on other shapes with the same links, where it may cost no more
than the documented schedule. What a schedule sends across nodes is judged whether or not it computes the
right result: the result is a concept of its own, so a wrong schedule does not lose the traffic concepts too
(issue 41). It is never compared step by step with the
reference: a ring walked the other way or another rotation of the chunks is just as correct and just as fast.
Real runs use integer tensors and exact comparisons.
"""

from __future__ import annotations

import importlib.util
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from coursekit.schedules import (
    H100_2X4,
    Schedule,
    ScheduleError,
    Step,
    Topology,
    check,
    from_data,
    schedule_time,
)
from grader.harness import World, assert_equal, peers
from grader.harness.outcomes import WorldCrashed, WorldTimeout

_RNG = random.Random(2030)  # three more shapes, drawn here and never shipped: 1..5 nodes of 1..5 GPUs
SHAPES = [(2, 4), (1, 4), (4, 1), (2, 2), (3, 2), (2, 3), (4, 2)]
SHAPES += [(_RNG.randint(1, 5), _RNG.randint(1, 5)) for _ in range(3)]  # (nodes, gpus_per_node)
SIZES = [1e3, 1e6, 2**30]  # bytes: latency-bound, middle, bandwidth-bound


def flat_ring_allgather(p: int) -> Schedule:
    """Exercise 02's ring in the schedule language (judge-side: it is 02's answer): p-1 rounds."""
    rounds = [[Step(r, (r + 1) % p, (r - s) % p, "copy") for r in range(p)] for s in range(p - 1)]
    return Schedule("allgather", p, p, rounds)


def flat_ring_allreduce(p: int) -> Schedule:
    """Exercise 02's ring all-reduce (judge-side): a reduce-scatter, then an all-gather, 2(p-1) rounds."""
    reduce_scatter = [[Step(r, (r + 1) % p, (r - s) % p, "reduce") for r in range(p)] for s in range(p - 1)]
    all_gather = [[Step(r, (r + 1) % p, (r + 1 - s) % p, "copy") for r in range(p)] for s in range(p - 1)]
    return Schedule("allreduce", p, p, reduce_scatter + all_gather)


FLAT_ALLGATHER_8, FLAT_ALLREDUCE_8 = flat_ring_allgather(8), flat_ring_allreduce(8)


def build(world: World, function: str, nodes: int, gpus: int) -> Schedule:
    """The student's schedule, built on the one rank and validated here (a malformed one fails the test)."""
    kwargs = {"nodes": nodes, "gpus_per_node": gpus}
    [res] = world.run("rank_programs:build", inputs={"function": function, "kwargs": kwargs})
    try:
        return from_data(res.value)
    except (ScheduleError, TypeError, KeyError) as exc:
        raise AssertionError(f"{function}({nodes}, {gpus}) is not a valid schedule: {exc}") from None


def correct(schedule: Schedule, what: str) -> None:
    try:
        check(schedule)
    except ScheduleError as exc:
        raise AssertionError(f"{what}: {exc}") from None


COST_SHAPES = [(2, 4), (3, 2), (2, 3), (4, 2)]  # with both an intra-node and an inter-node phase


def no_costlier(got: Schedule, want: Schedule, n: int, g: int, what: str) -> None:
    """``got`` costs no more than the documented ``want`` at every size, on n nodes of g H100s."""
    topo = Topology(nodes=n, gpus_per_node=g, intra=H100_2X4.intra, inter=H100_2X4.inter)
    for nbytes in SIZES:
        t, t_ref = schedule_time(got, topo, nbytes), schedule_time(want, topo, nbytes)
        # rel 1e-9: the same sum of floats in another order; anything more is a costlier schedule
        assert t <= t_ref * (1 + 1e-9), (
            f"{what}, {nbytes:.0f} B: {t * 1e6:.2f} us; the documented schedule takes {t_ref * 1e6:.2f} us "
            "(cross the network with as little data per NIC and per round as the documented one)"
        )


def network_load(s: Schedule, g: int) -> tuple[int, int]:
    """(most chunks one GPU sends or receives across nodes in a round, most in the whole schedule)."""
    worst_round, total = 0, Counter()
    for rnd in s.rounds:
        load = Counter()
        for step in rnd:
            if step.src // g != step.dst // g:  # rank = node * g + local
                load[step.src, "sends"] += 1
                load[step.dst, "receives"] += 1
        worst_round = max(worst_round, max(load.values(), default=0))
        total.update(load)
    return worst_round, max(total.values(), default=0)


def within_network_budget(s: Schedule, n: int, g: int, most: int, what: str) -> None:
    """The stub's budget: one chunk per GPU per round across nodes, `most` in all."""
    per_round, overall = network_load(s, g)
    assert per_round <= 1, (
        f"{what}: a GPU moves {per_round} chunks across nodes in one round; the budget is one per round "
        "(the NIC is the slow link: give every NIC one chunk per round, and all of them at once)"
    )
    assert overall <= most, f"{what}: a GPU moves {overall} chunks across nodes in all; the budget is {most}"


def run_for_real(world: World, function: str, nodes: int, gpus: int, inputs: list[torch.Tensor]) -> list:
    kwargs = {"nodes": nodes, "gpus_per_node": gpus}
    # for a failure's space-time diagram: a GPU talks within its node, or to the same GPU of another node
    world.expect(
        peers(
            "a hierarchical schedule (within a node, or to the same GPU of another node)",
            lambda r, p: {j for j in range(p) if j != r and (j // gpus == r // gpus or j % gpus == r % gpus)},
        )
    )
    inputs = [{"function": function, "kwargs": kwargs, "tensor": x} for x in inputs]
    return world.run("rank_programs:run", inputs=inputs, forbid=["all_reduce", "all_gather", "broadcast"])


# ---------------------------------------------------------------------------------------------------------
# 07.hierarchical_allgather: (n-1) inter-node rounds of one chunk, then (g-1) intra-node rounds of n chunks


@pytest.mark.concept("allgather_correct")
@pytest.mark.part("07.hierarchical_allgather")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allgather_every_shape(world: World) -> None:
    for n, g in SHAPES:
        s = build(world, "hierarchical_allgather", n, g)
        assert s.collective == "allgather", f"{n}x{g}: collective {s.collective!r}, expected 'allgather'"
        correct(s, f"hierarchical_allgather({n}, {g})")
        assert len(s.rounds) == (n - 1) + (g - 1), (
            f"hierarchical_allgather({n}, {g}) takes {len(s.rounds)} rounds; (n-1) + (g-1) = {n + g - 2}"
        )


@pytest.mark.concept("inter_node_first")
@pytest.mark.part("07.hierarchical_allgather")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allgather_no_costlier_than_documented(world: World, reference) -> None:
    ref = reference("hierarchical")
    for n, g in COST_SHAPES:
        got = build(world, "hierarchical_allgather", n, g)
        no_costlier(got, ref.hierarchical_allgather(n, g), n, g, f"hierarchical_allgather({n}, {g})")


@pytest.mark.concept("inter_node_first")
@pytest.mark.part("07.hierarchical_allgather")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allgather_network_budget(world: World) -> None:
    for n, g in SHAPES:
        s = build(world, "hierarchical_allgather", n, g)
        within_network_budget(s, n, g, n - 1, f"hierarchical_allgather({n}, {g})")


@pytest.mark.concept("inter_node_first")
@pytest.mark.part("07.hierarchical_allgather")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allgather_beats_flat_ring_on_h100_2x4(world: World, reference) -> None:
    got = build(world, "hierarchical_allgather", 2, 4)
    best = reference("hierarchical").hierarchical_allgather(2, 4)
    for nbytes in SIZES:
        t, ring = (
            schedule_time(got, H100_2X4, nbytes),
            schedule_time(flat_ring_allgather(8), H100_2X4, nbytes),
        )
        t_ref = schedule_time(best, H100_2X4, nbytes)
        assert t < ring, (
            f"{nbytes:.0f} B: {t * 1e6:.1f} us, not faster than the flat ring's {ring * 1e6:.1f} us"
        )
        # rel 1e-9: the same sum of floats in another order; anything more is a costlier schedule
        assert t <= t_ref * (1 + 1e-9), (
            f"{nbytes:.0f} B: {t * 1e6:.2f} us, the documented schedule takes {t_ref * 1e6:.2f} us "
            "(inter-node first: each NIC carries one chunk per round, not a node's worth)"
        )


@pytest.mark.concept("allgather_correct")
@pytest.mark.part("07.hierarchical_allgather")
@pytest.mark.parametrize("world", [8], indirect=True)
def test_allgather_for_real_on_8_ranks(world: World) -> None:
    p, m = 8, 3  # chunk c = elements 3c..3c+2 of a 24-element buffer
    data = [torch.arange(m, dtype=torch.int64) + 100 * (r + 1) for r in range(p)]
    inputs = []
    for r in range(p):
        x = torch.full((p * m,), -1, dtype=torch.int64)  # -1 where the chunk has not arrived yet
        x[r * m : (r + 1) * m] = data[r]
        inputs.append(x)
    expected = torch.cat(data)
    for res in run_for_real(world, "hierarchical_allgather", 2, 4, inputs):
        assert_equal(res.value, expected, rank=res.rank, world_size=p, what="buffer after the all-gather")


# ---------------------------------------------------------------------------------------------------------
# 07.hierarchical_allreduce: reduce-scatter in nodes, ring all-reduce across nodes, all-gather in nodes


@pytest.mark.concept("allreduce_phases_compose")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allreduce_every_shape(world: World) -> None:
    for n, g in SHAPES:
        s = build(world, "hierarchical_allreduce", n, g)
        assert s.collective == "allreduce", f"{n}x{g}: collective {s.collective!r}, expected 'allreduce'"
        correct(s, f"hierarchical_allreduce({n}, {g})")
        want = 2 * (g - 1) + 2 * (n - 1)
        assert len(s.rounds) == want, (
            f"hierarchical_allreduce({n}, {g}) takes {len(s.rounds)} rounds; 2(g-1) + 2(n-1) = {want}"
        )


@pytest.mark.concept("one_gth_across_nodes")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allreduce_no_costlier_than_documented(world: World, reference) -> None:
    ref = reference("hierarchical")
    for n, g in COST_SHAPES:
        got = build(world, "hierarchical_allreduce", n, g)
        no_costlier(got, ref.hierarchical_allreduce(n, g), n, g, f"hierarchical_allreduce({n}, {g})")


@pytest.mark.concept("one_gth_across_nodes")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allreduce_network_budget(world: World) -> None:
    for n, g in SHAPES:
        s = build(world, "hierarchical_allreduce", n, g)
        within_network_budget(s, n, g, 2 * (n - 1), f"hierarchical_allreduce({n}, {g})")


@pytest.mark.concept("one_gth_across_nodes")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_allreduce_beats_flat_ring_on_h100_2x4(world: World) -> None:
    # The flat ring pays the NIC's alpha and bandwidth in all 14 rounds (rounds 3->4 and 7->0 cross nodes);
    # the hierarchical schedule crosses nodes in 2 rounds with 1/8 of the data each. About 4x faster here.
    got = build(world, "hierarchical_allreduce", 2, 4)
    for nbytes in SIZES:
        t, ring = (
            schedule_time(got, H100_2X4, nbytes),
            schedule_time(flat_ring_allreduce(8), H100_2X4, nbytes),
        )
        assert t < 0.3 * ring, (
            f"{nbytes:.0f} B: {t * 1e6:.1f} us against the flat ring's {ring * 1e6:.1f} us; the hierarchical "
            "schedule should take less than 0.3x the ring here"
        )


@pytest.mark.concept("allreduce_phases_compose")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [8], indirect=True)
def test_allreduce_for_real_on_8_ranks(world: World) -> None:
    g = torch.Generator().manual_seed(7)
    inputs = [
        torch.randint(-1000, 1000, (37,), generator=g) for _ in range(8)
    ]  # 37: uneven chunks of 5 and 4
    expected = sum(inputs)
    for res in run_for_real(world, "hierarchical_allreduce", 2, 4, [x.clone() for x in inputs]):
        assert_equal(res.value, expected, rank=res.rank, world_size=8, what="buffer after the all-reduce")


@pytest.mark.concept("allreduce_phases_compose")
@pytest.mark.part("07.hierarchical_allreduce")
@pytest.mark.parametrize("world", [4], indirect=True)
def test_allreduce_for_real_on_4_nodes_of_1(world: World) -> None:
    # g = 1: no intra-node phase at all; the inter-node ring does everything
    inputs = [torch.arange(9, dtype=torch.int32) * (r + 1) for r in range(4)]
    for res in run_for_real(world, "hierarchical_allreduce", 4, 1, [x.clone() for x in inputs]):
        assert_equal(res.value, sum(inputs), rank=res.rank, world_size=4, what="buffer after the all-reduce")


# ---------------------------------------------------------------------------------------------------------
# 07.fused_allgather_matmul: the product, and the order of messages, waits and products each rank issued
#
# The shapes and data come from seeds here, in the judge (the rank programs rebuild the same shards from the
# seed). The product and the order of the calls are judged on the world group at every world size; inside
# two sub-groups of unequal size (ranks 0, 3, 5 and 1, 2, 4, 6, 7: 3 and 5, neither a power of two, with
# strided global ranks) a run of its own, at 8 ranks, grades group ranks alone (fused_subgroup), so that a
# mistake only sub-groups show costs that concept and not every overlap concept (issue 41). Any correct
# schedule passes: a ring either way, a bidirectional ring, every rank sending its shard to all the others
# at once; what counts is the order of the calls on each rank.

_PROGRAMS = Path(__file__).resolve().parents[2] / "exercises" / "07_custom_collectives" / "rank_programs.py"
_spec = importlib.util.spec_from_file_location("rank_programs_07", _PROGRAMS)
programs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(programs)

SPLIT_8 = [[0, 3, 5], [1, 2, 4, 6, 7]]
Run = tuple[int, int, dict[str, Any], int, dict[str, Any]]  # group rank, group size, config, rank, value


def fused_config(p: int, *, subgroups: bool) -> dict[str, Any]:
    """Seeded shapes: the world group at any p, or the two sub-groups of SPLIT_8 at 8 ranks."""
    if subgroups:
        return {"seed": 78, "m": 2, "k": 3, "n": 2, "dtype": "float32", "split": SPLIT_8}
    rng = random.Random(700 + p)
    shape = {"m": rng.randint(1, 3), "k": rng.randint(1, 4), "n": rng.randint(1, 3)}
    return {"seed": 70 + p, **shape, "dtype": "float64", "split": None}


def fused_runs(world: World, request: pytest.FixtureRequest, *, subgroups: bool = False) -> list[Run]:
    """Every rank's run over the world group (or, with ``subgroups``, inside SPLIT_8) at this world size,
    made once per grading run (the cache lives on the pytest session, so a later grading of another
    submission in the same process starts afresh). The two are separate calls: a sub-group run that hangs
    or fails leaves the world group's verdicts alone."""
    cache = request.session.__dict__.setdefault("_fused_runs_07", {})
    key = (world.size, subgroups)
    if key not in cache:
        cfg = fused_config(world.size, subgroups=subgroups)
        results = world.run("rank_programs:fused", inputs=cfg, forbid=list(COLLECTIVES_07))
        groups = cfg["split"] or [list(range(world.size))]
        runs = []
        for res in results:
            [members] = [g for g in groups if res.rank in g]
            assert isinstance(res.value, dict), f"rank {res.rank}: the rank program returned {res.value!r}"
            runs.append((members.index(res.rank), len(members), cfg, res.rank, res.value))
        cache[key] = runs
    return cache[key]


COLLECTIVES_07 = ("all_gather", "all_gather_into_tensor", "broadcast", "all_reduce", "all_to_all",
                  "all_to_all_single", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
                  "all_gather_object", "broadcast_object_list")  # fmt: skip


def expected_product(cfg: dict[str, Any], rank: int, p: int) -> torch.Tensor:
    x = torch.cat([programs.fused_shard(cfg["seed"], j, cfg["m"], cfg["k"], cfg["dtype"]) for j in range(p)])
    return x @ programs.fused_weight(cfg["seed"], rank, cfg["k"], cfg["n"], cfg["dtype"])


def check_order(world: World, request: pytest.FixtureRequest, concept: str) -> None:
    for me, p, _, rank, value in fused_runs(world, request):
        where = f"rank {rank} of the world group"
        problems = programs.overlap_problems(value["events"], me, p)
        assert not problems["budget"] or concept == "budget", (
            f"{where}: {problems['budget'][0]}; the order of the calls cannot be judged"
        )
        assert not problems[concept], f"{where}: {problems[concept][0]} (events: {value['events']})"


def check_products(world: World, runs: list[Run]) -> None:
    for me, p, cfg, rank, value in runs:
        got, want = value["out"], expected_product(cfg, rank, p)
        assert isinstance(got, torch.Tensor), f"rank {rank} returned {type(got).__name__}, not a tensor"
        assert_equal(got, want, rank=rank, world_size=world.size, what=f"Y on group rank {me} of {p}")


def world_product_right(world: World, request: pytest.FixtureRequest) -> bool:
    """Whether the world group's run at this world size gave every rank the right product."""
    try:
        check_products(world, fused_runs(world, request))
    except (AssertionError, WorldCrashed, WorldTimeout):  # a rank's exception is an AssertionError too
        return False
    return True


@pytest.mark.concept("fused_result")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.generated
def test_fused_product(world: World, request: pytest.FixtureRequest) -> None:
    check_products(world, fused_runs(world, request))


@pytest.mark.concept("fused_subgroup")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.generated
@pytest.mark.parametrize("world", [8], indirect=True)
def test_fused_in_subgroups(world: World, request: pytest.FixtureRequest) -> None:
    # Two groups at once, 3 and 5 strided ranks: the product by group rank, and every other member's shard
    # received exactly once (the calls' order is judged on the world group, by the overlap concepts).
    # The rows' places are fused_result's question: where the world group's product is already wrong at 8
    # ranks, a sub-group's is too whatever the ranks, so only the shards received are judged here.
    runs = fused_runs(world, request, subgroups=True)
    if world_product_right(world, request):
        check_products(world, runs)
    for me, p, _, rank, value in runs:
        budget = programs.overlap_problems(value["events"], me, p)["budget"]
        assert not budget, f"rank {rank} (group rank {me} of {p}): {budget[0]}"


@pytest.mark.concept("one_step_per_shard")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.generated
def test_fused_one_shard_per_step(world: World, request: pytest.FixtureRequest) -> None:
    check_order(world, request, "budget")


@pytest.mark.concept("compute_before_next_wait")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.generated
def test_fused_product_issued_before_next_wait(world: World, request: pytest.FixtureRequest) -> None:
    check_order(world, request, "overlap")


@pytest.mark.concept("next_shard_in_flight")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.generated
def test_fused_next_shard_in_flight(world: World, request: pytest.FixtureRequest) -> None:
    check_order(world, request, "in_flight")


@pytest.mark.concept("forward_before_compute")
@pytest.mark.part("07.fused_allgather_matmul")
@pytest.mark.generated
def test_fused_forward_before_compute(world: World, request: pytest.FixtureRequest) -> None:
    check_order(world, request, "forward")
