"""ECN marking and CNP pacing (alternative-correct case: last-CNP bookkeeping, piecewise ramp)."""

from __future__ import annotations

KB = 1024
KMIN_BYTES = 5 * KB
KMAX_BYTES = 200 * KB
PMAX = 0.01
CNP_INTERVAL_US = 50


def mark_probability(
    queue_bytes: float, kmin: float = KMIN_BYTES, kmax: float = KMAX_BYTES, pmax: float = PMAX
) -> float:
    """RED ramp."""
    if queue_bytes > kmax:
        return 1.0
    if queue_bytes <= kmin:
        return 0.0
    return pmax * (queue_bytes - kmin) / (kmax - kmin)


def mark_packets(
    queue_bytes: list[float],
    uniforms: list[float],
    kmin: float = KMIN_BYTES,
    kmax: float = KMAX_BYTES,
    pmax: float = PMAX,
) -> list[bool]:
    """Marked iff the draw is below the probability."""
    return [u < mark_probability(q, kmin, kmax, pmax) for q, u in zip(queue_bytes, uniforms, strict=True)]


def cnp_times(marked_arrivals_us: list[int], interval_us: int = CNP_INTERVAL_US) -> list[int]:
    """One CNP per interval at most."""
    sent: list[int] = []
    for t in marked_arrivals_us:
        if not sent or t - sent[-1] >= interval_us:
            sent.append(t)
    return sent


def cnps_for_queue_trace(
    arrivals_us: list[int],
    queue_bytes: list[float],
    uniforms: list[float],
    *,
    kmin: float = KMIN_BYTES,
    kmax: float = KMAX_BYTES,
    pmax: float = PMAX,
    interval_us: int = CNP_INTERVAL_US,
) -> list[int]:
    """Marks, then CNPs."""
    marks = mark_packets(queue_bytes, uniforms, kmin, kmax, pmax)
    return cnp_times([t for t, m in zip(arrivals_us, marks, strict=True) if m], interval_us)
