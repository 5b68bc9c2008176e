"""InfiniBand or RoCE v2: the same verbs and the same RC transport, over two different networks.

Answer every question in QUESTIONS: a letter for a multiple-choice question, an int for a number. Each is
checked on its own by `grade exercise 06`. README.md, section "InfiniBand and RoCE v2", has the background.
"""

from __future__ import annotations

# key -> (question, choices); choices is None when the answer is a number (an int)
QUESTIONS: dict[str, tuple[str, dict[str, str] | None]] = {
    "encapsulation": (
        "RoCE v2 carries the InfiniBand transport header (BTH) and payload inside...",
        {"a": "Ethernet frames with their own EtherType, no IP header", "b": "TCP segments to port 4791",
         "c": "UDP datagrams over IP, to destination port 4791", "d": "VXLAN, UDP port 4789"},
    ),
    "routable": (
        "Which of these can an ordinary IP router forward from one IP subnet to another?",
        {"a": "InfiniBand", "b": "RoCE v1", "c": "RoCE v2", "d": "all three"},
    ),
    "lid_owner": (
        "Inside one InfiniBand subnet, who assigns the 16-bit LIDs that switches forward on?",
        {"a": "the subnet manager (e.g. OpenSM)", "b": "a DHCP server", "c": "each HCA picks its own",
         "d": "the NIC firmware, from its MAC address"},
    ),
    "roce_address": (
        "On RoCE, what must ibv_qp_attr.ah_attr carry when the QP moves to RTR?",
        {"a": "the peer's LID in dlid", "b": "the peer's MAC address",
         "c": "nothing: RoCE finds the peer by IP on its own",
         "d": "is_global = 1 and the peer's GID in grh.dgid"},
    ),
    "ib_lossless": (
        "How does an InfiniBand link avoid dropping packets when the next buffer is full?",
        {"a": "it does not; the RC transport retransmits", "b": "credit-based link-level flow control: a "
         "port sends only into buffer space the other end advertised", "c": "PFC pause frames",
         "d": "ECN marks"},
    ),
    "roce_lossless": (
        "What do RoCE v2 fabrics usually configure so that RDMA packets are (almost) never dropped?",
        {"a": "Priority Flow Control (PFC, IEEE 802.1Qbb) on the RDMA traffic class, with ECN-based "
         "congestion control (DCQCN)", "b": "credit-based link-level flow control", "c": "TCP retransmission",
         "d": "a larger MTU"},
    ),
    "cnp_sender": (
        "In DCQCN, who sends the Congestion Notification Packet (CNP) that makes the sender slow down?",
        {"a": "the congested switch", "b": "the receiving NIC, when ECN-marked packets arrive",
         "c": "the sending NIC itself", "d": "the subnet manager"},
    ),
    "gid_index": (
        "show_gids lists: 0 RoCE v1 fe80::..., 1 RoCE v2 fe80::..., 2 RoCE v1 ::ffff:10.1.0.1, "
        "3 RoCE v2 ::ffff:10.1.0.1. The peer is in another IP subnet. Which GID index must the QP use?",
        None,
    ),
    "mtu_at_1500": (
        "With an Ethernet MTU of 1500 bytes, what RoCE path MTU in bytes does the port report (active_mtu)?",
        None,
    ),
    "eth_mtu_for_4096": (
        "What is the smallest Ethernet MTU, in bytes, that gives a 4096-byte RoCE path MTU?",
        None,
    ),
    "roce_header_bytes": (
        "Bytes RoCE v2 over IPv4 adds to a SEND-only packet's payload, from the Ethernet header to the "
        "Ethernet FCS, with no VLAN tag (leave out the preamble and inter-frame gap)?",
        None,
    ),
    "ib_header_bytes": (
        "The same for native InfiniBand inside one subnet (no GRH): bytes from the LRH to the VCRC?",
        None,
    ),
    "status_12": (
        "NCCL stops with 'ibv_poll_cq ... error 12' after a long stall. Which completion status is 12?",
        {"a": "IBV_WC_RNR_RETRY_EXC_ERR", "b": "IBV_WC_RETRY_EXC_ERR", "c": "IBV_WC_REM_ACCESS_ERR",
         "d": "IBV_WC_WR_FLUSH_ERR"},
    ),
    "retry_wait": (
        "With NCCL's defaults NCCL_IB_TIMEOUT=20 and NCCL_IB_RETRY_CNT=7, about how long does a dead peer "
        "take to turn into that error?",
        {"a": "4.3 s", "b": "20 s", "c": "2 min", "d": "30 s"},
    ),
}  # fmt: skip


def answers() -> dict[str, str | int]:
    """Your answer to each question in QUESTIONS: {"encapsulation": "b", ..., "gid_index": 3, ...}."""
    letters = dict(
        encapsulation="c", routable="c", lid_owner="a", roce_address="d", ib_lossless="b",
        roce_lossless="a", cnp_sender="b", status_12="b", retry_wait="d",
    )  # fmt: skip
    eth, ipv4, udp, bth, icrc, fcs, lrh, vcrc = 14, 20, 8, 12, 4, 4, 8, 2
    numbers = {
        "gid_index": 3,
        "mtu_at_1500": 1024,
        "eth_mtu_for_4096": 4096 + 96,
        "roce_header_bytes": eth + ipv4 + udp + bth + icrc + fcs,
        "ib_header_bytes": lrh + bth + icrc + vcrc,
    }
    return {**letters, **numbers}
