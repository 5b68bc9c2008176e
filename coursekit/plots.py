"""Line plots for exercises that produce time series (e.g. exercise 18's rate against time).

`save_line_plot` writes an SVG with no dependency at all; for a `.png` or `.pdf` path it uses matplotlib when
it is installed and otherwise writes the SVG next to it (same name, `.svg`) and says so in its return value.
The grader has no way to hand files back to a student yet, so exercises call this from a small script that
students run themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

Series = dict[str, tuple[Sequence[float], Sequence[float]]]
"""Label -> (xs, ys); every series of a plot shares the axes."""

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_W, _H = 800, 450  # SVG canvas, pixels
_LEFT, _RIGHT, _TOP, _BOTTOM = 80, 20, 40, 60  # margins around the plotting area


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """n + 1 evenly spaced tick values from lo to hi (a flat range gets a unit span)."""
    if hi <= lo:
        hi = lo + 1
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def _bounds(series: Series) -> tuple[float, float, float, float]:
    xs = [x for xs_, _ in series.values() for x in xs_]
    ys = [y for _, ys_ in series.values() for y in ys_]
    if not xs:
        raise ValueError("nothing to plot: every series is empty")
    y_lo = min(0.0, min(ys))
    return min(xs), max(xs), y_lo, max(ys) if max(ys) > y_lo else y_lo + 1


def line_plot_svg(series: Series, *, title: str = "", xlabel: str = "", ylabel: str = "") -> str:
    """The plot as SVG text: one polyline per series, axes with 6 ticks each, a legend top right."""
    for label, (xs, ys) in series.items():
        if len(xs) != len(ys):
            raise ValueError(f"series {label!r}: {len(xs)} x values but {len(ys)} y values")
    x_lo, x_hi, y_lo, y_hi = _bounds(series)
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (x - x_lo) / ((x_hi - x_lo) or 1) * plot_w

    def py(y: float) -> float:
        return _TOP + plot_h - (y - y_lo) / ((y_hi - y_lo) or 1) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}">',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="{_W / 2}" y="24" text-anchor="middle" font-size="16">{escape(title)}</text>',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>',
    ]
    for x in _ticks(x_lo, x_hi):
        out.append(
            f'<text x="{px(x):.1f}" y="{_TOP + plot_h + 18}" text-anchor="middle" font-size="11">{x:g}</text>'
        )
    for y in _ticks(y_lo, y_hi):
        out.append(f'<text x="{_LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="11">{y:g}</text>')
    out.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{_H - 15}" text-anchor="middle" font-size="13">'
        f"{escape(xlabel)}</text>"
    )
    out.append(
        f'<text x="18" y="{_TOP + plot_h / 2}" text-anchor="middle" font-size="13" '
        f'transform="rotate(-90 18 {_TOP + plot_h / 2})">{escape(ylabel)}</text>'
    )
    for i, (label, (xs, ys)) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        points = " ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in zip(xs, ys, strict=True))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>')
        ly = _TOP + 16 + 18 * i
        out.append(
            f'<line x1="{_W - 190}" y1="{ly - 4}" x2="{_W - 165}" y2="{ly - 4}" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{_W - 160}" y="{ly}" font-size="12">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def save_line_plot(
    path: str | Path, series: Series, *, title: str = "", xlabel: str = "", ylabel: str = ""
) -> Path:
    """Write the plot to `path` and return the path actually written.

    `.svg`: always written, by `line_plot_svg`. Any other suffix: matplotlib renders it if importable;
    without matplotlib the SVG goes to `path.with_suffix('.svg')` instead, and that path is returned.
    """
    path = Path(path)
    if path.suffix.lower() != ".svg":
        try:
            import matplotlib

            matplotlib.use("Agg")  # no display needed
            import matplotlib.pyplot as plt
        except ImportError:
            path = path.with_suffix(".svg")
        else:
            fig, ax = plt.subplots(figsize=(10, 5.6))
            for label, (xs, ys) in series.items():
                ax.plot(list(xs), list(ys), label=label, linewidth=1.2)
            ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
            ax.legend()
            fig.savefig(path)
            plt.close(fig)
            return path
    path.write_text(line_plot_svg(series, title=title, xlabel=xlabel, ylabel=ylabel))
    return path
