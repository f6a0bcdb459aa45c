"""The WMS and stock takes against the ledger: pull levels and compare, push our movements, handle WMS events.

Differences are reported as StockDiscrepancy rows and never written back into the ledger: the ledger changes
only through movements someone is accountable for. A re-run refreshes the open rows and resolves the ones that
went away, so the list always shows the differences that exist now.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    PartItem,
    PartItemStatus,
    PartModel,
    Site,
    StockLocation,
    StockMovement,
)
from integrations.exceptions import IntegrationError, PermanentError

from ..conf import warehouse_setting
from ..models import StockDiscrepancy, StockDiscrepancyKind, WmsSyncRun
from ..ports import WmsMovement
from ..registry import warehouse_client
from .ledger import consumable_adjust

logger = logging.getLogger(__name__)

WMS_KINDS = (
    StockDiscrepancyKind.WMS_QUANTITY,
    StockDiscrepancyKind.WMS_SERIAL_MISSING,
    StockDiscrepancyKind.WMS_SERIAL_UNKNOWN,
)
# Movements younger than this are not pushed yet: ids are allocated before commit, so a slow transaction can
# commit a lower id after a higher one is visible; waiting keeps the push watermark from skipping it.
PUSH_SETTLE = dt.timedelta(minutes=2)


@dataclass
class Desired:
    """The discrepancies one comparison found, keyed by subject (what makes two of them the same one)."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, key: str, **values: Any) -> None:
        self.rows[key[:200]] = values


def discrepancies_sync(*, site: Site, scope_prefix: str, kinds: Iterable[str], desired: Desired) -> int:
    """Make the open discrepancies under `scope_prefix` (of `kinds`) equal `desired`: refresh or open the
    desired ones, resolve the rest. Returns how many are open under the prefix afterwards."""
    now = timezone.now()
    with transaction.atomic():
        open_rows = {
            d.subject_key: d
            for d in StockDiscrepancy.objects.select_for_update().filter(
                status="open", kind__in=list(kinds), subject_key__startswith=scope_prefix
            )
        }
        for key, row in open_rows.items():
            if key not in desired.rows:
                row.status, row.resolved_at = "resolved", now
                row.resolution = "No longer differs (re-checked)."
                row.save(update_fields=["status", "resolved_at", "resolution"])
        for key, values in desired.rows.items():
            row = open_rows.get(key)
            if row is None:
                StockDiscrepancy.objects.create(site=site, subject_key=key, detected_at=now, last_seen_at=now, **values)
                continue
            for name, value in values.items():
                setattr(row, name, value)
            row.last_seen_at = now
            row.save()
    return len(desired.rows)


@dataclass
class _Ledger:
    """Per (location id, sku): on-hand from the ledger and the serials in stock there."""

    quantity: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))
    serials: dict[tuple[int, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    where: dict[str, str] = field(default_factory=dict)  # serial -> "location" for any in-stock serial of the site
    serialised_skus: set[str] = field(default_factory=set)


def _ledger_view(site: Site) -> _Ledger:
    view = _Ledger()
    accel = {m.pk: m.name for m in AcceleratorModel.objects.all()}
    parts = {p.pk: (p.sku, p.is_serialised) for p in PartModel.objects.all()}
    view.serialised_skus = set(accel.values()) | {sku for sku, serialised in parts.values() if serialised}
    for r in (
        StockMovement.objects.filter(location__site=site)
        .values("location_id", "accelerator_model_id", "part_model_id")
        .annotate(q=Sum("quantity"))
    ):
        sku = (
            accel.get(r["accelerator_model_id"])
            if r["accelerator_model_id"]
            else parts.get(r["part_model_id"], ("", False))[0]
        )
        if sku:
            view.quantity[(r["location_id"], sku)] += r["q"] or 0
    for loc_id, model_id, serial, loc_name in Accelerator.objects.filter(
        lifecycle=AcceleratorLifecycle.IN_STOCK, stock_location__site=site
    ).values_list("stock_location_id", "model_id", "serial", "stock_location__name"):
        if serial:
            view.serials[(loc_id, accel[model_id])].add(serial)
            view.where[serial] = loc_name
    for loc_id, model_id, serial, loc_name in PartItem.objects.filter(
        status=PartItemStatus.IN_STOCK, stock_location__site=site
    ).values_list("stock_location_id", "part_model_id", "serial", "stock_location__name"):
        view.serials[(loc_id, parts[model_id][0])].add(serial)
        view.where[serial] = loc_name
    return view


def _compare(
    *,
    site: Site,
    location: StockLocation | None,
    location_name: str,
    sku: str,
    ledger: _Ledger,
    wms_quantity: int,
    wms_serials: Sequence[str] | None,
    desired: Desired,
    origin: str,
) -> None:
    """Compare one (location, sku) between the ledger and the WMS; add what differs to `desired`."""
    prefix = f"wms:{site.pk}:{location_name}:{sku}"
    key = (location.pk, sku) if location else None
    ledger_qty = ledger.quantity.get(key, 0) if key else 0
    base = {"location": location, "sku": sku}
    if location is None:
        desired.add(
            f"{prefix}:location",
            kind=StockDiscrepancyKind.WMS_QUANTITY,
            ledger_quantity=0,
            other_quantity=wms_quantity,
            **base,
            detail=f"{origin} holds {wms_quantity} x {sku} at '{location_name}', a location gpuops does not "
            f"know at {site.code}.",
        )
        return
    if ledger_qty != wms_quantity:
        desired.add(
            f"{prefix}:qty",
            kind=StockDiscrepancyKind.WMS_QUANTITY,
            ledger_quantity=ledger_qty,
            other_quantity=wms_quantity,
            **base,
            detail=f"{sku} at {location}: ledger {ledger_qty}, {origin} {wms_quantity}.",
        )
    if wms_serials is None or sku not in ledger.serialised_skus:
        return
    ours, theirs = ledger.serials.get(key, set()), set(wms_serials)
    for serial in sorted(ours - theirs):
        desired.add(
            f"{prefix}:missing:{serial}",
            kind=StockDiscrepancyKind.WMS_SERIAL_MISSING,
            serial=serial,
            **base,
            detail=f"{serial} is in stock at {location} per the ledger; {origin} does not have it there.",
        )
    for serial in sorted(theirs - ours):
        elsewhere = ledger.where.get(serial)
        hint = (
            f" (the ledger has it at {elsewhere})"
            if elsewhere
            else " (not in stock anywhere at the site per the ledger)"
        )
        desired.add(
            f"{prefix}:unknown:{serial}",
            kind=StockDiscrepancyKind.WMS_SERIAL_UNKNOWN,
            serial=serial,
            **base,
            detail=f"{origin} has {serial} at {location}{hint}.",
        )


def wms_reconcile(*, site: Site) -> WmsSyncRun:
    """Pull the WMS's stock levels for a site and report every difference with the ledger.

    Raises:
        IntegrationError: the WMS could not be read (the run is recorded as failed first).
    """
    run = WmsSyncRun.objects.create(direction=WmsSyncRun.Direction.PULL, site=site, started_at=timezone.now())
    try:
        levels = warehouse_client().stock_levels(site.code)
    except IntegrationError as exc:
        WmsSyncRun.objects.filter(pk=run.pk).update(status="failed", error=str(exc)[:2000], finished_at=timezone.now())
        raise
    ledger = _ledger_view(site)
    locations = {loc.name: loc for loc in StockLocation.objects.filter(site=site)}
    by_id = {loc.pk: loc for loc in locations.values()}
    desired, seen = Desired(), set()
    for level in levels:
        location = locations.get(level.location)
        seen.add((location.pk if location else level.location, level.sku))
        _compare(
            site=site,
            location=location,
            location_name=level.location,
            sku=level.sku,
            ledger=ledger,
            wms_quantity=level.quantity,
            wms_serials=level.serials,
            desired=desired,
            origin="the WMS",
        )
    for (loc_id, sku), qty in ledger.quantity.items():
        if (loc_id, sku) not in seen and qty:
            loc = by_id[loc_id]
            _compare(
                site=site,
                location=loc,
                location_name=loc.name,
                sku=sku,
                ledger=ledger,
                wms_quantity=0,
                wms_serials=(),
                desired=desired,
                origin="the WMS",
            )
    open_count = discrepancies_sync(site=site, scope_prefix=f"wms:{site.pk}:", kinds=WMS_KINDS, desired=desired)
    WmsSyncRun.objects.filter(pk=run.pk).update(
        status="ok", items=len(levels), discrepancies=open_count, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def wms_count_compare(*, site: Site, location_name: str, sku: str, quantity: int, serials: Sequence[str] | None) -> int:
    """A cycle count reported by the WMS for one (location, sku): compare and sync that subject only."""
    location = StockLocation.objects.filter(site=site, name=location_name).first()
    desired = Desired()
    _compare(
        site=site,
        location=location,
        location_name=location_name,
        sku=sku,
        ledger=_ledger_view(site),
        wms_quantity=quantity,
        wms_serials=serials,
        desired=desired,
        origin="the WMS count",
    )
    return discrepancies_sync(
        site=site, scope_prefix=f"wms:{site.pk}:{location_name}:{sku}:", kinds=WMS_KINDS, desired=desired
    )


def _wms_movement(mv: StockMovement) -> WmsMovement:
    sku = mv.accelerator_model.name if mv.accelerator_model_id else (mv.part_model.sku if mv.part_model_id else "")
    serial = (mv.accelerator.serial or "") if mv.accelerator_id else (mv.part_item.serial if mv.part_item_id else "")
    return WmsMovement(
        ref=f"gpuops-mv-{mv.pk}",
        at=mv.at,
        kind=mv.kind,
        sku=sku,
        quantity=mv.quantity,
        site_code=mv.location.site.code if mv.location_id else "",
        location=mv.location.name if mv.location_id else "",
        serial=serial,
        to_location=mv.to_location.name if mv.to_location_id else "",
        ticket_ref=mv.ticket_ref,
        reason=mv.reason,
    )


def wms_push(*, now: dt.datetime | None = None) -> WmsSyncRun | None:
    """Push the next batch of physical ledger movements to the WMS, after the last pushed one (a watermark).

    The batch key is derived from the movement ids, so a retried push of the same batch is not recorded twice
    by the WMS. Returns the run, or None when there was nothing to push.
    """
    last = (
        WmsSyncRun.objects.filter(direction=WmsSyncRun.Direction.PUSH, status="ok")
        .order_by("-last_movement_id")
        .values_list("last_movement_id", flat=True)
        .first()
    ) or 0
    cutoff = (now or timezone.now()) - PUSH_SETTLE
    batch = list(
        StockMovement.objects.filter(
            pk__gt=last, at__lt=cutoff, kind__in=warehouse_setting("PUSH_KINDS"), location__isnull=False
        )
        .select_related("accelerator", "part_item", "part_model", "accelerator_model", "location__site", "to_location")
        .order_by("pk")[: warehouse_setting("PUSH_BATCH")]
    )
    if not batch:
        return None
    run = WmsSyncRun.objects.create(direction=WmsSyncRun.Direction.PUSH, started_at=timezone.now())
    key = f"gpuops-movements-{batch[0].pk}-{batch[-1].pk}"
    try:
        accepted = warehouse_client().movements_push([_wms_movement(mv) for mv in batch], idempotency_key=key)
    except IntegrationError as exc:
        WmsSyncRun.objects.filter(pk=run.pk).update(status="failed", error=str(exc)[:2000], finished_at=timezone.now())
        raise
    WmsSyncRun.objects.filter(pk=run.pk).update(
        status="ok", items=accepted, last_movement_id=batch[-1].pk, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


@dataclass(frozen=True)
class StocktakeResult:
    adjustments: list[StockMovement]
    missing: list[str]
    unexpected: list[str]


def stocktake_apply(
    *,
    location: StockLocation,
    counts: Mapping[PartModel, int] | None = None,
    serials: Sequence[str] | None = None,
    reason: str,
    ticket_ref: str = "",
    key: str | None = None,
) -> StocktakeResult:
    """Apply a stock take of one location.

    Consumables: the count is the truth after a stock take, so each model gets an `adjust` movement of
    (counted - on hand). Serialised items (when `serials` is given): a serial expected here and not counted, or
    counted and not expected, is a discrepancy for a person to resolve with a move (transfer, write-off) - a
    missing GPU is investigated, not adjusted away.
    """
    adjustments = []
    for part_model, counted in (counts or {}).items():
        row = consumable_adjust(
            part_model=part_model,
            location=location,
            counted=counted,
            reason=reason,
            ticket_ref=ticket_ref,
            key=f"{key}:pm:{part_model.pk}" if key else None,
        )
        if row is not None:
            adjustments.append(row)
    if serials is None:
        return StocktakeResult(adjustments=adjustments, missing=[], unexpected=[])
    site = location.site
    expected = set(
        Accelerator.objects.filter(lifecycle=AcceleratorLifecycle.IN_STOCK, stock_location=location).values_list(
            "serial", flat=True
        )
    ) | set(
        PartItem.objects.filter(status=PartItemStatus.IN_STOCK, stock_location=location).values_list(
            "serial", flat=True
        )
    )
    expected.discard(None)
    counted = set(serials)
    ledger = _ledger_view(site)
    desired = Desired()
    prefix = f"stocktake:{location.pk}:"
    for serial in sorted(expected - counted):
        desired.add(
            f"{prefix}{serial}",
            kind=StockDiscrepancyKind.STOCKTAKE_MISSING,
            location=location,
            serial=serial,
            detail=f"{serial} is in stock at {location} per the ledger and was not found at the stock take ({reason}).",
        )
    for serial in sorted(counted - expected):
        where = ledger.where.get(serial)
        desired.add(
            f"{prefix}{serial}",
            kind=StockDiscrepancyKind.STOCKTAKE_UNEXPECTED,
            location=location,
            serial=serial,
            detail=f"{serial} was found at {location} at the stock take; the ledger has it "
            f"{'at ' + where if where else 'nowhere in stock at ' + site.code}.",
        )
    discrepancies_sync(
        site=site,
        scope_prefix=prefix,
        desired=desired,
        kinds=(StockDiscrepancyKind.STOCKTAKE_MISSING, StockDiscrepancyKind.STOCKTAKE_UNEXPECTED),
    )
    return StocktakeResult(
        adjustments=adjustments, missing=sorted(expected - counted), unexpected=sorted(counted - expected)
    )


def wms_event_handle(event: Any) -> None:
    """Apply one WMS event (called by inbound.event_run inside its transaction).

    stock.counted: a cycle count of one (location, sku) -> compared with the ledger.
    movement.recorded: a movement the WMS made; one that refers to ours (ref "gpuops-mv-<id>") is expected;
    any other is a `wms_movement_unmatched` discrepancy (someone moved stock outside gpuops).
    """
    data = event.payload["data"]
    site = Site.objects.filter(code=data["site"]).first()
    if site is None:
        raise PermanentError(f"unknown site {data['site']!r}")
    if event.type == "stock.counted":
        wms_count_compare(
            site=site,
            location_name=data["location"],
            sku=data["sku"],
            quantity=data["quantity"],
            serials=data.get("serials"),
        )
        return
    ref = data.get("ref", "")
    ours = ref.removeprefix("gpuops-mv-")
    if ref.startswith("gpuops-mv-") and ours.isdigit() and StockMovement.objects.filter(pk=int(ours)).exists():
        return
    location = StockLocation.objects.filter(site=site, name=data.get("location", "")).first()
    desired = Desired()
    desired.add(
        f"wmsmove:{site.pk}:{event.event_id}",
        kind=StockDiscrepancyKind.WMS_MOVEMENT_UNMATCHED,
        location=location,
        sku=data["sku"],
        serial=data.get("serial", ""),
        other_quantity=data["quantity"],
        detail=f"The WMS recorded {data['kind']} of {data['quantity']} x {data['sku']}"
        f"{' ' + data['serial'] if data.get('serial') else ''} at {data.get('location', '?')} with no "
        f"matching gpuops movement (WMS ref {ref or 'none'}).",
    )
    # Keyed by the event: each unmatched WMS movement stays open until a person resolves it.
    row = desired.rows.popitem()
    if not StockDiscrepancy.objects.filter(subject_key=row[0], status="open").exists():
        now = timezone.now()
        StockDiscrepancy.objects.create(site=site, subject_key=row[0], detected_at=now, last_seen_at=now, **row[1])


__all__ = [
    "StocktakeResult",
    "discrepancies_sync",
    "stocktake_apply",
    "wms_count_compare",
    "wms_event_handle",
    "wms_push",
    "wms_reconcile",
]
