"""DCQCN's reaction point: how a RoCE sender NIC sets its rate from the CNPs it receives.

Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1 (RP algorithm), as the
authors' simulator implements it (github.com/bobzhuyb/ns3-rdma, qbb-net-device.cc: rpr_cnm_received,
ResumeAlpha, rpr_fast_*, rpr_active_*, rpr_hyper_*) and as ground-truth.md §6 and §18.4 write it:
    CNP:            alpha <- (1-g) alpha + g;  R_T <- R_C;  R_C <- R_C (1 - alpha/2)
    no CNP for K:   alpha <- (1-g) alpha
    increase event: R_C <- (R_T + R_C)/2 (fast recovery), after R_T += R_AI (additive) or R_T += R_HAI (hyper)
Rates R_C (current) and R_T (target) in Mb/s; 1 Mb/s for 1 us is 1 bit. Check: `grade exercise 18`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DcqcnParams:
    """RP parameters, with the paper's values as defaults (ground-truth.md §18.4). NVIDIA's ConnectX firmware
    names each one differently and ships other defaults (DOCA "DCQCN CC Parameters"), given in comments."""

    line_rate_mbps: float = 40_000.0  # the paper's testbed: 40 Gb/s ConnectX-3 Pro NICs
    g: float = 1 / 256  # alpha's EWMA gain (NVIDIA: dce_tcp_g, fixed point; mapping to g disputed, §6)
    alpha_timer_us: int = 55  # K: alpha decays once per K us without a CNP (NVIDIA: dce_tcp_rtt, 1 us)
    rate_timer_us: int = 55  # T: rate-increase timer (NVIDIA: rpg_time_reset)
    byte_counter_bytes: int = 10_000_000  # B = 10 MB: rate-increase byte counter (NVIDIA: rpg_byte_reset)
    fast_recovery_steps: int = 5  # F: increase events that only recover toward R_T (NVIDIA: rpg_threshold)
    rate_ai_mbps: float = 40.0  # R_AI (NVIDIA: rpg_ai_rate)
    # R_HAI: the paper gives no number we could verify (ground-truth.md §18.4); 10 x R_AI is the ratio of the
    # authors' ns-3 defaults (RateAI 5 Mb/s, RateHAI 50 Mb/s). Always pass it explicitly in experiments.
    rate_hai_mbps: float = 400.0
    min_rate_mbps: float = 100.0  # authors' ns-3 "MinRate" 100 Mb/s (NVIDIA: rpg_min_rate, 1 Mb/s)
    initial_alpha: float = 1.0  # NVIDIA initial_alpha_value 1023/1024; HPCC's Mellanox model sets alpha = 1


class ReactionPoint:
    """The rate state of one flow at the sender. Starts at line rate: DCQCN has no slow start (paper §3.1)."""

    def __init__(self, params: DcqcnParams) -> None:
        self.params = params
        self.rc = params.line_rate_mbps  # R_C, the rate the NIC paces this flow at
        self.rt = params.line_rate_mbps  # R_T, the rate it recovers toward
        self.alpha = params.initial_alpha  # estimate of how congested the path is, in [0, 1]
        self.timer_count = 0  # T: rate-timer expiries since the last CNP
        self.byte_count = 0  # BC: byte-counter expiries since the last CNP

    # --------------------------------------------------------------------------------------------------------
    # 18.rate_decrease

    def on_cnp(self) -> None:
        """A CNP arrived. In this order: alpha <- (1-g) alpha + g; R_T <- R_C; R_C <- R_C (1 - alpha/2) with
        the NEW alpha, but never below min_rate_mbps; both increase counters (T and BC) back to 0."""
        ### BEGIN SOLUTION 18.rate_decrease
        p = self.params
        # alpha is a DCTCP-style moving average of "was there congestion": a CNP pushes it toward 1.
        # The authors' simulator raises alpha first and cuts with the raised value (rpr_cnm_received).
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.rt = self.rc  # remember where we were: fast recovery climbs back toward it
        # multiplicative decrease by alpha/2: at most a halving (alpha = 1), gentle when CNPs are rare
        self.rc = max(p.min_rate_mbps, self.rc * (1 - self.alpha / 2))
        self.timer_count = 0  # a new congestion episode: recovery starts over with fast recovery
        self.byte_count = 0
        ### END SOLUTION

    def on_alpha_timer(self) -> None:
        """K us passed without a CNP: alpha <- (1-g) alpha (the rates do not change)."""
        ### BEGIN SOLUTION 18.rate_decrease
        self.alpha *= 1 - self.params.g  # no news is good news: forget the congestion slowly
        ### END SOLUTION

    # --------------------------------------------------------------------------------------------------------
    # 18.rate_increase

    def on_rate_timer(self) -> str:
        """The rate-increase timer expired: T += 1, then one increase step (`_increase`); its phase."""
        ### BEGIN SOLUTION 18.rate_increase
        self.timer_count += 1
        return self._increase()
        ### END SOLUTION

    def on_byte_counter(self) -> str:
        """The byte counter expired (B bytes sent): BC += 1, then one increase step. Returns its phase."""
        ### BEGIN SOLUTION 18.rate_increase
        self.byte_count += 1
        return self._increase()
        ### END SOLUTION

    def _increase(self) -> str:
        """One increase step, chosen by the counters AFTER the caller bumped one (F = fast_recovery_steps):
          max(T, BC) <= F:  "fast_recovery"   R_C <- (R_T + R_C) / 2
          min(T, BC) > F:   "hyper"           R_T <- R_T + R_HAI, then R_C <- (R_T + R_C) / 2
          otherwise:        "additive"        R_T <- R_T + R_AI,  then R_C <- (R_T + R_C) / 2
        R_T never exceeds the line rate (clamp it after adding). Returns the phase name."""
        ### BEGIN SOLUTION 18.rate_increase
        p = self.params
        f = p.fast_recovery_steps
        if max(self.timer_count, self.byte_count) <= f:
            # fast recovery: F halvings of the gap to R_T; the target stays put, the rate closes in on it
            phase = "fast_recovery"
        elif min(self.timer_count, self.byte_count) > f:
            # the timer AND the byte counter say "long quiet": probe for bandwidth much faster (QCN's HAI)
            phase = "hyper"
            self.rt = min(p.line_rate_mbps, self.rt + p.rate_hai_mbps)
        else:
            # one of them says quiet: the target creeps up by R_AI per step
            phase = "additive"
            self.rt = min(p.line_rate_mbps, self.rt + p.rate_ai_mbps)
        self.rc = (self.rt + self.rc) / 2
        return phase
        ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 18.simulate: drive the reaction point in discrete time, 1 us per tick


def simulate(params: DcqcnParams, cnp_times_us: list[int], duration_us: int) -> dict[str, list]:
    """Run one flow's RP for ticks t = 1 .. duration_us (1 us each), starting in the constructor's state.

    Each tick t, in this order:
      1. the flow sends for the tick at the current rate: bytes += R_C / 8 (R_C Mb/s for 1 us = R_C bits);
      2. if t is in cnp_times_us: on_cnp(); restart the alpha timer, the rate timer and the byte counter here
         (last_alpha = last_rate = t, bytes = 0); event (t, "cnp");
         otherwise, only once a first CNP has arrived (before it nothing runs):
         a. if t - last_alpha >= K: on_alpha_timer(), last_alpha = t; event (t, "alpha");
         b. if t - last_rate >= T: phase = on_rate_timer(), last_rate = t; event (t, "timer:" + phase);
         c. if bytes >= B: phase = on_byte_counter(), bytes = 0; event (t, "bytes:" + phase);
      3. record the state after the tick.
    Returns {"t": [0..duration_us], "rate_mbps": R_C, "target_mbps": R_T, "alpha": alpha (one entry per t,
    t = 0 being the start), "events": [[t, name], ...] in order}.
    """
    ### BEGIN SOLUTION 18.simulate
    rp = ReactionPoint(params)
    cnps = set(cnp_times_us)
    out: dict[str, list] = {"t": [0], "rate_mbps": [rp.rc], "target_mbps": [rp.rt], "alpha": [rp.alpha]}
    events: list[list] = []
    last_alpha = last_rate = None  # timers are idle until the first CNP
    sent_bytes = 0.0
    for t in range(1, duration_us + 1):
        sent_bytes += rp.rc / 8  # Mb/s x 1 us = bits; / 8 = bytes
        if t in cnps:
            rp.on_cnp()
            last_alpha = last_rate = t  # every CNP restarts both timers (paper: "no CNP for K us")
            sent_bytes = 0.0
            events.append([t, "cnp"])
        elif last_alpha is not None:
            if t - last_alpha >= params.alpha_timer_us:
                rp.on_alpha_timer()
                last_alpha = t
                events.append([t, "alpha"])
            if t - last_rate >= params.rate_timer_us:
                events.append([t, "timer:" + rp.on_rate_timer()])
                last_rate = t
            if sent_bytes >= params.byte_counter_bytes:
                events.append([t, "bytes:" + rp.on_byte_counter()])
                sent_bytes = 0.0
        out["t"].append(t)
        out["rate_mbps"].append(rp.rc)
        out["target_mbps"].append(rp.rt)
        out["alpha"].append(rp.alpha)
    out["events"] = events
    return out
    ### END SOLUTION
