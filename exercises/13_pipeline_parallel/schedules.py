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
    raise NotImplementedError("TODO(13.schedules): not implemented yet")


def one_f_one_b_schedule(num_ranks: int, num_microbatches: int) -> list[list[Action]]:
    """1F1B (PipeDream-Flush): each rank runs a backward as soon as the pipeline lets it. One chunk (chunk 0).

    Contract: a valid schedule with GPipe's bubble, (p-1)(t_f + t_b) for any t_f, t_b, in which rank r never
    holds the activations of more than min(p - r, m) microbatches at once (peak_in_flight).
    """
    raise NotImplementedError("TODO(13.schedules): not implemented yet")


def interleaved_schedule(num_ranks: int, num_microbatches: int, num_chunks: int) -> list[list[Action]]:
    """Interleaved 1F1B (Megatron-LM) with v = num_chunks chunks per rank; ValueError when m % p != 0.

    Chunk c on rank r is virtual stage c*p + r. Contract: a valid schedule whose bubble is
    (p-1)(t_f + t_b)/v for any t_f, t_b, and in which no rank holds more than min((v+1)p - 1, m*v)
    chunk-activations at once (peak_in_flight). How Megatron-LM orders the forwards and backwards to get
    there is the part (README, "Interleaved 1F1B"; hints).
    """
    raise NotImplementedError("TODO(13.schedules): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 13.simulator: run a schedule on a unit-time clock


def check_actions(schedule: list[list[Action]], num_microbatches: int, num_chunks: int) -> None:
    """Raise ValueError unless each rank has every ("F", i, c) and ("B", i, c), i < m, c < v, exactly once."""
    raise NotImplementedError("TODO(13.simulator): not implemented yet")


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
    raise NotImplementedError("TODO(13.simulator): not implemented yet")


def peak_in_flight(actions: list[Action]) -> int:
    """The most (microbatch, chunk) pairs whose forward has run and backward has not, walking `actions`.

    Each one holds its activations in memory: this is the pipeline's activation footprint, in chunk units.
    """
    raise NotImplementedError("TODO(13.simulator): not implemented yet")
