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
    """GPipe: on every rank, every forward before any backward (fill, then drain). One chunk (chunk 0).

    Contract: a valid schedule (simulate accepts it) whose bubble is (p-1)(t_f + t_b) for any t_f, t_b.
    """
    ### BEGIN SOLUTION 13.schedules
    # Fill, then drain. Backwards in microbatch order 0..m-1, as torch.distributed.pipelining's ScheduleGPipe
    # (torch/distributed/pipelining/schedules.py) runs them. Every rank holds all m activations at the peak.
    forwards = [("F", i, 0) for i in range(num_microbatches)]
    backwards = [("B", i, 0) for i in range(num_microbatches)]
    return [forwards + backwards for _ in range(num_ranks)]
    ### END SOLUTION


def one_f_one_b_schedule(num_ranks: int, num_microbatches: int) -> list[list[Action]]:
    """1F1B (PipeDream-Flush): each rank runs a backward as soon as the pipeline lets it. One chunk (chunk 0).

    Contract: a valid schedule with GPipe's bubble, (p-1)(t_f + t_b) for any t_f, t_b, in which rank r never
    holds the activations of more than min(p - r, m) microbatches at once (peak_in_flight).
    """
    ### BEGIN SOLUTION 13.schedules
    p, m = num_ranks, num_microbatches
    schedule = []
    for r in range(p):
        # Warm-up: rank r must run p-r-1 forwards before the first backward can come back from the last
        # rank (Megatron-LM schedules.py get_pp_rank_microbatches; picotron train_step_pipeline_1f1b).
        warmup = min(p - r - 1, m)
        actions = [("F", i, 0) for i in range(warmup)]
        for i in range(m - warmup):  # steady state: one forward, one backward; w+1 activations at most
            actions += [("F", i + warmup, 0), ("B", i, 0)]
        actions += [("B", i, 0) for i in range(m - warmup, m)]  # cool-down
        schedule.append(actions)
    return schedule
    ### END SOLUTION


def interleaved_schedule(num_ranks: int, num_microbatches: int, num_chunks: int) -> list[list[Action]]:
    """Interleaved 1F1B (Megatron-LM) with v = num_chunks chunks per rank; ValueError when m % p != 0.

    Chunk c on rank r is virtual stage c*p + r. Contract: a valid schedule whose bubble is
    (p-1)(t_f + t_b)/v for any t_f, t_b, and in which no rank holds more than min((v+1)p - 1, m*v)
    chunk-activations at once (peak_in_flight). How Megatron-LM orders the forwards and backwards to get
    there is the part (README, "Interleaved 1F1B"; hints).
    """
    ### BEGIN SOLUTION 13.schedules
    p, m, v = num_ranks, num_microbatches, num_chunks
    if m % p != 0:
        # Narayanan et al. 2021 §2.2.2: the schedule "requires the number of microbatches in a batch to be an
        # integer multiple of the degree of pipeline parallelism"
        raise ValueError(f"interleaved 1F1B needs num_microbatches % num_ranks == 0, got m={m}, p={p}")
    # Megatron-LM megatron/core/pipeline_parallel/schedules.py (read at commit 00611e6e): get_schedule_table
    # with microbatch_group_size_per_vp_stage = p (the default), get_model_chunk_id (backward: chunk v-1-c),
    # steady state forward_k = k + num_warmup_microbatches, backward_k = k
    table = [(g + j, c) for g in range(0, m, p) for c in range(v) for j in range(p)]
    total = m * v  # forwards per rank, one per (microbatch, chunk)
    schedule = []
    for r in range(p):
        # get_pp_rank_microbatches: 2(p-r-1) + (v-1)p warm-up forwards, capped at all of them
        warmup = min(2 * (p - r - 1) + (v - 1) * p, total)
        forward = [("F", mb, c) for mb, c in table]
        backward = [("B", mb, v - 1 - c) for mb, c in table]
        actions = forward[:warmup]
        for k in range(total - warmup):
            actions += [forward[k + warmup], backward[k]]
        actions += backward[total - warmup :]
        schedule.append(actions)
    return schedule
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 13.simulator: run a schedule on a unit-time clock


def check_actions(schedule: list[list[Action]], num_microbatches: int, num_chunks: int) -> None:
    """Raise ValueError unless each rank has every ("F", i, c) and ("B", i, c), i < m, c < v, exactly once."""
    ### BEGIN SOLUTION 13.simulator
    expected = {(op, i, c) for op in ("F", "B") for i in range(num_microbatches) for c in range(num_chunks)}
    for r, actions in enumerate(schedule):
        seen = [tuple(a) for a in actions]  # actions may arrive as lists
        if len(seen) != len(set(seen)) or set(seen) != expected:
            missing, unknown = sorted(expected - set(seen)), sorted(set(seen) - expected, key=str)
            repeated = len(seen) - len(set(seen))
            raise ValueError(
                f"rank {r}: each F and B must appear once; missing {missing[:3]}, "
                f"unknown {unknown[:3]}, {repeated} repeated"
            )
    ### END SOLUTION


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
    ### BEGIN SOLUTION 13.simulator
    check_actions(schedule, num_microbatches, num_chunks)
    p, m, v = len(schedule), num_microbatches, num_chunks
    last = v * p - 1  # the virtual stage that computes the loss
    end: dict[tuple[str, int, int], float] = {}  # (op, microbatch, stage) -> finish time
    start: list[list[float]] = [[] for _ in range(p)]
    free = [0.0] * p  # when each rank finishes its latest action
    progress = True
    while progress:  # sweep the ranks until nobody can move: the clock follows from the dependencies
        progress = False
        for r in range(p):
            while len(start[r]) < len(schedule[r]):
                op, i, c = schedule[r][len(start[r])]
                s = c * p + r
                if op == "F":
                    needs = [("F", i, s - 1)] if s > 0 else []
                else:
                    needs = [("F", i, s)] + ([("B", i, s + 1)] if s < last else [])
                if any(n not in end for n in needs):
                    break  # inputs not produced yet: this rank waits (its list order is fixed)
                begin = max([free[r]] + [end[n] for n in needs])
                free[r] = begin + (t_f if op == "F" else t_b) / v
                end[op, i, s] = free[r]
                start[r].append(begin)
                progress = True
    stuck = [r for r in range(p) if len(start[r]) < len(schedule[r])]
    if stuck:
        waiting = {r: tuple(schedule[r][len(start[r])]) for r in stuck}
        raise ValueError(f"deadlock: rank(s) {stuck} wait forever for the inputs of {waiting}")
    makespan, ideal = max(free), m * (t_f + t_b)
    return {
        "start": start,
        "makespan": makespan,
        "ideal": ideal,
        "bubble_ratio": (makespan - ideal) / ideal,
        "bubble_share": (makespan - ideal) / makespan,
        "peak_in_flight": [peak_in_flight(actions) for actions in schedule],
    }
    ### END SOLUTION


def peak_in_flight(actions: list[Action]) -> int:
    """The most (microbatch, chunk) pairs whose forward has run and backward has not, walking `actions`.

    Each one holds its activations in memory: this is the pipeline's activation footprint, in chunk units.
    """
    ### BEGIN SOLUTION 13.simulator
    live = peak = 0
    for op, _, _ in actions:
        live += 1 if op == "F" else -1  # a forward stores activations, its backward frees them
        peak = max(peak, live)
    return peak
    ### END SOLUTION
