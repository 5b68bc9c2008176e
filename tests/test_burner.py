"""benchmarks/burner.py: the spinners run at the priority asked, for the block only, and none outlives it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "burner", Path(__file__).parent.parent / "benchmarks" / "burner.py"
)
assert _SPEC is not None and _SPEC.loader is not None
burner = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(burner)


def spinners() -> dict[int, int]:
    """This process's children that spin: pid -> nice (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and b"while True: pass" in cmdline:
            found[int(entry.name)] = int(fields[16])
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_spinners_run_at_the_ranks_priority_and_stop_with_the_block() -> None:
    with burner.cpu_burner(2) as running:
        assert running == 2
        assert sorted(spinners().values()) == [burner.RANK_NICE] * 2
    assert spinners() == {}


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_an_exception_in_the_block_stops_them_too() -> None:
    with pytest.raises(RuntimeError), burner.cpu_burner(1, nice=10):
        assert list(spinners().values()) == [10]
        raise RuntimeError("the benchmark failed")
    assert spinners() == {}
