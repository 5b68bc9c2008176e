"""Spine-leaf (two-tier Clos) fabrics: the switches and cables a GPU cluster needs, and how oversubscribed.

A leaf of radix k splits its ports into `down` host-facing ports and `up` spine-facing ports; the
oversubscription is down/up (equal port speeds): 1:1 is non-blocking, 2:1 halves what a leaf can send up.
Every leaf reaches every spine; a spine's k ports bound the number of leaves, so two tiers hold at most
k * down endpoints (k^2/2 when non-blocking: 2048 NICs with 64-port NDR switches, ground-truth.md §7.2).
Check: `grade exercise 19`. Switch radixes and link rates: coursekit/hardware.yml.
"""

from __future__ import annotations

import math

from coursekit.hardware import load

HW = load()
QM9700_RADIX = HW.switches["qm9700"].radix  # 64 NDR ports: the DGX SuperPOD's InfiniBand switch
NDR_GBIT_S = HW.infiniband["ndr"].gbit_s  # 400 Gb/s per port, per direction


# ------------------------------------------------------------------------------------------------------------
# 19.spine_leaf


def leaf_ports(radix: int, oversubscription: int = 1) -> dict[str, int]:
    """Split a leaf's `radix` equal-speed ports for an `oversubscription`:1 ratio of down to up:
    up = radix // (oversubscription + 1) spine-facing ports, down = oversubscription * up host-facing ports
    (ports left over are unused). Returns {"down": ..., "up": ...}."""
    ### BEGIN SOLUTION 19.spine_leaf
    if radix < 2 or oversubscription < 1:
        raise ValueError(f"need radix >= 2 and oversubscription >= 1, got {radix}, {oversubscription}")
    up = radix // (oversubscription + 1)  # 64 ports at 1:1 -> 32 up; at 3:1 -> 16 up
    return {"down": oversubscription * up, "up": up}  # 3:1 -> 48 down; 2:1 -> 42 down, 21 up, 1 port idle
    ### END SOLUTION


def oversubscription_ratio(down_ports: int, up_ports: int, down_gbit_s: float, up_gbit_s: float) -> float:
    """Bandwidth hosts can push into a leaf over the bandwidth the leaf can push to the spines."""
    ### BEGIN SOLUTION 19.spine_leaf
    # e.g. 48 x 400G down, 8 x 800G up: 19200 / 6400 = 3:1. Faster uplinks buy back oversubscription.
    return down_ports * down_gbit_s / (up_ports * up_gbit_s)
    ### END SOLUTION


def two_tier(num_endpoints: int, radix: int, oversubscription: int = 1) -> dict[str, int]:
    """The smallest two-tier fabric for `num_endpoints` NIC ports, leaves split by `leaf_ports`.

    leaves: ceil(num_endpoints / down); every leaf cables all `up` uplinks.
    spines: the smallest s with s >= ceil(leaves * up / radix) that divides up, so that every leaf reaches
            every spine over up / s parallel links ("links_per_pair").
    Raises ValueError when two tiers cannot do it: more leaves than a spine has ports (leaves > radix).
    Returns {"leaves", "spines", "links_per_pair", "switches", "host_cables", "spine_cables",
    "max_endpoints"}, max_endpoints being radix * down, the most this leaf split allows in two tiers.
    """
    ### BEGIN SOLUTION 19.spine_leaf
    ports = leaf_ports(radix, oversubscription)
    down, up = ports["down"], ports["up"]
    leaves = math.ceil(num_endpoints / down)
    if leaves > radix:  # a spine needs one port per leaf at least: the third tier starts here
        raise ValueError(
            f"{num_endpoints} endpoints need {leaves} leaves, more than a {radix}-port spine can reach: "
            f"two tiers hold at most {radix * down}"
        )
    spines = math.ceil(leaves * up / radix)  # enough spine ports for every uplink
    while up % spines:  # equal parallel links between every leaf-spine pair, so ECMP spreads evenly
        spines += 1
    return {
        "leaves": leaves,
        "spines": spines,
        "links_per_pair": up // spines,
        "switches": leaves + spines,
        "host_cables": num_endpoints,  # one cable per NIC port
        "spine_cables": leaves * up,
        "max_endpoints": radix * down,  # k^2/2 when non-blocking
    }
    ### END SOLUTION
