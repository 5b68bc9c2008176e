"""The pytest plugin that turns a suite into graded results, ordered by pytest's lifecycle.

One ``GradingPlugin`` instance serves one grading run of one exercise. It parametrizes ``world`` over each
part's world sizes, hands tests a ``World`` backed by reusable rank pools, enforces the hang and budget
policies, and records one ``TestResult`` per test.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import random
import sys
import textwrap
import time
from collections.abc import Callable, Generator
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.runner import runtestprotocol

from grader.core.course import Concept, Course, Exercise, Part
from grader.core.results import NOT_RUN, Status, TestResult
from grader.harness.factory import FactoryError
from grader.harness.markers import MARKERS
from grader.harness.outcomes import (
    Blocked,
    CheckFailure,
    NotRun,
    RankCudaError,
    RankFailure,
    RankOutOfMemory,
    SameCallHung,
    WorldCrashed,
    WorldTimeout,
)
from grader.harness.pool import Pools
from grader.harness.testing import Hangs, World, comm_trace
from grader.harness.timelines import TestFacts, Timelines


class GradingPlugin:
    """Grades one exercise; read ``results`` and ``errors`` after ``pytest.main`` returns."""

    def __init__(
        self,
        *,
        course: Course,
        exercise: Exercise,
        pools: Pools,
        device: str,
        gpus: int,
        artifacts_dir: Path | None = None,
        only_parts: tuple[str, ...] = (),
        only_concept: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        shuffle_seed: int | None = None,
        trace: bool = False,
    ) -> None:
        """``only_parts`` grades those parts alone (all when empty), ``only_concept`` that concept's tests
        alone; ``on_progress(done, total)`` is called as each test ends; ``shuffle_seed`` runs the tests in
        a random order (no score may depend on it); ``trace`` keeps the timeline of every multi-rank test,
        passed ones too, whole."""
        self.course, self.exercise, self.pools = course, exercise, pools
        self.only_parts, self.only_concept, self.on_progress = only_parts, only_concept, on_progress
        self._total = 0
        self.device, self.gpus = device, gpus
        self.artifacts_dir = artifacts_dir
        self.artifacts: list[tuple[str, Path]] = []
        """(what, where) for every file a test saved for the student, e.g. a plot of their measurements."""
        self.results: list[TestResult] = []
        self.errors: list[str] = []
        """Problems with the suite itself (collection errors, unknown parts): course bugs, not verdicts."""
        self.trace = trace
        self.timelines = Timelines(trace=trace)
        """Space-time recordings of failing multi-rank tests (all of them with ``trace``): diagnostics."""
        self.shuffle_seed = shuffle_seed
        self._parts = {p.id: p for p in exercise.parts}
        self._tests_per_part: dict[str, int] = {}
        self._numbers: dict[str, str] = {}
        self._concepts: dict[str, str] = {}
        """nodeid -> the concept the test scores for (the part's name when the part declares none)."""
        self._tests_per_concept: dict[tuple[str, str], int] = {}
        self._hangs: Hangs = {}
        self._started = time.monotonic()
        self._deferred: list[tuple[pytest.Item, TestResult]] = []
        """Tests another test's hang or crash kept from running, with the result they would get now."""
        self._retrying = False

    # -----------------------------------------------------------------------------------------------------
    # configure and collect

    def pytest_configure(self, config: pytest.Config) -> None:
        """Register the ``part``, ``concept`` and ``generated`` markers; report failures in Python's own
        traceback style. A failure's message is its exception's text (``_verdict``); pytest's default report
        of it, built for every failure, parses the test file's source for each traceback entry (85 ms a
        failure: a third of the judge's time on a bug corpus). Set here since ``--tb`` comes with the terminal
        plugin, which the judge leaves out (``judge_session.pytest_args``)."""
        for marker in MARKERS:
            config.addinivalue_line("markers", marker)
        config.option.tbstyle = "native"

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "world" in metafunc.fixturenames:
            parametrize_world(metafunc, self._part_of(metafunc.definition))

    def pytest_make_parametrize_id(self, val: object, argname: str) -> str | None:
        return world_id(val, argname)

    def pytest_internalerror(self, excrepr: object) -> None:
        """A crash of pytest or of this plugin: a grader bug, never a score of 0 / 0."""
        self.errors.append(f"internal error while grading:\n{str(excrepr)[-3000:]}")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A suite that does not import is a course bug."""
        if report.failed:
            self.errors.append(f"{report.nodeid}: could not be collected:\n{report.longreprtext[-3000:]}")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Check every test names a known part; number tests and count them per part."""
        for item in items:
            if self._part_of(item) is None:
                marker = item.get_closest_marker("part")
                named = marker.args[0] if marker and marker.args else None
                self.errors.append(
                    f"{item.nodeid}: marked part({named!r}), not a part of {self.exercise.key}"
                )
        known = [i for i in items if self._part_of(i) is not None]
        order = {p.id: n for n, p in enumerate(self.exercise.parts, start=1)}
        for item in known:
            part = self._part_of(item)
            assert part is not None
            self._tests_per_part[part.id] = self._tests_per_part.get(part.id, 0) + 1
            self._numbers[item.nodeid] = f"{order[part.id]}.{self._tests_per_part[part.id]}"
            concept = self._concepts[item.nodeid] = self._concept_of(item, part)
            self._tests_per_concept[part.id, concept] = self._tests_per_concept.get((part.id, concept), 0) + 1
        if self.only_parts:
            known = [i for i in known if self._part_id(i) in self.only_parts]
        if self.only_concept is not None:
            known = [i for i in known if self._concepts[i.nodeid] == self.only_concept]
        if self.shuffle_seed is not None:
            random.Random(self.shuffle_seed).shuffle(known)
        items[:] = known
        self._total = len(known)

    def _concept_of(self, item: pytest.Item, part: Part) -> str:
        """The concept ``item`` scores for; a concept its part does not declare is a course bug."""
        if not part.concepts:
            return part.name
        marker = item.get_closest_marker("concept")
        name = marker.args[0] if marker and marker.args else None
        if part.concept(str(name)) is None:
            declared = ", ".join(c.name for c in part.concepts)
            self.errors.append(
                f"{item.nodeid}: marked concept({name!r}), not a concept of {part.id} ({declared}); "
                f"see exercises/{self.exercise.dirname}/concepts.yml"
            )
        return str(name)

    def _part_id(self, item: pytest.Item) -> str | None:
        part = self._part_of(item)
        return None if part is None else part.id

    def _part_of(self, node: pytest.Item | pytest.Collector) -> Part | None:
        marker = node.get_closest_marker("part")
        return self._parts.get(marker.args[0]) if marker and marker.args else None

    # -----------------------------------------------------------------------------------------------------
    # fixtures

    @pytest.fixture
    def world(self, request: pytest.FixtureRequest) -> World:
        """A ``World`` of ``request.param`` ranks for this test's part."""
        size: int = request.param
        part = self._part_of(request.node)
        assert part is not None
        self._refuse_to_start(part, size)
        return World(
            self.pools.get(size, part.nodes, shared_gpus=self._shared_gpus(part, size)),
            part.timeout,
            hangs={} if self._retrying else self._hangs,  # a test run again makes every call itself
            test=request.node.name,
        )

    @pytest.fixture
    def reference(self) -> Callable[[str], ModuleType]:
        """``reference("allreduce")`` imports the reference module from solutions/ into the judge."""
        return self._load_reference

    @pytest.fixture
    def artifact(self) -> Callable[[str, str], Path | None]:
        """``artifact("latency.png", "a plot of your measured latency")`` -> where to write it, or None.

        None when this run keeps no files (inside a container); the test then skips only the writing.
        """

        def place(name: str, what: str) -> Path | None:
            if self.artifacts_dir is None:
                return None
            self.artifacts_dir.mkdir(parents=True, exist_ok=True)
            self.artifacts.append((what, self.artifacts_dir / name))
            return self.artifacts_dir / name

        return place

    def _refuse_to_start(self, part: Part, size: int) -> None:
        needed = part.gpus_needed(size)
        if part.device == "gpu" and self.device != "cuda":
            raise Blocked(f"blocked: needs {needed} GPU{'s' * (needed > 1)}; this run uses the CPU")
        if self.device == "cuda" and needed > self.gpus:
            raise Blocked(f"blocked: needs {needed} GPUs, found {self.gpus}")
        if time.monotonic() - self._started > self.exercise.timeout:
            raise NotRun(f"{NOT_RUN}the exercise's time budget of {self.exercise.timeout:g} s is used up")

    def _shared_gpus(self, part: Part, size: int) -> int | None:
        """The GPUs a CUDA world shares when the part puts more than one rank on a GPU, else None."""
        needed = part.gpus_needed(size)
        return needed if self.device == "cuda" and needed < size else None

    def _load_reference(self, module: str) -> ModuleType:
        name = f"distgpu_reference_{self.exercise.dirname}_{module}"
        if name not in sys.modules:
            path = self.course.solution_dir(self.exercise) / f"{module}.py"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            sys.modules[name] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sys.modules[name])
        return sys.modules[name]

    # -----------------------------------------------------------------------------------------------------
    # run and report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Record a ``TestResult`` when a test ends: a failed setup, or the call phase."""
        report = yield
        if (call.when == "setup" and report.failed) or call.when == "call":
            result = self._result(item, call, report)
            if not self._retrying and _kept_from_running(call):
                self._deferred.append((item, result))
                return report
            self.results.append(result)
            self._record_timeline(item, call, result)
            if self.on_progress is not None:
                self.on_progress(len(self.results), self._total)
        return report

    def _record_timeline(self, item: pytest.Item, call: pytest.CallInfo[None], result: TestResult) -> None:
        """Keep the test's space-time recording: a multi-rank test that failed after its ranks ran (any such
        test with ``trace``). Nothing here reaches a score."""
        world = getattr(item, "funcargs", {}).get("world")
        if not isinstance(world, World) or world.size < 2 or not result.ran:
            return
        if result.status is Status.BLOCKED or (result.status is Status.PASSED and not self.trace):
            return
        hang = call.excinfo.value if call.excinfo else None
        stuck = hang.places if isinstance(hang, WorldTimeout) else {}
        concept = self._parts[result.part].concept(result.concept)
        facts = TestFacts.of(result, concept.idea if concept else "", stuck)
        self.timelines.add(world.read_flights(), facts, world.expected)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """After every test ran once: run again, each in a fresh world, the tests another test's hang or
        crash kept from running; a test costs points only if it fails on its own. One whose concept another
        test already lost keeps its "not run" (running it could change nothing but the time spent)."""
        outcome = yield
        deferred, self._deferred = self._deferred, []
        self._retrying = True
        for item, kept_out in deferred:
            if self._concept_lost(kept_out):
                self.results.append(_not_retried(kept_out))
            else:
                self.pools.retire_all()
                runtestprotocol(item, nextitem=None, log=False)
        self._retrying = False
        if deferred and self.on_progress is not None:
            self.on_progress(len(self.results), self._total)
        return outcome

    def _concept_lost(self, test: TestResult) -> bool:
        """Whether another test of ``test``'s concept failed on its own (a blocked one is not graded here)."""
        return any(
            t.part == test.part
            and t.concept == test.concept
            and t.status not in (Status.PASSED, Status.BLOCKED)
            for t in self.results
        )

    def _result(
        self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
    ) -> TestResult:
        part = self._part_of(item)
        assert part is not None
        size = item.callspec.params.get("world") if hasattr(item, "callspec") else None
        status, output = _verdict(call, report, part.id)
        concept = self._concepts[item.nodeid]
        if status is Status.FAILED:
            output = _explained(output, item, call, part.concept(concept))
        # With the public checks alone, a part is split over the concepts they grade: passing every public
        # check shows full marks, under the note that the hidden tests are still to come.
        graded = {name for part_id, name in self._tests_per_concept if part_id == part.id}
        max_score = part.concept_points(concept, graded) / self._tests_per_concept[part.id, concept]
        suite = "public" if Path(str(item.path)).is_relative_to(self.course.root / "exercises") else "hidden"
        return TestResult(
            name=item.name,
            number=self._numbers[item.nodeid],
            part=part.id,
            concept=concept,
            score=max_score if status is Status.PASSED else 0.0,
            max_score=max_score,
            status=status,
            output=output,
            suite=suite,
            world_size=size,
            seconds=call.duration,
            generated=item.get_closest_marker("generated") is not None,
        )


def parametrize_world(metafunc: pytest.Metafunc, part: Part | None) -> None:
    """Parametrize ``world`` over ``part``'s world sizes unless the test chose its own."""
    chosen = any("world" in m.args[0] for m in metafunc.definition.iter_markers("parametrize"))
    if not chosen and part is not None:
        metafunc.parametrize("world", part.world_sizes, indirect=True)


def world_id(val: object, argname: str) -> str | None:
    """Name world sizes the same way everywhere: ``test_sum[4ranks]``."""
    return f"{val}ranks" if argname == "world" else None


def _kept_from_running(call: pytest.CallInfo[None]) -> bool:
    """Whether a test ended because of another test: the same call hung there, or what it left running
    kept this test's ranks from starting."""
    return call.excinfo is not None and call.excinfo.errisinstance((SameCallHung, FactoryError))


def _not_retried(test: TestResult) -> TestResult:
    return dataclasses.replace(
        test, output=f"{test.output}\n  (not run again: another test of concept '{test.concept}' failed)"
    )


def _explained(output: str, item: pytest.Item, call: pytest.CallInfo[None], concept: Concept | None) -> str:
    """Add the test's concept and, after a wrong answer, the send/recv trace of its last world task."""
    if "NotImplementedError" in output.splitlines()[0]:
        return output  # nothing written yet: the concept would only be noise
    if concept is not None:
        output += f"\n  concept: {concept.idea}"
    world = getattr(item, "funcargs", {}).get("world")
    wrong_answer = call.excinfo is not None and not call.excinfo.errisinstance(RankFailure)
    if isinstance(world, World) and world.last and wrong_answer:
        trace = comm_trace(world.last)
        output += ("\n" + textwrap.indent(trace, "  ")) if trace else ""
    return output


def _verdict(call: pytest.CallInfo[None], report: pytest.TestReport, part_id: str) -> tuple[Status, str]:
    """Map how a test ended to a status and a one-paragraph message for the student."""
    if report.passed:
        return Status.PASSED, ""
    excinfo = call.excinfo
    assert excinfo is not None
    exc = excinfo.value
    if isinstance(exc, Blocked):
        return Status.BLOCKED, str(exc)
    if isinstance(exc, WorldTimeout):
        return Status.TIMEOUT, f"[{part_id}] {exc}"
    if isinstance(exc, WorldCrashed):
        return Status.CRASHED, f"[{part_id} rank {exc.rank}/{exc.world_size}] {exc}"
    if isinstance(exc, FactoryError):  # most often what an earlier test left running holds every pid
        return Status.CRASHED, f"[{part_id}] the ranks could not be started: {exc}"
    if isinstance(exc, CheckFailure):
        where = f" rank {exc.rank}/{exc.world_size}" if exc.rank is not None else ""
        status = Status.OOM if isinstance(exc, RankOutOfMemory) else Status.FAILED
        status = Status.CRASHED if isinstance(exc, RankCudaError) else status
        return status, f"[{part_id}{where}] {exc.message}"
    if isinstance(exc, pytest.fail.Exception):  # pytest.raises that saw nothing raised, or pytest.fail
        return Status.FAILED, f"[{part_id}] {str(exc).strip() or 'failed'}"
    if isinstance(exc, AssertionError):
        # Keep the test's own message and pytest's "assert a == b", not its "+ where" repr dump.
        lines = [ln for ln in str(exc).strip().splitlines() if not ln.startswith(" +")][:3]
        return Status.FAILED, f"[{part_id}] {' / '.join(lines) or 'assertion failed'}"
    return (
        Status.ERROR,
        f"[{part_id}] error in the test itself (a course bug):\n{report.longreprtext[-3000:]}",
    )
