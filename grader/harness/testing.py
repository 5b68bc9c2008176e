"""What hidden and public tests use: the ``World`` handle and exact or tolerant comparisons."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from grader.harness.outcomes import CheckFailure, RankResult
from grader.harness.pool import Pool


class World:
    """A test's view of ``size`` ranks: run student functions or rank programs on all of them at once."""

    def __init__(self, pool: Pool, timeout_s: float) -> None:
        self.size = pool.size
        self._pool = pool
        self._timeout_s = timeout_s

    def call(
        self,
        module: str,
        function: str,
        *,
        args: Sequence[Sequence[Any]],
        kwargs: Sequence[dict[str, Any]] | dict[str, Any] | None = None,
        forbid: Iterable[str] = (),
    ) -> list[RankResult]:
        """On rank r, call the student's ``module.function(*args[r], **kwargs[r])``; results in rank order."""
        per_rank_kwargs = self._per_rank(kwargs or {})
        if len(args) != self.size:
            raise ValueError(f"args has {len(args)} entries for {self.size} ranks")
        tasks = [
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
        return self._pool.submit(tasks, self._timeout_s)

    def run(
        self, program: str, *, inputs: Sequence[dict[str, Any]] | dict[str, Any], forbid: Iterable[str] = ()
    ) -> list[RankResult]:
        """On rank r, run the trusted rank program ``"module:function"`` with ``**inputs[r]``."""
        tasks = [
            {"kind": "run", "program": program, "inputs": i, "forbid": list(forbid)}
            for i in self._per_rank(inputs)
        ]
        return self._pool.submit(tasks, self._timeout_s)

    def _per_rank(self, value: Sequence[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
        if isinstance(value, dict):
            return [value] * self.size
        if len(value) != self.size:
            raise ValueError(f"got {len(value)} per-rank entries for {self.size} ranks")
        return list(value)


# ---------------------------------------------------------------------------------------------------------
# comparisons


def assert_equal(
    got: Any,
    expected: torch.Tensor,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    what: str = "result",
) -> None:
    """Exact equality: same dtype, same shape, every element; the message names the first difference."""
    _check_tensor_like(got, expected, rank, world_size, what)
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
    got: Any,
    expected: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    rank: int | None = None,
    world_size: int | None = None,
    what: str = "result",
) -> None:
    """``|got - expected| <= atol + rtol * |expected|`` elementwise; say why the tolerance at the call."""
    _check_tensor_like(got, expected, rank, world_size, what)
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


def _check_tensor_like(
    got: Any, expected: torch.Tensor, rank: int | None, world_size: int | None, what: str
) -> None:
    def fail(message: str) -> None:
        raise CheckFailure(message, rank=rank, world_size=world_size)

    if not isinstance(got, torch.Tensor):
        fail(f"{what}: expected a tensor, got {type(got).__name__}")
    if got.dtype != expected.dtype:
        fail(f"{what}: dtype {got.dtype} but expected {expected.dtype}")
    if got.shape != expected.shape:
        fail(f"{what}: shape {tuple(got.shape)} but expected {tuple(expected.shape)}")


def _item(tensor: torch.Tensor, index: int) -> Any:
    return tensor.reshape(-1)[index].item()
