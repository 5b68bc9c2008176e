"""What hidden and public tests use: the ``World`` handle, exact or tolerant comparisons, send/recv traces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NoReturn

import torch

from grader.core.results import NOT_RUN
from grader.harness.outcomes import CheckFailure, CommEvent, RankResult, SameCallHung, WorldTimeout
from grader.harness.patterns import Pattern
from grader.harness.world import LiveRanks

CallKey = tuple[str, tuple[str, ...], int]
"""What makes two calls the same call (``call_key``): the function or program, its settings, world size."""
Hangs = dict[CallKey, str]
"""Calls that hung in this grading run -> which test hung and where: ``call_key(task, size)`` keys."""
MessageLabels = dict[tuple[int | None, int | None, int], str]
"""``{(src, dst, k): label}`` for the k-th message from src to dst (``sent_labels``). A peer the recorder
could not name is None: looked up with it, a message has no label."""


class World:
    """A test's view of ``size`` ranks: run student functions or rank programs on all of them at once.

    A call that hung once is not made again in the same grading run: the same function (or rank program)
    with the same configuration (its string and boolean arguments) at the same world size raises
    ``SameCallHung`` naming the test that hung, and the plugin runs that test again in a fresh world at the
    end, unless its concept is lost already. Any other call still runs: one deadlock costs only its own
    tests.
    """

    def __init__(
        self, pool: LiveRanks, timeout_s: float, *, hangs: Hangs | None = None, test: str = ""
    ) -> None:
        """``hangs`` is shared by every world of one grading run; ``test`` names the test using this one."""
        self.size = pool.size
        self._pool = pool
        self._timeout_s = timeout_s
        self._hangs = hangs if hangs is not None else {}
        self._test = test
        self.last: list[RankResult] | None = None
        """The results of the last task that came back from every rank (for the failure trace)."""
        self.expected: Pattern | None = None
        """The message pattern the test expects (``expect``), for its space-time diagram."""
        self.submitted = False
        """Whether the test gave this world a task (only then has it a recording to draw)."""

    def expect(self, pattern: Pattern) -> None:
        """State the messages a correct answer sends (``grader.harness.patterns``): a failing test's diagram
        then names the first point where the recording departs from it. Diagnostics only: no grade uses it."""
        self.expected = pattern

    def read_flights(self) -> list[bytes]:
        """Every rank's recording of the last task (``flight``), in rank order; [] when there is none."""
        return self._pool.read_flights() if self.submitted else []

    def call(
        self,
        module: str,
        function: str,
        *,
        args: Sequence[Sequence[object]],
        kwargs: Sequence[dict[str, object]] | dict[str, object] | None = None,
        forbid: Iterable[str] = (),
    ) -> list[RankResult]:
        """On rank r, call the student's ``module.function(*args[r], **kwargs[r])``; results in rank order."""
        __tracebackhide__ = True  # in pytest's report, a rank's failure points at the test's own line
        per_rank_kwargs = self._per_rank(kwargs or {})
        if len(args) != self.size:
            raise ValueError(f"args has {len(args)} entries for {self.size} ranks")
        tasks: list[dict[str, object]] = [
            {
                "kind": "call",
                "module": module,
                "function": function,
                "args": list(a),
                "kwargs": k,
                "forbid": list(forbid),
            }
            for a, k in zip(args, per_rank_kwargs, strict=True)
        ]
        return self._submit(tasks)

    def run(
        self,
        program: str,
        *,
        inputs: Sequence[dict[str, object]] | dict[str, object],
        forbid: Iterable[str] = (),
    ) -> list[RankResult]:
        """On rank r, run the trusted rank program ``"module:function"`` with ``**inputs[r]``."""
        __tracebackhide__ = True
        tasks: list[dict[str, object]] = [
            {"kind": "run", "program": program, "inputs": i, "forbid": list(forbid)}
            for i in self._per_rank(inputs)
        ]
        return self._submit(tasks)

    def _submit(self, tasks: list[dict[str, object]]) -> list[RankResult]:
        __tracebackhide__ = True
        key = call_key(tasks[0], self.size)
        if key in self._hangs:
            raise SameCallHung(f"{NOT_RUN}{key[0]} {self._hangs[key]}; the same call would hang again")
        self.last, self.submitted = None, True
        try:
            self.last = self._pool.submit(tasks, self._timeout_s)
        except WorldTimeout as hang:
            where = next((ln.strip() for ln in str(hang).splitlines()[1:] if ln.strip()), "")
            self._hangs[key] = f"already hung at {self.size} ranks in {self._test}" + (
                f" ({where})" if where else ""
            )
            raise
        return self.last

    def _per_rank(self, value: Sequence[dict[str, object]] | dict[str, object]) -> list[dict[str, object]]:
        if isinstance(value, dict):
            return [value] * self.size
        if len(value) != self.size:
            raise ValueError(f"got {len(value)} per-rank entries for {self.size} ranks")
        return list(value)


# ---------------------------------------------------------------------------------------------------------
# comparisons


def assert_equal(
    got: object,
    expected: torch.Tensor,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    what: str = "result",
) -> None:
    """Exact equality: same dtype, same shape, every element; the message names the first difference."""
    got = _tensor_like(got, expected, rank, world_size, what)
    mismatch = (got != expected).reshape(-1).nonzero()
    if mismatch.numel():
        index = int(mismatch[0])
        raise CheckFailure(
            f"wrong {what} at index {index}: got {_item(got, index)}, expected {_item(expected, index)}"
            f" ({mismatch.numel()} of {expected.numel()} elements differ)",
            rank=rank,
            world_size=world_size,
        )


def assert_close(
    got: object,
    expected: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    rank: int | None = None,
    world_size: int | None = None,
    what: str = "result",
) -> None:
    """``|got - expected| <= atol + rtol * |expected|`` elementwise; say why the tolerance at the call."""
    got = _tensor_like(got, expected, rank, world_size, what)
    bad = ~torch.isclose(got, expected, rtol=rtol, atol=atol)
    if bad.any():
        index = int(bad.reshape(-1).nonzero()[0])
        delta = (got.double() - expected.double()).abs().max().item()
        raise CheckFailure(
            f"wrong {what} at index {index}: got {_item(got, index)}, expected {_item(expected, index)}"
            f" (max |diff| {delta:.3g} > tolerance rtol={rtol:g}, atol={atol:g})",
            rank=rank,
            world_size=world_size,
        )


def _tensor_like(
    got: object, expected: torch.Tensor, rank: int | None, world_size: int | None, what: str
) -> torch.Tensor:
    """``got``, when it is a tensor of ``expected``'s dtype and shape; else ``CheckFailure``."""

    def fail(message: str) -> NoReturn:
        raise CheckFailure(message, rank=rank, world_size=world_size)

    if not isinstance(got, torch.Tensor):
        fail(f"{what}: expected a tensor, got {type(got).__name__}")
    if got.dtype != expected.dtype:
        fail(f"{what}: dtype {got.dtype} but expected {expected.dtype}")
    if got.shape != expected.shape:
        fail(f"{what}: shape {tuple(got.shape)} but expected {tuple(expected.shape)}")
    return got


def _item(tensor: torch.Tensor, index: int) -> int | float | bool:
    return tensor.reshape(-1)[index].item()


# ---------------------------------------------------------------------------------------------------------
# send/recv traces


def chunk_of(event: CommEvent, numel: int, p: int) -> int | None:
    """i when ``event`` moved exactly chunk i of ``torch.tensor_split`` of a ``numel``-element tensor into
    ``p``; None for anything else (a scratch buffer, a copy, a slice of another size)."""
    if event.offset is None or event.storage_numel != numel:
        return None
    start = 0
    for i in range(p):
        size = numel // p + (i < numel % p)
        if (event.offset, event.numel) == (start, size) and size:
            return i
        start += size
    return None


def sent_labels(results: Sequence[RankResult], numel: int) -> MessageLabels:
    """``{(src, dst, k): label}`` for the k-th message from src to dst: 'cI' for chunk I, else its size.

    Receives are labelled by what their sender sent (messages between two ranks arrive in order), so a
    receive into a scratch buffer still shows which chunk it carried.
    """
    labels: MessageLabels = {}
    p = len(results)
    for res in results:
        count: dict[int, int] = {}
        for e in res.comm.events:
            if e.op in ("send", "isend") and e.peer is not None:
                k = count[e.peer] = count.get(e.peer, -1) + 1
                chunk = chunk_of(e, numel, p)
                labels[res.rank, e.peer, k] = f"c{chunk}" if chunk is not None else f"{e.numel}el"
    return labels


def comm_trace(results: Sequence[RankResult], *, numel: int | None = None, max_steps: int = 8) -> str:
    """A rank-by-rank, step-by-step table of every send and receive, for a failure message.

    Step k of a rank is its k-th send and its k-th receive, which is a ring's or a tree's step. ``->3 c1``:
    sent chunk 1 to rank 3; ``<-2 c0``: received chunk 0 from rank 2 (chunks of ``torch.tensor_split`` over
    ``numel`` elements, by default the largest tensor any message came from). At most ``max_steps`` rows.
    """
    events = [e for res in results for e in res.comm.events]
    if not events:
        return ""
    numel = numel or max(e.storage_numel or 0 for e in events)
    labels = sent_labels(results, numel)
    columns = [_rank_steps(res, labels) for res in results]
    steps = max(len(c) for c in columns)
    width = max(12, *(len(cell) for c in columns for cell in c))
    lines = [
        f"send/recv trace (step k = each rank's k-th send and k-th receive; cI = chunk I of "
        f"torch.tensor_split over {numel} elements):",
        "  step  " + "  ".join(f"rank {res.rank}".ljust(width) for res in results).rstrip(),
    ]
    for k in range(min(steps, max_steps)):
        cells = [(c[k] if k < len(c) else "-").ljust(width) for c in columns]
        lines.append(f"  {k:<4}  " + "  ".join(cells).rstrip())
    if steps > max_steps:
        lines.append(f"  ... {steps - max_steps} more step(s)")
    return "\n".join(lines)


def _rank_steps(res: RankResult, labels: MessageLabels) -> list[str]:
    sends: list[str] = []
    recvs: list[str] = []
    sent_to: dict[int | None, int] = {}
    got_from: dict[int | None, int] = {}
    for e in res.comm.events:
        if e.op in ("send", "isend"):
            k = sent_to[e.peer] = sent_to.get(e.peer, -1) + 1
            sends.append(f"->{e.peer} {labels.get((res.rank, e.peer, k), f'{e.numel}el')}")
        else:
            k = got_from[e.peer] = got_from.get(e.peer, -1) + 1
            recvs.append(f"<-{e.peer} {labels.get((e.peer, res.rank, k), f'{e.numel}el')}")
    return [
        " ".join(x for x in (sends[k] if k < len(sends) else "", recvs[k] if k < len(recvs) else "") if x)
        for k in range(max(len(sends), len(recvs)))
    ]


def call_key(task: Mapping[str, object], size: int) -> CallKey:
    """What makes two calls the same call: the function or program, its configuration, the world size.

    Configuration is the names and flags a call is given (strings, booleans, None): a schedule's name, a
    mode. Numbers, tensors and containers are data (sizes, seeds, inputs): the same ring on another tensor
    or seed hangs again, and retrying it would spend the exercise's time budget on timeouts.
    """
    target = str(task.get("program") or f"{task['module']}.{task['function']}")
    named = task.get("kwargs") or task.get("inputs") or {}
    args = task.get("args", ())
    settings = [repr(a) for a in (args if isinstance(args, list | tuple) else ()) if _setting(a)]
    if isinstance(named, dict):
        settings += [f"{k}={v!r}" for k, v in sorted(named.items()) if _setting(v)]
    return (target, tuple(settings), size)


def _setting(value: object) -> bool:
    return value is None or isinstance(value, bool | str)
