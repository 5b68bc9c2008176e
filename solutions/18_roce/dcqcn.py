"""DCQCN's reaction point: how a RoCE sender NIC sets its rate from the CNPs it receives.

Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1 (RP algorithm), as the
authors' simulator implements it (github.com/bobzhuyb/ns3-rdma, qbb-net-device.cc: rpr_cnm_received,
ResumeAlpha, rpr_fast_*, rpr_active_*, rpr_hyper_*) and as ground-truth.md §6 and §18.4 write it. Read the
update rules there; the README says what each rule is for. Rates R_C (current) and R_T (target) in Mb/s;
1 Mb/s for 1 us is 1 bit. Check: `grade exercise 18`; hints: `grade hint 18 <part>`.
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
        """A CNP arrived: update alpha, rt, rc, timer_count and byte_count as DCQCN's reaction point does
        (paper §3.1). Where the sources differ, this exercise follows the authors' simulator: the cut uses the
        congestion estimate as already updated by this CNP. rc never drops below min_rate_mbps."""
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
        """K us passed without a CNP: the congestion estimate decays (paper §3.1); the rates do not change."""
        ### BEGIN SOLUTION 18.rate_decrease
        self.alpha *= 1 - self.params.g  # no news is good news: forget the congestion slowly
        ### END SOLUTION

    # --------------------------------------------------------------------------------------------------------
    # 18.rate_increase

    def on_rate_timer(self) -> str:
        """The rate-increase timer expired: count the expiry in timer_count, then take one increase step
        (`_increase`). Returns its phase."""
        ### BEGIN SOLUTION 18.rate_increase
        self.timer_count += 1
        return self._increase()
        ### END SOLUTION

    def on_byte_counter(self) -> str:
        """The byte counter expired (B bytes sent): count it in byte_count, then take one increase step
        (`_increase`). Returns its phase."""
        ### BEGIN SOLUTION 18.rate_increase
        self.byte_count += 1
        return self._increase()
        ### END SOLUTION

    def _increase(self) -> str:
        """One rate-increase step of DCQCN (paper §3.1), its phase chosen by timer_count and byte_count as
        they are after the caller counted its expiry, F = fast_recovery_steps: a clock is in fast recovery for
        its first F expiries after a CNP. Updates rt and rc; rt never exceeds the line rate. Returns the
        phase: "fast_recovery", "additive" or "hyper"."""
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
    """Run one flow's RP for ticks t = 1 .. duration_us (1 us each), starting in the constructor's state, and
    fire its three clocks: the alpha timer (every K = alpha_timer_us without a CNP), the rate-increase timer
    (every T = rate_timer_us) and the byte counter (every B = byte_counter_bytes sent by the flow).

    Conventions (they make the trajectory unique):
      - in each tick the flow first sends for that tick at its current rate, then the clocks are checked;
      - no clock runs before the first CNP; a CNP (t in cnp_times_us) restarts all three clocks at t, and a
        tick with a CNP runs nothing else;
      - a clock fires in the tick in which its full period (K us, T us, B bytes) is reached, counted from its
        last restart or firing; in one tick the alpha timer is checked first, then the rate timer, then the
        byte counter.
    Returns {"t": [0..duration_us], "rate_mbps": R_C, "target_mbps": R_T, "alpha": alpha (one entry per t,
    t = 0 being the start, the state after the tick), "events": [[t, name], ...] in order}, name one of
    "cnp", "alpha", "timer:<phase>" or "bytes:<phase>".
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
