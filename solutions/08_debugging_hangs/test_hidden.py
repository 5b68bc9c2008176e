"""What this catches:
- flight recorder: analyzers that match send/recv entries as collectives (they repeat the last
  collective_seq_id), start at seq 1 when a ring buffer has wrapped, take the members of a group from the
  entries instead of pg_config (or forget that "ranks" is a string), report the wrong culprit on a tie, check
  sizes before ops or skip dtypes, stop at the first bad group, or trip on a "gloo:" prefix. Findings are
  compared exactly with each scenario's, which torch's own fr_trace confirms
  (tests/test_coursekit_flight_recorder.py).
- hangs: fixes that still deadlock (blocking sends; even/odd ordering, which fails on a ring of 3), that mix
  up the two halos when left == right, that use a collective for a halo, that let a rank without data skip an
  all-reduce or call a different sequence of collectives, that change the gradients' dtype, and gathers that
  truncate or pad wrongly; part lengths and micro-batch counts are drawn here from seeds.
- environment variables: each answer's exact name, and a value the tool accepts.
"""

from __future__ import annotations

import functools
import random

import pytest
import torch

from coursekit import fr_scenarios as fr
from coursekit.flight_recorder import Group, Recorder, dumps_of, world_group
from grader.harness import World, assert_equal, peers

# ---------------------------------------------------------------------------------------------------------
# 08.flight_recorder


def analyze(world: World, scenarios: list[fr.Scenario]) -> list:
    [res] = world.run("rank_programs:analyze_all", inputs={"scenarios": [s.dumps for s in scenarios]})
    assert isinstance(res.value, list) and len(res.value) == len(scenarios), (
        "find_mismatches returned no list"
    )
    return res.value


def compare(got: object, scenario: fr.Scenario) -> None:
    assert got == scenario.expected, (
        f"scenario {scenario.name} ({scenario.story}): find_mismatches returned {got!r}, "
        f"expected {scenario.expected!r}"
    )


@pytest.mark.concept("seq_alignment")
@pytest.mark.part("08.flight_recorder")
@pytest.mark.parametrize("world", [1], indirect=True)
@pytest.mark.parametrize("name", ["uneven_all_gather", "tp_group_dtype", "ring_buffer_wrapped"])
def test_shipped_scenario(world: World, name: str) -> None:
    scenario = fr.load(name)
    compare(analyze(world, [scenario])[0], scenario)


@functools.cache
def random_scenarios() -> dict[str, list[tuple[int, fr.Scenario]]]:
    """200 generated scenarios (2-8 ranks, up to 30 collectives, send/recv noise, some 12-entry buffers), by
    the kind of their fault: "missing", "op", "sizes", "dtypes", or "no" (no fault)."""
    by_kind: dict[str, list[tuple[int, fr.Scenario]]] = {}
    for seed in range(2000, 2200):
        s = fr.random_scenario(seed)
        by_kind.setdefault(s.story.split()[0], []).append((seed, s))
    return by_kind


@pytest.mark.concept("seq_alignment")
@pytest.mark.part("08.flight_recorder")
@pytest.mark.parametrize("world", [1], indirect=True)
@pytest.mark.parametrize("kind", ["missing", "op", "sizes", "dtypes", "no"])
def test_random_scenarios(world: World, kind: str) -> None:
    seeds, scenarios = zip(*random_scenarios()[kind], strict=True)
    assert len(scenarios) >= 25
    [res] = world.run("rank_programs:analyze_generated", inputs={"seeds": list(seeds)})  # generated there
    for got, scenario in zip(res.value, scenarios, strict=True):
        compare(got, scenario)


def scenario(
    name: str, recs: list[Recorder], k: int, op: str, kind: str, ranks: list, found: dict
) -> fr.Scenario:
    finding = {"collective_seq_id": k, "op": op, "kind": kind, "ranks": ranks, "found": found}
    return fr.Scenario(name, name, dumps_of(recs), {"0": finding})


def _ties_and_priorities() -> list[fr.Scenario]:
    out = []
    # 4 ranks split 2-2 on sizes: the lowest rank's value is the majority, so ranks 1 and 3 are the culprits
    recs = [Recorder(r, [world_group(4)]) for r in range(4)]
    for r in recs:
        r.collective("all_reduce", [8])
        r.collective("all_reduce", [16 if r.rank in (1, 3) else 12], state="started")
    found = {"1": [[[16]], [[16]]], "3": [[[16]], [[16]]]}
    out.append(scenario("tie_2_2", recs, 2, "all_reduce", "sizes", [1, 3], found))
    # rank 2 is missing AND rank 1 calls another op at the same seq id: "missing" comes first
    recs = [Recorder(r, [world_group(3)]) for r in range(3)]
    for r in recs:
        r.collective("broadcast", [4])
        if r.rank != 2:
            r.collective("all_reduce" if r.rank == 0 else "all_gather", [4], state="started")
    out.append(scenario("missing_first", recs, 2, "all_reduce", "missing", [2], {}))
    # rank 1 differs in op AND size: the op is reported
    recs = [Recorder(r, [world_group(3)], backend="gloo") for r in range(3)]
    for r in recs:
        r.collective("all_reduce" if r.rank != 1 else "broadcast", [4 if r.rank != 1 else 5], state="started")
    out.append(scenario("op_first", recs, 1, "all_reduce", "op", [1], {"1": "broadcast"}))
    return out


@pytest.mark.concept("classify_disagreement")
@pytest.mark.part("08.flight_recorder")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_ties_and_priorities(world: World) -> None:
    scenarios = _ties_and_priorities()
    for got, scenario in zip(analyze(world, scenarios), scenarios, strict=True):
        compare(got, scenario)


@pytest.mark.concept("group_membership")
@pytest.mark.part("08.flight_recorder")
@pytest.mark.parametrize("world", [1], indirect=True)
def test_groups_come_from_pg_config(world: World) -> None:
    # A pipeline group "1" of ranks 0 and 1 that only ever sends and receives: no collective, no finding,
    # although its p2p entries have collective_seq_id 0 on one rank and p2p_seq_id 1, 2 on both. In the
    # default group, rank 3 never reaches the 2nd all-reduce; it is in no entry at seq 2 and only pg_config
    # says it is a member.
    pp = Group("1", "pp", (0, 1))
    recs = [Recorder(r, [world_group(4), pp]) for r in range(4)]
    for r in recs:
        r.collective("all_reduce", [8])
        if r.rank == 0:
            r.send(1, [2, 8], group="1")
            r.send(1, [2, 8], group="1")
        if r.rank == 1:
            r.recv(0, [2, 8], group="1")
            r.recv(0, [2, 8], group="1", state="started")
        if r.rank != 3:
            r.collective("all_reduce", [8], state="started")
    pp_only = scenario("pp_only", recs, 2, "all_reduce", "missing", [3], {})
    # Two groups, each with its own finding: a tensor-parallel group's dtype mismatch, and the default
    # group's ranks missing behind it. Each group is analysed on its own; one finding does not end the search.
    two_groups = fr.load("tp_group_dtype")
    scenarios = [pp_only, two_groups]
    for got, want in zip(analyze(world, scenarios), scenarios, strict=True):
        compare(got, want)


# ---------------------------------------------------------------------------------------------------------
# 08.halo_exchange


def seeded_lengths(seed: int, p: int, low: int) -> list[int]:
    """p lengths in low..5 drawn from `seed`, not all equal, with one rank at `low` (a 1-element part, or an
    empty one)."""
    rng = random.Random(seed)
    lengths = [rng.randint(low + 1, 5) for _ in range(p)]
    lengths[rng.randrange(p)] = low
    return lengths


def stencil(parts: list[torch.Tensor]) -> list[torch.Tensor]:
    """y[i] = x[i-1] + x[i] + x[i+1] over the periodic concatenation, split back into the ranks' parts."""
    full = torch.cat(parts)
    y = torch.roll(full, 1) + full + torch.roll(full, -1)
    return list(torch.split(y, [len(x) for x in parts]))


COLLECTIVES = [
    "broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
    "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
]  # fmt: skip


HALO = peers("a halo exchange", lambda r, p: {(r - 1) % p, (r + 1) % p}, messages=2)
"""For a failure's space-time diagram: one message to each neighbour (left may be right)."""


@pytest.mark.concept("break_the_send_cycle")
@pytest.mark.part("08.halo_exchange")
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_halo_uneven_parts(world: World, dtype: torch.dtype) -> None:
    p = world.size
    lengths = seeded_lengths(80 + p + (dtype == torch.float32), p, low=1)  # drawn here; one rank holds 1
    g = torch.Generator().manual_seed(p)
    parts = [torch.randint(-50, 50, (n,), generator=g).to(dtype) for n in lengths]
    # no forbid here: a collective is the budget's concern (test_halo_messages), not the cycle's
    world.expect(HALO)
    results = world.call("hangs", "halo_stencil", args=[(x,) for x in parts])
    for res, want in zip(results, stencil(parts), strict=True):
        assert_equal(res.returned, want, rank=res.rank, world_size=p, what="stencil")


@pytest.mark.concept("halo_message_budget")
@pytest.mark.part("08.halo_exchange")
def test_halo_messages(world: World) -> None:
    p = world.size
    parts = [torch.arange(3) + 10 * r for r in range(p)]
    world.expect(HALO)
    for res in world.call("hangs", "halo_stencil", args=[(x,) for x in parts], forbid=COLLECTIVES):
        r = res.rank
        sends = sorted(e.peer for e in res.comm.events if e.op in ("send", "isend"))
        recvs = sorted(e.peer for e in res.comm.events if e.op in ("recv", "irecv"))
        want = sorted([(r - 1) % p, (r + 1) % p])
        assert sends == want and recvs == want, (
            f"rank {r}/{p} sent to {sends} and received from {recvs}; a halo exchange sends one message to "
            f"each neighbour and receives one from each: {want}"
        )
        assert all(e.numel == 1 for e in res.comm.events), (
            f"rank {r}/{p}: a halo is one element; messages of {[e.numel for e in res.comm.events]} elements"
        )


# ---------------------------------------------------------------------------------------------------------
# 08.uneven_microbatches


@pytest.mark.concept("agree_on_step_count")
@pytest.mark.part("08.uneven_microbatches")
def test_microbatches_with_an_empty_rank(world: World) -> None:
    p = world.size
    counts = seeded_lengths(90 + p, p, low=0)  # drawn here: one rank has no data at all
    grads = [
        [torch.full((2, 3), 10 * r + i, dtype=torch.int64) for i in range(n)] for r, n in enumerate(counts)
    ]
    like = torch.zeros(2, 3, dtype=torch.int64)
    results = world.call("hangs", "sum_microbatches", args=[(g, like) for g in grads])
    want = [sum(g[i] for g in grads if i < len(g)) for i in range(max(counts))]
    for res in results:
        got = res.returned
        assert isinstance(got, list) and len(got) == len(want), (
            f"rank {res.rank}/{p} returned {type(got).__name__} of length "
            f"{len(got) if isinstance(got, list) else '-'}; expected one sum per micro-batch: {len(want)}"
        )
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_equal(g, w, rank=res.rank, world_size=p, what=f"sum of micro-batch {i}")
    calls = {res.rank: res.comm.collectives for res in results}
    assert len({tuple(c) for c in calls.values()}) == 1, (
        f"the ranks called different collectives: {calls}; every rank must make the same calls in the same "
        "order, or the next call on the short rank pairs up with the wrong one"
    )


@pytest.mark.concept("even_counts_unchanged")
@pytest.mark.part("08.uneven_microbatches")
@pytest.mark.parametrize("world", [2], indirect=True)
def test_microbatches_even_counts_float(world: World) -> None:
    grads = [[torch.tensor([1.5 * r + i], dtype=torch.float64) for i in range(2)] for r in range(2)]
    like = torch.zeros(1, dtype=torch.float64)
    results = world.call("hangs", "sum_microbatches", args=[(g, like) for g in grads])
    for res in results:
        assert len(res.returned) == 2
        for i in range(2):
            assert_equal(res.returned[i], grads[0][i] + grads[1][i], rank=res.rank, world_size=2, what="sum")


# ---------------------------------------------------------------------------------------------------------
# 08.uneven_gather


@pytest.mark.concept("pad_then_trim")
@pytest.mark.part("08.uneven_gather")
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_gather_uneven(world: World, dtype: torch.dtype) -> None:
    p = world.size
    lengths = seeded_lengths(100 + p + (dtype == torch.float32), p, low=0)  # an empty shard, too
    parts = [(torch.arange(n) + 100 * r).to(dtype) for r, n in enumerate(lengths)]
    forbid = ["all_gather_object", "gather_object", "broadcast_object_list", "gather", "all_to_all"]
    results = world.call("hangs", "gather_uneven", args=[(x,) for x in parts], forbid=forbid)
    for res in results:
        assert_equal(res.returned, torch.cat(parts), rank=res.rank, world_size=p, what="gathered tensor")
        calls = list(res.comm.collectives)
        assert len(calls) <= 2 and set(calls) <= {"all_gather", "all_gather_into_tensor"}, (
            f"rank {res.rank}/{p} called {calls}; the contract allows at most two collectives, each an "
            "all_gather or all_gather_into_tensor"
        )
        assert res.comm.sends == res.comm.recvs == 0, f"rank {res.rank}/{p} used send/recv"


@pytest.mark.concept("pad_then_trim")
@pytest.mark.part("08.uneven_gather")
@pytest.mark.parametrize("world", [3], indirect=True)
def test_gather_equal_lengths(world: World) -> None:
    parts = [torch.tensor([r, r + 1], dtype=torch.int32) for r in range(3)]
    for res in world.call("hangs", "gather_uneven", args=[(x,) for x in parts]):
        assert_equal(res.returned, torch.cat(parts), rank=res.rank, world_size=3, what="gathered tensor")


# ---------------------------------------------------------------------------------------------------------
# 08.env_vars: the names torch 2.13 / NCCL read, and values they accept

TRUE = {"1", "y", "yes", "t", "true"}  # getCvarBool in torch/csrc/distributed/c10d/Utils.hpp, lower-cased
DUMP_PREFIX = "/shared/fr/rank_"  # DebugInfoWriter's file name is this prefix followed by the rank


def _parts(path: str) -> set[str]:
    """The %-escapes NCCL_DEBUG_FILE expands (%h host, %p pid) that appear in `path`."""
    return {path[i : i + 2] for i in range(len(path) - 1) if path[i] == "%"}


ANSWERS = {
    "nccl_init_details": ({"NCCL_DEBUG"}, lambda v: v.upper() == "INFO"),
    "nccl_network_lines_only": ({"NCCL_DEBUG_SUBSYS"}, lambda v: v.upper() == "NET"),
    "nccl_log_per_process": ({"NCCL_DEBUG_FILE"}, lambda v: v[:5] == "/tmp/" and {"%h", "%p"} <= _parts(v)),
    "collective_shape_check": ({"TORCH_DISTRIBUTED_DEBUG"}, lambda v: v == "DETAIL"),
    "flight_recorder_on": ({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, lambda v: v == "2000"),
    "dump_on_timeout": ({"TORCH_NCCL_DUMP_ON_TIMEOUT"}, lambda v: v.lower() in TRUE),
    "dump_location": ({"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}, DUMP_PREFIX.__eq__),
    "desync_report": ({"TORCH_NCCL_DESYNC_DEBUG", "NCCL_DESYNC_DEBUG"}, lambda v: v.lower() in TRUE),
    "consumer_gpu_p2p": ({"NCCL_P2P_DISABLE"}, lambda v: v == "1"),
    "bootstrap_interface": ({"NCCL_SOCKET_IFNAME"}, lambda v: v in ("eth0", "=eth0")),
    "ib_retry_timeout": ({"NCCL_IB_TIMEOUT"}, lambda v: v == "22"),
    "force_ring": ({"NCCL_ALGO"}, lambda v: v.lower() == "ring"),
    "cpp_logs_missing": ({"TORCH_CPP_LOG_LEVEL"}, lambda v: v == "INFO"),
    "nan_after_allreduce": ({"TORCH_NCCL_NAN_CHECK"}, lambda v: v.lower() in TRUE),
    "blocking_wait": ({"TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"}, lambda v: v.lower() in TRUE),
}  # fmt: skip


GROUPS = {  # the symptoms of each concept: a wrong answer loses its group's share
    "nccl_logging": ["nccl_init_details", "nccl_network_lines_only", "nccl_log_per_process"],
    "flight_recorder_switches": ["flight_recorder_on", "dump_on_timeout", "dump_location"],
    "pytorch_checks": [
        "collective_shape_check", "cpp_logs_missing", "desync_report", "nan_after_allreduce", "blocking_wait",
    ],
    "nccl_transport_switches": ["consumer_gpu_p2p", "bootstrap_interface", "ib_retry_timeout", "force_ring"],
}  # fmt: skip
assert sorted(s for group in GROUPS.values() for s in group) == sorted(ANSWERS)


def check_setting(world: World, symptom: str) -> None:
    [res] = world.call("env_vars", "diagnose", args=[(symptom,)])
    got = res.returned
    assert isinstance(got, str) and "=" in got, f"{symptom}: expected 'NAME=value', got {got!r}"
    name, _, value = (part.strip() for part in got.partition("="))
    names, accepts = ANSWERS[symptom]
    assert name in names, f"{symptom}: {name} is not the variable that does this (got {got!r})"
    assert accepts(value), f"{symptom}: {name} is right, but {value!r} is not the value that does this"


@pytest.mark.part("08.env_vars")
@pytest.mark.parametrize("world", [1], indirect=True)
class TestSettings:
    @pytest.mark.concept("nccl_logging")
    @pytest.mark.parametrize("symptom", GROUPS["nccl_logging"])
    def test_nccl_logging(self, world: World, symptom: str) -> None:
        check_setting(world, symptom)

    @pytest.mark.concept("flight_recorder_switches")
    @pytest.mark.parametrize("symptom", GROUPS["flight_recorder_switches"])
    def test_flight_recorder_switches(self, world: World, symptom: str) -> None:
        check_setting(world, symptom)

    @pytest.mark.concept("pytorch_checks")
    @pytest.mark.parametrize("symptom", GROUPS["pytorch_checks"])
    def test_pytorch_checks(self, world: World, symptom: str) -> None:
        check_setting(world, symptom)

    @pytest.mark.concept("nccl_transport_switches")
    @pytest.mark.parametrize("symptom", GROUPS["nccl_transport_switches"])
    def test_nccl_transport_switches(self, world: World, symptom: str) -> None:
        check_setting(world, symptom)
