"""What this catches: the first thing to get right in each part, on the simulated InfiniBand fabric.

Run them with `grade exercise 06`. Every check runs a scenario from rank_programs.py on one rank: two
simulated hosts, your code in between, and completions, QP states and buffers reported back. The hidden suite
checks RoCE, recovery from ERR, flow control, every error status and each IB/RoCE answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from coursekit import verbs as v
from grader.harness import World

RW = v.IBV_ACCESS_LOCAL_WRITE | v.IBV_ACCESS_REMOTE_WRITE | v.IBV_ACCESS_REMOTE_READ


def run(world: World, program: str, **inputs: Any) -> Any:
    [res] = world.run(f"rank_programs:{program}", inputs=inputs)
    return res.value


@pytest.mark.part("06.connect")
@pytest.mark.concept("qp_state_machine")
def test_connect_climbs_reset_init_rtr_rts(world: World) -> None:
    out = run(world, "connect_pair", link_layer="infiniband", routed=False, gid=None, start="RESET")
    states = [[step[:2] for step in log] for log in out["transitions"]]
    climb = [
        [v.IBV_QPS_RESET, v.IBV_QPS_INIT],
        [v.IBV_QPS_INIT, v.IBV_QPS_RTR],
        [v.IBV_QPS_RTR, v.IBV_QPS_RTS],
    ]
    assert states == [climb, climb], f"each QP goes RESET->INIT->RTR->RTS once; got {states}"
    assert out["a_to_b"]["data"] == b"ping over RC".hex(), f"a SEND over the connection: {out['a_to_b']}"


@pytest.mark.part("06.recover")
@pytest.mark.concept("poll_before_reset")
def test_recover_collects_the_failed_write(world: World) -> None:
    out = run(world, "recover_pair", receives=0)
    statuses = [w["status_name"] for w in out["recovered_a"]]
    assert statuses == ["IBV_WC_REM_ACCESS_ERR"], f"recover must return what the CQ held: {statuses}"


@pytest.mark.part("06.send_recv")
@pytest.mark.concept("two_sided_messages")
def test_send_message(world: World) -> None:
    out = run(world, "send_one", payload=b"hello".hex(), size_b=64, access_b=RW, wr_id=41)
    assert out["sent"]["status_name"] == out["got"]["status_name"] == "IBV_WC_SUCCESS", out
    assert out["got"]["byte_len"] == 5 and out["data"].startswith(b"hello".hex()), out["got"]


@pytest.mark.part("06.rdma_write")
@pytest.mark.concept("one_sided_write")
def test_rdma_write_is_one_sided(world: World) -> None:
    out = run(
        world, "write_one", payload="aabbcc", offset=10, key="good", access_b=RW, qp_access_b=RW, imm=None
    )
    assert out["done"]["status_name"] == "IBV_WC_SUCCESS", out["done"]
    assert bytes.fromhex(out["data"])[10:13] == b"\xaa\xbb\xcc", "the bytes land at remote addr + 10"
    assert out["target_cq"] == [], "nothing completes on the target of an RDMA WRITE"


@pytest.mark.part("06.rdma_write")
@pytest.mark.concept("remote_keys")
def test_bad_rkey_is_a_remote_access_error(world: World) -> None:
    out = run(world, "write_one", payload="aa", offset=0, key="lkey", access_b=RW, qp_access_b=RW, imm=None)
    assert out["done"]["status_name"] == "IBV_WC_REM_ACCESS_ERR", out["done"]


@pytest.mark.part("06.rdma_read")
@pytest.mark.concept("one_sided_read")
def test_rdma_read(world: World) -> None:
    out = run(world, "read_one", offset=5, length=6, access_a=RW, access_b=RW, qp_access_b=RW)
    remote = bytes((7 * i + 3) % 256 for i in range(256))
    assert out["done"]["status_name"] == "IBV_WC_SUCCESS", out["done"]
    assert bytes.fromhex(out["data"]) == remote[5:11], out["data"]


@pytest.mark.part("06.ib_vs_roce")
@pytest.mark.concept("answer_format")
def test_every_question_has_an_answer_of_the_right_kind(world: World) -> None:
    [res] = world.call("answers", "answers", args=[()])
    [questions] = [r.value for r in world.run("rank_programs:questions", inputs={})]
    got = res.returned
    assert isinstance(got, dict) and set(got) == set(questions), f"answer exactly {sorted(questions)}"
    for key, choices in questions.items():
        if choices is None:
            assert type(got[key]) is int, f"{key}: a number (int), got {got[key]!r}"
        else:
            assert got[key] in choices, f"{key}: one of {sorted(choices)}, got {got[key]!r}"
