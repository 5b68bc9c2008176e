"""Space-time diagrams of real worlds: gloo ranks run a trusted program, the judge reads their flight files.

A ring all-reduce at 4 ranks (exercise 02's reference) draws 2(p-1) arrows per rank, all one way round; a
deadlock of two ranks that both receive first draws both blocked, each on the other, as the hang verdict
says; a collective on a sub-group of non-adjacent ranks is drawn on its members' lanes only; the page
opens in a real browser without a console error; the Chrome trace has one pid per rank.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import cli
from grader.core.course import Course
from grader.core.diagrams.chrome import chrome_trace
from grader.core.diagrams.page import html_page
from grader.core.timeline import Timeline
from grader.harness.outcomes import WorldTimeout
from grader.harness.patterns import ring
from grader.harness.pool import Pools
from grader.harness.testing import World
from grader.harness.timelines import TestFacts, timeline_of
from grader.harness.world import WorldConfig
from tests.test_diagrams import check_trace_events

REPO = Path(__file__).parent.parent
PROGRAMS = Path(__file__).parent / "fixtures" / "diagram_programs"

pytestmark = pytest.mark.slow  # real rank worlds


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pools]:
    config = WorldConfig(
        backend="gloo",
        device="cpu",
        impl_dir=REPO / "solutions" / "02_ring_tree",
        programs_dir=PROGRAMS,
        scratch_dir=tmp_path_factory.mktemp("worlds"),
        pg_timeout_s=60,
    )
    pools = Pools(config)
    yield pools
    pools.close()


def facts(
    test: str, status: str = "failed", verdict: str = "", stuck: dict[int, str] | None = None
) -> TestFacts:
    return TestFacts(test, "1.1", "00.demo", "demo", "", status, verdict, stuck or {})


def svg_of(timeline: Timeline) -> ET.Element:
    """The diagram's SVG, parsed as XML (it must be well formed to be drawn at all)."""
    page = html_page(timeline)
    return ET.fromstring(page[page.index("<svg") : page.index("</svg>") + len("</svg>")])


def found(svg: ET.Element, tag: str, css: str) -> list[ET.Element]:
    return [e for e in svg.iter(f"{{http://www.w3.org/2000/svg}}{tag}") if css in e.get("class", "").split()]


@pytest.fixture(scope="module")
def ring_timeline(pools: Pools) -> Timeline:
    world = World(pools.get(4), 30.0, test="test_ring[4ranks]")
    world.expect(ring(messages=lambda p: 2 * (p - 1)))
    world.run("programs:ring", inputs={"numel": 4 * 4 + 1})
    return timeline_of(world.read_flights(), facts("test_ring[4ranks]", "passed"), pattern=world.expected)


def test_a_ring_all_reduce_at_4_ranks_draws_2p_minus_2_arrows_per_rank_all_one_way(
    ring_timeline: Timeline,
) -> None:
    p = 4
    arrows = [
        (int(a.get("data-src", -1)), int(a.get("data-dst", -1)))
        for a in found(svg_of(ring_timeline), "line", "msg")
    ]
    for rank in range(p):
        assert sum(src == rank for src, _ in arrows) == 2 * (p - 1), arrows
    directions = {(dst - src) % p for src, dst in arrows}
    assert directions in ({1}, {p - 1}), arrows
    assert ring_timeline.expected == "a ring" and ring_timeline.departure == ""


def test_the_ring_as_a_chrome_trace_has_one_pid_per_rank_and_a_flow_per_message(
    ring_timeline: Timeline,
) -> None:
    trace = json.loads(json.dumps(chrome_trace(ring_timeline)))
    check_trace_events(trace)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in slices} == {0, 1, 2, 3}
    assert sum(e["ph"] == "s" for e in trace["traceEvents"]) == 4 * 2 * 3


@pytest.fixture(scope="module")
def deadlock(pools: Pools) -> tuple[Timeline, WorldTimeout]:
    world = World(pools.get(2), 3.0, test="test_deadlock[2ranks]")
    with pytest.raises(WorldTimeout) as hang:
        world.run("programs:both_receive_first", inputs={})
    verdict = str(hang.value)
    timeline = timeline_of(
        world.read_flights(),
        facts("test_deadlock[2ranks]", "timeout", verdict, hang.value.places),
        pattern=None,
    )
    return timeline, hang.value


def test_a_deadlock_shows_both_ranks_blocked_each_on_the_other(
    deadlock: tuple[Timeline, WorldTimeout],
) -> None:
    timeline, hang = deadlock
    svg = svg_of(timeline)
    blocked = {(int(g.get("data-rank", -1)), g.get("data-peer")) for g in found(svg, "g", "blocked")}
    assert blocked == {(0, "1"), (1, "0")}
    assert sorted(hang.stuck) == [0, 1]  # the hang verdict names the same two ranks
    page = html_page(timeline)
    assert "rank 0 waits for rank 1, which waits for rank 0" in page
    assert "rank 0 waits for a message from rank 1 that was never sent" in page
    for rank, place in hang.places.items():
        assert "blocked in dist.recv" in place and f'data-rank="{rank}"' in page


def test_a_sub_group_collective_is_drawn_across_its_members_only(pools: Pools) -> None:
    world = World(pools.get(4), 30.0, test="test_subgroup[4ranks]")
    world.run("programs:subgroup_all_reduce", inputs={"members": [1, 3]})
    timeline = timeline_of(world.read_flights(), facts("test_subgroup[4ranks]"), pattern=None)
    svg = svg_of(timeline)
    boxes = found(svg, "rect", "coll")
    assert sorted(int(b.get("data-rank", -1)) for b in boxes) == [1, 3]
    [link] = found(svg, "polyline", "coll-link")
    assert link.get("data-ranks") == "1 3"
    assert timeline.members(boxes[0].get("data-group", "")) == (1, 3)


# ---------------------------------------------------------------------------------------------------------
# a real browser


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "the browser tests need Chromium: apt-get install chromium (.ci/run installs it)"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr"]
    return subprocess.run(
        [binary, *flags, "--v=0", *args], capture_output=True, text=True, timeout=120, check=True
    )


CONSOLE = re.compile(r":CONSOLE[:(]\d+")
"""How headless Chromium logs a page's console message (and an uncaught error) to stderr with
--enable-logging=stderr: ``INFO:CONSOLE:1] "planted", source: file:///...`` (``CONSOLE(1)`` before
Chromium 120 or so)."""


def console_messages(page: Path) -> list[str]:
    result = chromium("--dump-dom", page.as_uri())
    return [line for line in result.stderr.splitlines() if CONSOLE.search(line)]


def test_the_deadlock_page_opens_in_a_real_browser_without_console_errors(
    deadlock: tuple[Timeline, WorldTimeout], tmp_path: Path
) -> None:
    page = tmp_path / "deadlock.html"
    page.write_text(html_page(deadlock[0]))
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>console.error('planted');</script></body></html>")
    assert console_messages(broken), "the check must see a console error when there is one"
    assert console_messages(page) == []
    shot = tmp_path / "deadlock.png"
    chromium("--window-size=1280,760", f"--screenshot={shot}", page.as_uri())
    assert shot.stat().st_size > 10_000
    if os.environ.get("DISTGPU_SCREENSHOT"):  # a picture of this page, for a look
        shutil.copyfile(shot, os.environ["DISTGPU_SCREENSHOT"])


# ---------------------------------------------------------------------------------------------------------
# grade exercise


def test_grade_exercise_writes_diagrams_to_the_state_folder_and_prints_the_first(
    toy_course: Course, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--course", str(toy_course.root / "course.yml"), "exercise", "toy", "-k", "allreduce"]
    wrong = ["--submission", str(Path(__file__).parent / "fixtures" / "submissions" / "wrong")]
    assert cli.main([*argv, *wrong, "--trace"]) == 1
    out = capsys.readouterr().out
    folder = state_dir / "diagrams" / "01_toy"
    assert f"space-time diagram(s) and Chrome traces in {folder}" in out.replace("\n", "")
    assert "space-time: test_two_ranks[2ranks]" in out and "  rank 0 | ->1 <-1 w->1" in out
    pages = sorted(folder.glob("*.html"))
    assert any("test_message_count" in p.name for p in pages), "--trace draws passing tests too"
    for trace in folder.glob("*.trace.json"):
        check_trace_events(json.loads(trace.read_text()))
    assert cli.main([*argv, *wrong, "--no-diagram"]) == 1
    assert "space-time" not in capsys.readouterr().out
