"""The judge's side of one world: N rank workers started once and reused, with a wall clock over every task.

Ranks are forked by the grading run's rank factory (``factory``), which has already imported torch, so a
world costs one torch import per grading run rather than one per rank per test. Every reply is decoded by
``wire`` (plain data, no pickle). When a task outlives its deadline the judge asks each unfinished rank for
its stack (SIGUSR1), kills every rank's process group, and raises ``WorldTimeout`` naming who was stuck where.
"""

from __future__ import annotations

import signal
import tempfile
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from grader.core.sandbox import RankLimits, Sandbox
from grader.harness import wire
from grader.harness.activity import Activity
from grader.harness.factory import FactoryError, RankFactory, RankProcess
from grader.harness.flight import MAX_FLIGHT_BYTES
from grader.harness.outcomes import (
    RankResult,
    WorldCrashed,
    WorldTimeout,
    failure,
    is_cuda_error,
    rank_results,
)
from grader.harness.remote import NodeRankFactory
from grader.harness.stacks import where_stuck
from grader.harness.worker import WorkerSpec

MAX_REPLY_BYTES = 1 << 30
STACK_DUMP_WAIT_S = 1.0
"""The longest a hang's report waits for the stuck ranks' stack dumps (a rank may ignore SIGUSR1)."""
STACK_POLL_S = 0.1
"""How often the report looks at the dump files: a rank writes its stack within a poll or two when it runs."""
STILL_S = 2.0
"""A world none of whose threads ran, could run or waited on the disk, and whose CPU time did not grow, for
this long is deadlocked: each rank sleeps until another acts, so waiting out the test's time limit changes
nothing. No reference sleeps; a submission that sleeps this long inside a task is judged hung."""
STILL_CHECK_S = 0.5
"""How often a waiting judge asks the factory whether the world is still: a deadlock is reported within
``STILL_S`` plus this of its start, and a task that answers sooner is never asked about."""
START_TIMEOUT_S = 120.0
MAX_LINGERING = 32
"""Threads and child processes a rank may keep running after a task and still serve the next test. A few
(a logging thread, a helper process) are harmless; thousands (a thread or fork bomb) would leave the next
test without pids. Past this, the world is replaced after the test, not reused."""


@dataclass(frozen=True)
class WorldConfig:
    """How to start ranks; shared by every world of one grading run."""

    backend: str
    device: str
    impl_dir: Path
    programs_dir: Path
    scratch_dir: Path
    pg_timeout_s: float
    run_as_uid: int | None = None
    """Ranks drop to this uid; their run folder is then world-writable (it holds only logs and the store)."""
    sandbox: Sandbox | None = None
    """Where the rank factory runs (None: unsandboxed, as the judge's user)."""
    limits: RankLimits | None = None
    preload: tuple[str, ...] = ()
    """Modules the rank factory imports besides ``factory.PRELOAD`` (the exercise's ``preload``)."""
    timelines: bool = True
    """Ranks time their calls into flight files, for space-time diagrams (off: the benchmark's baseline)."""


Factory = RankFactory | NodeRankFactory


@dataclass
class _Rank:
    process: RankProcess
    tasks: Connection
    replies: Connection
    spec: WorkerSpec
    factory: Factory


class LiveRanks:
    """``size`` live rank workers. Not thread-safe; one task at a time.

    ``factories`` holds one rank factory per node: ranks are split over them in contiguous blocks (ranks
    0..k-1 on the first), as torchrun and Slurm place them. ``shared_gpus``: on a CUDA run, the ranks share
    that many GPUs (rank r on GPU r % shared_gpus) and talk over gloo, since NCCL refuses two ranks on one
    GPU."""

    def __init__(
        self, size: int, config: WorldConfig, factories: list[Factory], shared_gpus: int | None = None
    ) -> None:
        self.size = size
        self.config = config if shared_gpus is None else replace(config, backend="gloo")
        self.shared_gpus = shared_gpus
        self.factories = factories
        self._ranks: list[_Rank] = []
        self._answered: dict[int, Any] = {}
        self.still_s: float | None = None
        """Set when the last task's world was found still (``Stillness``): the hang was a deadlock."""
        self.start_seconds = 0.0
        self.retired = False
        """Set when a task left too much running in a rank: the world serves no further test, and is stopped
        before the next one starts."""
        self.flights: list[tuple[Factory, Path]] = []
        """Each rank's flight file and the factory that reads it; kept after the ranks are killed."""

    # -----------------------------------------------------------------------------------------------------
    # life cycle

    def start(self) -> None:
        """Start every rank and wait until all have joined the process group."""
        started = time.perf_counter()
        run_dir = Path(tempfile.mkdtemp(prefix=f"world{self.size}-", dir=self.config.scratch_dir))
        if self.config.run_as_uid is not None:
            run_dir.chmod(0o777)  # the ranks create the rendezvous store here after dropping privileges
        for rank in range(self.size):
            self._ranks.append(self._start_rank(rank, run_dir))
        self.flights = [(r.factory, r.spec.flight_path) for r in self._ranks if r.spec.flight_path]
        self._await_ready()
        self.start_seconds = time.perf_counter() - started

    def _start_rank(self, rank: int, run_dir: Path) -> _Rank:
        per_node = self.size // len(self.factories)
        factory = self.factories[rank // per_node]
        spec = WorkerSpec(
            rank=rank,
            world_size=self.size,
            backend=self.config.backend,
            device=self.config.device,
            store_path=run_dir / "store",
            impl_dir=self.config.impl_dir,
            programs_dir=self.config.programs_dir,
            log_path=run_dir / f"rank{rank}.log",
            stack_path=run_dir / f"rank{rank}.stack",
            pg_timeout_s=self.config.pg_timeout_s,
            run_as_uid=self.config.run_as_uid,
            limits=None if self.config.limits is None else self.config.limits.for_rank(per_node),
            local_rank=rank % (per_node if self.shared_gpus is None else self.shared_gpus),
            flight_path=run_dir / f"rank{rank}.flight" if self.config.timelines else None,
        )
        spec = factory.place(spec)
        process, tasks, replies = factory.fork(spec)
        return _Rank(process, tasks, replies, spec, factory)

    def _await_ready(self) -> None:
        replies = self._collect(time.monotonic() + START_TIMEOUT_S)
        if replies is None:
            self.kill()
            raise WorldTimeout(f"{self.size} ranks did not start within {START_TIMEOUT_S:.0f} s")

    @property
    def alive(self) -> bool:
        return bool(self._ranks) and all(r.process.is_alive() for r in self._ranks)

    def stop(self) -> None:
        """Ask the ranks to leave, then make sure they are gone."""
        self.ask_to_stop()
        deadline = time.monotonic() + 2.0
        for rank in self._ranks:
            rank.process.join(max(0.0, deadline - time.monotonic()))
        self.kill()

    def ask_to_stop(self) -> None:
        """Tell every rank to leave, without waiting (``stop`` waits)."""
        for rank in self._ranks:
            try:
                rank.tasks.send_bytes(wire.encode({"stop": True}))
            except OSError:
                pass

    def kill(self) -> None:
        """Kill every rank and whatever it started (each rank leads its own process group).

        If the factory cannot do it (it died, or stopped answering), the factory is ended instead, and with
        it, in a sandbox, every process inside.
        """
        for factory in self.factories:
            self._kill_on(factory, [rank.process for rank in self._ranks if rank.factory is factory])
        for rank in self._ranks:
            rank.tasks.close()
            rank.replies.close()
        self._ranks = []

    @staticmethod
    def _kill_on(factory: Factory, processes: list[RankProcess]) -> None:
        try:
            factory.signal(processes, signal.SIGKILL, group=True)
        except FactoryError:
            factory.close()
        deadline = time.monotonic() + 5.0
        if any(p.join(max(0.0, deadline - time.monotonic())) is None for p in processes):
            factory.close()

    def read_flights(self) -> list[bytes]:
        """Each rank's flight file as it stands (the last task's calls), in rank order; [] without them."""
        return [factory.read_bytes(path, MAX_FLIGHT_BYTES) for factory, path in self.flights]

    # -----------------------------------------------------------------------------------------------------
    # tasks

    def submit(self, tasks: list[dict[str, object]], timeout_s: float) -> list[RankResult]:
        """Run ``tasks[rank]`` on every rank; return each rank's result, or raise on timeout or crash."""
        __tracebackhide__ = True
        assert len(tasks) == self.size and self.alive
        for rank, task in zip(self._ranks, tasks, strict=True):
            rank.tasks.send_bytes(wire.encode(task))
        replies = self._collect(time.monotonic() + timeout_s)
        if replies is None:
            raise self._timeout(timeout_s)
        if _may_be_poisoned(replies):
            self.kill()  # an asymmetric failure leaves gloo pairs broken: the next test gets fresh ranks
        if any(r.get("lingering", 0) > MAX_LINGERING for r in replies.values()):
            self.retired = True  # this test may go on with it; the next one gets fresh ranks
        return rank_results(replies)

    # Any: ranks' decoded replies (worker._run_task's), their fields read by name
    def _collect(self, deadline: float) -> dict[int, Any] | None:
        """Wait for one reply per rank. ``None`` on deadline, or once the world is still (``Stillness``:
        ``self.still_s`` says so); ``WorldCrashed`` when a rank dies first."""
        replies: dict[int, Any] = {}
        self._answered = replies  # what the finished ranks said, for the timeout's report
        self._pending = [r for r in self._ranks]
        self.still_s = None
        stillness = Stillness(self._ranks)
        while self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            handles = [r.replies for r in self._pending] + [r.process.sentinel for r in self._pending]
            for ready in wait(handles, timeout=min(remaining, STILL_CHECK_S)):
                self._take(ready, replies)
            if self._pending and stillness.still_for() >= STILL_S:
                self.still_s = STILL_S
                return None
        return replies

    # Any: ranks' decoded replies (worker._run_task's), their fields read by name
    def _take(self, ready: object, replies: dict[int, Any]) -> None:
        for rank in list(self._pending):
            if ready is rank.replies:
                try:
                    replies[rank.spec.rank] = wire.decode(rank.replies.recv_bytes(MAX_REPLY_BYTES))
                except (EOFError, OSError):
                    raise self._crashed(rank) from None
                except wire.WireError as exc:
                    self.kill()
                    raise WorldCrashed(rank.spec.rank, self.size, f"sent a malformed reply ({exc})") from None
                self._pending.remove(rank)
            elif ready == rank.process.sentinel:
                raise self._crashed(rank)

    def _crashed(self, rank: _Rank) -> WorldCrashed:
        rank.process.join(1.0)
        code = rank.process.exitcode
        self.kill()
        if code == -signal.SIGKILL:
            how = "was killed by SIGKILL (most often the kernel's out-of-memory killer)"
        elif code is not None and code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        return WorldCrashed(
            rank.spec.rank, self.size, how, log_tail=rank.factory.read(rank.spec.log_path, 2000)
        )

    def _timeout(self, timeout_s: float) -> WorldTimeout:
        stuck = [r for r in self._pending]
        for factory in self.factories:
            try:
                factory.signal(
                    [r.process for r in stuck if r.factory is factory], signal.SIGUSR1, group=False
                )
            except FactoryError:
                pass  # no stacks from there this time; the kill below ends that factory
        _await_stacks(stuck)
        finished = sorted(set(range(self.size)) - {r.spec.rank for r in stuck})
        ranks_by_place: dict[str, list[int]] = {}
        for rank in stuck:
            place = where_stuck(rank.factory.read(rank.spec.stack_path), rank.spec.impl_dir)
            ranks_by_place.setdefault(place, []).append(rank.spec.rank)
        places = {rank: place for place, ranks in ranks_by_place.items() for rank in ranks}
        lines = [f"  {_rank_list(ranks, self.size)} {place}" for place, ranks in ranks_by_place.items()]
        failed = {rank: reply for rank, reply in self._answered.items() if not reply.get("ok")}
        if failed:  # a rank that raised left its peers waiting for it: its error is the cause, say it first
            cause = failure(failed, self.size)
            lines.insert(0, f"  first, rank {cause.rank}/{self.size} raised {cause}")
        self.kill()
        stuck_ranks = [r.spec.rank for r in stuck]
        return WorldTimeout(timeout_s, stuck_ranks, finished, lines, places, still_s=self.still_s)


def _await_stacks(stuck: list[_Rank]) -> None:
    """Until every stuck rank's stack dump is written: its file holds text and stopped growing (faulthandler
    writes it from the signal handler, at once), or ``STACK_DUMP_WAIT_S`` has passed."""
    deadline = time.monotonic() + STACK_DUMP_WAIT_S
    sizes: list[int] = []
    while time.monotonic() < deadline:
        time.sleep(STACK_POLL_S)
        now = [len(r.factory.read(r.spec.stack_path)) for r in stuck]
        if now == sizes and all(now):
            return
        sizes = now


class Stillness:
    """How long a world has been still, as its factory sees it at each ``still_for``: no thread of any rank
    running, runnable or waiting on the disk, the same threads, and no more CPU than ``IDLE_CPU_S`` a
    second per rank (an idle gloo rank's own timers use about 1 ms a second: measured, 2 ranks blocked in
    ``dist.recv``)."""

    IDLE_CPU_S = 0.005

    def __init__(self, ranks: list[_Rank]) -> None:
        self._ranks = ranks
        self._start: dict[int, Activity] | None = None
        self._since = 0.0

    def still_for(self) -> float:
        """Seconds the world has been still, as of now (0 when it is not, or its factory cannot say)."""
        now = time.monotonic()
        sample = self._sample()
        start = self._start
        if sample is None or start is None or not self._quiet_since(start, sample, now - self._since):
            self._start, self._since = sample, now
            return 0.0
        return now - self._since

    def _quiet_since(self, start: dict[int, Activity], now: dict[int, Activity], seconds: float) -> bool:
        if start.keys() != now.keys() or any(now[p].threads != start[p].threads for p in now):
            return False
        ran_ns = sum(max(0, now[p].cpu_ns - start[p].cpu_ns) for p in now)
        return ran_ns <= self.IDLE_CPU_S * 1e9 * seconds * len(now)

    def _sample(self) -> dict[int, Activity] | None:
        """Every rank's activity by pid, when they all share one local factory; None while anything is
        busy or cannot be read."""
        factories = {r.factory for r in self._ranks}
        if len(factories) != 1:
            return None
        found = factories.pop().activity([r.process for r in self._ranks])
        if found is None or any(a.busy for a in found.values()):
            return None
        return found


# Any: ranks' decoded replies (worker._run_task's), their fields read by name
def _may_be_poisoned(replies: dict[int, Any]) -> bool:
    """False when every rank succeeded, or every rank failed before any communication (an untouched stub)
    and without a CUDA error (which leaves the rank's GPU context unusable)."""
    failed = [r for r in replies.values() if not r.get("ok")]
    if not failed:
        return False
    if any(is_cuda_error(r["error"]) for r in failed):
        return True
    quiet = all(not r["comm"]["events"] and not r["comm"]["collectives"] for r in replies.values())
    return len(failed) < len(replies) or not quiet


def _rank_list(ranks: list[int], size: int) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}/{size}"
    return f"ranks {', '.join(map(str, ranks))} (of {size})"
