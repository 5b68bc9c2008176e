"""Swift-style delay-based window (alternative-correct case: flow scaling interpolated in 1/sqrt(cwnd))."""

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
        """Flow scaling is linear in 1/sqrt(cwnd) between its two anchor windows."""
        p = self.params
        x = 1 / math.sqrt(self.cwnd)
        x_lo, x_hi = 1 / math.sqrt(p.fs_max_cwnd), 1 / math.sqrt(p.fs_min_cwnd)
        fs = p.fs_range_us * (x - x_lo) / (x_hi - x_lo)
        fs = 0.0 if fs < 0 else min(fs, p.fs_range_us)
        return p.base_target_us + p.per_hop_us * hops + fs

    def on_ack(self, now_us: float, delay_us: float, num_acked: int, hops: int) -> str:
        """One ACK."""
        p = self.params
        target = self.target_delay_us(hops)
        action = "hold"
        if delay_us < target:
            if self.cwnd >= 1:
                self.cwnd = self.cwnd + p.ai * num_acked / self.cwnd
            else:
                self.cwnd = self.cwnd + p.ai * num_acked
            action = "increase"
        else:
            may_cut = self.last_decrease_us is None or (now_us - self.last_decrease_us) >= delay_us
            if may_cut:
                cut = p.beta * (delay_us - target) / delay_us
                self.cwnd = self.cwnd * (1 - min(cut, p.max_mdf))
                self.last_decrease_us = now_us
                action = "decrease"
        self.cwnd = max(p.min_cwnd, min(p.max_cwnd, self.cwnd))
        return action

    def pacing_interval_us(self, rtt_us: float) -> float:
        """Seconds between sends."""
        if self.cwnd < 1:
            return rtt_us / self.cwnd
        return 0.0
