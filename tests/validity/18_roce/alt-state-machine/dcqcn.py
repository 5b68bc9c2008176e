"""Alternative-correct 18 (validity corpus): DCQCN's reaction point as a small state machine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DcqcnParams:
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


# (timer counter past F, byte counter past F) -> phase
PHASES = {
    (False, False): "fast_recovery",
    (True, False): "additive",
    (False, True): "additive",
    (True, True): "hyper",
}


class ReactionPoint:
    def __init__(self, params: DcqcnParams) -> None:
        self.params = params
        self.rc = params.line_rate_mbps
        self.rt = params.line_rate_mbps
        self.alpha = params.initial_alpha
        self.timer_count = 0
        self.byte_count = 0

    def on_cnp(self) -> None:
        g = self.params.g
        self.alpha = self.alpha + g * (1 - self.alpha)
        self.rt = self.rc
        cut = self.rc * self.alpha / 2
        self.rc = self.rc - cut
        if self.rc < self.params.min_rate_mbps:
            self.rc = self.params.min_rate_mbps
        self.timer_count = self.byte_count = 0

    def on_alpha_timer(self) -> None:
        self.alpha = self.alpha - self.params.g * self.alpha

    def on_rate_timer(self) -> str:
        self.timer_count += 1
        return self._increase()

    def on_byte_counter(self) -> str:
        self.byte_count += 1
        return self._increase()

    def _increase(self) -> str:
        p = self.params
        f = p.fast_recovery_steps
        phase = PHASES[(self.timer_count > f, self.byte_count > f)]
        step = {"fast_recovery": 0.0, "additive": p.rate_ai_mbps, "hyper": p.rate_hai_mbps}[phase]
        if step:
            self.rt = min(self.rt + step, p.line_rate_mbps)
        self.rc = self.rc + (self.rt - self.rc) / 2
        return phase


def simulate(params: DcqcnParams, cnp_times_us: list[int], duration_us: int) -> dict[str, list]:
    rp = ReactionPoint(params)
    cnp_at = set(cnp_times_us)
    alpha_left = rate_left = None  # microseconds until each timer fires; None before the first CNP
    bytes_left = None  # bytes until the byte counter fires
    t_log, rates, targets, alphas = [0], [rp.rc], [rp.rt], [rp.alpha]
    events: list[list] = []
    for t in range(1, duration_us + 1):
        sent = rp.rc / 8
        if bytes_left is not None:
            bytes_left -= sent
        if t in cnp_at:
            rp.on_cnp()
            alpha_left, rate_left = params.alpha_timer_us, params.rate_timer_us
            bytes_left = float(params.byte_counter_bytes)
            events.append([t, "cnp"])
        elif alpha_left is not None:
            alpha_left -= 1
            rate_left -= 1
            if alpha_left <= 0:
                rp.on_alpha_timer()
                alpha_left = params.alpha_timer_us
                events.append([t, "alpha"])
            if rate_left <= 0:
                events.append([t, "timer:" + rp.on_rate_timer()])
                rate_left = params.rate_timer_us
            if bytes_left <= 0:
                events.append([t, "bytes:" + rp.on_byte_counter()])
                bytes_left = float(params.byte_counter_bytes)
        t_log.append(t)
        rates.append(rp.rc)
        targets.append(rp.rt)
        alphas.append(rp.alpha)
    return {"t": t_log, "rate_mbps": rates, "target_mbps": targets, "alpha": alphas, "events": events}
