"""Alternative-correct 19 fabric (validity corpus): spines chosen among the divisors of the uplinks."""

from __future__ import annotations

from coursekit.hardware import load

HW = load()
QM9700_RADIX = HW.switches["qm9700"].radix
NDR_GBIT_S = HW.infiniband["ndr"].gbit_s


def leaf_ports(radix: int, oversubscription: int = 1) -> dict[str, int]:
    if radix < 2 or oversubscription < 1:
        raise ValueError("need radix >= 2 and oversubscription >= 1")
    bundles = 0
    while (bundles + 1) * (oversubscription + 1) <= radix:
        bundles += 1
    return {"down": bundles * oversubscription, "up": bundles}


def oversubscription_ratio(down_ports: int, up_ports: int, down_gbit_s: float, up_gbit_s: float) -> float:
    return (down_ports * down_gbit_s) / (up_ports * up_gbit_s)


def two_tier(num_endpoints: int, radix: int, oversubscription: int = 1) -> dict[str, int]:
    split = leaf_ports(radix, oversubscription)
    down, up = split["down"], split["up"]
    leaves = -(-num_endpoints // down)
    if leaves > radix:
        raise ValueError(f"{leaves} leaves do not fit a {radix}-port spine")
    uplinks = leaves * up
    spines = min(s for s in range(1, up + 1) if up % s == 0 and s * radix >= uplinks)
    return {
        "leaves": leaves,
        "spines": spines,
        "links_per_pair": up // spines,
        "switches": leaves + spines,
        "host_cables": num_endpoints,
        "spine_cables": uplinks,
        "max_endpoints": radix * down,
    }
