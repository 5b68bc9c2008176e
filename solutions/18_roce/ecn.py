"""The two halves of DCQCN that are not the sender: ECN marking at the switch, CNPs at the receiver.

CP (congestion point, the switch): marks a packet's ECN bits with a probability set by its egress queue, as
RED does (NVIDIA DOCA, "DCQCN CC Algorithm"). NP (notification point, the receiving NIC): turns marked packets
into CNPs to the sender, at most one per flow every N = 50 us. Zhu et al., "Congestion Control for Large-Scale
RDMA Deployments", SIGCOMM 2015, §3. Check: `grade exercise 18`. Units: bytes for queues, microseconds (us).
"""

from __future__ import annotations

KB = 1024  # switch buffers are counted in binary KB; the paper writes "KB" without saying which

# DCQCN paper §5 (as quoted in ground-truth.md §18.4; the PDF was not opened): Kmin = 5 KB, Kmax = 200 KB
# and a small Pmax, 1%, tuned for 40 Gb/s links. The roles and the linear ramp from Kmin to Kmax are in
# NVIDIA DOCA, "DCQCN CC Algorithm" (networking-docs.nvidia.com/doca/archive/3-4-0/dcqcn-cc-algorithm).
KMIN_BYTES = 5 * KB
KMAX_BYTES = 200 * KB
PMAX = 0.01

# N: the authors' simulator sends at most one CNP per flow per 50 us (github.com/bobzhuyb/ns3-rdma,
# src/point-to-point/model/qbb-net-device.cc, attribute "CNPInterval" = 50.0); htsim's DCQCN sink: 50 us too.
CNP_INTERVAL_US = 50


# ------------------------------------------------------------------------------------------------------------
# 18.marking: the congestion point and the notification point


def mark_probability(
    queue_bytes: float, kmin: float = KMIN_BYTES, kmax: float = KMAX_BYTES, pmax: float = PMAX
) -> float:
    """Probability that the switch marks a packet that finds `queue_bytes` in its egress queue, with DCQCN's
    RED-like profile (README; DOCA "DCQCN CC Algorithm"). Boundaries: a queue of exactly kmin is not marked;
    exactly kmax is marked with probability pmax; anything beyond kmax always.
    """
    ### BEGIN SOLUTION 18.marking
    if queue_bytes <= kmin:
        return 0.0  # a short queue is normal: no signal at all
    if queue_bytes <= kmax:
        # RED's ramp: the longer the queue, the more senders hear about it, so they cut a little at a time
        return pmax * (queue_bytes - kmin) / (kmax - kmin)
    return 1.0  # past Kmax every packet carries the mark (the DCQCN/RED convention; DCTCP is Kmin = Kmax)
    ### END SOLUTION


def mark_packets(
    queue_bytes: list[float],
    uniforms: list[float],
    kmin: float = KMIN_BYTES,
    kmax: float = KMAX_BYTES,
    pmax: float = PMAX,
) -> list[bool]:
    """Which packets the switch marks. Packet i found queue_bytes[i] in the queue; uniforms[i] in [0, 1) is
    the switch's random draw for it: the packet is marked iff uniforms[i] < mark_probability(queue_bytes[i]).

    The draws are an input so that a run is reproducible: same queue, same draws, same marks.
    """
    ### BEGIN SOLUTION 18.marking
    if len(queue_bytes) != len(uniforms):
        raise ValueError(f"one draw per packet: {len(queue_bytes)} packets, {len(uniforms)} draws")
    # strict <: a draw of exactly 0.0 must not mark a packet whose probability is 0 (q <= Kmin)
    return [u < mark_probability(q, kmin, kmax, pmax) for q, u in zip(queue_bytes, uniforms, strict=True)]
    ### END SOLUTION


def cnp_times(marked_arrivals_us: list[int], interval_us: int = CNP_INTERVAL_US) -> list[int]:
    """When the NP sends CNPs for one flow, given when its marked packets arrive (ascending, in us).

    A marked packet makes the NP send a CNP at once, unless it already sent one for this flow less than
    interval_us ago: a CNP at t is sent iff no CNP was sent in (t - interval_us, t]. Marks in between are
    absorbed: one CNP stands for all of them.
    """
    ### BEGIN SOLUTION 18.marking
    sent: list[int] = []
    for t in marked_arrivals_us:
        # pacing CNPs keeps the sender from cutting once per marked packet: at 40 Gb/s a congested flow
        # gets a marked packet every few hundred ns, and each CNP is a multiplicative decrease
        if not sent or t - sent[-1] >= interval_us:
            sent.append(t)
    return sent
    ### END SOLUTION


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
    """The CNP times a flow's sender sees: packet i of the flow passes the switch at arrivals_us[i]
    (ascending) with queue_bytes[i] queued ahead of it and draw uniforms[i]; the switch marks it
    (mark_packets), the NP turns the marks into CNPs (cnp_times). Propagation delays are taken as zero."""
    ### BEGIN SOLUTION 18.marking
    marks = mark_packets(queue_bytes, uniforms, kmin, kmax, pmax)
    return cnp_times([t for t, marked in zip(arrivals_us, marks, strict=True) if marked], interval_us)
    ### END SOLUTION
