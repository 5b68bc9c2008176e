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
    raise NotImplementedError("TODO(19.spine_leaf): not implemented yet")


def oversubscription_ratio(down_ports: int, up_ports: int, down_gbit_s: float, up_gbit_s: float) -> float:
    """Bandwidth hosts can push into a leaf over the bandwidth the leaf can push to the spines."""
    raise NotImplementedError("TODO(19.spine_leaf): not implemented yet")


def two_tier(num_endpoints: int, radix: int, oversubscription: int = 1) -> dict[str, int]:
    """The smallest two-tier fabric for `num_endpoints` NIC ports, leaves split by `leaf_ports`.

    leaves: ceil(num_endpoints / down); every leaf cables all `up` uplinks.
    spines: the smallest s with s >= ceil(leaves * up / radix) that divides up, so that every leaf reaches
            every spine over up / s parallel links ("links_per_pair").
    Raises ValueError when two tiers cannot do it: more leaves than a spine has ports (leaves > radix).
    Returns {"leaves", "spines", "links_per_pair", "switches", "host_cables", "spine_cables",
    "max_endpoints"}, max_endpoints being radix * down, the most this leaf split allows in two tiers.
    """
    raise NotImplementedError("TODO(19.spine_leaf): not implemented yet")
