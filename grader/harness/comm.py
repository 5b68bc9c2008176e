"""Counting and forbidding inside a rank: wrappers around torch.distributed, installed before student code.

Point-to-point calls (send, recv, isend, irecv) are recorded as ``CommEvent``s so a test can check message
and byte counts against theory. Collective calls are recorded by name, and raise ``ForbiddenCollective``
when the test forbade them, e.g. ``dist.all_reduce`` inside a student's own all-reduce.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

P2P_OPS = ("send", "recv", "isend", "irecv")
COLLECTIVES = (
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
)


class ForbiddenCollective(RuntimeError):
    """A collective the test forbade was called."""


@dataclass
class CommRecorder:
    """What this rank did during the current task; reset before each task."""

    events: list[dict[str, Any]] = field(default_factory=list)
    collectives: list[str] = field(default_factory=list)
    forbidden: frozenset[str] = frozenset()
    depth: int = 0
    """Nesting of wrapped calls: torch's ``send`` calls ``isend``; only the outer call is the student's."""

    def reset(self, forbidden: frozenset[str]) -> None:
        self.events, self.collectives, self.forbidden, self.depth = [], [], forbidden, 0

    def summary(self) -> dict[str, Any]:
        return {"events": self.events, "collectives": self.collectives}


RECORDER = CommRecorder()


def _record_p2p(op: str, tensor: torch.Tensor, peer: int | None) -> None:
    RECORDER.events.append(
        {
            "op": op,
            "peer": peer,
            "numel": tensor.numel(),
            "nbytes": tensor.numel() * tensor.element_size(),
            "dtype": str(tensor.dtype).removeprefix("torch."),
            # where in its storage the message lives: tells chunk i of a tensor_split from a scratch buffer
            "offset": tensor.storage_offset(),
            "storage_numel": tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1),
        }
    )


@contextmanager
def _nested() -> Iterator[bool]:
    """Track wrapper nesting; yields True for the outermost wrapped call."""
    RECORDER.depth += 1
    try:
        yield RECORDER.depth == 1
    finally:
        RECORDER.depth -= 1


def _wrap_p2p(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    peer_arg = "dst" if name in ("send", "isend") else "src"

    @functools.wraps(original)
    def wrapper(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        peer = args[0] if args else kwargs.get(peer_arg, kwargs.get(f"group_{peer_arg}"))
        with _nested() as outermost:
            result = original(tensor, *args, **kwargs)
        if outermost:
            if name == "recv" and peer is None:
                peer = result  # recv from any source returns the sender's rank
            _record_p2p(name, tensor, peer)
        return result

    return wrapper


def _wrap_collective(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if RECORDER.depth == 0:
            if name in RECORDER.forbidden:
                raise ForbiddenCollective(
                    f"dist.{name} is not allowed here: build this operation from send/recv yourself"
                )
            RECORDER.collectives.append(name)
        with _nested():
            return original(*args, **kwargs)

    return wrapper


def install() -> None:
    """Replace the functions in ``torch.distributed`` and ``distributed_c10d`` with recording wrappers."""
    for name in P2P_OPS + COLLECTIVES:
        original = getattr(c10d, name)
        wrapper = _wrap_p2p(name, original) if name in P2P_OPS else _wrap_collective(name, original)
        setattr(c10d, name, wrapper)
        setattr(dist, name, wrapper)
