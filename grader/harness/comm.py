"""Counting and forbidding inside a rank: wrappers around torch.distributed, installed before student code.

Point-to-point calls (send, recv, isend, irecv) are recorded as ``CommEvent``s so a test can check message
and byte counts against theory. Collective calls are recorded by name, with the bytes of the tensors they
were handed (``CommLog.collective_bytes``), and raise ``ForbiddenCollective``
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

This module holds the wrappers and ``install``; ``collectives`` names what each road counts as, and
``recorder`` holds ``RECORDER`` and the sequence-number check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch._C._distributed_c10d as _C
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from grader.harness.collectives import COLLECTIVES, GROUP_METHODS, OPS, P2P, P2P_OPS, UNNAMED
from grader.harness.recorder import (
    RECORDER,
    ForbiddenCollective,
    accounted,
    global_rank,
    nested,
    note_group,
    record_p2p,
    refuse_or_record,
    tensor_bytes,
    watch_world,
)

__all__ = ["COLLECTIVES", "P2P_OPS", "RECORDER", "ForbiddenCollective", "install"]
"""What rank programs and tests use: ``install`` once, then ``RECORDER`` (reset, finish, summary) per task."""


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
        with nested() as outermost:
            if not outermost:
                return original(tensor, *args, **kwargs)
            _refuse_missing_peer(name, peer, kwargs)
            with accounted():
                result = original(tensor, *args, **kwargs)
        if name == "recv" and peer is None:
            peer = result  # recv from any source returns the sender's rank
        record_p2p(name, tensor, peer)
        return result

    return _strip(wrapper)


def _refuse_missing_peer(name: str, peer: Any, kwargs: dict[str, Any]) -> None:
    """A peer rank that does not exist is the student's error, said the same way every time: gloo, handed
    one, may crash the rank or block for ever, depending on timing."""
    if not isinstance(peer, int) or peer < 0:
        return
    group = kwargs.get("group")
    in_group = any(f"group_{arg}" in kwargs for arg in ("dst", "src"))
    size = dist.get_world_size(group) if in_group else dist.get_world_size()
    if peer >= size:
        where = "the group" if in_group else "the world"
        raise ValueError(f"dist.{name} with peer rank {peer}: {where} has only ranks 0 to {size - 1}")


def _wrap_collective(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if RECORDER.depth == 0:
            refuse_or_record(name, "", tensor_bytes(args, kwargs))
        with nested() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            with accounted():
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
        peer = global_rank(group, peer)
    for tensor in tensors if isinstance(tensors, list | tuple) else [tensors]:
        record_p2p("isend" if method == "send" else "irecv", tensor, peer)


def _wrap_group_method(
    owner: str, method: str, name: str, original: Callable[..., Any]
) -> Callable[..., Any]:
    how = f" (called as {owner}.{method})"

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        note_group(self)
        if RECORDER.depth == 0 and name not in (P2P, UNNAMED):
            refuse_or_record(name, how, tensor_bytes(args, kwargs))
        with nested() as outermost:
            if not outermost:
                return original(self, *args, **kwargs)
            with accounted():
                result = original(self, *args, **kwargs)
        if name == P2P:
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
        peer = None if op == "recv_any_source_" else global_rank(group, args[2] if len(args) > 2 else None)
        for tensor in tensors:
            record_p2p("isend" if op == "send" else "irecv", tensor, peer)
    elif op in ("isend", "irecv"):  # isend(tensor, dst, tag, group_name): the peer is the group's rank
        record_p2p(op, args[0], args[1] if len(args) > 1 else None)
    else:  # batch_p2p_ops(op_list, peer_list, tag_list, tensors, group_name)
        for kind, peer, tensor in zip(args[0], args[1], args[3], strict=False):
            record_p2p("isend" if "send" in kind else "irecv", tensor, peer)


def _wrap_op(namespace: str, op: str, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    how = f" (called as torch.ops.{namespace}.{op})"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if RECORDER.depth == 0 and name != P2P:
            refuse_or_record(name, how, tensor_bytes(args, kwargs))
        with nested() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            with accounted():
                result = original(*args, **kwargs)
        if name == P2P:
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
    watch_world()
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
        note_group(c10d._get_default_group())
