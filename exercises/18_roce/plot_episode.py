"""Plot R_C and R_T against time for exercise 18's scripted congestion episode, with YOUR ecn.py and dcqcn.py.

    python exercises/18_roce/plot_episode.py                  # writes exercises/18_roce/rate_vs_time.svg
    python exercises/18_roce/plot_episode.py -o rate.png      # PNG if matplotlib is installed, else SVG

The grader cannot hand files back yet, so `grade exercise 18` checks the numbers and this script draws them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


class _Context:
    """Stands in for the grader's RankContext: `submission(name)` imports your module from this folder."""

    def submission(self, module: str):
        return importlib.import_module(module)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-o", "--output", type=Path, default=HERE / "rate_vs_time.svg")
    args = parser.parse_args()

    sys.path.insert(0, str(HERE))
    import rank_programs

    from coursekit.plots import save_line_plot

    run = rank_programs.episode(
        _Context(),
        params=rank_programs.EPISODE_PARAMS,
        trace=rank_programs.episode_trace(),
        duration_us=rank_programs.EPISODE_US,
    )
    gbps = {  # Mb/s -> Gb/s for the axis
        "current rate R_C": (run["t"], [r / 1000 for r in run["rate_mbps"]]),
        "target rate R_T": (run["t"], [r / 1000 for r in run["target_mbps"]]),
    }
    written = save_line_plot(
        args.output,
        gbps,
        title=f"DCQCN reaction point, CNPs at {run['cnps']} us",
        xlabel="time (us)",
        ylabel="rate (Gb/s)",
    )
    print(f"wrote {written}")


if __name__ == "__main__":
    main()
