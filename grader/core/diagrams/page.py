"""A self-contained HTML page for one ``Timeline``: what the test was, what went wrong, the diagram, a legend.

No script, no network, no file beside it: one inline stylesheet and one inline SVG, so the page opens from a
zip, an LMS or a mail attachment. Everything the ranks recorded is escaped (student code could have
written it).
"""

from __future__ import annotations

from html import escape

from grader.core.diagrams.matching import Blocked, blocked, collectives, deadlock, messages
from grader.core.diagrams.svg import COLOURS, diagram, group_colours
from grader.core.timeline import Timeline

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1300px}
h1{font-size:1.3em;margin:0 0 .3em}pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
.departure-line{color:#a00;font-weight:600}.stuck-line{color:#a00}
svg text{font:12px system-ui,sans-serif}svg .rank{font-weight:600}svg .axis{fill:#666;font-size:11px}
svg .lane{stroke:#999;stroke-width:1}svg .tick{stroke:#eee}
svg .call{stroke:#333;stroke-width:.5}svg .raised{stroke:#c00;stroke-dasharray:3 2;stroke-width:1.5}
svg .msg{stroke:#333;stroke-width:1.2}svg .coll-link{fill:none;stroke-width:3;opacity:.55}
svg .unmatched path{fill:none;stroke:#c00;stroke-width:1.4;stroke-dasharray:5 3}svg .note{fill:#c00}
svg .blocked rect{fill:none;stroke:#c00;stroke-width:2}svg .stuck{fill:#c00;font-weight:600}
svg .departure{fill:none;stroke:#c00;stroke-width:2.5}
.legend span{display:inline-block;margin-right:1.2em}.legend i{display:inline-block;width:1.2em;height:.8em;
margin-right:.3em;vertical-align:middle;border:1px solid #333}
"""


def html_page(timeline: Timeline) -> str:
    """The page for ``timeline``."""
    found, together, stuck = messages(timeline), collectives(timeline), blocked(timeline)
    sections = [
        f"<h1>{escape(timeline.test)}</h1>",
        _facts(timeline),
        f"<pre>{escape(timeline.verdict)}</pre>" if timeline.verdict else "",
        _expected(timeline),
        _deadlock(stuck),
        diagram(timeline, found, together, stuck),
        _legend(timeline),
        _hang(stuck),
        _list("Messages without a match", [m.story() for m in found if not m.matched]),
        _list("Collectives the ranks did not all make", [s for c in together if (s := c.story())]),
        _list("About this recording", _notes(timeline)),
    ]
    body = "\n".join(s for s in sections if s)
    title = f"{timeline.test}: space-time diagram"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _facts(timeline: Timeline) -> str:
    idea = f": {escape(timeline.idea.rstrip('.'))}" if timeline.idea else ""
    return (
        f"<p>Test {escape(timeline.number)} of part {escape(timeline.part)}, concept "
        f"<strong>{escape(timeline.concept)}</strong>{idea}. World of {timeline.world_size} ranks; "
        f"{escape(timeline.status)}.</p>"
    )


def _expected(timeline: Timeline) -> str:
    if not timeline.expected:
        return ""
    if not timeline.departure:
        return f"<p>Expected: {escape(timeline.expected)}. The recording does not depart from it.</p>"
    return (
        f"<p>Expected: {escape(timeline.expected)}. First departure (circled in red):</p>"
        f'<p class="departure-line">{escape(timeline.departure)}</p>'
    )


def _deadlock(stuck: list[Blocked]) -> str:
    cycle = deadlock(stuck)
    if not cycle:
        return ""
    chain = f"rank {cycle[0]} waits for " + ", which waits for ".join(
        f"rank {r}" for r in [*cycle[1:], cycle[0]]
    )
    return f'<p class="stuck-line"><strong>Deadlock:</strong> {escape(chain)}.</p>'


def _hang(stuck: list[Blocked]) -> str:
    """Each stuck rank: the call it is in, and where the hang verdict says it waits."""
    if not stuck:
        return ""
    lines = [
        f'<li class="stuck-line" data-rank="{b.rank}">rank {b.rank}: {escape(b.text)}'
        f"<br><small>the hang verdict: {escape(b.place)}</small></li>"
        for b in stuck
    ]
    return f"<h2>Where each rank was stuck</h2><ul>{''.join(lines)}</ul>"


def _list(title: str, items: list[str]) -> str:
    if not items:
        return ""
    return f"<h2>{escape(title)}</h2><ul>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>"


def _legend(timeline: Timeline) -> str:
    swatches = [
        f'<span><i style="background:{COLOURS["send"]}"></i>send / isend</span>',
        f'<span><i style="background:{COLOURS["recv"]}"></i>recv / irecv</span>',
        f'<span><i style="background:{COLOURS["wait"]}"></i>wait for an isend / irecv</span>',
        *(
            f'<span><i style="background:{colour}"></i>collective on group {escape(name)} '
            f"(ranks {escape(', '.join(map(str, timeline.members(name))))})</span>"
            for name, colour in group_colours(timeline).items()
            if any(c.group == name and c.kind == "collective" for c in timeline.calls)
        ),
        "<span>&rarr; message from its send to where it arrived</span>",
        '<span style="color:#c00">- - &rarr; a message without its match</span>',
        '<span style="color:#c00">red frame: a call still running when the world was stopped</span>',
        '<span style="color:#c00">&#9711; first departure from the expected pattern</span>',
    ]
    return '<p class="legend">' + "".join(swatches) + "</p>"


def _notes(timeline: Timeline) -> list[str]:
    notes = [
        "Time flows right, one lane per rank; hover a box for its call. Recorded inside the rank processes: "
        "a diagnostic, not part of the grade."
    ]
    if timeline.truncated:
        ranks = ", ".join(map(str, timeline.truncated))
        notes.append(f"Rank(s) {ranks} reached the recording cap: their later calls are missing.")
    if timeline.dropped:
        notes.append(f"{timeline.dropped} later call(s) are not drawn, to keep this page small.")
    return notes
