"""Keep every core busy while a benchmark or test runs: N spinning processes, stopped cleanly.

    with cpu_burner():                 # os.cpu_count() spinners at the ranks' priority (nice 19)
        ...                            # grade something under load
    with cpu_burner(processes=4, nice=0):
        ...

    .venv/bin/python benchmarks/burner.py [N] [--nice K]     # burn until Ctrl-C or `kill PID`

Each spinner is a separate Python process (`while True: pass`), so the load does not depend on the GIL.

Why nice 19 by default: a class's load is other gradings, whose ranks all run at nice 19
(grader/harness/worker.py, `_yield_cpu_to_the_judge`), and that is the priority the spinners take, so they
compete with the ranks under test as other gradings' ranks do. Spinners at nice 0 would get about 68 times the
ranks' CPU share: measured on the 2-core CI box, a nice-19 loop took 8.9 s beside them against 0.08 s idle
(110x). That is a machine given to other, un-niced work, where no timeout or timing check can hold; pass
``nice=0`` to see it. Leaving the block (normally or by an exception) kills every spinner and waits for it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

RANK_NICE = 19
"""The priority every rank runs at (grader/harness/worker.py)."""


@contextlib.contextmanager
def cpu_burner(processes: int | None = None, *, nice: int = RANK_NICE) -> Iterator[int]:
    """Run ``processes`` spinners (None: os.cpu_count()) at ``nice`` for the block; yield how many run."""
    count = processes if processes is not None else (os.cpu_count() or 1)
    # each spinner says so once it runs at its priority: the block starts under the full load
    code = f"import os\nos.nice({nice} - os.nice(0))\nprint(flush=True)\nwhile True: pass"
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
                )
            )
        for spinner in spinners:
            assert spinner.stdout is not None
            spinner.stdout.readline()
        yield count
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
            if spinner.stdout is not None:
                spinner.stdout.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Keep every core busy until Ctrl-C.")
    parser.add_argument("processes", nargs="?", type=int, help="spinners (default: one per core)")
    parser.add_argument("--nice", type=int, default=RANK_NICE, help=f"their priority (default {RANK_NICE})")
    args = parser.parse_args()
    # a background job ignores Ctrl-C: `kill PID` (SIGTERM) stops the spinners as cleanly
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with cpu_burner(args.processes, nice=args.nice) as running:
        print(f"burning {running} cores at nice {args.nice}; Ctrl-C or kill stops", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
