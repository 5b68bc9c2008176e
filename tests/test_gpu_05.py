"""Exercise 05's GPU part on a CPU: the judge's checks on synthetic figures, and the rank programs end to end
against a stand-in for CUDA, so that what only a GPU can grade has had every line run before it meets one.

The stand-in (``fake_cuda``) is no model of a GPU: events read the host clock, synchronize does nothing,
"pinned" is a mark on the tensor. It checks plumbing (the shapes, keys and plain data that cross the wire, the
byte gate, the units), never timing: on a CPU, pinned and pageable are the same memory.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

REPO = Path(__file__).parent.parent
EXERCISE = REPO / "exercises" / "05_gpudirect"
SOLUTION = REPO / "solutions" / "05_gpudirect"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with warnings.catch_warnings():  # the suites' part/concept marks are registered by the grader's plugin
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        spec.loader.exec_module(module)
    return module


hidden = load(SOLUTION / "test_hidden.py", "gpu05_hidden")
programs = load(EXERCISE / "rank_programs.py", "gpu05_rank_programs")
reference = load(SOLUTION / "copies.py", "gpu05_reference_copies")
alt = load(REPO / "tests/validity/05_gpudirect/alt-wallclock-copies/copies.py", "gpu05_alt_copies")


def figures(h2d: tuple[float, float], d2h: tuple[float, float], nbytes: int = 1 << 28) -> dict[str, Any]:
    """Figures of copy_bandwidth's shape from (pageable, pinned) GB/s per direction, seconds consistent."""
    out: dict[str, Any] = {}
    for direction, pair in (("h2d", h2d), ("d2h", d2h)):
        out[direction] = {
            kind: {"seconds": nbytes / (gbps * 1e9), "gbps": gbps}
            for kind, gbps in zip(("pageable", "pinned"), pair, strict=True)
        }
    return out


# An H100/H200-like PCIe Gen5 host: pinned near the link, pageable held to a CPU memcpy
JUDGE = [
    figures((14.0, 53.0), (9.0, 54.0)),
    figures((15.0, 52.0), (8.5, 55.0)),
    figures((13.5, 53.5), (9.2, 53.0)),
]


class TestJudgeOnSyntheticFigures:
    def test_a_correct_student_passes_every_check(self) -> None:
        student = [figures((16.0, 50.0), (10.0, 51.0)), figures((12.0, 54.0), (8.0, 52.0))]
        assert hidden.ratio_problems(student, JUDGE) == []
        assert hidden.margin_problems(student, JUDGE) == []
        assert hidden.unit_problems(student, 1 << 28) == []
        assert hidden.seconds_problems(student, JUDGE) == []

    def test_swapped_labels_fail_ratio_and_margin(self) -> None:
        swapped = [figures((53.0, 14.0), (54.0, 9.0))]
        assert len(hidden.ratio_problems(swapped, JUDGE)) == 2
        assert len(hidden.margin_problems(swapped, JUDGE)) == 2

    def test_never_pinned_fails_the_margin_where_the_judge_sees_an_advantage(self) -> None:
        same = [figures((14.0, 14.5), (9.0, 9.1))]
        assert [p.split(":")[0] for p in hidden.margin_problems(same, JUDGE)] == ["h2d", "d2h"]
        assert hidden.ratio_problems(same, JUDGE)  # 1.0 against 3.8 and 6: beyond a factor of 2

    def test_no_clear_advantage_on_the_machine_judges_no_margin(self) -> None:
        flat = [figures((40.0, 44.0), (38.0, 41.0))]  # a coherent CPU-GPU link: pinned barely ahead
        assert hidden.margin_problems(flat, flat) == []
        assert hidden.ratio_problems(flat, flat) == []

    def test_gib_and_megabytes_fail_the_units(self) -> None:
        nbytes = 1 << 28
        gib = figures((14.0, 53.0), (9.0, 54.0), nbytes)
        for d in ("h2d", "d2h"):
            for k in ("pageable", "pinned"):
                gib[d][k]["gbps"] = nbytes / gib[d][k]["seconds"] / 2**30
        assert len(hidden.unit_problems([gib], nbytes)) == 4
        mbs = figures((14.0, 53.0), (9.0, 54.0), nbytes)
        mbs["h2d"]["pinned"]["gbps"] *= 1e3
        assert len(hidden.unit_problems([mbs], nbytes)) == 1

    def test_seconds_of_all_repeats_fail_the_seconds_check(self) -> None:
        total = figures((14.0, 53.0), (9.0, 54.0))
        for d in ("h2d", "d2h"):
            for k in ("pageable", "pinned"):
                total[d][k]["seconds"] *= 3  # the sum over repeats=3, with gbps from the same wrong seconds
                total[d][k]["gbps"] /= 3
        assert hidden.unit_problems([total], 1 << 28) == []  # self-consistent ...
        assert len(hidden.seconds_problems([total], JUDGE)) == 4  # ... but three copies' time, not one

    def test_time_copy_against_the_judges_clock(self) -> None:
        agree = {"h2d/pinned": {"student": [0.0051, 0.0050, 0.0052], "judge": [0.0052, 0.0053, 0.0052]}}
        assert hidden.time_problems(agree) == []
        queued = {"h2d/pinned": {"student": [1.1e-5, 0.9e-5, 1.0e-5], "judge": [0.0052, 0.0053, 0.0052]}}
        assert len(hidden.time_problems(queued)) == 1  # a host clock around a copy nobody waited for
        not_a_float = {"d2h/pageable": {"student": ["tensor(0.0300)"] * 3, "judge": [0.03] * 3}}
        assert "float" in hidden.time_problems(not_a_float)[0]

    def test_the_byte_gate(self) -> None:
        good = {"h2d/pinned": {"ok": True, "seconds": 2e-5}}
        assert hidden.bytes_problems(good) == []
        late = {"d2h/pinned": {"ok": False, "seconds": 2e-5}}
        assert "in flight" in hidden.bytes_problems(late)[0]
        zero = {"d2h/pinned": {"ok": True, "seconds": 0.0}}
        assert hidden.bytes_problems(zero)

    def test_malformed_figures_are_described_not_crashed_on(self) -> None:
        assert programs._figures_problem(figures((1.0, 2.0), (1.0, 2.0))) is None
        assert "keys" in programs._figures_problem({"h2d": {}})
        bad = figures((1.0, 2.0), (1.0, 2.0))
        bad["d2h"]["pinned"]["gbps"] = torch.tensor(2.0)
        assert "positive float" in programs._figures_problem(bad)
        bad["d2h"]["pinned"] = {"seconds": 1.0}
        assert "must be" in programs._figures_problem(bad)
        assert programs._number(torch.tensor(1.0)).startswith("tensor(")
        assert programs._number(0.5) == 0.5

    def test_the_answer_key_is_the_references_and_the_alt_cases(self) -> None:
        assert reference.staging_answers() == hidden.STAGING_KEY == alt.staging_answers()
        assert set(reference.QUESTIONS) == set(hidden.STAGING_KEY)
        for key, letter in hidden.STAGING_KEY.items():
            assert letter in reference.QUESTIONS[key][1]


# ------------------------------------------------------------------------------------------------------------
# the rank programs end to end, on a CPU stand-in for CUDA


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned: set[int] = set()
    kept: list[torch.Tensor] = []  # a freed "pinned" tensor's address must not come back as a pageable one
    real_empty = torch.empty

    def empty(*args: Any, pin_memory: bool = False, **kwargs: Any) -> torch.Tensor:
        t = real_empty(*args, **kwargs)
        if pin_memory:
            pinned.add(t.data_ptr())
            kept.append(t)
        return t

    def pin(self: torch.Tensor) -> torch.Tensor:
        t = self.clone()
        pinned.add(t.data_ptr())
        kept.append(t)
        return t

    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: self.data_ptr() in pinned)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)


def ctx(module: ModuleType) -> SimpleNamespace:
    return SimpleNamespace(device=torch.device("cpu"), submission=lambda name: module)


@pytest.mark.parametrize("impl", [reference, alt], ids=["reference", "alt"])
def test_rank_programs_end_to_end(fake_cuda: None, impl: ModuleType) -> None:
    facts = programs.host_buffer_facts(ctx(impl), sizes=[1, 4097])
    for fact in facts:
        assert (fact["type"], fact["dtype"], fact["shape"], fact["device"]) == (
            "Tensor",
            "torch.uint8",
            [fact["nbytes"]],
            "cpu",
        )
        assert fact["is_pinned"] == fact["pinned"]

    gate = programs.copies_move_bytes(ctx(impl), nbytes=(1 << 16) + 7, seed=3, repeats=2)
    assert sorted(gate) == ["d2h/pageable", "d2h/pinned", "h2d/pageable", "h2d/pinned"]
    assert hidden.bytes_problems(gate) == []

    paired = programs.paired_time_copy(ctx(impl), nbytes=1 << 16, repeats=2, rounds=2)
    assert hidden.bytes_problems(paired["bytes"]) == []
    assert all(len(v["student"]) == len(v["judge"]) == 2 for k, v in paired.items() if k != "bytes")

    nbytes = (1 << 16) + 1000
    result = programs.paired_bandwidth(ctx(impl), nbytes=nbytes, repeats=2, rounds=2)
    hidden.gated(result)
    assert hidden.unit_problems(result["student"], nbytes) == []
    assert hidden.unit_problems(result["judge"], nbytes) == []
    assert set(hidden.pinned_ratios(hidden.median_figures(result["student"]))) == {"h2d", "d2h"}


def test_the_byte_gate_sees_a_copy_that_never_happened(fake_cuda: None) -> None:
    lazy = SimpleNamespace(time_copy=lambda dst, src, repeats=5: 1e-3)
    gate = programs.copies_move_bytes(ctx(lazy), nbytes=4099, seed=1, repeats=2)  # type: ignore[arg-type]
    assert len(hidden.bytes_problems(gate)) == 4


def test_malformed_figures_come_back_as_words(fake_cuda: None) -> None:
    shaky = SimpleNamespace(
        time_copy=reference.time_copy, copy_bandwidth=lambda nbytes, device, repeats=5: {"h2d": 1.0}
    )
    result = programs.paired_bandwidth(ctx(shaky), nbytes=4096, repeats=2, rounds=1)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="copy_bandwidth must return"):
        hidden.gated(result)


def mutant(name: str) -> ModuleType:
    """The reference with bug ``name`` of tests/corpus/05_gpudirect.yml applied, as a module."""
    import yaml

    [bug] = [
        b for b in yaml.safe_load((REPO / "tests/corpus/05_gpudirect.yml").read_text()) if b["name"] == name
    ]
    source = (SOLUTION / bug["file"]).read_text()
    assert source.count(bug["replace"]) == 1
    module = ModuleType(f"gpu05_mutant_{name}")
    exec(compile(source.replace(bug["replace"], bug["with"]), f"<{name}>", "exec"), module.__dict__)
    return module


def test_the_unpinned_buffer_bug_is_seen_by_the_buffer_check(fake_cuda: None) -> None:
    facts = programs.host_buffer_facts(ctx(mutant("buffer_never_pinned")), sizes=[4097])
    assert [f["is_pinned"] for f in facts] == [False, False]  # the hidden test wants [False, True]


def test_the_gib_bug_is_seen_by_the_unit_check(fake_cuda: None) -> None:
    nbytes = (1 << 16) + 1000
    result = programs.paired_bandwidth(ctx(mutant("gib_per_second")), nbytes=nbytes, repeats=2, rounds=1)
    hidden.gated(result)  # the bytes and the shape are right ...
    assert len(hidden.unit_problems(result["student"], nbytes)) == 4  # ... the unit is not
