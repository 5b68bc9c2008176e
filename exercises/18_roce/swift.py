"""A Swift-style delay-based congestion window: react to how late packets are, not to marks.

Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in the Datacenter", SIGCOMM 2020,
Algorithm 1 and §3.5, as simulators reproduce it (ground-truth.md §6, §18.5; the paper text was not opened).
Windows in packets (cwnd < 1 means pacing), times in microseconds. Check: `grade exercise 18`; hints:
`grade hint 18 swift`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SwiftParams:
    """Defaults are simulator values (one HPCC-style ns-3 model and htsim), NOT the paper's: every simulator
    picks its own (ground-truth.md §18.5). Pass your own in experiments."""

    base_target_us: float = 25.0  # target for a one-hop path with few flows
    per_hop_us: float = 1.0  # "h": extra target per switch hop, so long paths are not starved
    fs_range_us: float = 25.0  # flow scaling: extra target at fs_min_cwnd, fading to 0 at fs_max_cwnd
    fs_min_cwnd: float = 0.1
    fs_max_cwnd: float = 100.0
    ai: float = 1.0  # additive increase: packets per RTT
    beta: float = 0.8  # multiplicative decrease gain
    max_mdf: float = 0.5  # at most a halving per RTT
    min_cwnd: float = 0.01
    max_cwnd: float = 100.0


class SwiftSender:
    """The congestion window of one flow."""

    def __init__(self, params: SwiftParams, cwnd: float = 1.0) -> None:
        self.params = params
        self.cwnd = cwnd
        self.last_decrease_us: float | None = None  # when the window was last cut; None: never

    def target_delay_us(self, hops: int) -> float:
        """Target delay (us) for the current window over a path of `hops` switch hops: a base target, an
        allowance per hop, and Swift's flow-scaling term (§3.5). The flow-scaling term is an affine function
        of 1/sqrt(cwnd) that is exactly fs_range at cwnd = fs_min_cwnd and 0 at cwnd = fs_max_cwnd, clamped
        to [0, fs_range] outside that range."""
        raise NotImplementedError("TODO(18.swift): not implemented yet")

    def on_ack(self, now_us: float, delay_us: float, num_acked: int, hops: int) -> str:
        """An ACK for num_acked packets arrived at now_us, measuring delay_us (the RTT sample). Apply Swift's
        window update (Algorithm 1) and return "increase", "decrease" or "hold".

        Conventions: the target is target_delay_us(hops) for the window BEFORE this ACK; a delay equal to
        the target is not below it. Additive increase adds `ai` packets per round trip in all, spread over
        the ACKs of a round trip while cwnd >= 1, and `ai` per acked packet below one packet. A decrease
        uses gain `beta`, is never deeper than `max_mdf`, and happens at most once per round trip: only if
        the window was never cut, or was last cut at least delay_us ago; otherwise "hold". In every case
        clamp cwnd to [min_cwnd, max_cwnd] last.
        """
        raise NotImplementedError("TODO(18.swift): not implemented yet")

    def pacing_interval_us(self, rtt_us: float) -> float:
        """Microseconds between two sends at round-trip time rtt_us: 0.0 when cwnd >= 1 (window-limited, no
        pacing); below one packet, Swift paces so that the flow still sends cwnd packets per round trip on
        average (its answer to incasts of many flows)."""
        raise NotImplementedError("TODO(18.swift): not implemented yet")
