"""Gradescope's "Export Submissions": a ``submission_<id>/`` folder per submission and a
``submission_metadata.yml`` that says whose each one is.

Gradescope publishes no source for the export; its shape is the one readers of real exports parse (the
folders beside the metadata in one ``assignment_<id>_export/`` folder, and per submission):

    submission_123456:
      :submitters:
      - :name: Jane Smith
        :sid: '12345'
        :email: jane@example.edu
      :created_at: 2026-03-01 23:59:58.123456000 -08:00

Ruby wrote it (symbol keys, hence the colons). A group submission lists every member under
``:submitters:``: each of them gets the group's grade. The gradebook's id is the ``:sid:``, else the
``:email:``. The time is the submission's: late when it is after ``--due`` (Gradescope's export says
nothing else of lateness).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from grader.classroom.intake.claims import Claim, Reading, member_bytes
from grader.core.upload import Member

PLATFORM = "gradescope"
METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 256 << 20
"""The metadata carries every submission's results too: a large class's runs to megabytes."""


class _RubyLoader(yaml.SafeLoader):
    """Safe YAML that reads a Ruby-tagged node (``!ruby/object:...``) as the plain node it wraps."""


_RubyLoader.add_multi_constructor("!", lambda loader, suffix, node: _plain(loader, node))


def _plain(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)  # type: ignore[arg-type]  # the node is a ScalarNode here


def _metadata(members: list[Member]) -> Member | None:
    return next((m for m in members if m.name == METADATA and len(m.parts) <= 2), None)


def looks_like(members: list[Member]) -> float:
    """1 when the archive holds Gradescope's metadata file, else 0 (detection)."""
    return 1.0 if _metadata(members) is not None else 0.0


def read(source: Path, members: list[Member], due: dt.datetime | None) -> Reading:
    """Each submission folder named in the metadata is its submitters'; the rest is left over."""
    reading = Reading(PLATFORM)
    metadata = _metadata(members)
    if metadata is None:
        raise ValueError(f"{source}: no {METADATA}: not Gradescope's export")
    root = metadata.folder
    entries = yaml.load(member_bytes(source, metadata.path, MAX_METADATA_BYTES), Loader=_RubyLoader) or {}
    folders: dict[str, list[tuple[str, str]]] = {}
    for member in members:
        inner = member.parts[len(root.split("/")) if root else 0 :]
        if member is metadata:
            reading.leftovers.append((member.path, "the export's metadata: read for who submitted what"))
        elif len(inner) > 1 and inner[0] in entries:
            folders.setdefault(inner[0], []).append((member.path, "/".join(inner[1:])))
        else:
            reading.leftovers.append((member.path, f"in no submission folder that {METADATA} names"))
    for unit in sorted(entries):
        owned = tuple(folders.get(unit, ()))
        claims = _claims(unit, entries[unit] or {}, owned, due)
        reading.claims += claims
        if not claims:
            reading.leftovers += [
                (path, f"{unit} names no submitter with an sid or email") for path, _ in owned
            ]
    return reading


def _claims(
    unit: str, entry: dict[str, Any], owned: tuple[tuple[str, str], ...], due: dt.datetime | None
) -> list[Claim]:
    """One claim per submitter of ``unit``, all on the same files (a group's members share its grade)."""
    created = entry.get(":created_at")
    submitted = _aware(created) if isinstance(created, dt.datetime) else None
    late = submitted > due if submitted is not None and due is not None else None
    said: tuple[str, ...] = ()
    if late and submitted and due:
        said = (f"submitted {submitted.isoformat()}, after the deadline {due.isoformat()}",)
    claims = []
    for person in entry.get(":submitters") or []:
        student = str(person.get(":sid") or "").strip() or str(person.get(":email") or "").strip()
        if student:
            name = person.get(":name")
            shown = str(name) if name else None
            claims.append(Claim(student, unit, owned, name=shown, late=late, submitted=submitted, notes=said))
    return claims


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
