"""Spine-leaf fabrics (alternative-correct case: spines found by scanning the divisors of `up`)."""

from __future__ import annotations

import math

from coursekit.hardware import load

HW = load()
QM9700_RADIX = HW.switches["qm9700"].radix
NDR_GBIT_S = HW.infiniband["ndr"].gbit_s


def leaf_ports(radix: int, oversubscription: int = 1) -> dict[str, int]:
    """Split a leaf's ports down:up."""
    up = radix // (oversubscription + 1)
    return {"down": oversubscription * up, "up": up}


def oversubscription_ratio(down_ports: int, up_ports: int, down_gbit_s: float, up_gbit_s: float) -> float:
    """Bandwidth in over bandwidth up."""
    return (down_ports * down_gbit_s) / (up_ports * up_gbit_s)


def two_tier(num_endpoints: int, radix: int, oversubscription: int = 1) -> dict[str, int]:
    """The smallest two-tier fabric."""
    ports = leaf_ports(radix, oversubscription)
    down, up = ports["down"], ports["up"]
    leaves = math.ceil(num_endpoints / down)
    if leaves > radix:
        raise ValueError(f"{num_endpoints} endpoints need {leaves} leaves; a spine has {radix} ports")
    need = math.ceil(leaves * up / radix)
    spines = next(s for s in range(max(need, 1), up + 1) if up % s == 0)
    return {
        "leaves": leaves,
        "spines": spines,
        "links_per_pair": up // spines,
        "switches": leaves + spines,
        "host_cables": num_endpoints,
        "spine_cables": leaves * up,
        "max_endpoints": radix * down,
    }
