"""Swift-style delay-based window (alternative-correct case: flow scaling solved as two equations)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SwiftParams:
    """Simulator defaults."""

    base_target_us: float = 25.0
    per_hop_us: float = 1.0
    fs_range_us: float = 25.0
    fs_min_cwnd: float = 0.1
    fs_max_cwnd: float = 100.0
    ai: float = 1.0
    beta: float = 0.8
    max_mdf: float = 0.5
    min_cwnd: float = 0.01
    max_cwnd: float = 100.0


class SwiftSender:
    """The congestion window of one flow."""

    def __init__(self, params: SwiftParams, cwnd: float = 1.0) -> None:
        self.params = params
        self.cwnd = cwnd
        self.last_decrease_us: float | None = None

    def target_delay_us(self, hops: int) -> float:
        """Base + hops + flow scaling."""
        p = self.params
        fs_alpha = p.fs_range_us / (1 / math.sqrt(p.fs_min_cwnd) - 1 / math.sqrt(p.fs_max_cwnd))
        fs_beta = -fs_alpha / math.sqrt(p.fs_max_cwnd)
        fs = min(max(fs_alpha / math.sqrt(self.cwnd) + fs_beta, 0.0), p.fs_range_us)
        return p.base_target_us + hops * p.per_hop_us + fs

    def on_ack(self, now_us: float, delay_us: float, num_acked: int, hops: int) -> str:
        """Increase below target, cut at most once per RTT above it."""
        p = self.params
        target = self.target_delay_us(hops)
        if delay_us < target:
            step = p.ai / self.cwnd if self.cwnd >= 1 else p.ai
            self.cwnd += step * num_acked
            action = "increase"
        elif self.last_decrease_us is None or now_us - self.last_decrease_us >= delay_us:
            factor = max(1 - p.beta * (delay_us - target) / delay_us, 1 - p.max_mdf)
            self.cwnd *= factor
            self.last_decrease_us = now_us
            action = "decrease"
        else:
            action = "hold"
        self.cwnd = min(max(self.cwnd, p.min_cwnd), p.max_cwnd)
        return action

    def pacing_interval_us(self, rtt_us: float) -> float:
        """Pace below one packet."""
        return 0.0 if self.cwnd >= 1 else rtt_us / self.cwnd
