"""CSV import and export of nodes and accelerators.

Import is all-or-nothing: every row is validated first (model validation plus checks across rows: duplicate
serials, U overlaps inside the file, unknown models); any error rejects the whole file with the row number,
field and reason; otherwise all rows are written in one transaction with source "import".

Each row is also checked against the actor's scopes (cmdb.permissions.can): an existing object needs change
rights where it is and where the row puts it, a new one add rights where it will be. An import changes only
the columns its header carries, so a partial file never blanks the rest of a node.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpuops.context import ChangeSource, change_context

from .. import permissions
from ..models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    Cluster,
    Node,
    Rack,
    ServerModel,
    Site,
    StockLocation,
    Tag,
    Tenant,
)
from .accelerators import placement_build, placements_write

NODE_COLUMNS = [
    "hostname",
    "serial",
    "asset_tag",
    "server_model",
    "site",
    "rack",
    "position",
    "face",
    "status",
    "role",
    "cluster",
    "tenant",
    "bmc_address",
    "po_number",
    "supplier",
    "purchase_date",
    "warranty_end",
    "tags",
]
ACCELERATOR_COLUMNS = [
    "serial",
    "model",
    "uuid",
    "node",
    "slot_index",
    "pci_bus_id",
    "stock_location",
    "lifecycle",
    "health",
    "firmware_version",
    "po_number",
    "supplier",
    "purchase_date",
    "warranty_end",
]


@dataclass
class RowError:
    row: int  # 1-based data row number (the header is row 0)
    field: str
    message: str

    def __str__(self) -> str:
        return f"row {self.row}, {self.field}: {self.message}"


@dataclass
class ImportResult:
    created: int = 0
    updated: int = 0
    errors: list[RowError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _read(data: str | bytes, required: list[str]) -> tuple[list[dict[str, str]], list[RowError]]:
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:  # an Excel export in a legacy code page: say so instead of a 500
        return [], [RowError(0, "file", f"not UTF-8 text (byte {exc.start}); save the file as CSV UTF-8")]
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing:
        return [], [RowError(0, c, "column missing from the header") for c in missing]
    rows = [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in reader]
    return rows, []


def _date(value: str) -> dt.date | None:
    return dt.date.fromisoformat(value) if value else None


class _Lookup:
    """Caches name -> object lookups so a 10,000-row file does not run 10,000 queries per column."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, str], Any] = {}

    def get(self, model, key: str, **query):
        ck = (model.__name__, key)
        if ck not in self.cache:
            self.cache[ck] = model.objects.filter(**query).first()
        return self.cache[ck]


def _scope_errors(actor, i: int, obj, before_ok: bool, label: str, where: str) -> list[RowError]:
    """Per-row permission errors: `before_ok` is whether the actor may change the object as it was (True for a
    new one); the object now carries the row's values, so `can` reads where it will be."""
    if actor is None:  # the system (management commands, demo data)
        return []
    if not before_ok:
        return [RowError(i, "serial", f"you may not change {label}: it is outside your scopes")]
    action = "change" if obj.pk else "add"
    if not permissions.can(actor, action, obj):
        verb = "move" if obj.pk else "create"
        return [RowError(i, where, f"you may not {verb} {label} there: the target is outside your scopes")]
    return []


def _validation_messages(exc: ValidationError) -> list[tuple[str, str]]:
    if hasattr(exc, "error_dict"):
        return [(f, "; ".join(m for e in errs for m in e.messages)) for f, errs in exc.error_dict.items()]
    return [("__all__", "; ".join(exc.messages))]


@transaction.atomic  # the scope checks and the writes see the same rows
def nodes_import_csv(data: str | bytes, *, actor=None) -> ImportResult:
    """Create or update nodes from CSV (keyed by serial). Nothing is written if any row is bad.

    Only the columns in the header are written (a file of hostname,serial,server_model,site moves nodes
    without touching their rack, cluster or dates). When a node changes site its installed cards follow,
    each with its own change record.
    """
    rows, errors = _read(data, ["hostname", "serial", "server_model", "site"])
    result = ImportResult(errors=errors)
    if errors:
        return result
    columns = set(rows[0]) if rows else set()
    look = _Lookup()
    planned: list[tuple[Node, list[Tag], int | None]] = []
    seen_serial: dict[str, int] = {}
    seen_host: dict[str, int] = {}
    occupied: dict[tuple[int, str, int], int] = {}
    for i, row in enumerate(rows, start=1):
        row_errors: list[RowError] = []
        serial, hostname = row.get("serial", ""), row.get("hostname", "")
        if serial in seen_serial:
            row_errors.append(RowError(i, "serial", f"duplicate of row {seen_serial[serial]}"))
        seen_serial.setdefault(serial, i)
        if hostname in seen_host:
            row_errors.append(RowError(i, "hostname", f"duplicate of row {seen_host[hostname]}"))
        seen_host.setdefault(hostname, i)
        model = look.get(ServerModel, row["server_model"], name=row["server_model"])
        site = look.get(Site, row["site"], code=row["site"])
        if model is None:
            row_errors.append(RowError(i, "server_model", f"unknown server model {row['server_model']!r}"))
        if site is None:
            row_errors.append(RowError(i, "site", f"unknown site {row['site']!r}"))
        values: dict[str, Any] | None = {"hostname": hostname, "server_model": model, "site": site}
        if "rack" in columns:
            rack = None
            if row["rack"]:
                room_name, _, rack_name = row["rack"].rpartition("/")
                query = {"name": rack_name, "room__site": site}
                if room_name:
                    query["room__name"] = room_name
                rack = look.get(Rack, f"{row['site']}:{row['rack']}", **query) if site else None
                if rack is None:
                    row_errors.append(RowError(i, "rack", f"unknown rack {row['rack']!r} in site {row['site']!r}"))
            values["rack"] = rack
        if "cluster" in columns:
            cluster = look.get(Cluster, row["cluster"], name=row["cluster"]) if row["cluster"] else None
            if row["cluster"] and cluster is None:
                row_errors.append(RowError(i, "cluster", f"unknown cluster {row['cluster']!r}"))
            values["cluster"] = cluster
        if "tenant" in columns:
            tenant = look.get(Tenant, row["tenant"], slug=row["tenant"]) if row["tenant"] else None
            if row["tenant"] and tenant is None:
                row_errors.append(RowError(i, "tenant", f"unknown tenant {row['tenant']!r}"))
            values["tenant"] = tenant
        node = Node.objects.filter(serial=serial).first() or Node(serial=serial)
        old_site_id = node.site_id if node.pk else None
        # Checked before the row touches the object: may the actor change it where it is now?
        before_ok = node.pk is None or actor is None or permissions.can(actor, "change", node)
        try:
            for name in ("asset_tag", "po_number", "supplier"):
                if name in columns:
                    values[name] = row[name]
            if "position" in columns:
                values["position"] = int(row["position"]) if row["position"] else None
            for name, default in (("face", "front"), ("status", node.status or "planned"), ("role", "compute")):
                if name in columns:
                    values[name] = row[name] or default
            if "bmc_address" in columns:
                values["bmc_address"] = row["bmc_address"] or None
            for name in ("purchase_date", "warranty_end"):
                if name in columns:
                    values[name] = _date(row[name])
        except ValueError as exc:
            row_errors.append(RowError(i, "position/date", str(exc)))
            values = None
        if values and model and site and not row_errors:
            for k, v in values.items():
                setattr(node, k, v)
            row_errors.extend(_scope_errors(actor, i, node, before_ok, f"node {serial}", "site"))
            try:
                node.full_clean(validate_unique=True)
            except ValidationError as exc:
                row_errors.extend(RowError(i, f, m) for f, m in _validation_messages(exc))
            if node.rack_id and node.position:
                for u in range(node.position, node.position + model.u_height):
                    key = (node.rack_id, node.face, u)
                    if key in occupied:
                        row_errors.append(RowError(i, "position", f"U{u} overlaps row {occupied[key]}"))
                        break
                    occupied[key] = i
        tags = [Tag(slug=t.strip()) for t in row.get("tags", "").split(";") if t.strip()]
        result.errors.extend(row_errors)
        if not row_errors:
            planned.append((node, tags, old_site_id))
    if result.errors:
        return result
    with change_context(actor=actor, source=ChangeSource.IMPORT), transaction.atomic():
        for node, tags, old_site_id in planned:
            created = node.pk is None
            node.save()
            if tags:
                node.tags.set([Tag.objects.get_or_create(slug=t.slug)[0] for t in tags])
            if old_site_id is not None and old_site_id != node.site_id:
                # The cards go where their node goes; one save each so each move has its change record.
                for card in Accelerator.objects.filter(node=node).exclude(site_id=node.site_id):
                    card.site_id = node.site_id
                    card.save()
            result.created += created
            result.updated += not created
    return result


@transaction.atomic  # the scope checks and the writes see the same rows
def accelerators_import_csv(data: str | bytes, *, actor=None) -> ImportResult:
    """Create or update accelerator cards from CSV (keyed by serial). Nothing is written if any row is bad."""
    rows, errors = _read(data, ["serial", "model"])
    result = ImportResult(errors=errors)
    if errors:
        return result
    look = _Lookup()
    planned: list[Accelerator] = []
    seen: dict[str, int] = {}
    slots: dict[tuple[int, int], int] = {}
    for i, row in enumerate(rows, start=1):
        row_errors: list[RowError] = []
        serial = row["serial"]
        if not serial:
            row_errors.append(RowError(i, "serial", "required"))
        elif serial in seen:
            row_errors.append(RowError(i, "serial", f"duplicate of row {seen[serial]}"))
        seen.setdefault(serial, i)
        model = look.get(AcceleratorModel, row["model"], name=row["model"])
        if model is None:
            row_errors.append(RowError(i, "model", f"unknown accelerator model {row['model']!r}"))
        node = look.get(Node, row["node"], hostname=row["node"]) if row.get("node") else None
        if row.get("node") and node is None:
            row_errors.append(RowError(i, "node", f"unknown node {row['node']!r}"))
        location = None
        if row.get("stock_location"):
            site_code, _, name = row["stock_location"].partition(":")
            location = look.get(StockLocation, row["stock_location"], site__code=site_code, name=name)
            if location is None:
                row_errors.append(RowError(i, "stock_location", f"unknown stock location {row['stock_location']!r}"))
        card = Accelerator.objects.filter(serial=serial).first() or Accelerator(serial=serial)
        before_ok = card.pk is None or actor is None or permissions.can(actor, "change", card)
        try:
            slot = int(row["slot_index"]) if row.get("slot_index") else None
            purchase, warranty = _date(row.get("purchase_date", "")), _date(row.get("warranty_end", ""))
        except ValueError as exc:
            row_errors.append(RowError(i, "slot_index/date", str(exc)))
            slot = purchase = warranty = None
        if not row_errors:
            card.model = model
            card.uuid = row.get("uuid") or None
            card.node, card.slot_index, card.stock_location = node, slot, location
            card.site_id = node.site_id if node else (location.site_id if location else card.site_id)
            card.pci_bus_id = row.get("pci_bus_id", "")
            lifecycle = row.get("lifecycle") or (
                AcceleratorLifecycle.INSTALLED if node else AcceleratorLifecycle.IN_STOCK
            )
            card.lifecycle = lifecycle
            card.health = row.get("health") or card.health
            card.firmware_version = row.get("firmware_version", "")
            card.po_number, card.supplier = row.get("po_number", ""), row.get("supplier", "")
            card.purchase_date, card.warranty_end = purchase, warranty
            where = "node" if node else "stock_location"
            row_errors.extend(_scope_errors(actor, i, card, before_ok, f"card {serial}", where))
            try:
                card.full_clean(validate_unique=True, validate_constraints=True)
            except ValidationError as exc:
                row_errors.extend(RowError(i, f, m) for f, m in _validation_messages(exc))
            if node and slot is not None:
                key = (node.pk, slot)
                if key in slots:
                    row_errors.append(RowError(i, "slot_index", f"slot {slot} of {node} also used by row {slots[key]}"))
                slots.setdefault(key, i)
        result.errors.extend(row_errors)
        if not row_errors:
            planned.append(card)
    if result.errors:
        return result
    with change_context(actor=actor, source=ChangeSource.IMPORT), transaction.atomic():
        for card in planned:
            created = card.pk is None
            before = card.loaded_snapshot() or {}
            card.save()
            moved = any(before.get(k) != getattr(card, k) for k in ("node_id", "slot_index", "stock_location_id"))
            if created or moved:
                # Close the open placement (if any) and open the new one: the card keeps its whole story.
                now = timezone.now()
                placements_write(
                    close_ids=[card.pk], opened=[placement_build(accelerator=card, note="imported", at=now)], at=now
                )
            result.created += created
            result.updated += not created
    return result


def _export(rows: Iterable[dict[str, Any]], columns: list[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def nodes_export_csv(queryset) -> str:
    """CSV of nodes in the import format (so an export can be edited and imported back)."""
    qs = queryset.select_related("server_model", "site", "rack__room", "cluster", "tenant").prefetch_related("tags")
    return _export(
        (
            {
                "hostname": n.hostname,
                "serial": n.serial,
                "asset_tag": n.asset_tag,
                "server_model": n.server_model.name,
                "site": n.site.code,
                "rack": f"{n.rack.room.name}/{n.rack.name}" if n.rack else "",
                "position": n.position,
                "face": n.face,
                "status": n.status,
                "role": n.role,
                "cluster": n.cluster.name if n.cluster else "",
                "tenant": n.tenant.slug if n.tenant else "",
                "bmc_address": n.bmc_address,
                "po_number": n.po_number,
                "supplier": n.supplier,
                "purchase_date": n.purchase_date,
                "warranty_end": n.warranty_end,
                "tags": ";".join(t.slug for t in n.tags.all()),
            }
            for n in qs.iterator(chunk_size=2000)
        ),
        NODE_COLUMNS,
    )


def accelerators_export_csv(queryset) -> str:
    qs = queryset.select_related("model", "node", "stock_location__site")
    return _export(
        (
            {
                "serial": a.serial,
                "model": a.model.name,
                "uuid": a.uuid,
                "node": a.node.hostname if a.node else "",
                "slot_index": a.slot_index,
                "pci_bus_id": a.pci_bus_id,
                "stock_location": f"{a.stock_location.site.code}:{a.stock_location.name}" if a.stock_location else "",
                "lifecycle": a.lifecycle,
                "health": a.health,
                "firmware_version": a.firmware_version,
                "po_number": a.po_number,
                "supplier": a.supplier,
                "purchase_date": a.purchase_date,
                "warranty_end": a.warranty_end,
            }
            for a in qs.iterator(chunk_size=2000)
        ),
        ACCELERATOR_COLUMNS,
    )
