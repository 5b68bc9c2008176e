"""The course's hardware catalogue: GPUs, NVLink, PCIe, InfiniBand, Ethernet, switches and node designs.

Every hardware constant an exercise uses comes from here (data and sources: coursekit/hardware.yml), never
from a number typed into an exercise. Use it like this:

    from coursekit.hardware import load

    hw = load()                                    # parsed once, then cached; frozen dataclasses
    h100 = hw.gpus["h100_sxm"]                     # .memory_gb 80, .memory_bandwidth_gb_s 3350, ...
    h100.nvlink_gb_s                               # 450: the scaling book's per-direction figure
    nv4 = hw.nvlink[h100.nvlink]                   # NVLink 4 as NVIDIA quotes it: 50 / 900 GB/s, both ways
    hw.infiniband["ndr"].gb_s                      # 50.0 GB/s per direction (400 Gb/s / 8)
    hw.pcie["gen4"].x16_gb_s                       # 31.5 GB/s per direction (16 GT/s x 128/130 x 16 / 8)
    hw.switches["qm9700"].radix                    # 64 ports of NDR
    hw.nodes["dgx_h100"].nics                      # 8 (one 400 Gb/s NIC per GPU)
    hw.node_egress_gb_s("dgx_h100")                # 400.0 GB/s per direction

Units are in the names: *_gb decimal GB (1e9 B, as datasheets and nccl-tests count), *_gb_s GB/s,
*_gbit_s Gb/s, *_tflops dense 1e12 flop/s. Unless a name or an argument says otherwise, a bandwidth here is
PER DIRECTION: moving S bytes over a link takes S / (per-direction bandwidth). NVIDIA quotes NVLink
BIDIRECTIONAL (both directions summed, ground-truth.md §0.3), so NVLink entries keep the figure as quoted,
with its `convention`; converting between the conventions is exercise 16's, and this module does not do it.
`unverified` lists the fields of an entry whose value needs a tolerance in a test.

Names (keys and attributes) are stable: exercises 16-25 read them. Add entries; do not rename. The loader
checks structure (keys, types, cross-references); whether the figures agree with each other and with their
sources is checked judge-side: `python -m pytest tests/test_coursekit_hardware.py`.
"""

from __future__ import annotations

import contextlib
import functools
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

PER_DIRECTION = "per-direction"  # one direction of a full-duplex link (the scaling book's "unidirectional")
BIDIRECTIONAL = "bidirectional"  # both directions summed (NVIDIA's NVLink figures)
CONVENTIONS = (PER_DIRECTION, BIDIRECTIONAL)

GB = 10**9  # bytes in a decimal gigabyte
BITS_PER_BYTE = 8
AGGREGATE_UNITS = ("TB/s", "Tbit/s")  # the units a switch's aggregate figure is quoted in

DEFAULT_PATH = Path(__file__).with_name("hardware.yml")


class HardwareCatalogueError(ValueError):
    """hardware.yml is malformed or inconsistent; the message names the entry and the key."""


# ------------------------------------------------------------------------------------------------------------
# entries


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """Fields every catalogue entry has."""

    key: str
    """The entry's name in its table, e.g. 'h100_sxm'."""
    source: str
    """Where the values come from: URL or document, and section."""
    note: str | None = None
    """Caveats: what a test must tolerate, how a figure was derived."""
    unverified: tuple[str, ...] = ()
    """Fields resting on secondary or disagreeing sources: assert them with a tolerance, never exactly."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GPU(Entry):
    name: str
    memory_gb: float
    memory_type: str
    memory_bandwidth_gb_s: float
    """Device-memory bandwidth (HBM or GDDR), reads and writes together: no direction applies."""
    bf16_dense_tflops: float | None
    """Dense tensor-core bf16 with fp32 accumulate; None where the GPU has no bf16 (V100)."""
    fp16_dense_tflops: float
    nvlink: str | None
    """Key into Catalogue.nvlink, or None: no NVLink (RTX 4090)."""
    nvlink_links: int
    nvlink_gb_s: float
    """The GPU's NVLink bandwidth over all its links, PER DIRECTION, as the scaling book tabulates it
    (gpus.md; ground-truth.md §7.1); 0 without NVLink. The figure coursekit.cluster uses."""
    pcie: str
    """Key into Catalogue.pcie: the GPU's host link, x16."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NVLinkGeneration(Entry):
    generation: int
    first_gpu: str
    """Key into Catalogue.gpus: the GPU that introduced it, whose link count is links_per_gpu."""
    links_per_gpu: int
    per_link_gb_s: float
    """As quoted, in `convention`."""
    per_gpu_gb_s: float
    """links_per_gpu x per_link_gb_s, as quoted, in `convention`."""
    convention: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PCIeGeneration(Entry):
    generation: int
    gt_s: float
    """Giga-transfers per second per lane; one transfer carries one bit on the lane."""
    encoding: tuple[int, ...]
    """Line code (payload bits, wire bits): (128, 130) since Gen3."""
    convention: str

    @property
    def lane_gb_s(self) -> float:
        """GB/s per lane, per direction: gt_s x payload/wire / 8."""
        payload, wire = self.encoding
        return self.gt_s * payload / wire / BITS_PER_BYTE

    @property
    def x16_gb_s(self) -> float:
        """GB/s of an x16 link, per direction (Gen4: 31.5)."""
        return 16 * self.lane_gb_s


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkRate(Entry):
    """One network port's data rate (InfiniBand 4x or Ethernet), per direction."""

    name: str
    gbit_s: float
    convention: str
    lanes: int | None = None
    lane_gbit_s: float | None = None

    @property
    def gb_s(self) -> float:
        """Bytes per second / 1e9, per direction: gbit_s / 8."""
        return self.gbit_s / BITS_PER_BYTE


@dataclass(frozen=True, kw_only=True, slots=True)
class Switch(Entry):
    name: str
    kind: str
    """'infiniband', 'ethernet' or 'nvswitch'."""
    radix: int
    """Ports at the native rate `port`."""
    port_kind: str
    """The table `port` is a key of: 'infiniband', 'ethernet' or 'nvlink' (one NVLink link per port)."""
    port: str
    aggregate: float | None
    """The vendor's total switching figure, in `aggregate_unit` and `convention`; None if not quoted."""
    aggregate_unit: str | None
    """'Tbit/s' or 'TB/s'."""
    convention: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Node(Entry):
    name: str
    gpu: str
    """Key into Catalogue.gpus."""
    gpus: int
    nvlink_domain_gpus: int
    """GPUs that reach each other over NVLink at full per-GPU bandwidth; 1 = no NVLink."""
    nvswitch: str | None
    """Key into Catalogue.switches, or None (no NVSwitch, or not in the catalogue)."""
    nvswitch_chips: int
    nics: int
    """Compute-fabric NICs (storage and management NICs not counted)."""
    nic_kind: str
    """'infiniband' or 'ethernet': the table `nic` is a key of."""
    nic: str
    gpu_p2p: bool
    """Can GPUs read each other's memory directly (NVLink or PCIe P2P)? False: through host memory."""
    pcie: str
    """Key into Catalogue.pcie: the node's PCIe generation (NIC slots, and GPU host links on PCIe)."""
    hbm_total_gb: float | None = None
    """The vendor's total GPU memory where it is not gpus x memory_gb (NVL72)."""


# ------------------------------------------------------------------------------------------------------------
# the catalogue


@dataclass(frozen=True, kw_only=True, slots=True)
class Catalogue:
    gpus: Mapping[str, GPU]
    nvlink: Mapping[str, NVLinkGeneration]
    pcie: Mapping[str, PCIeGeneration]
    infiniband: Mapping[str, LinkRate]
    ethernet: Mapping[str, LinkRate]
    switches: Mapping[str, Switch]
    nodes: Mapping[str, Node]

    def link_rate(self, kind: str, key: str) -> LinkRate:
        """infiniband[key] or ethernet[key], by `kind`."""
        return {"infiniband": self.infiniband, "ethernet": self.ethernet}[kind][key]

    def nic_gb_s(self, node: str) -> float:
        """One compute NIC of `node`, GB/s per direction."""
        n = self.nodes[node]
        return self.link_rate(n.nic_kind, n.nic).gb_s

    def node_egress_gb_s(self, node: str) -> float:
        """All compute NICs of `node` together, GB/s per direction (DGX H100: 8 x 400 Gb/s / 8 = 400)."""
        return self.nodes[node].nics * self.nic_gb_s(node)

    def extended(self, raw: Mapping[str, Mapping[str, Any]], origin: str = "extension") -> Catalogue:
        """This catalogue plus the entries of `raw` ({table: {key: fields as in hardware.yml}}), checked as
        load() checks hardware.yml; a key already in its table is an error."""
        tables = {}
        for table, cls in _TABLES.items():
            added = raw.get(table, {})
            clash = sorted(set(added) & set(getattr(self, table)))
            if clash:
                raise HardwareCatalogueError(f"{origin}: {table}: {clash} already in the catalogue")
            new = {str(k): _entry(cls, str(k), v, f"{origin}: {table}.{k}") for k, v in added.items()}
            tables[table] = types.MappingProxyType({**getattr(self, table), **new})
        unknown = sorted(set(raw) - set(_TABLES))
        if unknown:
            raise HardwareCatalogueError(f"{origin}: unknown table(s) {unknown}")
        cat = Catalogue(**tables)
        _validate(cat, origin)
        return cat


@functools.cache
def _load_default() -> Catalogue:
    return _parse(yaml.safe_load(DEFAULT_PATH.read_text()), DEFAULT_PATH.name)


_serving: list[Catalogue] = []


def load(path: Path | str | None = None) -> Catalogue:
    """The catalogue in `path` (default coursekit/hardware.yml, parsed once and cached), validated; inside
    `serving(cat)`, the default is `cat`."""
    if path is None:
        return _serving[-1] if _serving else _load_default()
    path = Path(path)
    return _parse(yaml.safe_load(path.read_text()), path.name)


@contextlib.contextmanager
def serving(cat: Catalogue) -> Iterator[Catalogue]:
    """Make load() return `cat` inside the block: how a judge shows code hardware it has not seen (e.g.
    load().extended({...}) with made-up entries). Code that calls load() when it runs sees it."""
    _serving.append(cat)
    try:
        yield cat
    finally:
        _serving.pop()


# ------------------------------------------------------------------------------------------------------------
# parsing: strict keys, checked types, cross-references and arithmetic

_TABLES: dict[str, type[Entry]] = {
    "gpus": GPU,
    "nvlink": NVLinkGeneration,
    "pcie": PCIeGeneration,
    "infiniband": LinkRate,
    "ethernet": LinkRate,
    "switches": Switch,
    "nodes": Node,
}


def _check_type(value: Any, hint: Any, where: str) -> Any:
    """`value` converted to `hint` (list -> tuple, int -> float), or an error naming `where`."""
    if isinstance(hint, types.UnionType):  # X | None
        if value is None and type(None) in hint.__args__:
            return None
        (hint,) = [a for a in hint.__args__ if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        (item, _) = typing.get_args(hint)
        if not isinstance(value, list):
            raise HardwareCatalogueError(f"{where}: expected a list, got {value!r}")
        return tuple(_check_type(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is float and type(value) is int:
        return float(value)
    if type(value) is not hint:
        raise HardwareCatalogueError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def _entry(cls: type[Entry], key: str, raw: Any, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise HardwareCatalogueError(f"{where}: expected a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in fields(cls)} - {"key"}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise HardwareCatalogueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(names)}")
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING} - {
        "key"
    }
    missing = sorted(required - set(raw))
    if missing:
        raise HardwareCatalogueError(f"{where}: missing key(s) {missing}")
    values = {k: _check_type(v, hints[k], f"{where}.{k}") for k, v in raw.items()}
    for name in values.get("unverified", ()):
        if name not in names:
            raise HardwareCatalogueError(f"{where}.unverified: {name!r} is not a field of this entry")
    return cls(key=key, **values)


def _parse(raw: Any, filename: str) -> Catalogue:
    if not isinstance(raw, dict) or sorted(raw) != sorted(_TABLES):
        got = sorted(raw) if isinstance(raw, dict) else raw
        raise HardwareCatalogueError(f"{filename}: expected exactly the tables {sorted(_TABLES)}, got {got}")
    tables: dict[str, Mapping[str, Any]] = {}  # each table holds entries of its own class (_TABLES)
    for table, cls in _TABLES.items():
        if not isinstance(raw[table], dict):
            raise HardwareCatalogueError(f"{filename}: {table}: expected a mapping of entries")
        tables[table] = types.MappingProxyType(
            {str(k): _entry(cls, str(k), v, f"{filename}: {table}.{k}") for k, v in raw[table].items()}
        )
    cat = Catalogue(**tables)
    _validate(cat, filename)
    return cat


def _fail(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise HardwareCatalogueError(f"{where}: {message}")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def _validate(cat: Catalogue, f: str) -> None:
    """Cross-references resolve and conventions and units are known. Whether an entry's figures agree with
    each other (per GPU = links x per link, a switch's aggregate, the per-direction NVLink figure) is checked
    judge-side, in tests/test_coursekit_hardware.py: some of that arithmetic is exercise 16's answer."""
    for t in ("nvlink", "pcie", "infiniband", "ethernet"):
        for k, e in getattr(cat, t).items():
            _fail(e.convention in CONVENTIONS, f"{f}: {t}.{k}.convention", f"expected one of {CONVENTIONS}")
    for k, g in cat.gpus.items():
        w = f"{f}: gpus.{k}"
        _fail(g.pcie in cat.pcie, w + ".pcie", f"{g.pcie!r} is not in pcie")
        _fail(g.nvlink is None or g.nvlink in cat.nvlink, w + ".nvlink", f"{g.nvlink!r} is not in nvlink")
        _fail(
            (g.nvlink is None) == (g.nvlink_links == 0) == (g.nvlink_gb_s == 0),
            w,
            "nvlink_links and nvlink_gb_s must be 0 exactly when nvlink is null",
        )
    for k, n in cat.nvlink.items():
        w = f"{f}: nvlink.{k}"
        _fail(n.first_gpu in cat.gpus, w + ".first_gpu", f"{n.first_gpu!r} is not in gpus")
        g = cat.gpus[n.first_gpu]
        _fail(g.nvlink == k and g.nvlink_links == n.links_per_gpu, w, f"disagrees with gpus.{n.first_gpu}")
    for k, p in cat.pcie.items():
        _fail(len(p.encoding) == 2 and 0 < p.encoding[0] <= p.encoding[1], f"{f}: pcie.{k}.encoding", "bad")
    for t in ("infiniband", "ethernet"):
        for k, r in getattr(cat, t).items():
            if r.lanes is not None or r.lane_gbit_s is not None:
                ok = (
                    r.lanes is not None
                    and r.lane_gbit_s is not None
                    and _close(r.lanes * r.lane_gbit_s, r.gbit_s)
                )
                _fail(ok, f"{f}: {t}.{k}", "lanes x lane_gbit_s != gbit_s")
    for k, s in cat.switches.items():
        _validate_switch(cat, s, f"{f}: switches.{k}")
    for k, node in cat.nodes.items():
        w = f"{f}: nodes.{k}"
        _fail(node.gpu in cat.gpus, w + ".gpu", f"{node.gpu!r} is not in gpus")
        _fail(node.pcie in cat.pcie, w + ".pcie", f"{node.pcie!r} is not in pcie")
        _fail(node.nvswitch is None or node.nvswitch in cat.switches, w + ".nvswitch", "not in switches")
        _fail(node.nic_kind in ("infiniband", "ethernet"), w + ".nic_kind", "expected infiniband or ethernet")
        _fail(node.nic in getattr(cat, node.nic_kind), w + ".nic", f"{node.nic!r} is not in {node.nic_kind}")
        _fail(1 <= node.nvlink_domain_gpus <= node.gpus, w + ".nvlink_domain_gpus", "expected 1..gpus")
        nvlinked = cat.gpus[node.gpu].nvlink is not None
        _fail(node.nvlink_domain_gpus == 1 or nvlinked, w, "an NVLink domain needs a GPU with NVLink")


def _validate_switch(cat: Catalogue, s: Switch, w: str) -> None:
    _fail(
        s.kind in ("infiniband", "ethernet", "nvswitch"), w + ".kind", "expected infiniband/ethernet/nvswitch"
    )
    _fail(s.port_kind in ("infiniband", "ethernet", "nvlink"), w + ".port_kind", "bad table")
    _fail(s.port in getattr(cat, s.port_kind), w + ".port", f"{s.port!r} is not in {s.port_kind}")
    quoted = (s.aggregate, s.aggregate_unit, s.convention)
    _fail(
        all(x is None for x in quoted) or None not in quoted,
        w,
        "aggregate, its unit and convention go together",
    )
    if s.aggregate is None:
        return
    _fail(s.convention in CONVENTIONS, w + ".convention", f"expected one of {CONVENTIONS}")
    _fail(s.aggregate_unit in AGGREGATE_UNITS, w + ".aggregate_unit", f"expected one of {AGGREGATE_UNITS}")
