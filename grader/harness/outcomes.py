"""What a world hands back to a test: per-rank results, or an exception that becomes the test's verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_OOM_TYPES = {"MemoryError", "OutOfMemoryError"}
_OOM_MARKERS = ("can't allocate memory", "CUDA out of memory")  # torch's CPU and CUDA allocators
# A CUDA error leaves the rank's CUDA context unusable (every later call fails): a crash, not an answer.
_CUDA_ERROR_TYPES = {"AcceleratorError"}  # torch >= 2.8 raises this for cudaError_t; older: RuntimeError
_CUDA_ERROR_MARKERS = ("CUDA error:", "CUBLAS_STATUS_", "CUDNN_STATUS_", "NCCL error", "device-side assert")
# Errors a rank raises because *another* rank failed; never the first thing to show a student.
_KNOCK_ON_MARKERS = ("Connection closed by peer", "Timed out waiting", "pair closure", "Connection reset")


@dataclass(frozen=True)
class CommEvent:
    """One point-to-point call made by the rank: op is send, recv, isend or irecv."""

    op: str
    peer: int | None
    numel: int
    nbytes: int
    dtype: str
    offset: int | None = None
    """Element offset of the message in its tensor's storage (None from an older worker)."""
    storage_numel: int | None = None
    """Elements in that storage: a view of the caller's tensor has its numel, a scratch buffer less."""


@dataclass(frozen=True)
class CommLog:
    """A rank's torch.distributed traffic during one task."""

    events: tuple[CommEvent, ...]
    collectives: tuple[str, ...]
    collective_bytes: tuple[int, ...] = ()
    """Per entry of ``collectives``: the bytes of every tensor the call was handed, lists included (for
    ``all_reduce(t)`` the message)."""

    def collective_sizes(self, name: str) -> list[int]:
        """The bytes handed to each call of collective ``name``, in call order."""
        return [n for c, n in zip(self.collectives, self.collective_bytes, strict=False) if c == name]

    @property
    def sends(self) -> int:
        return sum(e.op in ("send", "isend") for e in self.events)

    @property
    def recvs(self) -> int:
        return sum(e.op in ("recv", "irecv") for e in self.events)

    @property
    def bytes_sent(self) -> int:
        return sum(e.nbytes for e in self.events if e.op in ("send", "isend"))

    @property
    def bytes_received(self) -> int:
        return sum(e.nbytes for e in self.events if e.op in ("recv", "irecv"))


@dataclass(frozen=True)
class RankResult:
    """One rank's answer to a task. For ``world.call``, ``returned`` and ``args`` are filled in."""

    rank: int
    value: Any
    comm: CommLog
    seconds: float

    @property
    # Any: what the student's function returned, decoded; each test reads it as its exercise says
    def returned(self) -> Any:
        return self.value["returned"]

    @property
    # Any: the call's arguments after it, decoded; each test reads them as its exercise says
    def args(self) -> list[Any]:
        args = self.value["args"]
        assert isinstance(args, list), "world.call's answer holds its arguments as a list"
        return args


# ---------------------------------------------------------------------------------------------------------
# verdicts raised into the test


class CheckFailure(AssertionError):
    """A check failed on one rank (or on the whole world when ``rank`` is None)."""

    def __init__(self, message: str, *, rank: int | None = None, world_size: int | None = None) -> None:
        super().__init__(message)
        self.message, self.rank, self.world_size = message, rank, world_size


class RankFailure(CheckFailure):
    """The student's code raised on at least one rank."""


class RankOutOfMemory(RankFailure):
    """A rank ran out of memory."""


class RankCudaError(RankFailure):
    """A rank hit a CUDA error: its GPU context is lost, so the test is reported crashed, with the message."""


class WorldCrashed(Exception):
    """A rank process died (exit, signal) before it answered."""

    def __init__(self, rank: int, world_size: int, how: str, log_tail: str = "") -> None:
        detail = f"\nlast output of rank {rank}:\n{log_tail}" if log_tail.strip() else ""
        super().__init__(f"rank {rank}/{world_size} {how} before finishing the task{detail}")
        self.rank, self.world_size = rank, world_size


class WorldTimeout(Exception):
    """The world did not finish a task in time; the message says who was stuck where.

    Without ``stuck``, ``timeout_s`` is the whole message (a seconds figure, or a sentence of its own)."""

    def __init__(
        self,
        timeout_s: float | str,
        stuck: list[int] | None = None,
        finished: list[int] | None = None,
        details: list[str] | None = None,
        places: dict[int, str] | None = None,
        *,
        still_s: float | None = None,
    ) -> None:
        """``places``: where each stuck rank waits, as the message says it (``stacks.where_stuck``).
        ``still_s``: the world was found deadlocked (``world.STILL_S``) before the time limit."""
        self.stuck, self.places, self.still_s = stuck or [], places or {}, still_s
        if stuck is None:
            super().__init__(str(timeout_s))
            return
        if still_s is None:
            head = f"timed out after {timeout_s:g} s: rank(s) {_ranks(stuck)} still running"
        else:
            head = (
                f"deadlocked (no rank used the CPU for {still_s:g} s: waiting out the {timeout_s:g} s limit "
                f"would change nothing): rank(s) {_ranks(stuck)} still running"
            )
        if finished:
            head += (
                f"; rank(s) {_ranks(finished)} finished (a collective or send/recv not every rank reached?)"
            )
        super().__init__("\n".join([head, *(details or [])]))


class Blocked(Exception):
    """The part cannot run here, e.g. it needs more GPUs than this machine has."""


class NotRun(WorldTimeout):
    """A test that was not started because its part already hung, or the time budget ran out."""


class SameCallHung(NotRun):
    """A test not started because the same call already hung in another test: the judge runs it again in
    a fresh world once the others are done, unless its concept is lost already (``GradingPlugin``)."""


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


# ---------------------------------------------------------------------------------------------------------
# replies -> results


# Any: ranks' decoded replies (worker._run_task's), their fields read by name
def rank_results(replies: dict[int, Any]) -> list[RankResult]:
    """Turn decoded replies into ``RankResult``s, or raise the most telling rank's error."""
    __tracebackhide__ = True
    failed = {rank: reply for rank, reply in replies.items() if not reply.get("ok")}
    if failed:
        raise failure(failed, len(replies))
    return [_rank_result(rank, replies[rank]) for rank in sorted(replies)]


# Any: ranks' decoded replies (worker._run_task's), their fields read by name
def _rank_result(rank: int, reply: dict[str, Any]) -> RankResult:
    comm = reply["comm"]
    events = tuple(CommEvent(**event) for event in comm["events"])
    log = CommLog(events, tuple(comm["collectives"]), tuple(comm.get("collective_bytes", ())))
    return RankResult(rank, reply["value"], log, reply["seconds"])


# Any: ranks' decoded replies (worker._run_task's), their fields read by name
def failure(failed: dict[int, Any], world_size: int) -> RankFailure:
    """The most telling of the failed ranks' errors: a rank's own, before one caused by a peer's failure."""

    def knock_on(rank: int) -> bool:
        return any(m in failed[rank]["error"]["message"] for m in _KNOCK_ON_MARKERS)

    rank = min(failed, key=lambda r: (knock_on(r), r))
    error = failed[rank]["error"]
    where = f" (at {error['where'][-1]})" if error["where"] else ""
    others = sorted(set(failed) - {rank})
    also = f"; rank(s) {_ranks(others)} failed too" if others else ""
    message = f"{error['type']}: {error['message'][:2000]}{where}{also}"
    if error["type"] in _OOM_TYPES or any(m in error["message"] for m in _OOM_MARKERS):
        return RankOutOfMemory(f"out of memory: {message}", rank=rank, world_size=world_size)
    if is_cuda_error(error):
        return RankCudaError(
            f"CUDA error, the rank's GPU context is lost: {message}", rank=rank, world_size=world_size
        )
    return RankFailure(message, rank=rank, world_size=world_size)


# Any: a failed reply's error (worker._describe's), its fields read by name
def is_cuda_error(error: dict[str, Any]) -> bool:
    """``error`` (a failed reply's type and message) is a CUDA error rather than an exception in Python."""
    return error["type"] in _CUDA_ERROR_TYPES or any(m in error["message"] for m in _CUDA_ERROR_MARKERS)
