"""09.streams on a machine without a GPU: what of the GPU part can be checked here.

The part itself is graded only on a GPU (blocked on CPU). This file checks the rest:
- the judge's own arithmetic (overlap fraction, timer ratio, diagnoses) on synthetic figures, including that
  the figures a lost overlap produces fail and those of a hidden copy pass;
- the rank programs' calibration;
- that every torch.cuda name the reference, the alt case and the rank programs use exists in this torch;
- the rank programs run end to end against the reference and the alt case with a stand-in for torch.cuda
  that executes synchronously on the CPU: control flow, argument names, the plain data they return. It
  cannot show races or overlap; that needs the GPU (scripts/gpu-check).
"""

from __future__ import annotations

import ast
import importlib.util
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = ROOT / "exercises" / "09_data_parallel"
REFERENCE = ROOT / "solutions" / "09_data_parallel" / "streams.py"
ALT = ROOT / "tests" / "validity" / "09_data_parallel" / "alt-streams-kept-alive" / "streams.py"

# Loading test_public.py outside the grader: its part and concept marks are the grader's, unregistered here.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def public() -> ModuleType:
    return load(EXERCISE / "test_public.py", "gpu09_test_public")


@pytest.fixture(scope="module")
def programs() -> ModuleType:
    return load(EXERCISE / "rank_programs.py", "gpu09_rank_programs")


# ---------------------------------------------------------------------------------------------------------
# the judge's arithmetic on synthetic figures


def figures(serial: float, overlapped: float, copy: float, compute: float, n: int = 15, noise: float = 0.05):
    """n paired runs around the given medians, each figure off by up to +-noise (relative), alternating."""
    sign = [1 if i % 2 else -1 for i in range(n)]
    return [
        [x * (1 + s * noise * (i % 3) / 2) for i, s in enumerate(sign)]
        for x in (serial, overlapped, copy, compute)
    ]


def test_overlap_fraction_extremes(public: ModuleType) -> None:
    # copy 2.5 ms, matmuls 2.5 ms: serial 5.0; hidden entirely 2.5; not at all 5.0; pageable (slower) 6.0
    assert public.overlap_fractions([5.0], [2.5], [2.5], [2.5]) == [1.0]
    assert public.overlap_fractions([5.0], [5.0], [2.5], [2.5]) == [0.0]
    assert public.overlap_fractions([5.0], [6.0], [2.5], [2.5]) == [-0.4]
    # the shorter of the two is what can hide: copy 1 ms under 4 ms of matmuls
    assert public.overlap_fractions([5.0], [4.0], [1.0], [4.0]) == [1.0]
    with pytest.raises(AssertionError):
        public.overlap_fractions([5.0, 5.0], [2.5], [2.5], [2.5])


@pytest.mark.parametrize(
    ("case", "serial", "overlapped", "passes"),
    [
        ("hidden copy, 0.2 ms of launch and producer", 5.3, 2.7, True),
        ("half hidden", 5.3, 4.05, True),
        ("one stream, a synchronize, or a join at once", 5.3, 5.3, False),
        ("pageable: the staged copy is slower still", 5.3, 7.0, False),
        ("a copy 20 % hidden", 5.3, 4.8, False),
    ],
)
def test_threshold_separates_hidden_from_lost(public: ModuleType, case, serial, overlapped, passes) -> None:
    s, o, c, m = figures(serial, overlapped, 2.5, 2.6)
    got = statistics.median(public.overlap_fractions(s, o, c, m))
    assert (got >= public.OVERLAP_MIN) is passes, f"{case}: fraction {got:.2f}"


def test_timer_ratio(public: ModuleType) -> None:
    low, high = public.TIMER_RATIO
    trusted = [5.0, 5.1, 4.9, 5.0]
    assert low <= public.timer_ratio([5.05, 4.95, 5.2, 5.0], trusted) <= high  # CUDA events: the same step
    assert public.timer_ratio([0.04, 0.05, 0.04, 0.05], trusted) < low  # host clock, no synchronize
    assert public.timer_ratio([0.005, 0.005, 0.005, 0.005], trusted) < low  # seconds, not ms


def test_diagnoses(public: ModuleType) -> None:
    ok = {"ok": True, "what": "", "pinned": True, "contiguous": True}
    assert public.host_problem(ok) is None
    assert "pageable" in public.host_problem({**ok, "pinned": False})
    assert public.host_problem({**ok, "pinned": False}, need_pinned=False) is None  # right bytes all the same
    assert "expected a CPU tensor" in public.host_problem({**ok, "ok": False, "what": "a cuda tensor"})
    good = {"event": None, "numel": 10, "wrong": 0, "first_wrong": -1, "got": None, "want": None}
    assert public.copy_problem({**good, "matmul_ok": True, "bucket_intact": True}) is None
    assert "torch.cuda.Event" in public.copy_problem({**good, "event": "a NoneType, not a torch.cuda.Event"})
    for planted, words in [(1000.0, "did not wait"), (-1000.0, "before the copy"), (500.0, "NEXT bucket")]:
        message = public.copy_problem({**good, "wrong": 3, "first_wrong": 9, "got": planted, "want": -116.0})
        assert words in message, message
    assert "matmul" in public.copy_problem({**good, "matmul_ok": False})
    assert "not the other way" in public.copy_problem({**good, "bucket_intact": False})


def test_planted_values_match_the_rank_programs(public: ModuleType, programs: ModuleType) -> None:
    assert set(public.WHY_WRONG) == {programs.STALE, programs.SENTINEL, programs.NEXT}
    values = programs._pattern([1000], torch.float32, torch.device("cpu"))
    assert not set(values.tolist()) & set(public.WHY_WRONG)  # a planted value is never a right one
    for dtype in (torch.float32, torch.float16, torch.bfloat16):  # exact in every dtype the suites use
        assert torch.equal(programs._pattern([1000], dtype, torch.device("cpu")).double(), values.double())
        assert float(torch.tensor(programs.STALE, dtype=dtype)) == programs.STALE


@pytest.mark.parametrize(
    ("copy_ms", "matmul_ms", "reps"),
    [(2.5, 2.5, 1), (2.5, 0.6, 4), (11.0, 17.0, 1), (2.5, 0.01, 64), (2.5, 0.0, 64), (0.1, 5.0, 1)],
)
def test_matmul_reps(programs: ModuleType, copy_ms: float, matmul_ms: float, reps: int) -> None:
    assert programs.matmul_reps(copy_ms, matmul_ms) == reps


# ---------------------------------------------------------------------------------------------------------
# every torch.cuda name used exists in this torch (the CPU build carries the same Python API)

METHODS = {  # methods called on streams, events and tensors in these files
    torch.cuda.Stream: ["wait_stream", "wait_event", "record_event", "query", "synchronize"],
    torch.cuda.Event: ["record", "synchronize", "elapsed_time", "query"],
    torch.Tensor: ["record_stream", "pin_memory", "is_pinned", "copy_"],
}


@pytest.mark.parametrize(
    "path", [REFERENCE, ALT, EXERCISE / "rank_programs.py"], ids=["reference", "alt", "rank_programs"]
)
def test_torch_cuda_names_exist(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "torch.cuda":
            assert hasattr(torch.cuda, node.attr), f"{path.name}: torch.cuda.{node.attr} does not exist"
    for cls, names in METHODS.items():
        for name in names:
            assert callable(getattr(cls, name, None)), f"{cls.__name__}.{name}"


# ---------------------------------------------------------------------------------------------------------
# the rank programs end to end, with a synchronous stand-in for torch.cuda


class FakeStream:
    def wait_stream(self, other: FakeStream) -> None: ...

    def wait_event(self, event: FakeEvent) -> None:
        assert isinstance(event, FakeEvent)

    def record_event(self, event: FakeEvent | None = None) -> FakeEvent:
        event = event or FakeEvent()
        event.record(self)
        return event

    def synchronize(self) -> None: ...

    def query(self) -> bool:
        return True


class FakeEvent:
    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.timing, self.at = enable_timing, None

    def record(self, stream: FakeStream | None = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None: ...

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.timing and end.timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'")
        return (end.at - self.at) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch, programs: ModuleType) -> None:
    current = FakeStream()
    empty = torch.empty

    def empty_unpinned(*args: Any, pin_memory: bool = False, **kwargs: Any) -> torch.Tensor:
        return empty(*args, **kwargs)

    for name, value in {
        "Stream": lambda device=None, priority=0: FakeStream(),
        "Event": FakeEvent,
        "current_stream": lambda device=None: current,
        "default_stream": lambda device=None: current,
        "stream": lambda s: nullcontext(),
        "synchronize": lambda device=None: None,
        "empty_cache": lambda: None,
        "current_device": lambda: 0,
    }.items():
        monkeypatch.setattr(torch.cuda, name, value)
    monkeypatch.setattr(torch, "empty", empty_unpinned)
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: None, raising=False)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, device=None: self)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self, device=None: True)
    monkeypatch.setattr(programs, "MATMUL", 48)  # 4096 on two CPU cores would take seconds per product


class Ctx:
    def __init__(self, module: ModuleType) -> None:
        self.rank, self.world_size, self.device, self._module = 0, 1, torch.device("cpu"), module

    def submission(self, name: str) -> ModuleType:
        assert name == "streams"
        return self._module


@pytest.mark.parametrize("path", [REFERENCE, ALT], ids=["reference", "alt-streams-kept-alive"])
def test_rank_programs_run_end_to_end(fake_cuda: None, public: ModuleType, programs, path: Path) -> None:
    ctx = Ctx(load(path, f"gpu09_streams_{path.parent.name}"))
    for shape, dtype, reuse in [
        ([4099], "float32", False),
        ([3, 701], "bfloat16", False),
        ([4099], "float32", True),
    ]:
        value = programs.copy_round(ctx, shape=shape, dtype=dtype, seed=0, reuse=reuse)
        assert public.host_problem(value["host"]) is None
        assert public.copy_problem(value) is None, value
        assert value["numel"] == torch.Size(shape).numel()
    value = programs.copy_overlap(ctx, numel=4099, repeats=5, seed=1)
    assert public.copy_problem(value["check"]) is None
    fractions = public.overlap_fractions(
        value["serial_ms"], value["overlapped_ms"], value["copy_ms"], value["matmul_ms"]
    )
    assert len(fractions) == 5 and all(isinstance(f, float) for f in fractions)
    value = programs.event_timer(ctx, numel=4099, rounds=2, per_round=3, seed=2)
    assert value["problem"] is None and len(value["student_ms"]) == len(value["trusted_ms"]) == 6


def test_rank_programs_catch_what_a_cpu_can_show(
    fake_cuda: None, public: ModuleType, programs: ModuleType, tmp_path: Path
) -> None:
    """The checks can fail here too: a copy in the wrong direction, a timer in seconds, a wrong return."""
    source = REFERENCE.read_text()
    mutants = {
        "backwards": source.replace(
            "host.copy_(bucket, non_blocking=True)", "bucket.copy_(host, non_blocking=True)"
        ),
        "seconds": source.replace(
            "times.append(start.elapsed_time(end))", "times.append(start.elapsed_time(end) / 1e3)"
        ),
        "no_event": source.replace("    return done\n", "    return None\n"),
    }
    for name, text in mutants.items():
        assert text != source, name
        path = tmp_path / f"streams_{name}.py"
        path.write_text(text)
        mutants[name] = Ctx(load(path, f"gpu09_mutant_{name}"))
    value = programs.copy_round(mutants["backwards"], shape=[4099], dtype="float32", seed=0)
    assert "not the other way" in public.copy_problem({**value, "wrong": 0}) and value["wrong"] > 0
    value = programs.copy_round(mutants["no_event"], shape=[4099], dtype="float32", seed=0)
    assert "not a torch.cuda.Event" in public.copy_problem(value)
    value = programs.event_timer(mutants["seconds"], numel=4099, rounds=2, per_round=3, seed=2)
    assert public.timer_ratio(value["student_ms"], value["trusted_ms"]) < public.TIMER_RATIO[0]


# ---------------------------------------------------------------------------------------------------------
# issue 31: each run's own time. The runs of a round differ in length (every second one runs the matmuls
# long_reps times); a timer that gives every run the mean must fail. Here a matmul is a 2 ms sleep, which the
# stand-in's events (the host clock) measure as they would the GPU's work.


@pytest.fixture(scope="module")
def hidden() -> ModuleType:
    return load(ROOT / "solutions" / "09_data_parallel" / "test_hidden.py", "gpu09_test_hidden")


def test_per_run_check_on_synthetic_figures(hidden: ModuleType) -> None:
    ours = [5.0, 15.0, 5.1, 14.8] * 3  # short, long, short, long per round of 4
    assert hidden.per_run_problem([t * 1.03 for t in ours], ours, 4) is None  # another correct timer
    assert hidden.per_run_problem([t * 0.001 for t in ours], ours, 4) is None  # units: the public check's
    mean = [statistics.mean(ours[i : i + 4]) for i in range(0, 12, 4) for _ in range(4)]
    assert "1.00x by yours" in hidden.per_run_problem(mean, ours, 4)
    swapped = [ours[i ^ 1] for i in range(12)]  # each figure given to the run next to it
    assert hidden.per_run_problem(swapped, ours, 4) is not None
    flat = [5.0, 5.5] * 6  # a machine whose long runs are hardly longer: nothing to tell apart
    assert hidden.per_run_problem([5.2] * 12, flat, 4) is None


@pytest.fixture
def slow_matmul(fake_cuda: None, programs: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 ms a matmul: long enough that a loaded machine's scheduling jitter stays far below the 1.5x allowed
    monkeypatch.setattr(programs._Compute, "run", lambda self: time.sleep(0.02 * self.reps))


def test_per_run_timer_end_to_end(slow_matmul: None, programs: ModuleType, hidden, tmp_path: Path) -> None:
    source = REFERENCE.read_text()
    mean_timer = source.replace(
        "        times.append(start.elapsed_time(end))  # ms between the two events, on the GPU's clock\n"
        "    return times  # ms, in run order\n",
        "        times.append(start.elapsed_time(end))\n    return [statistics.mean(times)] * repeats\n",
    ).replace(
        "from collections.abc import Callable\n", "import statistics\nfrom collections.abc import Callable\n"
    )
    warmed = source.replace("    times: list[float] = []\n", "    times: list[float] = []\n    fn()\n")
    impls = {"reference": source, "mean": mean_timer, "warm-up run": warmed}
    values = {}
    for name, text in impls.items():
        assert name == "reference" or text != source, name
        path = tmp_path / f"streams_{name.replace(' ', '_')}.py"
        path.write_text(text)
        ctx = Ctx(load(path, f"gpu09_timer_{path.stem}"))
        values[name] = programs.event_timer(ctx, numel=4099, rounds=2, per_round=4, seed=2, long_reps=5)
    good = values["reference"]
    assert (
        good["problem"] is None and hidden.per_run_problem(good["student_ms"], good["trusted_ms"], 4) is None
    )
    mean = values["mean"]
    assert mean["problem"] is None and hidden.per_run_problem(mean["student_ms"], mean["trusted_ms"], 4)
    assert values["warm-up run"]["problem"].startswith("5 runs of fn for repeats=4")
