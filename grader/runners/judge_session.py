"""How the judge runs a suite's pytest session: its arguments, and the process settings it runs under
(none of the caller's pytest settings, one torch thread)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def pytest_args(suites: list[Path], rootdir: Path) -> list[str]:
    """How the judge runs the suites: none of pytest's own reporting, and no settings but these."""
    return [
        *map(str, suites),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:terminal",
        "-p",
        "no:stepwise",
        # Both run gc.collect() several times as the session ends (0.2 s a run) to report warnings
        # that -W ignore drops anyway.
        "-p",
        "no:unraisableexception",
        "-p",
        "no:threadexception",
        # A handler added to and removed from the root logger around each phase of every test (0.17 s of a
        # 3 s grading); no suite reads logs (caplog).
        "-p",
        "no:logging",
        "--import-mode=importlib",
        "--rootdir",
        str(rootdir),
        "-o",
        "addopts=",
        "-W",
        "ignore",
    ]


OUTER_PYTEST_SETTINGS = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
"""What the environment may tell any pytest run (the caller's own test session, a user's shell): the
judge's run of the suite takes its options from its arguments alone, or e.g. an outer ``--basetemp`` would
make it wipe the caller's temporary folder."""


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """The judge computes the expected values of small tensors on one thread: while the ranks keep the cores
    busy, an op on two threads waits for the second (a softmax of 1000x64 doubles took 0.7 ms on one thread,
    15-25 ms on two on a loaded machine), and one thread adds every reduction in one order. The caller's
    setting is restored."""
    import torch  # the factory is launched: importing torch now cannot reach a rank

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def outer_pytest_settings_ignored() -> Iterator[None]:
    """The judge's pytest hears none of the caller's settings and loads no plugin that happens to be installed
    (pytest-randomly would shuffle the suite, pytest-rerunfailures rerun it): the grading plugin is handed to
    it, and the same suite then grades alike on every machine."""
    saved = {name: os.environ.pop(name) for name in OUTER_PYTEST_SETTINGS if name in os.environ}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        os.environ.update(saved)
