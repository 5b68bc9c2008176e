"""Trusted rank programs for exercise 15: drive your allocator, pool, window and KV cache through a script.

Objects cannot cross the judge/worker boundary, so each test sends a script of plain steps and each program
returns plain data after every step. An error the exercise defines (OutOfMemory, InvalidFree, AccessError
and its subclasses, PoolExhausted, UnknownSequence, ValueError) comes back as
{"error": class name, "message": str(error)}; any other exception fails the rank as usual.

A handle in a script is either an int (the i-th handle this program's pool allocated) or [owner, id, nbytes]
(a handle built by hand: to a peer's region, or forged).
"""

from __future__ import annotations

import gc
from typing import Any

import torch
import torch.distributed as dist


def _error(exc: BaseException) -> dict[str, str]:
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return {"error": type(exc).__name__, "message": message}


def _expected_errors(*modules: Any) -> tuple[type[BaseException], ...]:
    names = ["OutOfMemory", "InvalidFree", "AccessError", "PoolExhausted", "UnknownSequence"]
    return (ValueError, *(getattr(m, n) for m in modules for n in names if hasattr(m, n)))


# ---------------------------------------------------------------------------------------------------------
# 15.allocator


def arena_trace(ctx: Any, *, capacity: int, alignment: int, ops: list[list[Any]]) -> list[dict[str, Any]]:
    """Run ["alloc", n] / ["free", offset] / ["free_live", k] on one Arena; state after every op.

    "free_live" frees the k-th live block in address order (k mod the number of live blocks; a no-op
    returning None when none is live), so a random script can free blocks without knowing their offsets.
    """
    arena_mod = ctx.submission("arena")
    errors = _expected_errors(arena_mod)
    arena = arena_mod.Arena(capacity, alignment)
    trace = []
    for op, arg in ops:
        try:
            if op == "alloc":
                result = arena.alloc(arg)
            elif op == "free":
                result = arena.free(arg)
            else:
                live = sorted(arena.allocated)
                result = arena.free(live[arg % len(live)]) if live else None
        except errors as exc:
            result = _error(exc)
        trace.append(
            {
                "result": result,
                "free_list": [list(b) for b in arena.free_list],
                "allocated": sorted([o, s] for o, s in arena.allocated.items()),
            }
        )
    return trace


# ---------------------------------------------------------------------------------------------------------
# 15.access


def _handle(pool_mod: Any, handles: list[Any], spec: Any) -> Any:
    return handles[spec] if isinstance(spec, int) else pool_mod.Handle(*spec)


def _handle_data(handle: Any) -> list[int]:
    return [handle.owner, handle.id, handle.nbytes]


def _pool_step(pool_mod: Any, pool: Any, handles: list[Any], step: list[Any]) -> Any:
    op, *args = step
    if op == "allocate":
        handles.append(pool.allocate(args[0]))
        return _handle_data(handles[-1])
    h = _handle(pool_mod, handles, args[0])
    if op == "release":
        return pool.release(h)
    if op == "grant":
        return pool.grant(h, args[1], args[2])
    if op == "write":  # [h, offset, data uint8, requester]
        return pool.write(h, args[1], args[2], args[3])
    if op == "read":  # [h, offset, nbytes, requester]
        return pool.read(h, args[1], args[2], args[3])
    if op == "check":  # [h, offset, nbytes, write, requester]
        return pool.check(h, args[4], args[1], args[2], args[3])
    raise ValueError(f"unknown step {op!r}")  # a bug in the test, not in the submission


def pool_script(ctx: Any, *, rank: int, capacity: int, alignment: int, steps: list[list[Any]]) -> list[Any]:
    """MemoryPool(rank, capacity, alignment) driven by `steps`; one result per step."""
    pool_mod = ctx.submission("pool")
    errors = _expected_errors(pool_mod, ctx.submission("arena"))
    pool, handles, results = pool_mod.MemoryPool(rank, capacity, alignment, device=ctx.device), [], []
    for step in steps:
        try:
            results.append(_pool_step(pool_mod, pool, handles, step))
        except errors as exc:
            results.append(_error(exc))
    return results


# ---------------------------------------------------------------------------------------------------------
# 15.one_sided


def window_epochs(
    ctx: Any, *, capacity: int, setup: list[list[Any]], epochs: list[list[list[Any]]]
) -> dict[str, Any]:
    """Set up my pool with `setup` (as pool_script, my own rank as requester), then run each epoch:
    queue its ["get", h, offset, nbytes] / ["put", h, offset, data] ops on a Window and fence.
    Returns the handles my pool allocated, and each epoch's fence results (errors as dicts).
    """
    pool_mod, window_mod = ctx.submission("pool"), ctx.submission("window")
    pool = pool_mod.MemoryPool(ctx.rank, capacity, device=ctx.device)
    handles: list[Any] = []
    for step in setup:
        _pool_step(pool_mod, pool, handles, step)
    window = window_mod.Window(pool)
    out = []
    for ops in epochs:
        for op, spec, offset, arg in ops:
            h = _handle(pool_mod, handles, spec)
            window.put(h, offset, arg.to(ctx.device)) if op == "put" else window.get(h, offset, arg)
        results = window.fence()
        out.append(
            {
                "results": [_error(r) if isinstance(r, pool_mod.AccessError) else r for r in results],
                "left_in_queue": len(window.queue),
            }
        )
    return {"handles": [_handle_data(h) for h in handles], "epochs": out}


# ---------------------------------------------------------------------------------------------------------
# 15.page_table and 15.paged_kv


def _manager_state(m: Any) -> dict[str, Any]:
    return {
        "tables": {str(s): [list(p) for p in t] for s, t in sorted(m.tables.items())},
        "lengths": {str(s): n for s, n in sorted(m.lengths.items())},
        "free": [list(f) for f in m.free],
        "evicted": list(m.evicted),
    }


def manager_script(
    ctx: Any, *, world_size: int, pages_per_rank: int, block_size: int, steps: list[list[Any]]
) -> list[dict[str, Any]]:
    """BlockManager driven by ["add", seq, home] / ["append", seq, n] / ["touch", seq] / ["free", seq]."""
    bm = ctx.submission("block_manager")
    errors = _expected_errors(bm)
    m, trace = bm.BlockManager(world_size, pages_per_rank, block_size), []
    for op, *args in steps:
        try:
            if op == "add":
                result = m.add_sequence(*args)
            elif op == "append":
                result = [list(s) for s in m.append_slots(*args)]
            elif op == "touch":
                result = m.touch(*args)
            else:
                result = m.free_sequence(*args)
        except errors as exc:
            result = _error(exc)
        trace.append({"result": result, "state": _manager_state(m)})
    return trace


def kv_workload(
    ctx: Any,
    *,
    pages_per_rank: int,
    block_size: int,
    num_heads: int,
    head_dim: int,
    steps: list[list[Any]],
) -> dict[str, Any]:
    """A PagedKVCache on every rank, driven by ["add", seq, home] / ["append", seq, k, v] (k, v [n, H, D]
    for every rank; only the home rank passes them on) / ["gather", [[seq, dst], ...]].
    Returns what each gather gave this rank, this rank's pages and the final page table.
    """
    bm, kvc = ctx.submission("block_manager"), ctx.submission("kv_cache")
    manager = bm.BlockManager(ctx.world_size, pages_per_rank, block_size)
    cache = kvc.PagedKVCache(manager, num_heads, head_dim, dtype=torch.float64, device=ctx.device)
    gathers = []
    for op, *args in steps:
        if op == "add":
            manager.add_sequence(*args)
        elif op == "append":
            seq, k, v = args
            if manager.homes[seq] == ctx.rank:  # only the home rank has the new tokens
                cache.append(seq, k.shape[0], k.to(ctx.device), v.to(ctx.device))
            else:
                cache.append(seq, k.shape[0])
        else:
            got = cache.gather([tuple(q) for q in args[0]])
            gathers.append([None if r is None else list(r) for r in got])
    return {"gathers": gathers, "pages": cache.pages, **_manager_state(manager)}


# ---------------------------------------------------------------------------------------------------------
# 15.cuda_ipc: rank 0 owns a pool on the GPU and lends rank 1 a window of it; both ranks share that GPU.


class _PeerFailed(Exception):
    """The other rank's code raised; this rank stops at the same point instead of waiting for it."""


class _Lockstep:
    """Keeps the two ranks in step when the submission raises on one of them.

    Code between two meetings runs inside ``with step:``, which keeps the first error instead of raising
    it; ``meet`` then tells both ranks, and the rank whose code failed raises its own error there, so the
    report shows the student's exception at once instead of a peer that waits until the timeout.
    """

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def __enter__(self) -> _Lockstep:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None and self.error is None:
            self.error = exc
        return exc is not None

    def meet(self, obj: Any = None, src: int = 0) -> Any:
        """Both ranks call this at the same point; returns rank `src`'s `obj` (pickled, over gloo)."""
        box: list[Any] = [None, None]
        dist.all_gather_object(box, (obj if self.error is None else None, self.error is not None))
        if self.error is not None:
            raise self.error
        if any(failed for _, failed in box):
            raise _PeerFailed
        return box[src][0]


def _allocated(device: torch.device) -> int:
    """Bytes this process's caching allocator has handed out on `device` (0 off the GPU)."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reclaim(device: torch.device) -> None:
    """Free what this process lent out and its borrowers have let go of (torch keeps it until then)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.ipc_collect()


def _new_pool(ctx: Any, data: torch.Tensor) -> torch.Tensor:
    """The owner's pool: one fresh allocation on its GPU, holding `data`."""
    return data.to(ctx.device, copy=True)


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the storages behind `a` and `b` overlap: `a` is (a view of) memory `b` also reaches."""
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return sa.data_ptr() < sb.data_ptr() + sb.nbytes() and sb.data_ptr() < sa.data_ptr() + sa.nbytes()


def _raised(call: Any) -> str | None:
    """None if `call` went through, else "ErrorName: message" (any exception: the contract names none)."""
    try:
        call()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def _refusal(errors: tuple[type[BaseException], ...], call: Any) -> Any:
    """None if `call` went through, its error as a dict if it was refused (anything else propagates)."""
    try:
        call()
    except errors as exc:
        return _error(exc)
    return None


def ipc_session(ctx: Any, **inputs: Any) -> dict[str, Any]:
    """One loan of a window of rank 0's pool to rank 1 (see ``_loan``). If the submission raises on one
    rank, that rank fails with its error and the other returns {"peer_failed": True} at the same point."""
    try:
        return _loan(ctx, _Lockstep(), **inputs)
    except _PeerFailed:
        return {"peer_failed": True}


def _loan(
    ctx: Any,
    step: _Lockstep,
    *,
    pool: torch.Tensor,
    window: list[int],
    window_bytes: torch.Tensor | None = None,
    writes: list[list[Any]] = (),  # type: ignore[assignment]
    refused_windows: list[list[int]] = (),  # type: ignore[assignment]
    refused_accesses: list[list[Any]] = (),  # type: ignore[assignment]
    lag_cycles: int = 0,
    drop_early: bool = False,
) -> dict[str, Any]:
    """`window` = [offset, nbytes] of a pool holding `pool` (uint8 [capacity]), lent by rank 0 to rank 1.

    Owner (rank 0): tries each of `refused_windows` (each must be refused), grants the window and passes the
    Grant to rank 1, then stores `window_bytes` into its own window in place. Borrower (rank 1): opens the
    window, reads it before and after the owner's store, tries each of `refused_accesses` (["read", offset,
    nbytes] or ["write", offset, uint8 data]), then makes `writes` ([offset, uint8 data], window-relative)
    and tells the owner, which reads its pool. With lag_cycles > 0 the borrower's GPU is kept busy that long
    on the current stream, the data to write is produced there after it (as a caller's kernels would), and
    nothing here waits for the writes: only write() itself can, after the data exists. Otherwise this program
    synchronizes before telling the owner. Last, the borrower closes its window, then tries a read and a
    write on it (each must raise). The tensor its first read returned stays on its GPU, and is read again
    after the owner's store and after close(): a copy keeps its bytes; a view of the window would not.

    drop_early: the lifetime script instead (``_lifetime``).
    """
    dev, owner = ctx.device, ctx.rank == 0
    offset, nbytes = window
    out: dict[str, Any] = {}
    held: dict[str, Any] = {}  # every reference this program has to the pool, the grant or the window
    grant = None
    with step:
        ipc = ctx.submission("ipc")  # both ranks import it before a Grant is unpickled
        errors = (ValueError, ipc.WindowOutOfRange)
        if owner:
            held["pool"] = _new_pool(ctx, pool)
            out["refused"] = [
                _refusal(errors, lambda w=w: ipc.grant_window(held["pool"], *w)) for w in refused_windows
            ]
            _synchronize(dev)
            ptr, before = held["pool"].data_ptr(), _allocated(dev)
            grant = ipc.grant_window(held["pool"], offset, nbytes)
            out["grant"] = {"offset": grant.offset, "nbytes": grant.nbytes}
            out["allocated_by_grant"] = _allocated(dev) - before
            out["pool_moved"] = held["pool"].data_ptr() != ptr
            held["grant"] = grant
    grant = step.meet(grant, src=0)
    with step:
        if not owner:
            _synchronize(dev)
            before = _allocated(dev)
            held["win"] = ipc.BorrowedWindow(grant)
            _synchronize(dev)
            out["allocated_by_open"] = _allocated(dev) - before
            view = held["win"].bytes
            out["view"] = {"numel": view.numel(), "dtype": str(view.dtype), "device": str(view.device)}
            ptr = view.data_ptr()
            first = held["win"].read(0, nbytes)  # kept on the GPU: a copy must keep these bytes
            out["first_read"] = first.to("cpu", copy=True)  # now: `first` may alias
            out["read_shares_memory"] = isinstance(first, torch.Tensor) and _shares_memory(first, view)
            del view  # this program keeps no hold of its own on the owner's memory (but `first`, below)
            if not drop_early:  # the lifetime script counts every hold: it keeps nothing of a read
                held["first"] = first
            del first
    del grant
    step.meet()  # the borrower has read the window as granted
    if drop_early:
        return _lifetime(out, step, owner, dev, held, nbytes)

    with step:
        if owner:
            held["pool"][offset : offset + nbytes] = window_bytes.to(dev)  # in place: a copy misses it
            _synchronize(dev)
    step.meet()
    with step:
        if not owner:
            win = held["win"]
            out["second_read"] = win.read(0, nbytes).to("cpu", copy=True)
            out["first_read_after_store"] = held["first"].to("cpu", copy=True)
            refused = []
            for op, at, arg in refused_accesses:
                if op == "read":
                    refused.append(_refusal(errors, lambda at=at, arg=arg: win.read(at, arg)))
                else:
                    refused.append(_refusal(errors, lambda at=at, arg=arg: win.write(at, arg.to(dev))))
            out["refused_accesses"] = refused
            _borrower_writes(win, writes, dev, lag_cycles)
            out["view_moved"] = win.bytes.data_ptr() != ptr
    step.meet()  # the borrower says its writes are done
    with step:
        if owner:
            out["pool_after"] = held["pool"].cpu()
    step.meet()
    with step:
        if not owner:
            win = held.pop("win")
            win.close()
            out["first_read_after_close"] = held.pop("first").to("cpu", copy=True)
            one = torch.ones(1, dtype=torch.uint8, device=dev)
            out["after_close"] = [_raised(lambda: win.read(0, 1)), _raised(lambda: win.write(0, one))]
            _synchronize(dev)
    step.meet()
    return out


def _borrower_writes(win: Any, writes: list[list[Any]], dev: torch.device, lag_cycles: int) -> None:
    """The borrower's `writes` ([offset, uint8 data]) through win.write. With lag_cycles, the current stream
    is busy that long first and each write's data is produced on it after that (zeros until then), so a
    write that neither follows the current stream nor waits for its own copy leaves zeros or old bytes."""
    payloads = [(at, data.to(dev)) for at, data in writes]
    landing = [(at, torch.zeros_like(data)) for at, data in payloads] if lag_cycles else payloads
    _synchronize(dev)
    if lag_cycles:
        torch.cuda._sleep(lag_cycles)  # the GPU is busy: a write queued behind this lands later
        for (_, data), (_, fresh) in zip(payloads, landing, strict=True):
            fresh.copy_(data)  # the caller's data, written on the current stream behind the lag
    for at, data in landing:
        win.write(at, data)
    if not lag_cycles:
        _synchronize(dev)


def _lifetime(
    out: dict[str, Any], step: _Lockstep, owner: bool, dev: Any, held: dict[str, Any], nbytes: int
) -> dict[str, Any]:
    """The owner lets go of its pool while the borrower holds the window; the memory must stay until the
    borrower closes it, and come back to the owner then."""
    before = 0
    with step:
        if owner:
            before = _allocated(dev)
            held.clear()  # the pool and the grant: this process now holds nothing of its own on them
            _reclaim(dev)
            out["freed_while_lent"] = before - _allocated(dev)
    step.meet()
    with step:
        if not owner:
            out["read_while_lent"] = held["win"].read(0, nbytes).cpu()
            held["win"].close()  # the window object itself stays referenced: close alone must let go
            _reclaim(dev)
            _synchronize(dev)
    step.meet()  # the borrower has closed
    with step:
        if owner:
            _reclaim(dev)
            out["freed_after_close"] = before - _allocated(dev)
    step.meet()
    return out
