"""Trusted rank programs for exercise 15: drive your allocator, pool, window and KV cache through a script.

Objects cannot cross the judge/worker boundary, so each test sends a script of plain steps and each program
returns plain data after every step. An error the exercise defines (OutOfMemory, InvalidFree, AccessError
and its subclasses, PoolExhausted, UnknownSequence, ValueError) comes back as
{"error": class name, "message": str(error)}; any other exception fails the rank as usual.

A handle in a script is either an int (the i-th handle this program's pool allocated) or [owner, id, nbytes]
(a handle built by hand: to a peer's region, or forged).
"""

from __future__ import annotations

from typing import Any

import torch


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
