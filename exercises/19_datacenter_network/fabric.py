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
    raise NotImplementedError("TODO(19.spine_leaf): not implemented yet")


def oversubscription_ratio(down_ports: int, up_ports: int, down_gbit_s: float, up_gbit_s: float) -> float:
    """Bandwidth hosts can push into a leaf over the bandwidth the leaf can push to the spines."""
    raise NotImplementedError("TODO(19.spine_leaf): not implemented yet")


def two_tier(num_endpoints: int, radix: int, oversubscription: int = 1) -> dict[str, int]:
    """The smallest two-tier fabric for `num_endpoints` NIC ports on radix-`radix` switches, leaves split by
    `leaf_ports`: the fewest leaves, every leaf cabling all its uplinks, and the fewest spines that take
    every uplink while every leaf reaches every spine over the same number of parallel links
    ("links_per_pair"), so that ECMP spreads evenly.
    Raises ValueError when two tiers cannot hold the endpoints with this leaf split.
    Returns ints {"leaves", "spines", "links_per_pair", "switches", "host_cables", "spine_cables",
    "max_endpoints"}, max_endpoints being the most endpoints this leaf split allows in two tiers.
    """
    raise NotImplementedError("TODO(19.spine_leaf): not implemented yet")
