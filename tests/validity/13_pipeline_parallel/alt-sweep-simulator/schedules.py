"""Pipeline schedules as plain data, and a unit-time simulator that checks and times them.

A schedule is one list of actions per rank; rank r runs its list in order. An action is a tuple
(op, microbatch, chunk): op "F" (forward) or "B" (backward). With v chunks per rank (interleaving), chunk c on
rank r is virtual stage s = c*p + r, so a microbatch visits ranks 0..p-1, then 0..p-1 again (Megatron-LM).
Bubble (Narayanan et al. 2021, arXiv 2104.04473 §2.2): t_pb = (p-1)(t_f+t_b) for GPipe and 1F1B, and
(p-1)(t_f+t_b)/v interleaved. As a ratio to the ideal time m(t_f+t_b): (p-1)/m and (p-1)/(v*m) (Megatron's
definition); as a share of the whole step: (p-1)/(m+p-1) (GPipe's, Huang et al. 2019, arXiv 1811.06965 §2.3).
Check: `grade exercise 13`. Symbols: p ranks, m microbatches, v chunks per rank, S = v*p virtual stages.
"""

from __future__ import annotations

Action = tuple[str, int, int]  # (op "F" | "B", microbatch, chunk)


# ------------------------------------------------------------------------------------------------------------
# 13.schedules: who runs what, in which order


def gpipe_schedule(num_ranks: int, num_microbatches: int) -> list[list[Action]]:
    """GPipe (all forwards, then all backwards): on every rank F0..F(m-1), then B0..B(m-1). One chunk."""
    one = [("F", i, 0) for i in range(num_microbatches)] + [("B", i, 0) for i in range(num_microbatches)]
    return [list(one) for _ in range(num_ranks)]


def one_f_one_b_schedule(num_ranks: int, num_microbatches: int) -> list[list[Action]]:
    """1F1B (PipeDream-Flush): rank r runs w = min(p-r-1, m) warm-up forwards, then m-w pairs (F(i+w), B(i)),
    then the w remaining backwards in order. One chunk."""
    m = num_microbatches
    fwd = [("F", i, 0) for i in range(m)]
    bwd = [("B", i, 0) for i in range(m)]
    return [_warmup_steady_cooldown(fwd, bwd, min(num_ranks - r - 1, m)) for r in range(num_ranks)]


def _warmup_steady_cooldown(fwd: list[Action], bwd: list[Action], w: int) -> list[Action]:
    """w forwards, then pairs (forward k + w, backward k), then the remaining backwards."""
    out = list(fwd[:w])
    for k in range(len(fwd) - w):
        out += [fwd[k + w], bwd[k]]
    return out + list(bwd[len(fwd) - w :])


def interleaved_schedule(num_ranks: int, num_microbatches: int, num_chunks: int) -> list[list[Action]]:
    """Megatron-LM's interleaved 1F1B with v = num_chunks chunks per rank; m % p != 0 is a ValueError.

    Forward k (k = 0..m*v-1) of every rank is table[k]: microbatches go in groups of p, and each group runs
    through chunk 0, then chunk 1, ..., then chunk v-1: table = [(g+j, c) for g in 0, p, 2p.. for c in
    range(v) for j in range(p)]. Backward k is the same microbatch on chunk v-1-c. Rank r runs
    w = min(2(p-r-1) + (v-1)p, m*v) warm-up forwards, then m*v-w pairs (forward k+w, backward k), then the
    w remaining backwards.
    """
    p, m, v = num_ranks, num_microbatches, num_chunks
    if m % p:
        raise ValueError(f"interleaving needs the microbatches ({m}) to be a multiple of the ranks ({p})")
    table = [(g + j, c) for g in range(0, m, p) for c in range(v) for j in range(p)]
    fwd = [("F", i, c) for i, c in table]
    bwd = [("B", i, v - 1 - c) for i, c in table]
    return [_warmup_steady_cooldown(fwd, bwd, min(2 * (p - r - 1) + (v - 1) * p, m * v)) for r in range(p)]


# ------------------------------------------------------------------------------------------------------------
# 13.simulator: run a schedule on a unit-time clock


def check_actions(schedule: list[list[Action]], num_microbatches: int, num_chunks: int) -> None:
    """Raise ValueError unless each rank has every ("F", i, c) and ("B", i, c), i < m, c < v, exactly once."""
    want = sorted((op, i, c) for op in "FB" for i in range(num_microbatches) for c in range(num_chunks))
    for r, actions in enumerate(schedule):
        got = sorted(tuple(a) for a in actions)
        if got != want:
            raise ValueError(f"rank {r}: its actions are not each F and B of every (microbatch, chunk) once")


def simulate(
    schedule: list[list[Action]],
    num_microbatches: int,
    num_chunks: int = 1,
    t_f: float = 1.0,
    t_b: float = 1.0,
) -> dict:
    """Time `schedule` with zero-cost messages; raise ValueError if it is not a valid schedule.

    Valid: it passes check_actions, and it finishes. Dependencies, with s = c*p + r the virtual stage:
    F(i) at stage s needs F(i) at stage s-1 to have finished; B(i) at s needs F(i) at s and B(i) at s+1
    (the last stage needs only its own F).
    A rank runs its actions in order, one at a time; each starts as soon as the rank is free and its inputs
    exist. An F takes t_f / v, a B t_b / v (a chunk is 1/v of the rank's layers). Returns:
      "start":          per rank, the start time of each of its actions, in list order;
      "makespan":       when the last action ends;
      "ideal":          m (t_f + t_b), the busy time of every rank;
      "bubble_ratio":   (makespan - ideal) / ideal      (Megatron's definition);
      "bubble_share":   (makespan - ideal) / makespan   (GPipe's definition);
      "peak_in_flight": per rank, the most forwards run whose backward has not yet run (in list order).
    """
    m, v = num_microbatches, num_chunks
    check_actions(schedule, m, v)
    p = len(schedule)
    last = v * p - 1
    dur = {"F": t_f / v, "B": t_b / v}
    done: dict[tuple[str, int, int], float] = {}  # (op, microbatch, stage) -> finish time
    start = [[0.0] * len(a) for a in schedule]
    nxt, free = [0] * p, [0.0] * p
    remaining = sum(len(a) for a in schedule)
    while remaining:
        moved = False
        for r in range(p):
            while nxt[r] < len(schedule[r]):
                op, i, c = schedule[r][nxt[r]]
                s = c * p + r
                if op == "F":
                    deps = [("F", i, s - 1)] if s > 0 else []
                else:
                    deps = [("F", i, s)] + ([("B", i, s + 1)] if s < last else [])
                if any(d not in done for d in deps):
                    break
                t0 = max([free[r]] + [done[d] for d in deps])
                start[r][nxt[r]] = t0
                free[r] = done[(op, i, s)] = t0 + dur[op]
                nxt[r] += 1
                remaining -= 1
                moved = True
        if not moved:
            waiting = [a[n] if n < len(a) else None for a, n in zip(schedule, nxt, strict=True)]
            raise ValueError(f"deadlock: ranks wait at actions {waiting}")
    makespan = max(free)
    ideal = m * (t_f + t_b)
    return {
        "start": start,
        "makespan": makespan,
        "ideal": ideal,
        "bubble_ratio": (makespan - ideal) / ideal,
        "bubble_share": (makespan - ideal) / makespan,
        "peak_in_flight": [peak_in_flight(a) for a in schedule],
    }


def peak_in_flight(actions: list[Action]) -> int:
    """The most (microbatch, chunk) pairs whose forward has run and backward has not, walking `actions`.

    Each one holds its activations in memory: this is the pipeline's activation footprint, in chunk units.
    """
    live: set[tuple[int, int]] = set()
    peak = 0
    for op, i, c in actions:
        if op == "F":
            live.add((i, c))
            peak = max(peak, len(live))
        else:
            live.discard((i, c))
    return peak
