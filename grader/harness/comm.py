"""Counting and forbidding inside a rank: wrappers around torch.distributed, installed before student code.

Point-to-point calls (send, recv, isend, irecv) are recorded as ``CommEvent``s so a test can check message
and byte counts against theory. Collective calls are recorded by name, and raise ``ForbiddenCollective``
when the test forbade them, e.g. ``dist.all_reduce`` inside a student's own all-reduce.

Every road to the network that Python can take is wrapped, not only ``torch.distributed``'s functions:

- the functions of ``torch.distributed`` and ``distributed_c10d`` (the names a test forbids);
- the methods of the process group and of its backends (``_get_default_group().allreduce([t])``,
  ``dist.group.WORLD.send(...)``, ``pg._get_backend(dev).allgather(...)``): what those functions call, so a
  reloaded or copied ``distributed_c10d`` still ends here;
- the dispatcher's ops, ``torch.ops.c10d.*`` and ``torch.ops._c10d_functional*.*`` (what
  ``torch.distributed._functional_collectives`` and DTensor call): their ``_op`` is wrapped in place.

Each is recorded once: the outermost wrapped call is the student's (``dist.send`` calls ``pg.send``).

What reaches the C++ process group without passing a wrapper (``torch._C._jit_get_operation``,
``OpOverload._handle``, a C++ extension) is caught afterwards: every collective and point-to-point call
advances the group's sequence number; the wrappers add up what they let through, and ``finish`` compares.
Where the task forbids collectives, traffic no wrapper saw fails it (``ForbiddenCollective``); elsewhere it
is counted as ``unrecorded``. docs/threat_model.md says what remains possible.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._C._distributed_c10d as _C
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

_P2P = "p2p"
_UNNAMED = ""
"""Communicates, but is neither a collective nor a message of its own (coalescing, sequence numbers):
its traffic is accounted for, nothing is recorded."""

GROUP_METHODS: dict[str, str] = {
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "allgather_coalesced": "all_gather",
    "_allgather_base": "all_gather_into_tensor",
    "allgather_into_tensor_coalesced": "all_gather_into_tensor",
    "all_gather_single": "all_gather_into_tensor",
    "all_gather_single_coalesced": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter_tensor",
    "reduce_scatter_single": "reduce_scatter_tensor",
    "reduce_scatter_single_coalesced": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all_single",
    "all_to_all_single": "all_to_all_single",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "monitored_barrier": "barrier",
    "send": _P2P,
    "recv": _P2P,
    "recv_anysource": _P2P,
    "_start_coalescing": _UNNAMED,
    "_end_coalescing": _UNNAMED,
    "_set_sequence_number_for_group": _UNNAMED,
}
"""Methods of ``ProcessGroup`` and of every ``Backend`` class, and the collective each one is."""

_FUNCTIONAL = {
    "all_reduce": "all_reduce",
    "all_reduce_": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "all_reduce_coalesced_": "all_reduce",
    "all_gather_into_tensor": "all_gather_into_tensor",
    "all_gather_into_tensor_out": "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced": "all_gather_into_tensor",
    "reduce_scatter_tensor": "reduce_scatter_tensor",
    "reduce_scatter_tensor_out": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor",
    "all_to_all_single": "all_to_all_single",
    "broadcast": "broadcast",
    "broadcast_": "broadcast",
    "isend": _P2P,
    "irecv": _P2P,
    "batch_p2p_ops": _P2P,
}
OPS: dict[str, dict[str, str]] = {
    "c10d": {
        "allreduce_": "all_reduce",
        "allreduce_coalesced_": "all_reduce",
        "allgather_": "all_gather",
        "allgather_coalesced_": "all_gather",
        "_allgather_base_": "all_gather_into_tensor",
        "allgather_into_tensor_coalesced_": "all_gather_into_tensor",
        "reduce_scatter_": "reduce_scatter",
        "_reduce_scatter_base_": "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor",
        "alltoall_": "all_to_all",
        "alltoall_base_": "all_to_all_single",
        "broadcast_": "broadcast",
        "reduce_": "reduce",
        "gather_": "gather",
        "scatter_": "scatter",
        "barrier": "barrier",
        "monitored_barrier_": "barrier",
        "send": _P2P,
        "recv_": _P2P,
        "recv_any_source_": _P2P,
    },
    "_c10d_functional": _FUNCTIONAL,
    "_c10d_functional_autograd": _FUNCTIONAL,
}
"""Dispatcher ops, by namespace, and the collective each one is."""


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
    accounted: int = 0
    """Sequence numbers the wrapped calls advanced the process groups by."""
    unrecorded: int = 0
    """Calls that advanced a group's sequence number without passing a wrapper (set by ``finish``)."""
    baseline: dict[int, int] = field(default_factory=dict)
    """Each known group's sequence number when the task started, by ``id``."""

    def reset(self, forbidden: frozenset[str]) -> None:
        self.events, self.collectives, self.forbidden, self.depth = [], [], forbidden, 0
        self.accounted, self.unrecorded, self.baseline = 0, 0, _sequence_numbers()

    def finish(self) -> None:
        """After the task: compare the groups' sequence numbers with what the wrappers let through.

        Raises ``ForbiddenCollective`` where the task forbids collectives and some call went around them."""
        now = _sequence_numbers()
        advanced = sum(seq - self.baseline.get(key, 0) for key, seq in now.items())
        self.unrecorded = advanced - self.accounted
        if self.unrecorded and self.forbidden:
            raise ForbiddenCollective(
                f"{abs(self.unrecorded)} collective or point-to-point call(s) went around torch.distributed "
                "and the process group's methods (the process group's sequence number moved by "
                f"{advanced}, the recorded calls account for {self.accounted}): collectives are not "
                "allowed here, and a call the harness cannot see cannot be checked; use dist.send, "
                "dist.recv, dist.isend and dist.irecv"
            )

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"events": self.events, "collectives": self.collectives}
        if self.unrecorded:
            out["unrecorded"] = self.unrecorded
        return out


RECORDER = CommRecorder()

# ---------------------------------------------------------------------------------------------------------
# the process groups and their sequence numbers

_GROUPS: dict[int, Any] = {}
"""Every process group a wrapper has seen or ``distributed_c10d`` listed, by ``id`` (held: ids stay valid)."""
_WORLD: Any = None
"""``distributed_c10d._world`` at install: a reloaded module gets a new, empty one."""
_sequence_number: Callable[[Any], int] = _C.ProcessGroup._get_sequence_number_for_group
"""The unwrapped getter, taken before student code could replace it."""


def _note_group(group: Any) -> None:
    if isinstance(group, _C.ProcessGroup) and id(group) not in _GROUPS:
        _GROUPS[id(group)] = group


def _sequence_numbers() -> dict[int, int]:
    """Each known group's count of collective and point-to-point calls so far."""
    for world in (_WORLD, getattr(c10d, "_world", None)):
        for group in list(getattr(world, "pg_map", {}) or {}):
            _note_group(group)
    numbers = {}
    for key, group in list(_GROUPS.items()):
        try:
            numbers[key] = _sequence_number(group)
        except Exception:  # a backend without sequence numbers, a group shut down
            pass
    return numbers


def _sequence_total() -> int:
    return sum(_sequence_numbers().values())


# ---------------------------------------------------------------------------------------------------------
# recording


def _global_rank(group: Any, peer: int | None) -> int | None:
    """``peer``'s rank in the default group: the process-group methods and ops take the group's rank."""
    if peer is None or not isinstance(group, _C.ProcessGroup):
        return peer
    try:
        return c10d.get_global_rank(group, peer)
    except Exception:  # a group distributed_c10d does not know (a reload, one built by hand)
        return peer


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


def _refuse_or_record(name: str, how: str) -> None:
    if name in RECORDER.forbidden:
        raise ForbiddenCollective(
            f"dist.{name} is not allowed here{how}: build this operation from send/recv yourself"
        )
    RECORDER.collectives.append(name)


@contextmanager
def _nested() -> Iterator[bool]:
    """Track wrapper nesting; yields True for the outermost wrapped call."""
    RECORDER.depth += 1
    try:
        yield RECORDER.depth == 1
    finally:
        RECORDER.depth -= 1


@contextmanager
def _accounted() -> Iterator[None]:
    """Add what the call advances the groups' sequence numbers by to what the wrappers let through."""
    before = _sequence_total()
    try:
        yield
    finally:
        RECORDER.accounted += _sequence_total() - before


def _strip(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """No ``__wrapped__``: ``dist.all_reduce.__wrapped__`` would hand out the unrecorded original."""
    wrapper.__dict__.pop("__wrapped__", None)
    return wrapper


# ---------------------------------------------------------------------------------------------------------
# torch.distributed's functions


def _wrap_p2p(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    peer_arg = "dst" if name in ("send", "isend") else "src"

    @functools.wraps(original)
    def wrapper(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        peer = args[0] if args else kwargs.get(peer_arg, kwargs.get(f"group_{peer_arg}"))
        with _nested() as outermost:
            if not outermost:
                return original(tensor, *args, **kwargs)
            with _accounted():
                result = original(tensor, *args, **kwargs)
        if name == "recv" and peer is None:
            peer = result  # recv from any source returns the sender's rank
        _record_p2p(name, tensor, peer)
        return result

    return _strip(wrapper)


def _wrap_collective(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if RECORDER.depth == 0:
            _refuse_or_record(name, "")
        with _nested() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            with _accounted():
                return original(*args, **kwargs)

    return _strip(wrapper)


# ---------------------------------------------------------------------------------------------------------
# the process group's and its backends' methods


def _group_p2p(method: str, group: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``send(tensors, dstRank, tag)``, ``recv(tensors, srcRank, tag)``, ``recv_anysource(tensors, tag)``."""
    tensors = args[0] if args else kwargs.get("tensors", [])
    if method == "recv_anysource":
        peer = None
    else:
        peer = args[1] if len(args) > 1 else kwargs.get("dstRank" if method == "send" else "srcRank")
        peer = _global_rank(group, peer)
    for tensor in tensors if isinstance(tensors, list | tuple) else [tensors]:
        _record_p2p("isend" if method == "send" else "irecv", tensor, peer)


def _wrap_group_method(
    owner: str, method: str, name: str, original: Callable[..., Any]
) -> Callable[..., Any]:
    how = f" (called as {owner}.{method})"

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        _note_group(self)
        if RECORDER.depth == 0 and name not in (_P2P, _UNNAMED):
            _refuse_or_record(name, how)
        with _nested() as outermost:
            if not outermost:
                return original(self, *args, **kwargs)
            with _accounted():
                result = original(self, *args, **kwargs)
        if name == _P2P:
            _group_p2p(method, self, args, kwargs)
        return result

    return _strip(wrapper)


def _backend_classes() -> list[type]:
    """``ProcessGroup``, ``Backend`` and every backend this build of torch has (Gloo, NCCL, MPI, ...)."""
    classes = [value for value in vars(_C).values() if isinstance(value, type)]
    return [cls for cls in classes if issubclass(cls, _C.ProcessGroup | _C.Backend)]


# ---------------------------------------------------------------------------------------------------------
# the dispatcher's ops


def _op_p2p(namespace: str, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Record the messages of a point-to-point op from its schema's arguments."""
    if namespace == "c10d":  # send(tensors, pg, dst, tag), recv_(tensors, pg, src, tag), recv_any_source_
        tensors, group = args[0], args[1] if len(args) > 1 else None
        peer = None if op == "recv_any_source_" else _global_rank(group, args[2] if len(args) > 2 else None)
        for tensor in tensors:
            _record_p2p("isend" if op == "send" else "irecv", tensor, peer)
    elif op in ("isend", "irecv"):  # isend(tensor, dst, tag, group_name): the peer is the group's rank
        _record_p2p(op, args[0], args[1] if len(args) > 1 else None)
    else:  # batch_p2p_ops(op_list, peer_list, tag_list, tensors, group_name)
        for kind, peer, tensor in zip(args[0], args[1], args[3], strict=False):
            _record_p2p("isend" if "send" in kind else "irecv", tensor, peer)


def _wrap_op(namespace: str, op: str, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    how = f" (called as torch.ops.{namespace}.{op})"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if RECORDER.depth == 0 and name != _P2P:
            _refuse_or_record(name, how)
        with _nested() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            with _accounted():
                result = original(*args, **kwargs)
        if name == _P2P:
            try:
                _op_p2p(namespace, op, args, kwargs)
            except (IndexError, TypeError):  # called by keyword: its traffic still counts as accounted
                pass
        return result

    return wrapper


def _install_ops() -> None:
    """Wrap each op's ``_op`` (packet and overloads) in place: torch keeps comparing the same objects."""
    for namespace, ops in OPS.items():
        space = getattr(torch.ops, namespace)
        for op, name in ops.items():
            try:
                packet = getattr(space, op)
            except (AttributeError, RuntimeError):  # not in this build of torch
                continue
            targets = [packet] + [getattr(packet, overload) for overload in packet.overloads()]
            for target in targets:
                target._op = _wrap_op(namespace, op, name, target._op)


# ---------------------------------------------------------------------------------------------------------


def install() -> None:
    """Wrap every road to the network (see the module's docstring); call once, after joining the world."""
    global _WORLD
    _WORLD = getattr(c10d, "_world", None)
    for name in P2P_OPS + COLLECTIVES:
        original = getattr(c10d, name)
        wrapper = _wrap_p2p(name, original) if name in P2P_OPS else _wrap_collective(name, original)
        setattr(c10d, name, wrapper)
        setattr(dist, name, wrapper)
    for cls in _backend_classes():
        for method, name in GROUP_METHODS.items():
            if method in vars(cls):
                setattr(cls, method, _wrap_group_method(cls.__name__, method, name, vars(cls)[method]))
    _install_ops()
    if dist.is_initialized():
        _note_group(c10d._get_default_group())
