"""DCQCN reaction point (alternative-correct case: one shared bump helper, counters of elapsed time)."""

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
        """CNP: alpha first, then the cut with the new alpha."""
        p = self.params
        new_alpha = (1 - p.g) * self.alpha + p.g
        cut = self.rc * (1 - new_alpha / 2)
        self.alpha, self.rt = new_alpha, self.rc
        self.rc = cut if cut > p.min_rate_mbps else p.min_rate_mbps
        self.timer_count = 0
        self.byte_count = 0

    def on_alpha_timer(self) -> None:
        """Quiet period."""
        self.alpha = (1 - self.params.g) * self.alpha

    def _bump(self, counter: str) -> str:
        setattr(self, counter, getattr(self, counter) + 1)
        return self._increase()

    def on_rate_timer(self) -> str:
        """Timer expiry."""
        return self._bump("timer_count")

    def on_byte_counter(self) -> str:
        """Byte-counter expiry."""
        return self._bump("byte_count")

    def _increase(self) -> str:
        """One increase step."""
        p = self.params
        f = p.fast_recovery_steps
        t, bc = self.timer_count, self.byte_count
        if t > f and bc > f:
            self.rt = min(self.rt + p.rate_hai_mbps, p.line_rate_mbps)
            phase = "hyper"
        elif t > f or bc > f:
            self.rt = min(self.rt + p.rate_ai_mbps, p.line_rate_mbps)
            phase = "additive"
        else:
            phase = "fast_recovery"
        self.rc = (self.rt + self.rc) / 2
        return phase


def simulate(params: DcqcnParams, cnp_times_us: list[int], duration_us: int) -> dict[str, list]:
    """Tick the RP, counting microseconds since each clock last fired."""
    rp = ReactionPoint(params)
    cnp_iter = iter(sorted(set(cnp_times_us)))
    next_cnp = next(cnp_iter, None)
    ts, rates, targets, alphas, events = [0], [rp.rc], [rp.rt], [rp.alpha], []
    started = False
    since_alpha = since_rate = 0
    sent_bytes = 0.0
    for t in range(1, duration_us + 1):
        sent_bytes += rp.rc / 8
        since_alpha += 1
        since_rate += 1
        while next_cnp is not None and next_cnp < t:
            next_cnp = next(cnp_iter, None)
        if next_cnp == t:
            rp.on_cnp()
            started, since_alpha, since_rate, sent_bytes = True, 0, 0, 0.0
            events.append([t, "cnp"])
        elif started:
            if since_alpha >= params.alpha_timer_us:
                rp.on_alpha_timer()
                since_alpha = 0
                events.append([t, "alpha"])
            if since_rate >= params.rate_timer_us:
                phase = rp.on_rate_timer()
                since_rate = 0
                events.append([t, f"timer:{phase}"])
            if sent_bytes >= params.byte_counter_bytes:
                phase = rp.on_byte_counter()
                sent_bytes = 0.0
                events.append([t, f"bytes:{phase}"])
        ts.append(t)
        rates.append(rp.rc)
        targets.append(rp.rt)
        alphas.append(rp.alpha)
    return {"t": ts, "rate_mbps": rates, "target_mbps": targets, "alpha": alphas, "events": events}
