"""Plot measured all-reduce times against the fitted alpha-beta model, for a ring and a tree. Not graded.

Run it from this folder once measure.py works:  `python plot_fit.py [ranks] [out.png]`  (default 2 ranks).
It measures gloo's all-reduce with YOUR measure_allreduce, fits it with YOUR fit_alpha_beta (relative error),
and saves latency against message size, log-log: the measurements, the fitted line read as a ring, and the
binomial tree that YOUR link_alpha_beta and tree_allreduce_time predict from the same fit. Writes a PNG
with matplotlib, or an SVG (coursekit.plots) without it. The grader can call `plot_fit(...)` directly
with numbers.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

SIZES = [1 << k for k in range(8, 23)]  # 256 B .. 4 MiB


def predict_tree(sizes: Sequence[float], alpha: float, beta: float, p: int) -> list[float]:
    """The binomial tree's times on this machine, from YOUR measure.link_alpha_beta and
    costs.tree_allreduce_time (run from this folder)."""
    from costs import tree_allreduce_time
    from measure import link_alpha_beta

    a_link, b_link = link_alpha_beta(alpha, beta, p)
    return [tree_allreduce_time(p, s, a_link, b_link) for s in sizes]


def plot_fit(
    sizes: Sequence[float],
    measured: Sequence[float],
    alpha: float,
    beta: float,
    p: int,
    path: str | Path,
    tree: Sequence[float] | None = None,
) -> Path | None:
    """Save the plot to `path` (.png needs matplotlib; otherwise an .svg is written next to it), with the
    tree's predicted times too when `tree` is given. Returns the file written, or None when neither
    matplotlib nor coursekit.plots is available."""
    path = Path(path)
    curves = {"measured (gloo)": list(measured), "ring (fit)": [alpha + beta * s for s in sizes]}
    if tree is not None:
        curves["tree (predicted)"] = list(tree)
    title = f"all-reduce on {p} ranks: alpha = {alpha * 1e6:.1f} us, 1/beta = {1 / beta / 1e9:.2f} GB/s"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _svg_fallback(sizes, curves, title, path)
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, ys in curves.items():
        style = "o" if label.startswith("measured") else "-"
        ax.loglog(list(sizes), [y * 1e6 for y in ys], style, label=label)
    ax.set(xlabel="message size (bytes)", ylabel="time (us)", title=title)
    ax.legend()
    fig.savefig(path)
    plt.close(fig)
    return path


def _svg_fallback(sizes: Sequence[float], curves: dict, title: str, path: Path) -> Path | None:
    try:
        from coursekit.plots import save_line_plot
    except ImportError:
        print("plot_fit: neither matplotlib nor coursekit.plots is available; no plot written")
        return None
    xs = [math.log2(s) for s in sizes]  # log-log by hand: the SVG writer has linear axes
    series = {label: (xs, [math.log10(y * 1e6) for y in ys]) for label, ys in curves.items()}
    return save_line_plot(
        path.with_suffix(".svg"), series, title=title, xlabel="log2(bytes)", ylabel="log10(time / us)"
    )


# ------------------------------------------------------------------------------------------------------------
# python plot_fit.py: measure with your measure.py on local gloo ranks


def _rank(rank: int, world_size: int, store: str, queue) -> None:
    import torch.distributed as dist
    from measure import measure_allreduce

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    times = measure_allreduce(SIZES, iters=10, warmup=2)
    if rank == 0:
        queue.put(times)
    dist.destroy_process_group()


def main() -> None:
    import torch.multiprocessing as mp
    from measure import fit_alpha_beta

    p = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    out = sys.argv[2] if len(sys.argv) > 2 else "allreduce_fit.png"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_rank, args=(r, p, f"{tmp}/store", queue)) for r in range(p)]
        for proc in procs:
            proc.start()
        times = queue.get()
        for proc in procs:
            proc.join()
    alpha, beta = fit_alpha_beta(SIZES, times, [1 / t**2 for t in times])
    for s, t in zip(SIZES, times, strict=True):
        print(f"{s:>9} B  {t * 1e6:9.1f} us   fit {(alpha + beta * s) * 1e6:9.1f} us")
    print(f"alpha = {alpha * 1e6:.1f} us, beta = 1 / ({1 / beta / 1e9:.2f} GB/s)")
    tree = predict_tree(SIZES, alpha, beta, p) if p > 1 else None
    written = plot_fit(SIZES, times, alpha, beta, p, out, tree)
    print(f"plot written to {written}" if written else "no plot written")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
