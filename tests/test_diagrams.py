"""Space-time diagrams from plain data: the flight file, matching, departures, pages, Chrome traces, files.

Every timeline here is built by hand, so these run without ranks; tests/test_diagrams_worlds.py draws real
worlds. ``check_trace_events`` validates Chrome trace-event JSON against the format's documented fields.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest

from grader.core.diagrams.chrome import chrome_trace
from grader.core.diagrams.files import write_diagrams
from grader.core.diagrams.matching import blocked, collectives, messages
from grader.core.diagrams.page import html_page
from grader.core.results import ExerciseResult
from grader.core.timeline import Call, Group, Timeline
from grader.harness.flight import (
    BEGIN,
    END,
    FLIGHT_BYTES,
    KIND_BEGIN,
    KIND_GROUP,
    KIND_NAME,
    KIND_RETURN,
    MAX_CALLS_PER_TEST,
    NONE32,
    FlightLog,
    read_flight,
)
from grader.harness.patterns import first_departure, from_root, pairwise, ring, to_root
from grader.learner.diagrams import TEXT_MAX_LINES, text_diagram

# ---------------------------------------------------------------------------------------------------------
# the Trace Event Format's documented fields
#
# The format is the Google document "Trace Event Format" that chrome://tracing and Perfetto follow (Perfetto's
# docs/getting-started/other-formats.md links it): the JSON Object Format is {"traceEvents": [...],
# "displayTimeUnit": "ms" or "ns", "otherData": {...}}; every event has name, ph, pid, tid and (but for
# metadata) ts in microseconds; a complete event (X) has dur; a metadata event (M) names a process or thread
# in args.name; flow events (s, t, f) share an id, and "bp": "e" binds an f to its enclosing slice. Perfetto's
# JSON importer binds a flow event to the slice open on its thread at its ts (json_trace_parser_impl.cc,
# cases 's' and 'f'), and wants the X slices of one thread to nest.

PHASES = {"X", "M", "s", "t", "f", "B", "E", "i", "I", "C"}
METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def check_trace_events(trace: Any) -> None:
    """Fail unless ``trace`` is trace-event JSON as documented, with every flow bound to a slice."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    assert isinstance(trace.get("otherData", {}), dict)
    slices: dict[tuple[int, int], list[tuple[float, float]]] = {}
    flows: dict[Any, list[dict[str, Any]]] = {}
    for event in trace["traceEvents"]:
        assert event["ph"] in PHASES and isinstance(event["name"], str), event
        assert type(event["pid"]) is int and type(event["tid"]) is int, event
        if event["ph"] == "M":
            assert event["name"] in METADATA and isinstance(event["args"]["name"], str), event
            continue
        assert isinstance(event["ts"], int | float) and event["ts"] >= 0, event
        if event["ph"] == "X":
            assert isinstance(event["dur"], int | float) and event["dur"] >= 0, event
            slices.setdefault((event["pid"], event["tid"]), []).append(
                (event["ts"], event["ts"] + event["dur"])
            )
        if event["ph"] in "stf":
            assert isinstance(event["id"], int | str) and isinstance(event["cat"], str), event
            assert event.get("bp", "e") == "e", event
            flows.setdefault(event["id"], []).append(event)
    for spans in slices.values():  # one thread's complete events nest: no partial overlap
        spans.sort()
        for (a0, a1), (b0, b1) in itertools.pairwise(spans):
            assert b0 >= a1 or b1 <= a1, (a0, a1, b0, b1)
    for events in flows.values():
        assert sorted(e["ph"] for e in events) == ["f", "s"], events
        for e in events:
            enclosing = slices.get((e["pid"], e["tid"]), [])
            assert any(start <= e["ts"] <= end for start, end in enclosing), f"flow event on no slice: {e}"


# ---------------------------------------------------------------------------------------------------------
# timelines by hand


def call(
    rank: int, index: int, op: str, peer: int | None, start: float, end: float | None, **kw: Any
) -> Call:
    fields: dict[str, Any] = {"group_peer": peer, "nbytes": 16, "tag": 0, "group": "0", "of": None} | kw
    return Call(rank=rank, index=index, op=op, peer=peer, start=start, end=end, **fields)


def timeline(calls: list[Call], size: int, **kw: Any) -> Timeline:
    groups = kw.pop("groups", (Group("0", tuple(range(size))),))
    return Timeline(
        test="test_x[4ranks]",
        number="1.1",
        part="02.ring",
        concept="c",
        world_size=size,
        status="failed",
        calls=tuple(calls),
        groups=groups,
        **kw,
    )


def ring_calls(p: int, steps: int, wrong: tuple[int, int, int] | None = None) -> list[Call]:
    """Step k: every rank sends to r+1 at time k, and receives from r-1 until k + 0.5; ``wrong`` (rank, step,
    peer) sends that one message elsewhere."""
    out = []
    for r in range(p):
        for k in range(steps):
            to = wrong[2] if wrong and (r, k) == wrong[:2] else (r + 1) % p
            out.append(call(r, 2 * k, "isend", to, float(k), k + 0.1))
            out.append(call(r, 2 * k + 1, "recv", (r - 1) % p, k + 0.1, k + 0.5))
    return out


def test_a_ring_departure_names_the_step_the_rank_and_where_a_ring_sends() -> None:
    found = first_departure(ring(), timeline(ring_calls(4, 6, wrong=(2, 3, 0)), 4))
    assert found is not None and found.text == "step 3: rank 2 sent to rank 0; a ring sends to rank 3"
    assert (found.rank, found.index) == (2, 6)


def test_a_ring_that_sends_one_message_too_many_departs_there() -> None:
    found = first_departure(ring(messages=lambda p: 2 * (p - 1)), timeline(ring_calls(3, 5), 3))
    assert found is not None and found.text.startswith("step 4: rank 0 sent one message more; a ring sends 4")


def test_a_correct_ring_does_not_depart() -> None:
    assert first_departure(ring(direction=1, messages=6), timeline(ring_calls(4, 6), 4)) is None
    assert first_departure(ring(direction=-1), timeline(ring_calls(4, 6), 4)) is not None


def test_a_broadcast_that_forwards_before_it_received_departs() -> None:
    calls = [
        call(0, 0, "send", 1, 0.0, 1.0),
        call(1, 0, "recv", 0, 0.0, 1.0),
        call(2, 0, "send", 3, 0.2, 0.3),  # rank 2 forwards before anything reached it
        call(2, 1, "recv", 0, 0.4, 2.0),
        call(0, 1, "send", 2, 1.0, 2.0),
        call(3, 0, "recv", 2, 0.2, 0.3),
    ]
    found = first_departure(from_root(0), timeline(calls, 4))
    assert found is not None and found.rank == 2
    assert "rank 2 sent to rank 3 before its message arrived" in found.text


def test_a_reduce_whose_root_sends_departs_and_pairwise_repeats_depart() -> None:
    calls = [
        call(1, 0, "send", 0, 0.0, 1.0),
        call(0, 0, "recv", 1, 0.0, 1.0),
        call(0, 1, "send", 1, 1.5, 2.0),
    ]
    found = first_departure(to_root(0), timeline(calls, 2))
    assert found is not None and "in a reduce to rank 0 the root only receives" in found.text
    twice = [call(0, 0, "send", 1, 0.0, 1.0), call(0, 1, "send", 1, 1.0, 2.0)]
    found = first_departure(pairwise(), timeline(twice, 3))
    assert found is not None and "rank 0 sent to rank 1 again" in found.text


def test_sub_group_departures_name_group_and_global_ranks() -> None:
    calls = [call(5, 0, "isend", 3, 0.0, 0.1, group="7", group_peer=1)]
    found = first_departure(ring(direction=1), timeline(calls, 6, groups=(Group("7", (1, 3, 5)),)))
    assert found is not None
    assert found.text == (
        "step 0: group rank 2 (rank 5) sent to group rank 1 (rank 3); a ring sends to group rank 0 (rank 1)"
    )


# ---------------------------------------------------------------------------------------------------------
# matching and hangs


def test_messages_match_in_order_per_pair_and_tag_and_say_what_is_missing() -> None:
    calls = [
        call(0, 0, "isend", 1, 0.0, 0.1),
        call(0, 1, "isend", 1, 0.2, 0.3),
        call(1, 0, "irecv", 0, 0.0, 0.05),
        call(1, 1, "wait", 0, 0.05, 0.4, of=0),
        call(2, 0, "recv", 1, 0.1, None),
    ]
    found = messages(timeline(calls, 3, stuck=((2, "blocked in dist.recv"),)))
    matched = [m for m in found if m.matched]
    assert len(matched) == 1 and matched[0].arrived == 0.4  # an irecv arrives when its wait returns
    stories = {m.story() for m in found if not m.matched}
    assert stories == {
        "rank 0 sent a message to rank 1 that was never received",
        "rank 2 waits for a message from rank 1 that was never sent",
    }


def test_a_rank_blocked_in_a_wait_waits_for_the_peer_of_its_request() -> None:
    calls = [call(0, 0, "isend", 1, 0.0, 0.1), call(0, 1, "wait", 1, 0.2, None, of=0)]
    [stuck] = blocked(timeline(calls, 2, stuck=((0, "still running"),)))
    assert stuck.text == "waiting for its isend (send to rank 1)" and stuck.waits_for == (1,)


def test_a_collective_a_member_never_called_is_named() -> None:
    calls = [call(r, 0, "all_reduce", None, 0.0, None) for r in (0, 1, 2)]
    [collective] = collectives(timeline(calls, 4))
    assert collective.story() == "all_reduce #0 of group 0: rank(s) 3 never called it"
    [stuck, *_] = blocked(timeline(calls, 4, stuck=((0, "x"),)))
    assert stuck.text == "blocked in all_reduce of group 0, which rank(s) 3 never called"


# ---------------------------------------------------------------------------------------------------------
# the flight file


def flight_log(path: Path, world_size: int) -> FlightLog:
    log = FlightLog()
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    log.open(fd)
    os.close(fd)
    log.reset(world_size)
    return log


def test_the_flight_file_round_trips_and_skips_what_student_code_scribbled(tmp_path: Path) -> None:
    path = tmp_path / "rank0.flight"
    log = flight_log(path, world_size=2)
    first = log.begin("isend", peer=1, group_peer=1, nbytes=16, tag=0, group=("0", (0, 1)))
    log.end(first, ok=True)
    never_named = BEGIN.pack(KIND_BEGIN, 7, 77, 1, 1, 4, 0, 78, 1.0, NONE32)  # names 77 and 78: unknown
    never_begun = END.pack(KIND_RETURN, 99, 1.0, 1, NONE32)
    not_a_time = BEGIN.pack(KIND_BEGIN, 8, 0, 1, 1, 4, 0, 1, math.nan, NONE32)
    log._append(never_named + never_begun + not_a_time)  # as if student code wrote them
    second = log.begin("recv", peer=None, group_peer=None, nbytes=16, tag=0, group=("0", (0, 1)))
    log.end(second, ok=False, peer=1)  # a receive from any source learns its sender when it returns
    flight = read_flight(path.read_bytes())  # read while the rank still has it mapped, as the judge does
    assert [c["op"] for c in flight.calls] == ["isend", "recv"]
    assert flight.calls[0] | {"start": 0.0, "end": 0.0} == {
        "index": 0, "op": "isend", "peer": 1, "group_peer": 1, "nbytes": 16, "tag": 0, "group": "0",
        "start": 0.0, "of": None, "end": 0.0, "ok": True,
    }  # fmt: skip
    assert flight.calls[1]["peer"] == 1 and flight.calls[1]["ok"] is False
    assert flight.calls[1]["group_peer"] is None and flight.calls[1]["start"] <= flight.calls[1]["end"]
    assert flight.groups == {"0": (0, 1)} and not flight.truncated


def test_what_a_rank_passed_that_is_no_plain_int_reads_back_as_none(tmp_path: Path) -> None:
    path = tmp_path / "rank0.flight"
    log = flight_log(path, world_size=2)
    index = log.begin("send", peer=2**40, group_peer=True, nbytes=2**70, tag="7", group=("g", (0, 2**33)))
    log.end(index, ok=True, peer=-(2**31))
    flight = read_flight(path.read_bytes())
    [call] = flight.calls
    assert (call["peer"], call["group_peer"], call["nbytes"], call["tag"]) == (None, None, None, None)
    assert flight.groups == {}  # a member that is no rank: the group is not shown rather than shown wrong


def test_a_rank_records_its_share_of_the_cap_then_marks_the_truncation(tmp_path: Path) -> None:
    path = tmp_path / "rank0.flight"
    log = flight_log(path, world_size=MAX_CALLS_PER_TEST // 2)  # a share of 2 calls
    begun = [log.begin("send", peer=1, group_peer=1, nbytes=4, tag=0, group=("0", (0, 1))) for _ in range(5)]
    for index in begun:
        log.end(index, ok=True)  # the calls begun before the cap still record their end
    flight = read_flight(path.read_bytes())
    assert len(flight.calls) == 2 and flight.truncated
    assert all(c["end"] is not None for c in flight.calls)
    log.reset(world_size=2)  # the next task starts from an empty file
    assert read_flight(path.read_bytes()).calls == []


def test_records_student_code_forged_in_a_flight_file_never_raise(tmp_path: Path) -> None:
    """Rank code can write over its flight file: whatever it wrote, the judge reads the well-formed records
    before it and never raises (a record cut off, a kind no recorder writes, a group of any count)."""
    path = tmp_path / "rank0.flight"
    log = flight_log(path, world_size=2)
    log.end(log.begin("send", peer=1, group_peer=1, nbytes=4, tag=0, group=("0", (0, 1))), ok=True)
    good = path.read_bytes()[: log.offset]
    forged = [
        BEGIN.pack(KIND_BEGIN, 1, 0, 1, 1, 4, 0, 1, 2.0, NONE32)[:9],  # cut off
        bytes([KIND_GROUP, 1, 0, 255, 255]),  # 65,535 members announced, none there
        bytes([KIND_NAME, 5, 0, 200]) + b"ab",  # a name shorter than announced
        b"\xff" * 64,  # no kind at all
        bytes(range(256)),
    ]
    for tail in forged:
        flight = read_flight(good + tail)
        assert [c["op"] for c in flight.calls] == ["send"] and flight.calls[0]["end"] is not None, tail


def test_a_full_flight_file_stops_recording_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "rank0.flight"
    log = flight_log(path, world_size=1)
    log.cap = FLIGHT_BYTES  # more calls than fit: the file fills before the cap
    while not log.truncated:
        log.end(log.begin("send", peer=0, group_peer=0, nbytes=4, tag=0, group=("0", (0,))), ok=True)
    flight = read_flight(path.read_bytes())
    assert flight.truncated and len(flight.calls) == log.count and path.stat().st_size == FLIGHT_BYTES
    assert all(c["end"] is not None for c in flight.calls[:-1])


# ---------------------------------------------------------------------------------------------------------
# pages, traces, files, text


def test_what_the_ranks_wrote_is_escaped_everywhere_on_the_page() -> None:
    evil = "<img src=x onerror=alert(1)>"
    calls = [
        call(0, 0, "all_reduce", None, 0.0, 0.1, group=evil),
        call(1, 0, "all_reduce", None, 0.0, 0.1, group=evil),
    ]
    page = html_page(timeline(calls, 2, groups=(Group(evil, (0, 1)),), verdict=evil))
    assert evil not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script" not in page


def test_a_hang_as_a_chrome_trace_is_valid_trace_event_json() -> None:
    calls = [
        call(0, 0, "send", 1, 0.0, None),
        call(1, 0, "recv", 0, 0.001, 0.002),
        call(1, 1, "send", 0, 0.003, None),
    ]
    trace = json.loads(json.dumps(chrome_trace(timeline(calls, 2))))
    check_trace_events(trace)
    assert {e["pid"] for e in trace["traceEvents"]} == {0, 1}


def test_the_trace_checker_refuses_a_flow_bound_to_no_slice() -> None:
    trace = chrome_trace(timeline([call(0, 0, "send", 1, 0.0, 0.1), call(1, 0, "recv", 0, 0.0, 0.1)], 2))
    next(e for e in trace["traceEvents"] if e["ph"] == "f")["ts"] = 10_000_000.0
    with pytest.raises(AssertionError, match="flow event on no slice"):
        check_trace_events(trace)


def test_diagrams_are_written_atomically_within_the_budget_and_replace_the_last_run(tmp_path: Path) -> None:
    (tmp_path / "9.9-old.html").write_text("from the last run")
    many = tuple(dataclasses.replace(timeline(ring_calls(4, 6), 4), number=f"1.{i}") for i in range(1, 6))
    one = len(html_page(many[0]).encode())
    written = write_diagrams(many, tmp_path, budget=3 * one + 10)
    assert [p.name for p in written.pages] == [f"1.{i}-test_x-4ranks.html" for i in (1, 2, 3)]
    assert len(written.left_out) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in written.pages]  # no temp files


def test_the_text_diagram_fits_20_lines_for_8_ranks() -> None:
    calls = ring_calls(8, 40) + [call(r, 80, "recv", (r - 1) % 8, 50.0, None) for r in range(8)]
    stuck = tuple((r, "blocked in dist.recv") for r in range(8))
    lines = text_diagram(timeline(calls, 8, stuck=stuck, expected="a ring", departure="step 3: ..."), 100)
    assert len(lines) <= TEXT_MAX_LINES
    assert lines[1].startswith("  rank 0 | ->1 <-7") and "...+" in lines[1]
    assert any("deadlock" in line for line in lines)


def test_a_result_carries_its_timelines_through_json() -> None:
    result = ExerciseResult(
        exercise="02", title="", graded="", device="cpu", timelines=(timeline(ring_calls(2, 1), 2),)
    )
    assert ExerciseResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert re.search(r'"calls": \[\[0, 0, "isend"', json.dumps(result.to_dict()))


def test_a_rank_a_hang_stopped_short_is_not_a_departure_but_one_that_finished_short_is() -> None:
    stopped = ring_calls(3, 2) + [call(r, 4, "recv", (r - 1) % 3, 9.0, None) for r in range(3)]
    assert first_departure(ring(messages=4), timeline(stopped, 3)) is None
    found = first_departure(ring(messages=4), timeline(ring_calls(3, 2), 3))
    assert found is not None and found.text == "rank 0 sent 2 message(s); a ring sends 4 per rank"
