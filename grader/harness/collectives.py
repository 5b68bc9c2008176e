"""What each wrapped road to the network is: the collective a call counts as, or a point-to-point message.

``comm`` wraps the functions of ``torch.distributed`` named in ``P2P_OPS`` and ``COLLECTIVES``, the process
group's and its backends' methods in ``GROUP_METHODS`` and the dispatcher's ops in ``OPS``; a test forbids
collectives by the names in ``COLLECTIVES``.
"""

from __future__ import annotations

P2P_OPS = ("send", "recv", "isend", "irecv")
COLLECTIVES = (
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
)

P2P = "p2p"
"""A point-to-point message: recorded as a ``CommEvent``, never forbidden."""
UNNAMED = ""
"""Communicates, but is neither a collective nor a message of its own (coalescing, sequence numbers):
its traffic is accounted for, nothing is recorded."""

GROUP_METHODS: dict[str, str] = {
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "allgather_coalesced": "all_gather",
    "_allgather_base": "all_gather_into_tensor",
    "allgather_into_tensor_coalesced": "all_gather_into_tensor",
    "all_gather_single": "all_gather_into_tensor",
    "all_gather_single_coalesced": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter_tensor",
    "reduce_scatter_single": "reduce_scatter_tensor",
    "reduce_scatter_single_coalesced": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all_single",
    "all_to_all_single": "all_to_all_single",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "monitored_barrier": "barrier",
    "send": P2P,
    "recv": P2P,
    "recv_anysource": P2P,
    "_start_coalescing": UNNAMED,
    "_end_coalescing": UNNAMED,
    "_set_sequence_number_for_group": UNNAMED,
}
"""Methods of ``ProcessGroup`` and of every ``Backend`` class, and the collective each one is."""

_FUNCTIONAL = {
    "all_reduce": "all_reduce",
    "all_reduce_": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "all_reduce_coalesced_": "all_reduce",
    "all_gather_into_tensor": "all_gather_into_tensor",
    "all_gather_into_tensor_out": "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced": "all_gather_into_tensor",
    "reduce_scatter_tensor": "reduce_scatter_tensor",
    "reduce_scatter_tensor_out": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor",
    "all_to_all_single": "all_to_all_single",
    "broadcast": "broadcast",
    "broadcast_": "broadcast",
    "isend": P2P,
    "irecv": P2P,
    "batch_p2p_ops": P2P,
}
OPS: dict[str, dict[str, str]] = {
    "c10d": {
        "allreduce_": "all_reduce",
        "allreduce_coalesced_": "all_reduce",
        "allgather_": "all_gather",
        "allgather_coalesced_": "all_gather",
        "_allgather_base_": "all_gather_into_tensor",
        "allgather_into_tensor_coalesced_": "all_gather_into_tensor",
        "reduce_scatter_": "reduce_scatter",
        "_reduce_scatter_base_": "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor",
        "alltoall_": "all_to_all",
        "alltoall_base_": "all_to_all_single",
        "broadcast_": "broadcast",
        "reduce_": "reduce",
        "gather_": "gather",
        "scatter_": "scatter",
        "barrier": "barrier",
        "monitored_barrier_": "barrier",
        "send": P2P,
        "recv_": P2P,
        "recv_any_source_": P2P,
    },
    "_c10d_functional": _FUNCTIONAL,
    "_c10d_functional_autograd": _FUNCTIONAL,
}
"""Dispatcher ops, by namespace, and the collective each one is."""
