"""The objects of the verbs simulator: a fabric of devices (one per simulated host), PDs, MRs, CQs, QPs.

The verbs in ``coursekit.verbs`` create and change them; the wire (``coursekit.verbs_wire``) moves data
between them. Each object keeps the simulator's own state in ``sim`` (a ``...Sim`` record): what libibverbs
hides behind its handles; only the verbs and the wire change it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from coursekit.verbs_defs import (
    IBV_GID_TYPE_IB,
    IBV_GID_TYPE_ROCE_V1,
    IBV_GID_TYPE_ROCE_V2,
    IBV_LINK_LAYER_ETHERNET,
    IBV_LINK_LAYER_INFINIBAND,
    IBV_MTU_4096,
    IBV_QPS_RESET,
    IBV_QPT_RC,
    ibv_qp_attr,
    ibv_qp_cap,
    ibv_recv_wr,
    ibv_send_wr,
    ibv_wc,
    mtu_bytes,
    state_name,
)


class Fabric:
    """The network between simulated hosts. ``link_layer`` is 'infiniband' or 'ethernet' (RoCE).

    InfiniBand: the subnet manager gives port k the LID k+1; one GID (type IB). Ethernet: LID 0 and the usual
    mlx5 GID table (``show_gids``): 0 RoCE v1 and 1 RoCE v2 on the link-local fe80:: address, 2 RoCE v1 and
    3 RoCE v2 on the IPv4-mapped address. ``routed`` puts every host in its own IP subnet behind a router:
    only RoCE v2 with a routable (IPv4-mapped) GID crosses it. ``eth_mtu`` sets the RoCE path MTU the way the
    kernel's ``iboe_get_mtu`` does: the largest IB MTU <= eth_mtu - 96 bytes of RoCE headers.
    """

    def __init__(self, link_layer: str = "infiniband", *, routed: bool = False, eth_mtu: int = 4200) -> None:
        if link_layer not in ("infiniband", "ethernet"):
            raise ValueError(f"link_layer must be 'infiniband' or 'ethernet', got {link_layer!r}")
        self.link_layer = IBV_LINK_LAYER_INFINIBAND if link_layer == "infiniband" else IBV_LINK_LAYER_ETHERNET
        self.routed = routed
        self.eth_mtu = eth_mtu
        self.devices: list[ibv_context] = []

    def open_device(self, name: str) -> ibv_context:
        """ibv_open_device() on a new host's HCA, e.g. ``fabric.open_device("hostA/mlx5_0")``."""
        ctx = ibv_context(self, name, len(self.devices))
        self.devices.append(ctx)
        return ctx

    def all_qps(self) -> list[ibv_qp]:
        return [qp for ctx in self.devices for qp in ctx.sim.qps.values()]


@dataclass
class ContextSim:
    """A device's address space and key space: ``index`` (its place on the fabric), the next free virtual
    address, the buffers given addresses (``bases``: by ``id``, kept alive), its MRs by lkey and by rkey, its
    QPs by number, and how many keys it has issued."""

    index: int
    next_addr: int
    bases: dict[int, tuple[bytearray, int]] = field(default_factory=dict)
    mrs: dict[int, ibv_mr] = field(default_factory=dict)
    qps: dict[int, ibv_qp] = field(default_factory=dict)
    nkeys: int = 0

    def base(self, buf: bytearray) -> int:
        """The virtual address of ``buf`` on this host (given on first use)."""
        if id(buf) not in self.bases:
            self.bases[id(buf)] = (buf, self.next_addr)  # keeps buf alive: its id stays unique
            self.next_addr += (len(buf) // 4096 + 2) * 4096
        return self.bases[id(buf)][1]


class ibv_context:
    """One host's RDMA device (port 1 only) with its own virtual address space and key space."""

    def __init__(self, fabric: Fabric, name: str, index: int) -> None:
        self.fabric, self.name = fabric, name
        self.sim = ContextSim(index, 0x7F0000000000 + index * 0x10000000000)  # hosts' address spaces differ
        if fabric.link_layer == IBV_LINK_LAYER_INFINIBAND:
            self.lid = index + 1
            self.gids = [(f"fe80::2:c903:0:{index + 1:x}", IBV_GID_TYPE_IB)]
            self.active_mtu = IBV_MTU_4096
        else:
            self.lid = 0
            ip = f"10.{index + 1}.0.1" if fabric.routed else f"10.0.0.{index + 1}"
            local, mapped = f"fe80::a00:ff:fe00:{index + 1:x}", f"::ffff:{ip}"
            self.gids = [(local, IBV_GID_TYPE_ROCE_V1), (local, IBV_GID_TYPE_ROCE_V2),
                         (mapped, IBV_GID_TYPE_ROCE_V1), (mapped, IBV_GID_TYPE_ROCE_V2)]  # fmt: skip
            # linux include/rdma/ib_addr.h iboe_get_mtu: 96 = GRH 40 + UDP 8 + BTH 12 + XRC 4
            # + AtomicETH 28 + ICRC 4 (sizes from include/rdma/ib_pack.h)
            room = fabric.eth_mtu - 96
            self.active_mtu = max((m for m in range(1, 6) if mtu_bytes(m) <= room), default=0)

    def __repr__(self) -> str:
        return f"ibv_context({self.name!r})"


@dataclass
class PdSim:
    users: int = 0
    """MRs and QPs on the PD; -1 once it is deallocated."""


class ibv_pd:
    def __init__(self, context: ibv_context) -> None:
        self.context = context
        self.sim = PdSim()


@dataclass
class MrSim:
    view: memoryview | None
    """The registered bytes; it pins the buffer (no resize while registered); None once deregistered."""


class ibv_mr:
    """A registered buffer: ``addr``/``length`` in the host's virtual addresses, ``lkey``/``rkey``, access."""

    def __init__(self, pd: ibv_pd, buf: bytearray, access: int, lkey: int, rkey: int) -> None:
        self.context, self.pd, self.access = pd.context, pd, access
        self.addr, self.length = pd.context.sim.base(buf), len(buf)
        self.lkey, self.rkey = lkey, rkey
        self.sim = MrSim(memoryview(buf))

    def __repr__(self) -> str:
        return f"ibv_mr(addr={self.addr:#x}, length={self.length}, lkey={self.lkey:#x}, rkey={self.rkey:#x})"


@dataclass(frozen=True)
class Completion:
    """A completion waiting in its CQ; a send-side one frees its QP's send-queue slots up to ``frees``
    (the QP and the WR's sequence number) when it is polled."""

    wc: ibv_wc
    frees: tuple[ibv_qp, int] | None = None


@dataclass
class CqSim:
    entries: deque[Completion] = field(default_factory=deque)
    users: int = 0
    """QPs that use the CQ."""
    overrun: bool = False


class ibv_cq:
    def __init__(self, context: ibv_context, cqe: int) -> None:
        self.context, self.cqe = context, cqe
        self.sim = CqSim()

    def deliver(self, wc: ibv_wc, frees: tuple[ibv_qp, int] | None = None) -> None:
        """The simulator queues a completion (``frees``: see ``Completion``); a full CQ overruns."""
        if len(self.sim.entries) >= self.cqe:
            self.sim.overrun = True  # real verbs: IBV_EVENT_CQ_ERR; the completion is lost
            return
        self.sim.entries.append(Completion(wc, frees))


# the one C struct that holds objects (its CQs): it lives here, with them, so verbs_defs needs none
@dataclass
class ibv_qp_init_attr:
    send_cq: ibv_cq
    recv_cq: ibv_cq
    cap: ibv_qp_cap = field(default_factory=ibv_qp_cap)
    qp_type: int = IBV_QPT_RC
    sq_sig_all: int = 0


@dataclass(frozen=True)
class PostedSend:
    """A send WR as posted: a copy of it, its sequence number on the QP, and its data when it was inline
    (copied at post time)."""

    wr: ibv_send_wr
    seq: int
    inline: bytes | None = None


@dataclass
class QpSim:
    state: int = IBV_QPS_RESET
    attr: ibv_qp_attr = field(default_factory=ibv_qp_attr)
    sq: deque[PostedSend] = field(default_factory=deque)
    rq: deque[ibv_recv_wr] = field(default_factory=deque)
    next_psn: int = 0
    expected_psn: int = 0
    sq_posted: int = 0
    sq_freed: int = 0
    """Send slots are freed when a completion is POLLED (``ibv_poll_cq`` in coursekit.verbs)."""


class ibv_qp:
    """An RC queue pair. ``state`` is read-only: only ibv_modify_qp changes it, and ``transitions`` logs
    every successful ibv_modify_qp as (old state, new state, attr_mask)."""

    def __init__(self, pd: ibv_pd, init: ibv_qp_init_attr, qp_num: int) -> None:
        self.context, self.pd, self.qp_num, self.qp_type = pd.context, pd, qp_num, init.qp_type
        self.send_cq, self.recv_cq, self.sq_sig_all = init.send_cq, init.recv_cq, init.sq_sig_all
        self.cap = replace(init.cap)
        self.transitions: list[tuple[int, int, int]] = []
        self.sim = QpSim()

    @property
    def state(self) -> int:
        return self.sim.state

    def __repr__(self) -> str:
        return f"ibv_qp(qp_num={self.qp_num:#x}, state={state_name(self.sim.state)})"
