"""ECN marking and CNP pacing (alternative-correct case: interpolated ramp, window-scan for CNPs)."""

from __future__ import annotations

KB = 1024
KMIN_BYTES = 5 * KB
KMAX_BYTES = 200 * KB
PMAX = 0.01
CNP_INTERVAL_US = 50


def mark_probability(
    queue_bytes: float, kmin: float = KMIN_BYTES, kmax: float = KMAX_BYTES, pmax: float = PMAX
) -> float:
    """Linear interpolation on the ramp's two end points."""
    if queue_bytes <= kmin:
        return 0.0
    if queue_bytes <= kmax:
        frac = (queue_bytes - kmin) / (kmax - kmin)
        return frac * pmax
    return 1.0


def mark_packets(
    queue_bytes: list[float],
    uniforms: list[float],
    kmin: float = KMIN_BYTES,
    kmax: float = KMAX_BYTES,
    pmax: float = PMAX,
) -> list[bool]:
    """Marks, one draw per packet."""
    marks = []
    for i in range(len(queue_bytes)):
        p = mark_probability(queue_bytes[i], kmin=kmin, kmax=kmax, pmax=pmax)
        marks.append(bool(uniforms[i] < p))
    return marks


def cnp_times(marked_arrivals_us: list[int], interval_us: int = CNP_INTERVAL_US) -> list[int]:
    """Scan the window (t - interval, t] of CNPs already sent."""
    sent: list[int] = []
    for t in marked_arrivals_us:
        if any(t - interval_us < s <= t for s in sent):
            continue
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
    marked = []
    for t, q, u in zip(arrivals_us, queue_bytes, uniforms, strict=True):
        if mark_packets([q], [u], kmin, kmax, pmax)[0]:
            marked.append(t)
    return cnp_times(marked, interval_us=interval_us)
