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
    m = num_microbatches
    return [[("F" if k < m else "B", k % m, 0) for k in range(2 * m)] for _ in range(num_ranks)]


def one_f_one_b_schedule(num_ranks: int, num_microbatches: int) -> list[list[Action]]:
    """1F1B (PipeDream-Flush): rank r runs w = min(p-r-1, m) warm-up forwards, then m-w pairs (F(i+w), B(i)),
    then the w remaining backwards in order. One chunk."""
    m, p = num_microbatches, num_ranks
    schedule = []
    for r in range(p):
        w = min(p - r - 1, m)
        f = b = 0
        actions: list[Action] = []
        while f < w:  # warm-up
            actions.append(("F", f, 0))
            f += 1
        while f < m:  # steady state: one forward, one backward
            actions.append(("F", f, 0))
            actions.append(("B", b, 0))
            f, b = f + 1, b + 1
        while b < m:  # cool-down
            actions.append(("B", b, 0))
            b += 1
        schedule.append(actions)
    return schedule


def interleaved_schedule(num_ranks: int, num_microbatches: int, num_chunks: int) -> list[list[Action]]:
    """Megatron-LM's interleaved 1F1B with v = num_chunks chunks per rank; m % p != 0 is a ValueError.

    Forward k (k = 0..m*v-1) of every rank is table[k]: microbatches go in groups of p, and each group runs
    through chunk 0, then chunk 1, ..., then chunk v-1: table = [(g+j, c) for g in 0, p, 2p.. for c in
    range(v) for j in range(p)]. Backward k is the same microbatch on chunk v-1-c. Rank r runs
    w = min(2(p-r-1) + (v-1)p, m*v) warm-up forwards, then m*v-w pairs (forward k+w, backward k), then the
    w remaining backwards.
    """
    p, m, v = num_ranks, num_microbatches, num_chunks
    if m % p != 0:
        raise ValueError(f"m = {m} is not a multiple of p = {p}")
    total = m * v

    def forward(k: int) -> Action:
        group, rest = divmod(k, p * v)
        return ("F", group * p + rest % p, rest // p)

    def backward(k: int) -> Action:
        _, i, c = forward(k)
        return ("B", i, v - 1 - c)

    schedule = []
    for r in range(p):
        w = min(2 * (p - r - 1) + (v - 1) * p, total)
        actions = [forward(k) for k in range(w)]
        for k in range(total - w):
            actions += [forward(k + w), backward(k)]
        actions += [backward(k) for k in range(total - w, total)]
        schedule.append(actions)
    return schedule


# ------------------------------------------------------------------------------------------------------------
# 13.simulator: run a schedule on a unit-time clock


def check_actions(schedule: list[list[Action]], num_microbatches: int, num_chunks: int) -> None:
    """Raise ValueError unless each rank has every ("F", i, c) and ("B", i, c), i < m, c < v, exactly once."""
    from collections import Counter

    expected = Counter(
        (op, i, c) for op in ("F", "B") for i in range(num_microbatches) for c in range(num_chunks)
    )
    for r, actions in enumerate(schedule):
        got = Counter(tuple(a) for a in actions)
        if got != expected:
            missing, extra = expected - got, got - expected
            raise ValueError(f"rank {r}: missing {sorted(missing)}, unexpected or repeated {sorted(extra)}")


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
    from collections import deque

    m, v = num_microbatches, num_chunks
    check_actions(schedule, m, v)
    p = len(schedule)
    S = v * p
    where = {}  # (op, microbatch, stage) -> (rank, index)
    for r, actions in enumerate(schedule):
        for n, (op, i, c) in enumerate(actions):
            where[(op, i, c * p + r)] = (r, n)
    preds: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (op, i, s), node in where.items():
        r, n = node
        deps = [(r, n - 1)] if n else []  # program order on the rank
        if op == "F" and s > 0:
            deps.append(where[("F", i, s - 1)])
        if op == "B":
            deps.append(where[("F", i, s)])
            if s < S - 1:
                deps.append(where[("B", i, s + 1)])
        preds[node] = deps
    succs: dict[tuple[int, int], list[tuple[int, int]]] = {node: [] for node in preds}
    indeg = {node: len(d) for node, d in preds.items()}
    for node, deps in preds.items():
        for d in deps:
            succs[d].append(node)
    ready = deque(node for node, k in indeg.items() if k == 0)
    finish: dict[tuple[int, int], float] = {}
    start = [[0.0] * len(a) for a in schedule]
    while ready:
        node = ready.popleft()
        r, n = node
        t0 = max((finish[d] for d in preds[node]), default=0.0)
        start[r][n] = t0
        finish[node] = t0 + (t_f if schedule[r][n][0] == "F" else t_b) / v
        for nxt in succs[node]:
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                ready.append(nxt)
    if len(finish) != len(preds):
        raise ValueError(f"the schedule deadlocks: {len(preds) - len(finish)} actions can never run")
    makespan = max(finish.values())
    ideal = m * (t_f + t_b)
    return {
        "start": start,
        "makespan": makespan,
        "ideal": ideal,
        "bubble_ratio": (makespan - ideal) / ideal,
        "bubble_share": (makespan - ideal) / makespan,
        "peak_in_flight": [peak_in_flight(actions) for actions in schedule],
    }


def peak_in_flight(actions: list[Action]) -> int:
    """The most (microbatch, chunk) pairs whose forward has run and backward has not, walking `actions`.

    Each one holds its activations in memory: this is the pipeline's activation footprint, in chunk units.
    """
    count = peak = 0
    for op, _, _ in actions:
        count += 1 if op == "F" else -1
        peak = max(peak, count)
    return peak
