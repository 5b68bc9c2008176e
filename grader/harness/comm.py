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
import inspect
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import torch
import torch._C._distributed_c10d as _C
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from grader.harness.collectives import COLLECTIVES, GROUP_METHODS, OPS, P2P, P2P_OPS, UNNAMED
from grader.harness.recorder import (
    FLIGHT,
    RECORDER,
    ForbiddenCollective,
    TimedCall,
    accounted,
    global_rank,
    group_rank,
    nested,
    note_group,
    record_p2p,
    refuse_or_record,
    tensor_bytes,
    timed,
    timed_wait,
    watch_world,
)

__all__ = ["COLLECTIVES", "FLIGHT", "P2P_OPS", "RECORDER", "ForbiddenCollective", "install"]
"""What rank programs and tests use: ``install`` once, then ``RECORDER`` (reset, finish, summary) per task;
the worker opens ``FLIGHT``'s file when the judge asks for timelines."""

F = TypeVar("F", bound=Callable[..., object])


def _strip(wrapper: F) -> F:
    """No ``__wrapped__``: ``dist.all_reduce.__wrapped__`` would hand out the unrecorded original."""
    wrapper.__dict__.pop("__wrapped__", None)
    return wrapper


# ---------------------------------------------------------------------------------------------------------
# torch.distributed's functions


def _wrap_p2p(name: str, original: Callable[..., object]) -> Callable[..., object]:
    peer_arg = "dst" if name in ("send", "isend") else "src"

    @functools.wraps(original)
    def wrapper(tensor: torch.Tensor, *args: object, **kwargs: object) -> object:
        peer = args[0] if args else kwargs.get(peer_arg, kwargs.get(f"group_{peer_arg}"))
        with nested() as outermost:
            if not outermost:
                return original(tensor, *args, **kwargs)
            _refuse_missing_peer(name, peer, kwargs)
            with accounted(), _timed_p2p(name, peer_arg, tensor, args, kwargs) as call:
                result = original(tensor, *args, **kwargs)
                call.returned(result, sender=name == "recv")
        if name == "recv" and peer is None:
            peer = result  # recv from any source returns the sender's rank
        record_p2p(name, tensor, peer)
        return result

    return _strip(wrapper)


def _timed_p2p(
    name: str, peer_arg: str, tensor: torch.Tensor, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> AbstractContextManager[TimedCall]:
    """``timed`` for ``send(tensor, dst, group, tag, group_dst)`` (or ``src``): the peer both ways."""
    group = args[1] if len(args) > 1 else kwargs.get("group")
    tag = args[2] if len(args) > 2 else kwargs.get("tag", 0)
    peer = args[0] if args else kwargs.get(peer_arg)
    in_group = args[3] if len(args) > 3 else kwargs.get(f"group_{peer_arg}")
    peer, in_group = (v if type(v) is int else None for v in (peer, in_group))
    if peer is None and in_group is not None:
        peer = global_rank(group, in_group)
    elif in_group is None:
        in_group = group_rank(group, peer)
    nbytes = tensor.numel() * tensor.element_size()
    return timed(name, group, peer=peer, group_peer=in_group, nbytes=nbytes, tag=tag)


def _refuse_missing_peer(name: str, peer: object, kwargs: Mapping[str, object]) -> None:
    """A peer rank that does not exist is the student's error, said the same way every time: gloo, handed
    one, may crash the rank or block for ever, depending on timing."""
    if not isinstance(peer, int) or peer < 0:
        return
    group = kwargs.get("group")
    if not (group is None or isinstance(group, _C.ProcessGroup)):
        return  # not a process group: torch's own call says what is wrong with it
    in_group = any(f"group_{arg}" in kwargs for arg in ("dst", "src"))
    size = dist.get_world_size(group) if in_group else dist.get_world_size()
    if peer >= size:
        where = "the group" if in_group else "the world"
        raise ValueError(f"dist.{name} with peer rank {peer}: {where} has only ranks 0 to {size - 1}")


def _wrap_collective(name: str, original: Callable[..., object]) -> Callable[..., object]:
    group_at = _position(original, "group")

    @functools.wraps(original)
    def wrapper(*args: object, **kwargs: object) -> object:
        if RECORDER.depth:
            return original(*args, **kwargs)
        nbytes = tensor_bytes(args, kwargs)
        refuse_or_record(name, "", nbytes)
        group = args[group_at] if group_at is not None and len(args) > group_at else kwargs.get("group")
        with nested(), accounted(), timed(name, group, nbytes=nbytes) as call:
            result = original(*args, **kwargs)
            call.returned(result)
            return result

    return _strip(wrapper)


def _position(function: Callable[..., object], parameter: str) -> int | None:
    """Where ``parameter`` stands among ``function``'s positional parameters, if it is one of them."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None
    return names.index(parameter) if parameter in names else None


# ---------------------------------------------------------------------------------------------------------
# the process group's and its backends' methods


def _group_p2p(method: str, group: object, args: tuple[object, ...], kwargs: Mapping[str, object]) -> None:
    """``send(tensors, dstRank, tag)``, ``recv(tensors, srcRank, tag)``, ``recv_anysource(tensors, tag)``."""
    tensors = args[0] if args else kwargs.get("tensors", [])
    for tensor in tensors if isinstance(tensors, list | tuple) else [tensors]:
        if not isinstance(tensor, torch.Tensor):
            continue  # unreachable: the method took only tensors
        record_p2p(
            "isend" if method == "send" else "irecv",
            tensor,
            global_rank(group, _group_peer(method, args, kwargs)),
        )


def _group_peer(method: str, args: tuple[object, ...], kwargs: Mapping[str, object]) -> int | None:
    if method == "recv_anysource":
        return None
    peer = args[1] if len(args) > 1 else kwargs.get("dstRank" if method == "send" else "srcRank")
    return peer if isinstance(peer, int) else None


def _timed_method(
    method: str, name: str, group: object, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> AbstractContextManager[TimedCall]:
    """``timed`` for a process group's or backend's method: a collective on it, or its send or recv."""
    if name != P2P:
        return timed(name, group, nbytes=tensor_bytes(args, kwargs))
    peer = _group_peer(method, args, kwargs)
    tag_at = 1 if method == "recv_anysource" else 2
    tag = args[tag_at] if len(args) > tag_at else kwargs.get("tag")
    op = "isend" if method == "send" else "irecv"
    nbytes = tensor_bytes(args[:1], {})
    return timed(op, group, peer=global_rank(group, peer), group_peer=peer, nbytes=nbytes, tag=tag)


def _wrap_group_method(
    owner: str, method: str, name: str, original: Callable[..., object]
) -> Callable[..., object]:
    how = f" (called as {owner}.{method})"

    @functools.wraps(original)
    def wrapper(self: object, *args: object, **kwargs: object) -> object:
        note_group(self)
        if RECORDER.depth == 0 and name not in (P2P, UNNAMED):
            refuse_or_record(name, how, tensor_bytes(args, kwargs))
        with nested() as outermost:
            if not outermost:
                return original(self, *args, **kwargs)
            if name == UNNAMED:
                with accounted():
                    return original(self, *args, **kwargs)
            with accounted(), _timed_method(method, name, self, args, kwargs) as call:
                result = original(self, *args, **kwargs)
                call.returned(result)
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


# Any: the op's arguments as its schema types them (lists of tensors, ranks, a group), read by position; a
# call they do not fit raises IndexError or TypeError here, which the wrapper skips
def _op_p2p(namespace: str, op: str, args: tuple[Any, ...]) -> None:
    """Record the messages of a point-to-point op from its schema's positional arguments."""
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


def _wrap_op(namespace: str, op: str, name: str, original: Callable[..., object]) -> Callable[..., object]:
    how = f" (called as torch.ops.{namespace}.{op})"

    def wrapper(*args: object, **kwargs: object) -> object:
        if RECORDER.depth == 0 and name != P2P:
            refuse_or_record(name, how, tensor_bytes(args, kwargs))
        with nested() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            with (
                accounted(),
                timed(_op_name(op, name), _op_group(args), nbytes=tensor_bytes(args, kwargs)) as call,
            ):
                result = original(*args, **kwargs)
                call.returned(result)
        if name == P2P:
            try:
                _op_p2p(namespace, op, args)
            except (IndexError, TypeError):  # called by keyword: its traffic still counts as accounted
                pass
        return result

    return wrapper


def _op_name(op: str, name: str) -> str:
    """What a dispatcher op is called in a diagram: its collective, or for a message its direction."""
    if name != P2P:
        return name
    return "isend" if "send" in op else "irecv"


def _op_group(args: tuple[object, ...]) -> _C.ProcessGroup | str:
    """The process group among an op's arguments (a group's name for the functional ops), if it shows."""
    return next((a for a in args if isinstance(a, _C.ProcessGroup | str)), "?")


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


def _wrap_wait(original: Callable[..., bool]) -> Callable[..., bool]:
    """``Work.wait``, timed when the work came from a recorded call: where a rank waits for its isend."""

    @functools.wraps(original)
    def wait(self: _C.Work, *args: object, **kwargs: object) -> bool:
        with timed_wait(self):
            return original(self, *args, **kwargs)

    return _strip(wait)


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
    # a pybind class's method, replaced on purpose, like the process group's above
    _C.Work.wait = _wrap_wait(_C.Work.wait)  # type: ignore[method-assign]
    if dist.is_initialized():
        note_group(c10d._get_default_group())
