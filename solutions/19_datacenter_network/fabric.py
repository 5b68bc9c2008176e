"""Spine-leaf (two-tier Clos) fabrics: the switches and cables a GPU cluster needs, and how oversubscribed.

A leaf of radix k splits its ports into `down` host-facing ports and `up` spine-facing ports; the
oversubscription is down/up (equal port speeds): 1:1 is non-blocking, 2:1 halves what a leaf can send up.
Every leaf reaches every spine (ground-truth.md §7.2: 2048 NICs in two non-blocking tiers of 64-port NDR
switches). Check: `grade exercise 19`; hints: `grade hint 19 <part>`. Switch radixes and link rates:
coursekit/hardware.yml.
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
    """Split a leaf's `radix` equal-speed ports into host-facing ("down") and spine-facing ("up") ports whose
    ratio is exactly `oversubscription`:1, using as many ports as that allows (any left over stay unused).
    Returns {"down": ..., "up": ...} (ints). ValueError for radix < 2 or oversubscription < 1."""
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
    """The smallest two-tier fabric for `num_endpoints` NIC ports on radix-`radix` switches, leaves split by
    `leaf_ports`: the fewest leaves, every leaf cabling all its uplinks, and the fewest spines that take
    every uplink while every leaf reaches every spine over the same number of parallel links
    ("links_per_pair"), so that ECMP spreads evenly.
    Raises ValueError when two tiers cannot hold the endpoints with this leaf split.
    Returns ints {"leaves", "spines", "links_per_pair", "switches", "host_cables", "spine_cables",
    "max_endpoints"}, max_endpoints being the most endpoints this leaf split allows in two tiers.
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
