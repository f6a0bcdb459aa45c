"""Firmware: the one writer of a node's reported firmware (NodeFirmware and its FirmwareComponent index) and of
the compliance baselines. Reads (the compliance report) are in cmdb.compliance."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import transaction

from ..models import (
    FirmwareBaseline,
    FirmwareComponent,
    FirmwareKind,
    Node,
    NodeFirmware,
)

KINDS = frozenset(FirmwareKind.values)
# Components whose model is the node's server model in the CMDB (the agent reports the DMI product name, which a
# baseline should not have to spell).
SERVER_COMPONENTS = frozenset({FirmwareKind.BIOS, FirmwareKind.BMC})
# Which agent collectors produce each component: when one failed, the stored versions of its components stand.
COMPONENT_COLLECTORS: dict[str, tuple[str, ...]] = {
    FirmwareKind.BIOS: ("dmidecode",),
    FirmwareKind.BMC: ("bmc",),
    FirmwareKind.NIC: ("ethtool", "mlxfwmanager", "infiniband"),
    FirmwareKind.GPU_VBIOS: ("nvidia",),
    FirmwareKind.GPU_INFOROM: ("nvidia",),
    FirmwareKind.NPU_FIRMWARE: ("ascend",),
    FirmwareKind.DCU_VBIOS: ("hygon",),
}


def _text(value: Any, limit: int) -> str:
    return str(value).strip()[:limit] if value is not None else ""


def firmware_canonical(entries: Any) -> list[dict[str, str]]:
    """The report's `firmware` list as stored: known components with a device and a version, trimmed to the
    columns' sizes, one per (component, device), sorted. Anything else is dropped (the schema check already
    refused wrong types)."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("component") not in KINDS:
            continue
        device, version = _text(entry.get("device"), 100), _text(entry.get("version"), 100)
        if not device or not version:
            continue
        row = {
            "component": entry["component"],
            "device": device,
            "model": _text(entry.get("model"), 200),
            "version": version,
            "psid": _text(entry.get("psid"), 32),
        }
        rows.setdefault((row["component"], device), row)
    return [rows[key] for key in sorted(rows)]


def firmware_digest(components: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(components, separators=(",", ":"), sort_keys=True).encode()).hexdigest()


def node_firmware_current(node: Node) -> NodeFirmware | None:
    """The node's stored firmware, from the select_related cache when the caller loaded it (no query then)."""
    try:
        return node.firmware
    except NodeFirmware.DoesNotExist:
        return None


def node_firmware_record(
    node: Node,
    components: list[dict[str, str]],
    current: NodeFirmware | None,
    failed_collectors: frozenset[str] = frozenset(),
) -> NodeFirmware | None:
    """Store `components` (canonical) as `node`'s firmware unless `current` holds the same. Components whose
    collectors failed this time (`failed_collectors`) keep their stored entries: a broken ipmitool is no evidence
    that the BMC lost its firmware. BIOS and BMC entries take the node's server model as their model.

    Returns the row when it was written, None when nothing changed (then no query at all). When written: the
    row's save (its change record carries the caller's change context) and the FirmwareComponent index rewritten
    for the node - a constant number of statements whatever the number of components. The caller holds the
    node's lock and the transaction."""
    server_model = node.server_model.name if node.server_model_id else ""
    fresh = [dict(c, model=server_model) if c["component"] in SERVER_COMPONENTS else c for c in components]
    stale_kinds = {kind for kind, names in COMPONENT_COLLECTORS.items() if failed_collectors.intersection(names)}
    if stale_kinds and current is not None:
        fresh = [c for c in fresh if c["component"] not in stale_kinds]
        fresh += [c for c in current.components if c.get("component") in stale_kinds]
        fresh.sort(key=lambda c: (c["component"], c["device"]))
    digest = firmware_digest(fresh)
    if current is not None and current.digest == digest:
        return None
    row = current if current is not None else NodeFirmware(node=node)
    row.components = fresh
    row.digest = digest
    row.save()
    FirmwareComponent.objects.filter(node=node).delete()
    FirmwareComponent.objects.bulk_create(
        FirmwareComponent(
            node=node,
            component=c["component"],
            device=c["device"],
            model=c["model"],
            version=c["version"],
            psid=c.get("psid", ""),
        )
        for c in fresh
    )
    node.firmware = row
    return row


def firmware_baseline_save(baseline: FirmwareBaseline) -> FirmwareBaseline:
    """Create or update a baseline (seed data, scripts; the API and admin save through the model's clean() and
    save() the same way): validated (ValidationError naming the field), saved in one transaction; the save's change
    record is the baseline's history."""
    baseline.full_clean()
    with transaction.atomic():
        baseline.save()
    return baseline
