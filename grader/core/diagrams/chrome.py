"""A ``Timeline`` as Chrome trace-event JSON, for Perfetto's UI and chrome://tracing.

The Trace Event Format (the Google document both tools follow; Perfetto's
docs/getting-started/other-formats.md): a JSON object with a ``traceEvents`` array. Here each rank is a
process (``pid`` = rank, named by an ``M`` ``process_name`` event) with one thread (``tid`` 0), each call a
complete event (``ph`` ``X``: ``ts`` and ``dur`` in microseconds), and each matched message a flow: ``s`` on
the sender, ``f`` on the receiver with ``bp`` ``e``. Perfetto binds a flow event to the slice open on its
thread at its ``ts`` (``JsonTraceParserImpl::ParseJsonPacket``, cases 's' and 'f' in
src/trace_processor/importers/json/json_trace_parser_impl.cc), so each flow event sits at the middle of its
call. A rank's calls never overlap (one thread makes them), which the format asks of ``X`` events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.core.diagrams.matching import messages
from grader.core.diagrams.svg import describe
from grader.core.timeline import Call, Timeline

if TYPE_CHECKING:
    from grader.core.formats import JSON, JSONValue

MIN_DUR_US = 1.0
"""A call shorter than this is drawn this long, so a flow still finds it."""


def chrome_trace(timeline: Timeline) -> JSON:
    """The trace-event JSON object for ``timeline``."""
    end = max((t for c in timeline.calls for t in (c.start, c.end) if t is not None), default=0.0)
    events: list[JSONValue] = []
    for rank in range(timeline.world_size):
        events.append(
            {"name": "process_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}}
        )
        events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": "calls"}})
    events += [_slice(call, end) for call in timeline.calls]
    flow = 0
    for message in messages(timeline):
        if message.send is None or message.recv is None:
            continue
        flow += 1
        events.append(_flow("s", flow, message.send, end))
        events.append(_flow("f", flow, message.recv, end) | {"bp": "e"})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"test": timeline.test, "world_size": timeline.world_size, "status": timeline.status},
    }


def _span(call: Call, end: float) -> tuple[float, float]:
    """(ts, dur) in microseconds; a call that never returned runs to the last recorded moment."""
    ts = call.start * 1e6
    stop = (end if call.end is None else call.end) * 1e6
    return round(ts, 3), round(max(stop - ts, MIN_DUR_US), 3)


def _slice(call: Call, end: float) -> JSON:
    ts, dur = _span(call, end)
    return {
        "name": call.op + ("" if call.end is not None else " (never returned)"),
        "cat": call.kind,
        "ph": "X",
        "pid": call.rank,
        "tid": 0,
        "ts": ts,
        "dur": dur,
        "args": {"what": describe(call), "group": call.group, "peer": call.peer, "bytes": call.nbytes},
    }


def _flow(phase: str, flow: int, call: Call, end: float) -> JSON:
    ts, dur = _span(call, end)
    return {
        "name": "message",
        "cat": "message",
        "ph": phase,
        "id": flow,
        "pid": call.rank,
        "tid": 0,
        "ts": round(ts + dur / 2, 3),
    }
