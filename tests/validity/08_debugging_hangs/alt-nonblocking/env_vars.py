"""Which environment variable diagnoses which symptom: NCCL's own, and PyTorch's ProcessGroupNCCL ones.

NCCL: docs/userguide/source/env.rst in NVIDIA/nccl. PyTorch 2.13: the names that ProcessGroupNCCL.hpp and
FlightRecorder.hpp read (torch/include/torch/csrc/distributed/c10d/ in the installed wheel),
TORCH_DISTRIBUTED_DEBUG in torch/distributed/distributed_c10d.py; pytorch/pytorch
docs/source/torch_nccl_environment_variables.rst.
Check: `grade exercise 08`.
"""

from __future__ import annotations

SYMPTOMS = {
    "nccl_init_details": (
        "At start-up you want NCCL to print its version, the transport it picked between each pair of "
        "GPUs (P2P, SHM, NET) and the rings and trees it built."
    ),
    "nccl_network_lines_only": (
        "With the setting above, every rank prints thousands of lines. You only want the lines about "
        "network setup (InfiniBand, sockets), where your job stops."
    ),
    "nccl_log_per_process": (
        "The NCCL logs of 64 ranks interleave on one stdout. You want one file per host and process id, "
        "under /tmp."
    ),
    "collective_shape_check": (
        "Some ranks hang in an all-reduce and you suspect one rank passes a tensor of another shape. You "
        "want PyTorch to check, at every collective, that all ranks call the same collective with the "
        "same shapes, and raise an error that names the difference instead of hanging."
    ),
    "flight_recorder_on": (
        "You want every rank to keep a ring buffer of its last 2000 collectives (op, sizes, state) so "
        "that you can dump it when the job hangs."
    ),
    "dump_on_timeout": (
        "When ProcessGroupNCCL's watchdog detects a collective timeout, you want every rank to write its "
        "flight-recorder buffer to a file by itself."
    ),
    "dump_location": (
        "The flight-recorder dumps land on each node's local disk, in "
        "~/.cache/torch/comm_lib_trace_rank_<rank>. You want them as /shared/fr/rank_<rank> on the shared "
        "file system."
    ),
    "desync_report": (
        "After a collective timeout, you want ProcessGroupNCCL to report whether some rank never entered "
        "the collective the others are stuck in (a desynchronized rank)."
    ),
    "consumer_gpu_p2p": (
        "An 8x RTX 4090 box hangs in its first all-reduce; one GPU alone works, and NCCL's log shows "
        "P2P/IPC between the GPUs. You want to turn peer-to-peer transport off to confirm."
    ),
    "bootstrap_interface": (
        "The NCCL log shows bootstrap over docker0, and initialization across nodes never finishes. You "
        "want NCCL to use the interface eth0."
    ),
    "ib_retry_timeout": (
        "After a switch reboot, training dies with an InfiniBand 'retry exceeded' error. You want each "
        "retry to wait longer: 4.096 us x 2^22, about 17 s."
    ),
    "force_ring": (
        "Results differ between runs, only on 16 nodes. To rule out the tree algorithm, you want NCCL to "
        "use rings only."
    ),
    "cpp_logs_missing": (
        "You set the variable that checks collective shapes, but none of c10d's C++ INFO messages show up."
    ),
    "nan_after_allreduce": (
        "The loss becomes NaN right after an all-reduce. You want ProcessGroupNCCL to check each "
        "collective's input for NaN and fail on the rank that feeds one."
    ),
    "blocking_wait": (
        "You want work.wait() on a NCCL collective to block the CPU and raise an exception once the "
        "process group's timeout passes, so that your training loop can catch it."
    ),
}


def diagnose(symptom: str) -> str:
    """The setting that diagnoses `SYMPTOMS[symptom]`, as you would type it: "NAME=value".

    NAME is the exact variable (case matters); value is what to set it to. Where torch 2.13 reads several
    names for one setting (the current one and older aliases it still honours with a deprecation warning),
    any of them is accepted.
    """
    settings = {
        "nccl_init_details": "NCCL_DEBUG=INFO",
        "nccl_network_lines_only": "NCCL_DEBUG_SUBSYS=NET",
        "nccl_log_per_process": "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log",
        "collective_shape_check": "TORCH_DISTRIBUTED_DEBUG=DETAIL",
        "flight_recorder_on": "TORCH_FR_BUFFER_SIZE=2000",
        "dump_on_timeout": "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        "dump_location": "TORCH_FR_DUMP_TEMP_FILE=/shared/fr/rank_",
        "desync_report": "TORCH_NCCL_DESYNC_DEBUG=1",
        "consumer_gpu_p2p": "NCCL_P2P_DISABLE=1",
        "bootstrap_interface": "NCCL_SOCKET_IFNAME==eth0",
        "ib_retry_timeout": "NCCL_IB_TIMEOUT=22",
        "force_ring": "NCCL_ALGO=Ring",
        "cpp_logs_missing": "TORCH_CPP_LOG_LEVEL=INFO",
        "nan_after_allreduce": "TORCH_NCCL_NAN_CHECK=1",
        "blocking_wait": "TORCH_NCCL_BLOCKING_WAIT=1",
    }
    return settings[symptom]
