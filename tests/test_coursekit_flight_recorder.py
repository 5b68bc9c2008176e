"""coursekit.flight_recorder: its dumps have the schema of a live torch dump, its counters behave like
ProcessGroupNCCL's, the shipped JSON is what the generator writes, and torch's own analyzer agrees with every
scenario's expected finding."""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from coursekit import flight_recorder as fr
from coursekit import fr_scenarios
from coursekit.flight_recorder import ENTRY_KEYS, Group, Recorder, world_group
from coursekit.fr_scenarios import SCENARIOS

# ---------------------------------------------------------------------------------------------------------
# the schema, against a dump recorded live: gloo records flight-recorder entries too (torch >= 2.8)


def _live(rank: int, store: str, out: str) -> None:
    os.environ["TORCH_FR_BUFFER_SIZE"] = "64"  # read when the recorder is first used, in this process
    import torch._C._distributed_c10d as c10d

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    dist.all_reduce(torch.ones(3, 4))
    dist.all_gather([torch.empty(5), torch.empty(5)], torch.ones(5))
    sub = dist.new_group([0, 1])
    dist.all_reduce(torch.ones(2, dtype=torch.bfloat16), group=sub)
    dist.barrier()
    if rank == 0:
        with open(out, "w") as f:
            f.write(c10d._dump_fr_trace_json(True, False).decode())
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def live_dump() -> dict:
    import torch._C._distributed_c10d as c10d

    if not hasattr(c10d, "_dump_fr_trace_json"):
        pytest.skip("this torch has no _dump_fr_trace_json")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank0.json")
        store = os.path.join(tmp, "store")
        mp.start_processes(_live, args=(store, out), nprocs=2, join=True, start_method="fork")
        with open(out) as f:
            return json.load(f)


def test_top_level_keys_and_version_match_a_live_dump(live_dump: dict) -> None:
    ours = Recorder(0, [world_group(2)])
    ours.collective("all_reduce", [3, 4])
    assert set(ours.dump()) == set(live_dump)
    assert live_dump["version"] == fr.SCHEMA_VERSION == ours.dump()["version"]


def test_entries_have_the_keys_and_types_of_a_live_dump(live_dump: dict) -> None:
    ours = Recorder(0, [world_group(2), Group("1", "undefined", (0, 1))], backend="gloo")
    ours.collective("all_reduce", [3, 4])
    ours.collective("all_gather", [5])
    ours.collective("all_reduce", [2], group="1", dtype="BFloat16")
    live = live_dump["entries"]
    for mine, real in zip(ours.dump()["entries"], live, strict=False):
        assert set(mine) == set(real) == ENTRY_KEYS
        assert {k: type(v) for k, v in mine.items()} == {k: type(v) for k, v in real.items()}
        for key in ("profiling_name", "process_group", "pg_id", "collective_seq_id", "p2p_seq_id", "op_id",
                    "input_sizes", "output_sizes", "input_dtypes", "output_dtypes", "is_p2p"):  # fmt: skip
            assert mine[key] == real[key], key
    assert live[-1]["profiling_name"] == "gloo:barrier"


def test_pg_status_is_strings(live_dump: dict) -> None:
    ours = Recorder(0, [world_group(2)]).dump()["pg_status"]
    for status in [*live_dump["pg_status"].values(), *ours.values()]:
        assert set(status) == {
            "last_enqueued_collective",
            "last_started_collective",
            "last_completed_collective",
        }
        assert all(isinstance(v, str) and int(v) >= -1 for v in status.values())


# ---------------------------------------------------------------------------------------------------------
# counters and the ring buffer


def test_counters_follow_process_group_nccl() -> None:
    tp = Group("1", "tp", (2, 3))
    r = Recorder(3, [world_group(4), Group("2", "other", (0, 1)), tp])
    r.collective("all_reduce", [8])
    r.send(0, [4], group="1")  # group-local ranks: rank 3 is 1 in group "1"
    r.collective("all_reduce", [8], group="1")
    r.recv(0, [4], group="1")
    r.collective("all_gather", [8])
    e = r.dump()["entries"]
    assert [x["record_id"] for x in e] == [0, 1, 2, 3, 4]  # over all groups
    assert [x["pg_id"] for x in e] == [0, 1, 1, 1, 0]  # rank 3 never created group "2"
    assert [(x["collective_seq_id"], x["p2p_seq_id"], x["op_id"]) for x in e] == [
        (1, 0, 1),
        (0, 1, 1),  # a send keeps the group's collective_seq_id
        (1, 1, 2),
        (1, 2, 3),
        (2, 0, 2),
    ]
    assert e[1]["profiling_name"] == "nccl:send 1->0" and e[3]["profiling_name"] == "nccl:recv 1<-0"
    assert e[4]["output_sizes"] == [[4, 8]]
    assert set(r.dump()["pg_config"]) == {"0", "1"}
    assert r.dump()["pg_config"]["1"]["ranks"] == "[2, 3]"


def test_ring_buffer_keeps_the_newest_entries() -> None:
    r = Recorder(0, [world_group(2)], buffer_size=3)
    for state in ("completed", "completed", "completed", "started", "scheduled"):
        r.collective("all_reduce", [1], state=state)
    d = r.dump()
    assert [x["collective_seq_id"] for x in d["entries"]] == [3, 4, 5]
    assert d["pg_status"]["0"] == {
        "last_enqueued_collective": "5",
        "last_started_collective": "4",
        "last_completed_collective": "3",
    }
    assert d["entries"][1]["time_discovered_completed_ns"] == 0 and d["entries"][1]["retired"] is False
    assert "entries" not in Recorder(0, [world_group(2)]).dump()  # dump_json leaves the key out when empty


def test_shipped_json_is_what_the_generator_writes() -> None:
    for name, make in SCENARIOS.items():
        shipped, fresh = fr_scenarios.load(name), make()
        assert shipped.dumps == fresh.dumps, (
            f"coursekit/data/fr_{name}.json is stale: python -m coursekit.fr_scenarios"
        )
        assert shipped.expected == fresh.expected and shipped.story == fresh.story


# ---------------------------------------------------------------------------------------------------------
# torch's own analyzer (torch/distributed/flight_recorder) agrees with the expected findings

_KIND = {
    "COLLECTIVE_TYPE_MISMATCH": "op",
    "SIZE_OR_SYNTAX_MISMATCH": "sizes",
    "COLLECTIVE_DTYPE_MISMATCH": "dtypes",
}


def _torch_findings(dumps: dict) -> dict:
    """First failing collective per group, as (seq id, kind, ranks), from torch's build_collectives."""
    builder = pytest.importorskip("torch.distributed.flight_recorder.components.builder")
    utils = pytest.importorskip("torch.distributed.flight_recorder.components.utils")
    logging.disable(logging.CRITICAL)  # fr_trace logs every finding
    try:
        pg_config = {int(r): d["pg_config"] for r, d in dumps.items()}
        # fr_trace pairs p2p ops separately; here only collectives are compared
        entries = {
            int(r): [e for e in copy.deepcopy(d.get("entries", [])) if not e["is_p2p"]]
            for r, d in dumps.items()
        }
        entries = utils.align_trace_from_beginning(dict(sorted(entries.items())))
        _, groups, _, members, guids = builder.build_groups_memberships(pg_config)
        _, collectives, _ = builder.build_collectives(entries, groups, members, guids, fr.SCHEMA_VERSION)
    finally:
        logging.disable(logging.NOTSET)
    found = {}
    for c in collectives:  # a collective some ranks never joined still passes, with missing_ranks set
        if c.group_id in found or (c.pass_check and not c.missing_ranks):
            continue
        if c.missing_ranks:
            found[c.group_id] = (c.collective_seq_id, "missing", sorted(c.missing_ranks))
        else:
            kinds = {_KIND[m.type_of_mismatch.state.name] for m in c.mismatch_collectives.values()}
            found[c.group_id] = (c.collective_seq_id, *kinds, sorted(c.mismatch_collectives))
    return found


def _expected(scenario: fr_scenarios.Scenario) -> dict:
    return {g: (f["collective_seq_id"], f["kind"], f["ranks"]) for g, f in scenario.expected.items()}


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "ring_buffer_wrapped"])
def test_torch_fr_trace_agrees_on_the_shipped_scenarios(name: str) -> None:
    scenario = fr_scenarios.load(name)
    assert _torch_findings(scenario.dumps) == _expected(scenario)


def test_torch_fr_trace_agrees_on_random_scenarios() -> None:
    # Wrapped buffers are left out: fr_trace aligns the ranks' buffers by record_id, which counts send/recv
    # too, so with uneven point-to-point traffic it drops collectives a rank did record (ring_buffer_wrapped:
    # it reports collective 29 where rank 1 in fact stopped before 41). The exercise aligns by seq id instead.
    checked = 0
    for seed in range(120):
        scenario = fr_scenarios.random_scenario(seed)
        if any(d.get("entries", [{}])[0].get("record_id", 0) > 0 for d in scenario.dumps.values()):
            continue  # some ring buffer has wrapped
        assert _torch_findings(scenario.dumps) == _expected(scenario), (seed, scenario.story)
        checked += 1
    assert checked > 60
