"""The objects of the verbs simulator: a fabric of devices (one per simulated host), PDs, MRs, CQs, QPs.

The verbs in ``coursekit.verbs`` create and change them; the wire (``coursekit.verbs_wire``) moves data
between them. Attributes that start with ``_`` are the simulator's own state: only the simulator changes them.
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

    def _qps(self) -> list[ibv_qp]:
        return [qp for ctx in self.devices for qp in ctx._qps.values()]


class ibv_context:
    """One host's RDMA device (port 1 only) with its own virtual address space and key space."""

    def __init__(self, fabric: Fabric, name: str, index: int) -> None:
        self.fabric, self.name, self._index = fabric, name, index
        self._next_addr = 0x7F0000000000 + index * 0x10000000000  # hosts' address spaces differ
        self._bases: dict[int, tuple[bytearray, int]] = {}
        self._mrs: dict[int, ibv_mr] = {}  # by lkey and by rkey
        self._qps: dict[int, ibv_qp] = {}
        self._nkeys = 0
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

    def _base(self, buf: bytearray) -> int:
        if id(buf) not in self._bases:
            self._bases[id(buf)] = (buf, self._next_addr)  # keeps buf alive: its id stays unique
            self._next_addr += (len(buf) // 4096 + 2) * 4096
        return self._bases[id(buf)][1]

    def __repr__(self) -> str:
        return f"ibv_context({self.name!r})"


class ibv_pd:
    def __init__(self, context: ibv_context) -> None:
        self.context = context
        self._users = 0


class ibv_mr:
    """A registered buffer: ``addr``/``length`` in the host's virtual addresses, ``lkey``/``rkey``, access."""

    def __init__(self, pd: ibv_pd, buf: bytearray, access: int, lkey: int, rkey: int) -> None:
        self.context, self.pd, self.access = pd.context, pd, access
        self.addr, self.length = pd.context._base(buf), len(buf)
        self.lkey, self.rkey = lkey, rkey
        self._view: memoryview | None = memoryview(buf)  # pins buf: it cannot be resized while registered

    def __repr__(self) -> str:
        return f"ibv_mr(addr={self.addr:#x}, length={self.length}, lkey={self.lkey:#x}, rkey={self.rkey:#x})"


class ibv_cq:
    def __init__(self, context: ibv_context, cqe: int) -> None:
        self.context, self.cqe = context, cqe
        self._entries: deque[ibv_wc] = deque()
        self._users = 0
        self._overrun = False

    def _push(self, wc: ibv_wc) -> None:
        if len(self._entries) >= self.cqe:
            self._overrun = True  # real verbs: IBV_EVENT_CQ_ERR; the completion is lost
            return
        self._entries.append(wc)


# the one C struct that holds objects (its CQs): it lives here, with them, so verbs_defs needs none
@dataclass
class ibv_qp_init_attr:
    send_cq: ibv_cq
    recv_cq: ibv_cq
    cap: ibv_qp_cap = field(default_factory=ibv_qp_cap)
    qp_type: int = IBV_QPT_RC
    sq_sig_all: int = 0


class ibv_qp:
    """An RC queue pair. ``state`` is read-only: only ibv_modify_qp changes it, and ``transitions`` logs
    every successful ibv_modify_qp as (old state, new state, attr_mask)."""

    def __init__(self, pd: ibv_pd, init: ibv_qp_init_attr, qp_num: int) -> None:
        self.context, self.pd, self.qp_num, self.qp_type = pd.context, pd, qp_num, init.qp_type
        self.send_cq, self.recv_cq, self.sq_sig_all = init.send_cq, init.recv_cq, init.sq_sig_all
        self.cap = replace(init.cap)
        self.transitions: list[tuple[int, int, int]] = []
        self._state = IBV_QPS_RESET
        self._attr = ibv_qp_attr()
        self._sq: deque[ibv_send_wr] = deque()
        self._rq: deque[ibv_recv_wr] = deque()
        self._next_psn = self._expected_psn = 0
        # send slots are freed when a completion is POLLED (see _post_send in coursekit.verbs)
        self._sq_posted = self._sq_freed = 0

    @property
    def state(self) -> int:
        return self._state

    def __repr__(self) -> str:
        return f"ibv_qp(qp_num={self.qp_num:#x}, state={state_name(self._state)})"
