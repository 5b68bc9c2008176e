"""Trusted rank programs for exercise 18: build the student's objects from plain dicts, drive them, and return
plain data (a dataclass or an object cannot cross the judge/worker boundary).

The scripted congestion episode of `grade exercise 18` and of `plot_episode.py` is defined here too.
"""

from __future__ import annotations

from typing import Any

# ------------------------------------------------------------------------------------------------------------
# The scripted congestion episode: a 40 Gb/s flow passes a switch queue that jumps above Kmax for 100 us
# (every packet marked), drains, and later sits at 180 KB for 400 us (a few random marks). One packet per us;
# the draws are fixed, so the marks, the CNPs and the plot never change. The byte counter is the authors' ns-3
# default, 150 KB (bobzhuyb/ns3-rdma qbb-net-device.cc "ByteCounter"), not the paper's 10 MB: with 10 MB the
# hyper-increase phase would need tens of milliseconds to show up.

EPISODE_US = 3000
EPISODE_PARAMS = {"byte_counter_bytes": 150_000}


def episode_trace() -> dict[str, list]:
    """Packet arrival times (us), the queue each one found (bytes), and the switch's draw for each."""
    kb = 1024
    times, queue, draws = [], [], []
    for t in range(1, EPISODE_US + 1):
        if 200 <= t < 300:
            q = 250 * kb  # above Kmax = 200 KB: p = 1
        elif 300 <= t < 400:
            q = 250 * kb - 2560 * (t - 300)  # drains to 0
        elif 1500 <= t < 1900:
            q = 180 * kb  # between Kmin and Kmax: p = 0.9%
        else:
            q = 0
        times.append(t)
        queue.append(q)
        draws.append(((t * 7919) % 1000) / 1000)  # a fixed, well-spread sequence in [0, 1)
    return {"arrivals_us": times, "queue_bytes": queue, "uniforms": draws}


# ------------------------------------------------------------------------------------------------------------
# DCQCN reaction point


def _rp(ctx: Any, params: dict[str, Any], state: dict[str, Any] | None) -> Any:
    dcqcn = ctx.submission("dcqcn")
    rp = dcqcn.ReactionPoint(dcqcn.DcqcnParams(**params))
    for name, value in (state or {}).items():  # start mid-episode: rc, rt, alpha, timer_count, byte_count
        setattr(rp, name, value)
    return rp


def _snapshot(rp: Any) -> dict[str, Any]:
    return {
        "rc": rp.rc,
        "rt": rp.rt,
        "alpha": rp.alpha,
        "timer_count": rp.timer_count,
        "byte_count": rp.byte_count,
    }


def replay_rp(
    ctx: Any, *, params: dict[str, Any], events: list[str], state: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Apply events ("cnp", "alpha", "timer", "bytes") to a fresh ReactionPoint; the state after each one,
    with the phase returned by the increase events under "phase"."""
    rp = _rp(ctx, params, state)
    methods = {
        "cnp": "on_cnp",
        "alpha": "on_alpha_timer",
        "timer": "on_rate_timer",
        "bytes": "on_byte_counter",
    }
    trace = []
    for event in events:
        phase = getattr(rp, methods[event])()
        trace.append(_snapshot(rp) | {"phase": phase})
    return trace


def simulate(ctx: Any, *, params: dict[str, Any], cnp_times_us: list[int], duration_us: int) -> dict:
    """dcqcn.simulate(DcqcnParams(**params), cnp_times_us, duration_us)."""
    dcqcn = ctx.submission("dcqcn")
    return dcqcn.simulate(dcqcn.DcqcnParams(**params), cnp_times_us, duration_us)


def episode(ctx: Any, *, params: dict[str, Any], trace: dict[str, list], duration_us: int) -> dict:
    """Queue trace -> marks -> CNPs (ecn.py) -> rate trajectory (dcqcn.py), all with the student's code."""
    ecn, dcqcn = ctx.submission("ecn"), ctx.submission("dcqcn")
    cnps = ecn.cnps_for_queue_trace(trace["arrivals_us"], trace["queue_bytes"], trace["uniforms"])
    result = dcqcn.simulate(dcqcn.DcqcnParams(**params), cnps, duration_us)
    return result | {"cnps": cnps}


# ------------------------------------------------------------------------------------------------------------
# Swift


def replay_swift(
    ctx: Any,
    *,
    params: dict[str, Any],
    acks: list[list[float]],
    cwnd: float = 1.0,
    hops: int = 1,
) -> list[dict[str, Any]]:
    """Feed ACKs [now_us, delay_us, num_acked] to a fresh SwiftSender; after each: action, cwnd, the target
    delay for the new window and the pacing interval at this RTT."""
    swift = ctx.submission("swift")
    sender = swift.SwiftSender(swift.SwiftParams(**params), cwnd=cwnd)
    trace = []
    for now_us, delay_us, num_acked in acks:
        action = sender.on_ack(now_us, delay_us, int(num_acked), hops)
        trace.append(
            {
                "action": action,
                "cwnd": sender.cwnd,
                "target_us": sender.target_delay_us(hops),
                "pacing_us": sender.pacing_interval_us(delay_us),
            }
        )
    return trace


def swift_target(ctx: Any, *, params: dict[str, Any], cwnd: float, hops: int) -> float:
    swift = ctx.submission("swift")
    return swift.SwiftSender(swift.SwiftParams(**params), cwnd=cwnd).target_delay_us(hops)
