"""DCQCN reaction point (alternative-correct case: deadline-style clocks in the simulator, phase table)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DcqcnParams:
    """RP parameters, with the paper's values as defaults."""

    line_rate_mbps: float = 40_000.0
    g: float = 1 / 256
    alpha_timer_us: int = 55
    rate_timer_us: int = 55
    byte_counter_bytes: int = 10_000_000
    fast_recovery_steps: int = 5
    rate_ai_mbps: float = 40.0
    rate_hai_mbps: float = 400.0
    min_rate_mbps: float = 100.0
    initial_alpha: float = 1.0


class ReactionPoint:
    """The rate state of one flow at the sender."""

    def __init__(self, params: DcqcnParams) -> None:
        self.params = params
        self.rc = params.line_rate_mbps
        self.rt = params.line_rate_mbps
        self.alpha = params.initial_alpha
        self.timer_count = 0
        self.byte_count = 0

    def on_cnp(self) -> None:
        """Raise alpha, remember the rate, cut it."""
        g = self.params.g
        self.alpha = self.alpha * (1 - g) + g
        self.rt = self.rc
        self.rc = max(self.params.min_rate_mbps, self.rc * (1 - self.alpha / 2))
        self.timer_count = self.byte_count = 0

    def on_alpha_timer(self) -> None:
        """Forget a little congestion."""
        self.alpha -= self.params.g * self.alpha

    def on_rate_timer(self) -> str:
        """Timer expiry."""
        self.timer_count += 1
        return self._increase()

    def on_byte_counter(self) -> str:
        """Byte-counter expiry."""
        self.byte_count += 1
        return self._increase()

    def _increase(self) -> str:
        """One increase step."""
        p = self.params
        lo, hi = sorted((self.timer_count, self.byte_count))
        if hi <= p.fast_recovery_steps:
            phase, bump = "fast_recovery", 0.0
        elif lo > p.fast_recovery_steps:
            phase, bump = "hyper", p.rate_hai_mbps
        else:
            phase, bump = "additive", p.rate_ai_mbps
        if bump:
            self.rt = min(p.line_rate_mbps, self.rt + bump)
        self.rc = 0.5 * (self.rc + self.rt)
        return phase


def simulate(params: DcqcnParams, cnp_times_us: list[int], duration_us: int) -> dict[str, list]:
    """Tick the RP, keeping the next deadline of each clock instead of the time it last fired."""
    rp = ReactionPoint(params)
    cnps = set(cnp_times_us)
    out: dict[str, list] = {"t": [0], "rate_mbps": [rp.rc], "target_mbps": [rp.rt], "alpha": [rp.alpha]}
    events: list[list] = []
    sent = 0.0
    alpha_due = rate_due = None  # None until the first CNP starts the clocks
    for t in range(1, duration_us + 1):
        sent += rp.rc / 8
        if t in cnps:
            rp.on_cnp()
            alpha_due, rate_due, sent = t + params.alpha_timer_us, t + params.rate_timer_us, 0.0
            events.append([t, "cnp"])
        elif alpha_due is not None and rate_due is not None:
            if t >= alpha_due:
                rp.on_alpha_timer()
                alpha_due = t + params.alpha_timer_us
                events.append([t, "alpha"])
            if t >= rate_due:
                events.append([t, "timer:" + rp.on_rate_timer()])
                rate_due = t + params.rate_timer_us
            if sent >= params.byte_counter_bytes:
                events.append([t, "bytes:" + rp.on_byte_counter()])
                sent = 0.0
        out["t"].append(t)
        out["rate_mbps"].append(rp.rc)
        out["target_mbps"].append(rp.rt)
        out["alpha"].append(rp.alpha)
    out["events"] = events
    return out
