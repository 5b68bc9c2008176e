"""What this catches: an NCCL model that picks the wrong algorithm or protocol, misreads NCCL_ALGO/NCCL_PROTO,
cuts the buffer differently from NCCL's ring kernel, or builds the wrong double binary tree.

- protocols: LL counted as 100% or LL128 as 15/16 of something else, buffers in lines instead of bytes, the
  LL step payload not halved, float instead of C integer arithmetic.
- selector: each refinement of tuning.cc (LL cap, 0.92, 1/3.8, 7/9 vs 120/128, per-channel caps, the
  bus-to-algorithm ratio), the intra/inter latency split, the ppn=1 network latency, the net overhead, the
  tree correction table, the ring plateau, the selection loop and its default/forced LL128. Every number is
  checked against the reference (rel 1e-9: the model is closed-form, only float rounding differs) on one
  node, two nodes, four nodes, and one GPU per node, and the selections at 8 B..1 GiB are compared exactly.
- env_parsing: the three examples in tuning.cc's comment, '^', case, per-function overrides, strtok's empty
  pieces, untrimmed spaces, and the three errors.
- chunks: the exact pieces of runRing for every protocol, over several loops, and that they tile the buffer.
- trees: ncclGetBtree / ncclGetDtree for 1..33 ranks against the reference and trees.cc's own pictures.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pytest

from grader.harness import World
from grader.harness.outcomes import RankFailure

PROTOS = ("LL", "LL128", "Simple")
FUNCS3 = ("AllReduce", "AllGather", "ReduceScatter")


def many(world: World, module: str, function: str, calls: list[tuple], system: Any = None) -> list[Any]:
    """`module.function(*args)` for each args tuple in `calls`, on the one rank, in one round trip."""
    inputs = {
        "module": module,
        "function": function,
        "calls": [{"args": list(c)} for c in calls],
        "system": None if system is None else dataclasses.asdict(system),
    }
    [res] = world.run("rank_programs:call_many", inputs=inputs)
    return res.value


def close(got: Any, expected: float, what: str, rel: float = 1e-9) -> None:
    """Closed forms: rel 1e-9 leaves room for float rounding only."""
    if type(got) not in (int, float):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if not math.isclose(got, expected, rel_tol=rel, abs_tol=1e-12):
        raise AssertionError(f"{what}: got {got!r}, expected {expected!r}")


def raises_value_error(world: World, module: str, function: str, *args: Any) -> str:
    try:
        [res] = world.call(module, function, args=[args])
    except RankFailure as failure:
        assert "ValueError" in str(failure), f"{function}{args!r} should raise ValueError, got: {failure}"
        return str(failure)
    raise AssertionError(f"{function}{args!r} should raise ValueError, returned {res.returned!r}")


# ------------------------------------------------------------------------------------------------------------
# 04.protocols


@pytest.mark.part("04.protocols")
@pytest.mark.concept("proto_efficiency")
def test_efficiency_from_line_layouts(world: World) -> None:
    # device.h: LL line = {data1, flag1, data2, flag2} (8 of 16 B); LL128 line = 16 words, 15 of data
    got = many(world, "protocols", "proto_efficiency", [(p,) for p in PROTOS])
    for proto, value, expected in zip(PROTOS, got, (0.5, 120 / 128, 1.0), strict=True):
        close(value, expected, f"proto_efficiency({proto!r})", rel=0)


@pytest.mark.part("04.protocols")
@pytest.mark.concept("fifo_sizes")
def test_default_buffers(world: World) -> None:
    # ground-truth.md §3 (src/init.cc): 8 x 512 x 8 x 16 B, 120 x 640 x 8 x 8 B, DEFAULT_BUFFSIZE 1 << 22
    got = many(world, "protocols", "default_buffer_bytes", [(p,) for p in PROTOS])
    for proto, value, expected in zip(PROTOS, got, (524288, 4915200, 4194304), strict=True):
        assert value == expected and type(value) is int, (
            f"default_buffer_bytes({proto!r}) = {value!r}, expected {expected} bytes (an int)"
        )


@pytest.mark.part("04.protocols")
@pytest.mark.concept("fifo_sizes")
def test_step_payload(world: World, reference) -> None:
    ref = reference("protocols")
    calls = [(p, b) for p in PROTOS for b in (None, 1 << 20, 1 << 22, 1_000_003, 65536)]
    got = many(world, "protocols", "step_bytes", calls)
    for (proto, buff), value in zip(calls, got, strict=True):
        expected = ref.step_bytes(proto, buff)
        assert value == expected and type(value) is int, (
            f"step_bytes({proto!r}, {buff}) = {value!r}, expected {expected} (C integer arithmetic)"
        )


@pytest.mark.part("04.protocols")
@pytest.mark.concept("unknown_proto")
def test_unknown_protocol(world: World) -> None:
    raises_value_error(world, "protocols", "proto_efficiency", "LL64")
    raises_value_error(world, "protocols", "default_buffer_bytes", "simple")  # names are NCCL's spelling


# ------------------------------------------------------------------------------------------------------------
# 04.selector: systems are illustrative inputs (per-channel GB/s as a topology search might report them)


def drawn_systems(ref: Any, k: int = 6, seed: int = 20260316) -> dict[str, Any]:
    """Systems drawn by the judge and never shown: 1..16 nodes, 1..8 GPUs per node (odd counts too),
    1..32 channels, any per-channel bandwidths, NVLink or PCIe, LL128 validated or not."""
    rng = random.Random(seed)
    out = {}
    for i in range(k):
        # every shape at least once: one node, a few nodes, many nodes, one GPU per node; PCIe in two of them
        nodes = [1, rng.choice([2, 3, 5]), rng.choice([4, 6, 8, 16]), rng.choice([2, 3, 4, 7]), 1][i % 5]
        ppn = 1 if i % 5 == 3 else rng.choice([2, 3, 4, 5, 6, 7, 8])
        system = ref.System(
            n_ranks=nodes * ppn,
            n_nodes=nodes,
            n_channels=rng.randint(1, 32),
            bw_intra=round(rng.uniform(5.0, 48.0), 1),
            bw_inter=round(rng.uniform(2.0, 25.0), 1),
            nvlink=i % 5 not in (1, 4),
            ll128=rng.random() < 0.6,
        )
        out[f"drawn system {i} ({nodes} x {ppn})"] = system
    return out


def systems(ref: Any) -> dict[str, Any]:
    S = ref.System
    return drawn_systems(ref) | {
        "8 GPUs, one NVLink node": S(n_ranks=8, n_nodes=1, n_channels=16, bw_intra=20.0, bw_inter=20.0),
        "4 GPUs over PCIe, no LL128": S(
            n_ranks=4, n_nodes=1, n_channels=2, bw_intra=12.0, bw_inter=12.0, nvlink=False, ll128=False
        ),
        "2 nodes x 8": S(n_ranks=16, n_nodes=2, n_channels=8, bw_intra=20.0, bw_inter=12.0),
        "4 nodes x 8": S(n_ranks=32, n_nodes=4, n_channels=8, bw_intra=20.0, bw_inter=12.0),
        "16 nodes x 1 GPU": S(n_ranks=16, n_nodes=16, n_channels=4, bw_intra=12.0, bw_inter=12.0),
        "3 nodes x 2, PCIe": S(n_ranks=6, n_nodes=3, n_channels=2, bw_intra=10.0, bw_inter=5.0, nvlink=False),
    }


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_selection")
def test_drawn_systems_reach_every_regime(world: World, reference) -> None:
    # the drawn systems are only worth something if they exercise the rules: on them, the reference picks
    # both algorithms and every protocol somewhere between 8 B and 1 GiB (checked here on the judge side),
    # and the submission must pick the same at sizes between the powers of two as well
    ref = reference("tuner")
    drawn = drawn_systems(ref)
    sizes = [1 << k for k in range(3, 31)]
    seen = {tuple(ref.select_algo_proto("AllReduce", n, s)) for s in drawn.values() for n in sizes}
    assert {a for a, _ in seen} == {"Tree", "Ring"} and {p for _, p in seen} == set(PROTOS), seen
    rng = random.Random(7)
    calls = [(f, rng.randint(1, 1 << 31)) for f in FUNCS3 for _ in range(12)]
    for name, system in drawn.items():
        got = many(world, "tuner", "select_algo_proto", calls, system)
        for (f, n), value in zip(calls, got, strict=True):
            expected = ref.select_algo_proto(f, n, system)
            assert value == expected, f"select_algo_proto({f}, {n} B) on {name} {system}: got {value!r}"


def combos() -> list[tuple[str, str, str]]:
    return [
        (f, a, p) for f in FUNCS3 for a in ("Tree", "Ring") for p in PROTOS if a == "Ring" or f == "AllReduce"
    ]


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_bandwidth")
def test_bandwidths(world: World, reference) -> None:
    ref = reference("tuner")
    for name, system in systems(ref).items():
        got = many(world, "tuner", "algo_bandwidth", combos(), system)
        for (f, a, p), value in zip(combos(), got, strict=True):
            close(value, ref.algo_bandwidth(f, a, p, system), f"algo_bandwidth({f}, {a}, {p}) on {name}")


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_bandwidth")
def test_unmodeled_algorithms_have_no_bandwidth(world: World, reference) -> None:
    system = systems(reference("tuner"))["2 nodes x 8"]
    calls = [
        ("AllGather", "Tree", "Simple"),
        ("ReduceScatter", "Tree", "LL"),
        ("AllReduce", "NVLS", "Simple"),
    ]
    for args, value in zip(calls, many(world, "tuner", "algo_bandwidth", calls, system), strict=True):
        close(
            value, 0.0, f"algo_bandwidth{args} (NCCL has no tree AllGather/ReduceScatter; NVLS not modeled)"
        )


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_latency")
def test_latencies(world: World, reference) -> None:
    ref = reference("tuner")
    for name, system in systems(ref).items():
        got = many(world, "tuner", "algo_latency", combos(), system)
        for (f, a, p), value in zip(combos(), got, strict=True):
            close(value, ref.algo_latency(f, a, p, system), f"algo_latency({f}, {a}, {p}) on {name}")


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_latency")
def test_one_node_latencies_by_hand(world: World, reference) -> None:
    # 8 GPUs, NVLink: Ring/Simple AllReduce 8.4 + 14 x 3.4 = 56.0 us; Tree/Simple 8.4 + 2 x 7 x 4.0 = 64.4 us
    system = systems(reference("tuner"))["8 GPUs, one NVLink node"]
    calls = [("AllReduce", "Ring", "Simple"), ("AllReduce", "Tree", "Simple"), ("AllGather", "Ring", "LL")]
    got = many(world, "tuner", "algo_latency", calls, system)
    for args, value, expected in zip(calls, got, (56.0, 64.4, 6.6 + 7 * 0.6), strict=True):
        close(value, expected, f"algo_latency{args}, 8 GPUs on NVLink")


SIZES = [8, 63, 64, 100, 4096, 65536, 1 << 20, 3_000_000, 1 << 27, 1 << 28, 1 << 29, 1 << 30]


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_selection")
def test_times(world: World, reference) -> None:
    ref = reference("tuner")
    calls = [(f, a, p, n) for f, a, p in combos() for n in SIZES]
    for name, system in systems(ref).items():
        got = many(world, "tuner", "algo_time", calls, system)
        for args, value in zip(calls, got, strict=True):
            close(value, ref.algo_time(*args, system), f"algo_time{args} on {name}")


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_selection")
def test_selections_at_sizes(world: World, reference) -> None:
    ref = reference("tuner")
    calls = [(f, 1 << k) for f in FUNCS3 for k in range(3, 31)] + [("AllReduce", 3_000_000)]
    for name, system in systems(ref).items():
        got = many(world, "tuner", "select_algo_proto", calls, system)
        for (f, n), value in zip(calls, got, strict=True):
            expected = ref.select_algo_proto(f, n, system)
            assert value == expected, (
                f"select_algo_proto({f}, {n} B) on {name}: got {value!r}, expected {expected}"
            )


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_enabled")
def test_selection_with_user_lists(world: World, reference) -> None:
    ref = reference("tuner")
    sys4, pcie = systems(ref)["4 nodes x 8"], systems(ref)["4 GPUs over PCIe, no LL128"]
    cases = [
        (sys4, ("AllReduce", 1 << 12), {"algos": ["Ring"]}),
        (sys4, ("AllReduce", 1 << 30), {"algos": ["Tree"], "protos": ["LL", "LL128"]}),
        (sys4, ("AllGather", 1 << 16), {"protos": ["Simple"]}),
        # LL128 is off by default on this platform, but a user who lists it forces it on
        (pcie, ("AllReduce", 1 << 20), {"protos": ["LL128", "Simple"]}),
        (pcie, ("AllReduce", 1 << 20), {}),
    ]
    for system, args, kwargs in cases:
        inputs = {
            "module": "tuner",
            "function": "select_algo_proto",
            "calls": [{"args": list(args), "kwargs": kwargs}],
            "system": dataclasses.asdict(system),
        }
        [res] = world.run("rank_programs:call_many", inputs=inputs)
        expected = ref.select_algo_proto(*args, system, **kwargs)
        assert res.value == [expected], (
            f"select_algo_proto{args} with {kwargs} on {system}: got {res.value[0]!r}, expected {expected}"
        )


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_enabled")
def test_default_ll128_follows_the_platform(world: World, reference) -> None:
    ref = reference("tuner")
    pcie = systems(ref)["4 GPUs over PCIe, no LL128"]
    got = many(world, "tuner", "select_algo_proto", [("AllReduce", 1 << k) for k in range(3, 31)], pcie)
    assert all(p != "LL128" for _, p in got), (
        f"LL128 is not enabled by default on {pcie}, yet selected: {got}"
    )


@pytest.mark.part("04.selector")
@pytest.mark.concept("tuner_enabled")
def test_nothing_available(world: World, reference) -> None:
    system = systems(reference("tuner"))["2 nodes x 8"]
    inputs = {
        "module": "tuner",
        "function": "select_algo_proto",
        "calls": [{"args": ["AllGather", 4096], "kwargs": {"algos": ["Tree"]}}],
        "system": dataclasses.asdict(system),
    }
    try:
        [res] = world.run("rank_programs:call_many", inputs=inputs)
    except RankFailure as failure:
        assert "ValueError" in str(failure), f"expected a ValueError, got: {failure}"
        return
    raise AssertionError(
        f"AllGather with only Tree enabled has no algorithm: got {res.value!r}, not ValueError"
    )


# ------------------------------------------------------------------------------------------------------------
# 04.env_parsing

ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")


def parse(world: World, cases: list[tuple[str, tuple]]) -> list[Any]:
    return many(world, "nccl_env", "parse_nccl_list", [(v, list(e)) for v, e in cases])


def every(names: list[str]) -> dict[str, list[str]]:
    return {f: list(names) for f in FUNCS}


@pytest.mark.part("04.env_parsing")
@pytest.mark.concept("parse_lists")
def test_examples_from_tuning_cc(world: World) -> None:
    # the three examples in the comment above parseList (src/graph/tuning.cc)
    cases = [
        ("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", ALGOS),
        ("LL,Simple;allreduce:^LL", PROTOS),
        ("^LL128;allreduce:LL128", PROTOS),
    ]
    expected = [
        every(["Ring", "CollNetDirect"]) | {"AllReduce": ["Tree", "CollNetDirect"], "Broadcast": ["Ring"]},
        every(["LL", "Simple"]) | {"AllReduce": ["LL128", "Simple"]},
        every(["LL", "Simple"]) | {"AllReduce": ["LL128"]},
    ]
    for (value, _), got, want in zip(cases, parse(world, cases), expected, strict=True):
        assert got == want, f"parse_nccl_list({value!r}): got {got}, expected {want}"


@pytest.mark.part("04.env_parsing")
@pytest.mark.concept("parse_lists")
def test_grammar_details(world: World, reference) -> None:
    ref = reference("nccl_env")
    cases = [
        ("RING,tReE", ALGOS),  # case-insensitive, answered in NCCL's spelling and order
        ("^ring", ALGOS),
        ("allreduce:tree", ALGOS),  # one function; the others keep their defaults (None)
        ("AllGather:ring;ALLREDUCE:^tree,nvls", ALGOS),
        ("allreduce:tree;allreduce:ring", ALGOS),  # a later entry replaces an earlier one
        ("ring;allreduce:^ring", ALGOS),
        ("ring,,tree", ALGOS),  # strtok skips empty pieces
        ("", PROTOS),
        ("^", PROTOS),  # everything but nothing
        ("simple", PROTOS),
        ("ll128;reducescatter:ll", PROTOS),
    ]
    for (value, elems), got in zip(cases, parse(world, cases), strict=True):
        expected = ref.parse_nccl_list(value, list(elems))
        assert got == expected, f"parse_nccl_list({value!r}): got {got}, expected {expected}"


def drawn_setting(rng: random.Random, elems: tuple[str, ...]) -> str:
    """A valid NCCL_ALGO / NCCL_PROTO string the judge makes up: 1-4 entries, any case, '^' sometimes."""
    entries = []
    for i in range(rng.randint(1, 4)):
        names = rng.sample(elems, rng.randint(1, min(3, len(elems))))
        names = [n.upper() if rng.random() < 0.3 else n.lower() if rng.random() < 0.5 else n for n in names]
        body = ("^" if rng.random() < 0.3 else "") + ",".join(names)
        if i == 0 and rng.random() < 0.5:
            entries.append(body)  # only the first entry may leave out the function
        else:
            entries.append(f"{rng.choice(FUNCS).lower()}:{body}")
    return ";".join(entries)


@pytest.mark.part("04.env_parsing")
@pytest.mark.concept("parse_lists")
def test_settings_drawn_by_the_judge(world: World, reference) -> None:
    ref = reference("nccl_env")
    rng = random.Random(20260316)
    cases = [(drawn_setting(rng, e), e) for e in (ALGOS, PROTOS) for _ in range(12)]
    for (value, elems), got in zip(cases, parse(world, cases), strict=True):
        expected = ref.parse_nccl_list(value, list(elems))
        assert got == expected, f"parse_nccl_list({value!r}): got {got}, expected {expected}"


@pytest.mark.part("04.env_parsing")
@pytest.mark.parametrize(
    "value",
    [
        "ring;tree",  # only the first entry may leave out the function
        "allreduc:ring",  # unknown function
        "ring,foo",  # unknown algorithm
        "ring, tree",  # NCCL does not trim: " tree" is not a name
        "allgather:ring;tree",
    ],
)
@pytest.mark.concept("parse_errors")
def test_errors(world: World, value: str) -> None:
    raises_value_error(world, "nccl_env", "parse_nccl_list", value, list(ALGOS))


# ------------------------------------------------------------------------------------------------------------
# 04.chunks


CHUNK_CASES = [
    # count, elem_size, n_ranks, n_channels, proto, nthreads, buff_bytes
    (1000, 4, 4, 2, "Simple", 512, None),
    (10_000_000, 4, 4, 2, "Simple", 512, None),  # 2.4 loops of 4 x 2 x 512Ki floats
    (3_000_001, 2, 8, 3, "Simple", 256, 1 << 20),
    (1000, 4, 4, 2, "LL", 512, None),
    (200_000, 4, 3, 4, "LL", 512, None),  # several loops of 4 x 3 x 8Ki floats
    (777_777, 8, 4, 2, "LL", 256, None),
    (100_000, 4, 4, 2, "LL128", 640, None),
    (5_000_000, 2, 2, 4, "LL128", 512, None),
]


def drawn_chunk_cases(k: int = 6, seed: int = 20260316) -> list[tuple]:
    """Buffers the judge draws: any count, 2/4/8-byte elements, 2..9 ranks (odd too), 1..5 channels."""
    rng = random.Random(seed)
    cases = []
    for i in range(k):
        proto = PROTOS[i % 3]
        nthreads = rng.choice([256, 512]) if proto != "LL128" else rng.choice([512, 640])
        buff = rng.choice([None, None, 1 << 20, 3 << 19])
        count = rng.randint(1, 6_000_000)
        cases.append(
            (count, rng.choice([2, 4, 8]), rng.randint(2, 9), rng.randint(1, 5), proto, nthreads, buff)
        )
    return cases


CHUNK_CASES += drawn_chunk_cases()


@pytest.mark.part("04.chunks")
@pytest.mark.concept("chunk_layout")
def test_pieces_match_run_ring(world: World, reference) -> None:
    ref = reference("protocols")
    got = many(world, "protocols", "ring_allreduce_chunks", CHUNK_CASES)
    for case, value in zip(CHUNK_CASES, got, strict=True):
        expected = ref.ring_allreduce_chunks(*case)
        if value != expected:
            lines = [f"ring_allreduce_chunks{case}: wrong pieces"]
            for c, (mine, theirs) in enumerate(zip(value or [], expected, strict=False)):
                if mine != theirs:
                    lines.append(f"  channel {c}: got {mine[:4]}..., expected {theirs[:4]}...")
            if not isinstance(value, list) or len(value) != len(expected):
                lines.append(f"  expected one list per channel ({len(expected)}), got {type(value).__name__}")
            raise AssertionError("\n".join(lines))


@pytest.mark.part("04.chunks")
@pytest.mark.concept("chunk_tiling")
def test_pieces_tile_the_buffer(world: World) -> None:
    got = many(world, "protocols", "ring_allreduce_chunks", CHUNK_CASES)
    for case, channels in zip(CHUNK_CASES, got, strict=True):
        spans = sorted((o, n) for pieces in channels for o, n in pieces)
        end = 0
        for offset, nelem in spans:
            assert offset == end and nelem > 0, (
                f"ring_allreduce_chunks{case}: gap or overlap at element {end}"
            )
            end += nelem
        assert end == case[0], f"ring_allreduce_chunks{case}: pieces cover {end} of {case[0]} elements"


# ------------------------------------------------------------------------------------------------------------
# 04.trees


def tree_table(world: World, nranks: int) -> list[Any]:
    return many(world, "trees", "dtree", [(nranks, r) for r in range(nranks)])


def unordered(node: Any) -> Any:
    """A tree node with its children sorted: which child NCCL stores first is no property of the tree."""
    if isinstance(node, list):
        return [unordered(n) for n in node]
    if isinstance(node, dict) and isinstance(node.get("children"), list):
        return {**node, "children": sorted(node["children"], key=repr)}
    return node


@pytest.mark.part("04.trees")
@pytest.mark.concept("dtree_shape")
def test_dtree_against_reference(world: World, reference) -> None:
    ref = reference("trees")
    calls = [(n, r) for n in range(1, 34) for r in range(n)]
    got = many(world, "trees", "dtree", calls)
    for (n, r), value in zip(calls, got, strict=True):
        expected = ref.dtree(n, r)
        # children in any order: a tree is who is whose child, not the order of NCCL's down[] slots
        assert unordered(value) == unordered(expected), f"dtree({n}, {r}): got {value}, expected {expected}"


@pytest.mark.part("04.trees")
@pytest.mark.concept("btree_bits")
def test_btree_against_reference(world: World, reference) -> None:
    ref = reference("trees")
    calls = [(n, r) for n in (1, 2, 3, 5, 13, 14, 16, 17, 31, 100) for r in range(n)]
    for (n, r), value in zip(calls, many(world, "trees", "btree", calls), strict=True):
        expected = ref.btree(n, r)
        # children in any order: a tree is who is whose child, not the order of NCCL's down[] slots
        assert unordered(value) == unordered(expected), f"btree({n}, {r}): got {value}, expected {expected}"


@pytest.mark.part("04.trees")
@pytest.mark.concept("dtree_shape")
def test_pictures_in_trees_cc(world: World) -> None:
    # src/graph/trees.cc draws tree 0 for 14 ranks, the mirrored tree 1 for 12 and the shifted tree 1 for 13.
    # A picture shows who is whose child, not NCCL's child order: compare sets.
    def drawn(table: list[Any], tree: int, ranks: tuple[int, ...]) -> list[set[int]]:
        return [set(table[r][tree]["children"]) for r in ranks]

    t14 = tree_table(world, 14)
    assert drawn(t14, 0, (0, 8, 4, 12, 10)) == [{8}, {4, 12}, {2, 6}, {10, 13}, {9, 11}], (
        "tree 0 of 14 ranks should be 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 10 -> 9, 11"
    )
    t12 = tree_table(world, 12)
    assert t12[11][1]["parent"] == -1 and drawn(t12, 1, (11, 3, 7)) == [{3}, {1, 7}, {5, 9}], (
        "tree 1 of 12 ranks mirrors tree 0: root 11 -> 3; 3 -> 1, 7; 7 -> 5, 9"
    )
    t13 = tree_table(world, 13)
    assert t13[1][1]["parent"] == -1 and drawn(t13, 1, (1, 9, 0)) == [{9}, {5, 0}, {11}], (
        "tree 1 of 13 ranks shifts tree 0 by one: root 1 -> 9; 9 -> 5, 0; 0 -> 11"
    )


@pytest.mark.part("04.trees")
@pytest.mark.concept("dtree_shape")
def test_two_spanning_trees_sharing_the_load(world: World) -> None:
    for n in (2, 7, 8, 13, 24):
        table = tree_table(world, n)
        for t in (0, 1):
            edges = 0
            for r in range(n):
                for c in table[r][t]["children"]:
                    assert table[c][t]["parent"] == r, (
                        f"{n} ranks, tree {t}: {c} is {r}'s child, not its parent"
                    )
                    edges += 1
            assert edges == n - 1, f"{n} ranks, tree {t}: {edges} edges, a spanning tree has {n - 1}"
        both = [r for r in range(n) if table[r][0]["children"] and table[r][1]["children"]]
        allowed = [0] if n % 2 else []  # with the shift, rank 0 is interior in both trees for odd n
        assert both == allowed, f"{n} ranks: ranks {both} are interior in both trees; only {allowed} may be"
