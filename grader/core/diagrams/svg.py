"""The space-time diagram itself, as inline SVG: one lane per rank, time flowing right.

Every call is a box on its rank's lane (sends blue, receives green, waits grey, collectives in their
group's colour); an arrow runs from each send to the receive that got it; a collective's boxes are joined
across the members of its group, and only them. Unmatched messages are drawn open-ended, dashed, with their
story; a hang's unfinished calls run to the right edge, outlined red, with the rank they wait for. Elements
carry ``class`` and ``data-*`` attributes (``msg``, ``data-src``...) so tests and readers can find them.

Time is real time with long pauses drawn shorter: the gap between two consecutive moments at which anything
starts or ends is drawn in proportion to its square root, so a 5 ms wait does not push a 20 us exchange
into one pixel; the axis labels give real milliseconds.
"""

from __future__ import annotations

import bisect
import math
from html import escape

from grader.core.diagrams.matching import Blocked, Collective, Message
from grader.core.timeline import Call, Timeline

LANE = 56
TOP = 44
LEFT = 112
WIDTH = 880
"""The plot's width; unfinished calls and their labels run into ``TAIL`` beyond it."""
TAIL = 260
BOX = 16
COLOURS = {"send": "#4e79a7", "recv": "#59a14f", "wait": "#bab0ac"}
GROUP_COLOURS = ("#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#e15759")
"""Collectives by group, in the order the timeline lists its groups (tableau10, colour-blind aware)."""
DEFS = (
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
    'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>'
    '<marker id="open" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="8" markerHeight="8">'
    '<circle cx="5" cy="5" r="4" fill="white" stroke="#c00"/></marker></defs>'
)


class Clock:
    """Maps seconds to x: consecutive moments ``sqrt(gap)`` apart, scaled to ``WIDTH``."""

    def __init__(self, times: list[float]) -> None:
        self.times = sorted(set(times)) or [0.0]
        steps = [math.sqrt(b - a) for a, b in zip(self.times, self.times[1:], strict=False)]
        positions = [0.0]
        for step in steps:
            positions.append(positions[-1] + step)
        scale = WIDTH / positions[-1] if positions[-1] > 0 else 0.0
        self.positions = [LEFT + p * scale for p in positions]

    def x(self, t: float | None) -> float:
        """The x of time ``t``; None (never ended) is the right edge of the plot plus a margin."""
        if t is None:
            return LEFT + WIDTH + 40
        i = bisect.bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] == t:
            return self.positions[i]
        i = min(max(i, 1), len(self.times) - 1)
        a, b = self.times[i - 1], self.times[i]
        share = (t - a) / (b - a) if b > a else 0.0
        return self.positions[i - 1] + share * (self.positions[i] - self.positions[i - 1])

    def ticks(self, count: int = 6) -> list[tuple[float, float]]:
        """(x, seconds) for ``count`` moments spread evenly over the plot."""
        chosen = {round(i * (len(self.times) - 1) / max(count - 1, 1)) for i in range(count)}
        return [(self.positions[i], self.times[i]) for i in sorted(chosen)]


def lane_y(rank: int) -> float:
    return TOP + LANE * rank + LANE / 2


def group_colours(timeline: Timeline) -> dict[str, str]:
    return {g.name: GROUP_COLOURS[i % len(GROUP_COLOURS)] for i, g in enumerate(timeline.groups)}


def diagram(
    timeline: Timeline, found: list[Message], together: list[Collective], stuck: list[Blocked]
) -> str:
    """The whole SVG element for ``timeline``."""
    times = [t for c in timeline.calls for t in (c.start, c.end) if t is not None]
    clock = Clock(times + [m.arrived for m in found if m.arrived is not None])
    colours = group_colours(timeline)
    height = TOP + LANE * timeline.world_size + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + TAIL}" height="{height}" '
        f'role="img" aria-label="space-time diagram of {escape(timeline.test)}">',
        DEFS,
        *_axis(clock, timeline.world_size),
        *_lanes(timeline),
        *(_collective_link(c, clock, colours) for c in together if len(c.calls) > 1),
        *(_call(c, clock, colours) for c in timeline.calls),
        *(_message(m, clock) for m in found),
        *(_blocked(b, clock) for b in stuck if b.call is not None),
        _departure(timeline, clock),
        "</svg>",
    ]
    return "\n".join(p for p in parts if p)


def _axis(clock: Clock, ranks: int) -> list[str]:
    bottom = TOP + LANE * ranks
    title = "time (ms since the first call; long pauses drawn shorter)"
    out = [f'<text x="{LEFT}" y="14" class="axis">{title}</text>']
    for x, t in clock.ticks():
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 12}" x2="{x:.1f}" y2="{bottom}" class="tick"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP - 16}" class="axis" text-anchor="middle">{t * 1e3:.3g}</text>')
    return out


def _lanes(timeline: Timeline) -> list[str]:
    stuck = {rank for rank, _ in timeline.stuck}
    out = []
    for rank in range(timeline.world_size):
        y = lane_y(rank)
        label = f"rank {rank}" + (" (stuck)" if rank in stuck else "")
        out.append(f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + WIDTH + 40}" y2="{y}" class="lane"/>')
        out.append(f'<text x="8" y="{y + 4}" class="rank" data-rank="{rank}">{escape(label)}</text>')
    return out


def _call(call: Call, clock: Clock, colours: dict[str, str]) -> str:
    x0, x1 = clock.x(call.start), clock.x(call.end)
    kind = "coll" if call.kind == "collective" else call.kind
    classes = f"call {kind}" + ("" if call.ok else " raised") + (" open" if call.end is None else "")
    fill = colours.get(call.group, GROUP_COLOURS[-1]) if kind == "coll" else COLOURS[kind]
    return (
        f'<rect class="{classes}" data-rank="{call.rank}" data-index="{call.index}" '
        f'data-group="{escape(call.group)}" x="{x0:.1f}" y="{lane_y(call.rank) - BOX / 2}" '
        f'width="{max(x1 - x0, 3):.1f}" height="{BOX}" fill="{fill}">'
        f"<title>{escape(describe(call))}</title></rect>"
    )


def describe(call: Call) -> str:
    """A call in words, for its tooltip: 'rank 0: isend to rank 1, 16 B, tag 0, group 0, 0.012 to 0.013'."""
    what = call.op
    if call.kind in ("send", "recv") or (call.kind == "wait" and call.peer is not None):
        way = "to" if call.kind == "send" else "from" if call.kind == "recv" else "with"
        what += f" {way} " + ("any rank" if call.peer is None else f"rank {call.peer}")
    size = "" if call.nbytes is None or call.kind == "wait" else f", {call.nbytes} B"
    tag = f", tag {call.tag}" if call.tag is not None and call.kind in ("send", "recv") else ""
    end = "never returned" if call.end is None else f"to {call.end * 1e3:.3f} ms"
    raised = "" if call.ok else " (raised)"
    return f"rank {call.rank}: {what}{size}{tag}, group {call.group}, {call.start * 1e3:.3f} {end}{raised}"


def _message(message: Message, clock: Clock) -> str:
    if message.send is not None and message.recv is not None:
        x1, y1 = clock.x(message.send.start), lane_y(message.send.rank)
        x2 = clock.x(message.arrived if message.arrived is not None else message.recv.start)
        y2 = lane_y(message.recv.rank)
        title = f"rank {message.src} to rank {message.dst}, {message.send.nbytes} B"
        return (
            f'<line class="msg" data-src="{message.src}" data-dst="{message.dst}" x1="{x1:.1f}" y1="{y1}" '
            f'x2="{x2:.1f}" y2="{y2}" marker-end="url(#arrow)"><title>{escape(title)}</title></line>'
        )
    return _unmatched(message, clock)


def _unmatched(message: Message, clock: Clock) -> str:
    """A send nobody received, or a receive nobody sent to: dashed, half way to the other lane, and its
    story."""
    mine = message.send or message.recv
    assert mine is not None
    other = message.dst if message.send is not None else message.src
    y = lane_y(mine.rank)
    y_other = y + (LANE / 2 if other is None else (lane_y(other) - y) / 2)
    x = clock.x(mine.start)
    if message.send is not None:
        path = f"M{x:.1f},{y} L{x + 40:.1f},{y_other:.1f}"
    else:
        path = f"M{x - 40:.1f},{y_other:.1f} L{x:.1f},{y}"
    story = escape(message.story())
    # an unfinished call's frame says it already, at the right edge
    note = "" if mine.end is None else f'<text x="{x + 4:.1f}" y="{y - BOX:.1f}" class="note">{story}</text>'
    return (
        f'<g class="unmatched" data-src="{message.src}" data-dst="{message.dst}">'
        f'<path d="{path}" marker-start="url(#open)" marker-end="url(#arrow)"/>'
        f"{note}<title>{story}</title></g>"
    )


def _collective_link(collective: Collective, clock: Clock, colours: dict[str, str]) -> str:
    """A line through the boxes of one collective's members, lane to lane."""
    points = " ".join(f"{clock.x(c.start) + 2:.1f},{lane_y(c.rank)}" for c in collective.calls)
    ranks = " ".join(str(c.rank) for c in collective.calls)
    colour = colours.get(collective.group, GROUP_COLOURS[-1])
    return (
        f'<polyline class="coll-link" data-group="{escape(collective.group)}" data-ranks="{ranks}" '
        f'points="{points}" stroke="{colour}"/>'
    )


def _blocked(block: Blocked, clock: Clock) -> str:
    assert block.call is not None
    y = lane_y(block.rank)
    x0 = clock.x(block.call.start)
    peers = " ".join(map(str, block.waits_for))
    return (
        f'<g class="blocked" data-rank="{block.rank}" data-peer="{peers}">'
        f'<rect x="{x0:.1f}" y="{y - BOX / 2 - 3}" width="{clock.x(None) - x0:.1f}" height="{BOX + 6}"/>'
        f'<text x="{clock.x(None) + 6:.1f}" y="{y + 4}" class="stuck">{escape(block.text)}</text></g>'
    )


def _departure(timeline: Timeline, clock: Clock) -> str:
    if timeline.departure_at is None:
        return ""
    rank, index = timeline.departure_at
    call = next((c for c in timeline.calls if (c.rank, c.index) == (rank, index)), None)
    if call is None:
        return ""
    return (
        f'<circle class="departure" data-rank="{rank}" data-index="{index}" cx="{clock.x(call.start):.1f}" '
        f'cy="{lane_y(rank)}" r="11"><title>{escape(timeline.departure)}</title></circle>'
    )
