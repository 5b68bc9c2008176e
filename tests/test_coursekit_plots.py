"""coursekit.plots: the SVG is well-formed and puts each point where it belongs; other formats fall back."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from coursekit.plots import line_plot_svg, save_line_plot

NS = {"svg": "http://www.w3.org/2000/svg"}
SERIES = {
    "rate": ([0, 1, 2, 3], [40.0, 20.0, 30.0, 35.0]),
    "target": ([0, 1, 2, 3], [40.0, 40.0, 40.0, 40.0]),
}


def _polylines(svg: str) -> list[list[tuple[float, float]]]:
    root = ET.fromstring(svg)
    lines = []
    for node in root.findall("svg:polyline", NS):
        pairs = [p.split(",") for p in node.attrib["points"].split()]
        lines.append([(float(x), float(y)) for x, y in pairs])
    return lines


def test_one_polyline_per_series_with_every_point() -> None:
    svg = line_plot_svg(SERIES, title="DCQCN <rate>", xlabel="t (us)", ylabel="Gb/s")
    lines = _polylines(svg)  # also proves the XML parses, the "<" in the title escaped
    assert [len(line) for line in lines] == [4, 4]
    assert "DCQCN &lt;rate&gt;" in svg


def test_points_are_scaled_monotonically_into_the_canvas() -> None:
    rate, target = _polylines(line_plot_svg(SERIES))
    xs = [x for x, _ in rate]
    assert xs == sorted(xs) and xs[0] < xs[-1]
    # SVG y grows downward: the larger value is higher up, the equal values share one height
    assert rate[1][1] > rate[0][1]
    assert len({y for _, y in target}) == 1 and target[0][1] == rate[0][1]
    for x, y in rate + target:
        assert 0 <= x <= 800 and 0 <= y <= 450


def test_mismatched_lengths_and_empty_input_are_errors() -> None:
    with pytest.raises(ValueError, match="3 x values but 2 y values"):
        line_plot_svg({"bad": ([0, 1, 2], [1, 2])})
    with pytest.raises(ValueError, match="nothing to plot"):
        line_plot_svg({"empty": ([], [])})


def test_save_svg(tmp_path: Path) -> None:
    written = save_line_plot(tmp_path / "plot.svg", SERIES)
    assert written == tmp_path / "plot.svg" and _polylines(written.read_text())


def test_png_without_matplotlib_falls_back_to_svg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    written = save_line_plot(tmp_path / "plot.png", SERIES)
    assert written == tmp_path / "plot.svg" and written.is_file()
    assert not (tmp_path / "plot.png").exists()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib is not installed")
def test_png_with_matplotlib(tmp_path: Path) -> None:
    written = save_line_plot(tmp_path / "plot.png", SERIES)
    assert written == tmp_path / "plot.png"
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
