"""Shipments: dispatch notices, deliveries that become assets, and the discrepancies between them.

Out-of-order design (docs/procurement.md): a delivery is authoritative for what is on the dock, so assets are
created from `shipment.delivered` at once, whether or not its dispatch notice came first. Expected and received
serials are compared per request only when a shipment has both (`request_reconcile`), and compared again after
every later event; discrepancies the later events explain (a missing serial that came in the next shipment) are
resolved automatically, the others stay open for a person. A delivery whose dispatch notice never comes gets a
`no_dispatch_notice` discrepancy after DISPATCH_NOTICE_GRACE_H (the sweep task re-runs the reconciliation).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from cmdb.models import Accelerator, Node, NodeStatus, PartItem, Site
from cmdb.services.changelog import records_for_bulk, records_write
from integrations.exceptions import PermanentError
from integrations.warehouse.services.ledger import (
    CardReceipt,
    accelerators_receive,
    consumable_move,
    part_items_receive,
    stock_location_default,
)

from ..conf import procurement_setting
from ..hooks import on_servers_delivered
from ..models import (
    Discrepancy,
    DiscrepancyKind,
    DiscrepancyStatus,
    ItemKind,
    PoState,
    ProcurementRequest,
    RequestLine,
    RequestState,
    Shipment,
    ShipmentItem,
    ShipmentItemStatus,
    ShipmentStatus,
)
from ..tickets import ticket_sync_on_commit
from .orders import po_state_advance

# Discrepancies recomputed from scratch by request_reconcile (the others are raised once by the event handlers).
RECONCILED_KINDS = frozenset(
    {
        DiscrepancyKind.MISSING,
        DiscrepancyKind.UNEXPECTED,
        DiscrepancyKind.QUANTITY_SHORT,
        DiscrepancyKind.QUANTITY_OVER,
        DiscrepancyKind.NO_DISPATCH_NOTICE,
        DiscrepancyKind.OVER_DELIVERED,
    }
)


@dataclass(frozen=True)
class ShipmentLineData:
    """One line of a dispatch notice or a delivery: serials, or a quantity (consumables)."""

    line_ref: str
    serials: tuple[str, ...] = ()
    quantity: int | None = None
    warranty_months: int | None = None


@dataclass
class DeliveryResult:
    """What a delivery created."""

    node_ids: list[int] = field(default_factory=list)
    accelerator_ids: list[int] = field(default_factory=list)
    part_item_ids: list[int] = field(default_factory=list)
    consumable_units: int = 0


def months_add(day: dt.date, months: int) -> dt.date:
    """`day` plus whole months, clamped to the month's last day (Jan 31 + 1 month = Feb 28/29)."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def discrepancy_open(
    *,
    request: ProcurementRequest,
    kind: str,
    subject: str,
    detail: str,
    shipment: Shipment | None = None,
    line: RequestLine | None = None,
    serial: str = "",
    expected: int | None = None,
    actual: int | None = None,
) -> Discrepancy:
    """Open a discrepancy, or refresh the open one about the same subject (never a duplicate)."""
    key = f"{kind}:{shipment.pk if shipment else '-'}:{subject}"[:200]
    values = {
        "kind": kind,
        "shipment": shipment,
        "line": line,
        "serial": serial,
        "detail": detail[:500],
        "expected_quantity": expected,
        "actual_quantity": actual,
    }
    found = Discrepancy.objects.filter(request=request, subject_key=key, status=DiscrepancyStatus.OPEN).first()
    if found is None:
        ticket_sync_on_commit(request, note=f"Discrepancy ({DiscrepancyKind(kind).label}): {detail}"[:500])
        return Discrepancy.objects.create(request=request, subject_key=key, **values)
    for name, value in values.items():
        setattr(found, name, value)
    found.save()
    return found


def _lines(request: ProcurementRequest) -> dict[str, RequestLine]:
    lines = request.lines.select_related("server_model", "accelerator_model", "part_model", "site")
    return {line.line_ref: line for line in lines}


def _shipment_for(request: ProcurementRequest, shipment_ref: str) -> Shipment:
    shipment, _ = Shipment.objects.select_for_update().get_or_create(
        shipment_ref=shipment_ref, defaults={"request": request}
    )
    if shipment.request_id != request.pk:
        raise PermanentError(f"shipment {shipment_ref} belongs to PR-{shipment.request_id}, not {request.reference}")
    return shipment


@transaction.atomic
def shipment_dispatch_record(
    *,
    request: ProcurementRequest,
    shipment_ref: str,
    lines: Sequence[ShipmentLineData],
    carrier: str = "",
    tracking: str = "",
    dispatched_at: dt.datetime | None = None,
    expected_at: dt.datetime | None = None,
) -> Shipment:
    """Store what a shipment should carry. A repeated notice replaces the expectations (carriers re-send).

    Lines we do not know are an `unknown_line` discrepancy. Reconciles the request afterwards, which matters
    when the delivery came first.
    """
    shipment = _shipment_for(request, shipment_ref)
    shipment.carrier, shipment.tracking = carrier[:100], tracking[:100]
    shipment.dispatched_at = dispatched_at or shipment.dispatched_at or timezone.now()
    shipment.expected_at = expected_at
    shipment.is_dispatch_known = True
    shipment.save()
    by_ref = _lines(request)
    items = {(i.serial or f"#line{i.line_id}"): i for i in shipment.items.all()}
    for item in items.values():
        item.is_expected, item.expected_quantity = False, 0
    for data in lines:
        line = by_ref.get(data.line_ref)
        if line is None:
            discrepancy_open(
                request=request,
                kind=DiscrepancyKind.UNKNOWN_LINE,
                shipment=shipment,
                subject=f"dispatch:{data.line_ref}",
                detail=f"Dispatch notice lists line {data.line_ref}, which is not on {request.reference}"
                f" ({len(data.serials)} serial(s): {', '.join(data.serials[:10])}).",
            )
            continue
        if data.serials and line.is_serialised:
            for serial in data.serials:
                item = items.get(serial) or ShipmentItem(shipment=shipment, serial=serial, line=line)
                item.is_expected, item.expected_quantity = True, 1
                item.line = item.line or line
                items[serial] = item
        else:
            key = f"#line{line.pk}"
            item = items.get(key) or ShipmentItem(shipment=shipment, serial="", line=line)
            item.is_expected = True
            item.expected_quantity = data.quantity if data.quantity is not None else len(data.serials)
            items[key] = item
    for item in items.values():
        if item.is_expected or item.is_received:
            item.save()
        elif item.pk:
            item.delete()  # expected by an earlier notice only, never received: the new notice replaces it
    request_po_state_set(request, PoState.DISPATCHED)
    request_reconcile(request)
    return shipment


def _hostname(site: Site, serial: str, taken: set[str]) -> str:
    """A placeholder hostname for a received server (provisioning renames it): '<site>-<serial>'."""
    base = f"{site.code}-{re.sub(r'[^a-z0-9-]+', '-', serial.lower()).strip('-')}"[:240]
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


@transaction.atomic
def shipment_deliver(
    *,
    request: ProcurementRequest,
    shipment_ref: str,
    site_code: str,
    lines: Sequence[ShipmentLineData],
    delivered_at: dt.datetime | None = None,
) -> DeliveryResult:
    """Receive a delivery in one transaction: nodes (status `received`) for servers, in-stock cards and part
    items with a `receive` movement each, consumables by quantity; link them on the shipment; reconcile.

    Idempotent: a serial already received for this PO is not created again. A serial that exists elsewhere in
    the CMDB is a `duplicate_serial` discrepancy, not a second asset. On commit, `on_servers_delivered` opens
    provisioning tickets for the new nodes when that workflow exists.
    Raises:
        PermanentError: unknown site, or the shipment belongs to another request.
    """
    site = Site.objects.filter(code=site_code).first()
    if site is None:
        raise PermanentError(f"delivery {shipment_ref}: unknown site {site_code!r}")
    req = ProcurementRequest.objects.select_for_update().get(pk=request.pk)
    shipment = _shipment_for(req, shipment_ref)
    shipment.status, shipment.site = ShipmentStatus.DELIVERED, site
    shipment.delivered_at = delivered_at or shipment.delivered_at or timezone.now()
    shipment.delivery_recorded_at = shipment.delivery_recorded_at or timezone.now()
    shipment.save()
    location = stock_location_default(site)
    purchase_date = (req.po_created_at or shipment.delivered_at).date()
    reason = f"received {shipment_ref} ({req.reference}, PO {req.po_number})"
    ticket_ref = req.ticket_ref or req.reference
    by_ref = _lines(req)
    items = {(i.serial or f"#line{i.line_id}"): i for i in shipment.items.all()}
    result = DeliveryResult()
    wanted: dict[str, list[tuple[RequestLine, str, dt.date]]] = defaultdict(list)

    for data in lines:
        line = by_ref.get(data.line_ref)
        if line is None:
            discrepancy_open(
                request=req,
                kind=DiscrepancyKind.UNKNOWN_LINE,
                shipment=shipment,
                subject=f"delivery:{data.line_ref}",
                detail=f"Delivered against line {data.line_ref}, which is not on {req.reference}; "
                f"nothing was received for it ({len(data.serials)} serial(s): "
                f"{', '.join(data.serials[:10])}; quantity {data.quantity}).",
            )
            continue
        if line.site_id != site.pk:
            discrepancy_open(
                request=req,
                kind=DiscrepancyKind.SITE_MISMATCH,
                shipment=shipment,
                line=line,
                subject=f"line:{line.pk}",
                detail=f"{line.line_ref} was ordered for site {line.site.code} but delivered to "
                f"{site.code}; received at {site.code}.",
            )
        months = data.warranty_months if data.warranty_months is not None else procurement_setting("WARRANTY_MONTHS")
        warranty_end = months_add(purchase_date, months)
        if line.is_serialised:
            if not data.serials and data.quantity:
                discrepancy_open(
                    request=req,
                    kind=DiscrepancyKind.NO_SERIALS,
                    shipment=shipment,
                    line=line,
                    subject=f"line:{line.pk}",
                    actual=data.quantity,
                    detail=f"{data.quantity} x {line.item} delivered on {line.line_ref} without serials;"
                    " nothing was received - record them by serial.",
                )
            for serial in data.serials:
                wanted[line.item_kind].append((line, serial, warranty_end))
            continue
        quantity = data.quantity if data.quantity is not None else len(data.serials)
        key = f"#line{line.pk}"
        item = items.get(key) or ShipmentItem(shipment=shipment, serial="", line=line)
        if quantity and not item.is_received:
            consumable_move(
                part_model=line.part_model,
                kind="receive",
                quantity=quantity,
                location=location,
                reason=reason,
                ticket_ref=ticket_ref,
                key=f"receive:{shipment_ref}:{line.line_ref}",
            )
            result.consumable_units += quantity
        item.is_received, item.received_quantity = True, max(item.received_quantity, quantity)
        item.save()
        items[key] = item

    common = {"req": req, "shipment": shipment, "items": items, "reason": reason}
    result.node_ids = _servers_receive(site=site, purchase_date=purchase_date, wanted=wanted[ItemKind.SERVER], **common)
    result.accelerator_ids = _cards_receive(
        location=location,
        purchase_date=purchase_date,
        ticket_ref=ticket_ref,
        wanted=wanted[ItemKind.ACCELERATOR],
        **common,
    )
    result.part_item_ids = _parts_receive(
        location=location, ticket_ref=ticket_ref, wanted=wanted[ItemKind.PART], **common
    )
    request_receipt_refresh(req)
    request_reconcile(req)
    node_ids, request_id = list(result.node_ids), req.pk
    received = len(result.node_ids) + len(result.accelerator_ids) + len(result.part_item_ids)
    ticket_sync_on_commit(
        req,
        note=f"{shipment_ref} delivered to {site.code}: {received} new asset(s), "
        f"{result.consumable_units} consumable unit(s)",
    )
    transaction.on_commit(lambda: on_servers_delivered(node_ids, request_id=request_id))
    return result


def _item_received(
    items: dict[str, ShipmentItem], shipment: Shipment, line: RequestLine, serial: str, **asset: object
) -> None:
    item = items.get(serial) or ShipmentItem(shipment=shipment, serial=serial, line=line)
    item.line = item.line or line
    item.is_received, item.received_quantity = True, 1
    for name, value in asset.items():
        setattr(item, name, value)
    item.save()
    items[serial] = item


def _duplicate(req: ProcurementRequest, shipment: Shipment, line: RequestLine, serial: str, where: str) -> None:
    discrepancy_open(
        request=req,
        kind=DiscrepancyKind.DUPLICATE_SERIAL,
        shipment=shipment,
        line=line,
        serial=serial,
        subject=serial,
        detail=f"Serial {serial} was delivered on {line.line_ref} but is already known as "
        f"{where}; no new asset was created.",
    )


def _servers_receive(
    *,
    req: ProcurementRequest,
    shipment: Shipment,
    items: dict[str, ShipmentItem],
    reason: str,
    site: Site,
    purchase_date: dt.date,
    wanted: list[tuple[RequestLine, str, dt.date]],
) -> list[int]:
    existing = {n.serial: n for n in Node.objects.filter(serial__in=[s for _, s, _ in wanted])}
    taken = set(Node.objects.filter(hostname__startswith=f"{site.code}-").values_list("hostname", flat=True))
    new: list[tuple[RequestLine, Node]] = []
    pending: set[str] = set()
    for line, serial, warranty_end in wanted:
        if serial in pending:
            continue  # the same serial twice in one delivery: one node
        node = existing.get(serial)
        if node is not None:
            if node.po_number == req.po_number and node.server_model_id == line.server_model_id:
                _item_received(items, shipment, line, serial, node=node)
            else:
                _duplicate(req, shipment, line, serial, f"node {node.hostname}")
                _item_received(items, shipment, line, serial)
            continue
        node = Node(
            hostname=_hostname(site, serial, taken),
            serial=serial,
            server_model=line.server_model,
            site=site,
            status=NodeStatus.RECEIVED,
            po_number=req.po_number,
            supplier=req.supplier[:200],
            purchase_date=purchase_date,
            warranty_end=warranty_end,
        )
        pending.add(serial)
        new.append((line, node))
    if not new:
        return []
    # One INSERT for the nodes and one for their change records (signals do not fire for bulk_create).
    Node.objects.bulk_create([n for _, n in new])
    records_write(records_for_bulk(created=[n for _, n in new], reason=reason))
    for line, node in new:
        _item_received(items, shipment, line, node.serial, node=node)
    return [n.pk for _, n in new]


def _cards_receive(
    *,
    req: ProcurementRequest,
    shipment: Shipment,
    items: dict[str, ShipmentItem],
    reason: str,
    location,
    purchase_date: dt.date,
    ticket_ref: str,
    wanted: list[tuple[RequestLine, str, dt.date]],
) -> list[int]:
    existing = {c.serial: c for c in Accelerator.objects.filter(serial__in=[s for _, s, _ in wanted])}
    receipts: list[CardReceipt] = []
    line_of: dict[str, RequestLine] = {}
    for line, serial, warranty_end in wanted:
        if serial in line_of:
            continue  # the same serial twice in one delivery: one card
        card = existing.get(serial)
        if card is not None:
            if card.po_number == req.po_number and card.model_id == line.accelerator_model_id:
                _item_received(items, shipment, line, serial, accelerator=card)
            else:
                _duplicate(req, shipment, line, serial, f"card #{card.pk} ({card.get_lifecycle_display()})")
                _item_received(items, shipment, line, serial)
            continue
        receipts.append(
            CardReceipt(
                serial=serial,
                model=line.accelerator_model,
                po_number=req.po_number,
                supplier=req.supplier,
                purchase_date=purchase_date,
                warranty_end=warranty_end,
            )
        )
        line_of[serial] = line
    cards = accelerators_receive(
        cards=receipts,
        location=location,
        reason=reason,
        ticket_ref=ticket_ref,
        key_prefix=f"receive:{req.po_number or req.reference}",
    )
    for card in cards:
        _item_received(items, shipment, line_of[card.serial], card.serial, accelerator=card)
    return [c.pk for c in cards]


def _parts_receive(
    *,
    req: ProcurementRequest,
    shipment: Shipment,
    items: dict[str, ShipmentItem],
    reason: str,
    location,
    ticket_ref: str,
    wanted: list[tuple[RequestLine, str, dt.date]],
) -> list[int]:
    existing = {p.serial: p for p in PartItem.objects.filter(serial__in=[s for _, s, _ in wanted])}
    per_model: dict[int, list[tuple[RequestLine, str]]] = defaultdict(list)
    for line, serial, _ in wanted:
        part = existing.get(serial)
        if part is not None:
            mine = part.movements.filter(idempotency_key=f"receive:{req.po_number or req.reference}:{serial}").exists()
            if mine:
                _item_received(items, shipment, line, serial, part_item=part)
            else:
                _duplicate(req, shipment, line, serial, f"part item #{part.pk}")
                _item_received(items, shipment, line, serial)
            continue
        per_model[line.part_model_id].append((line, serial))
    created: list[int] = []
    for pairs in per_model.values():
        line_of = {serial: line for line, serial in pairs}
        parts = part_items_receive(
            part_model=pairs[0][0].part_model,
            serials=[s for _, s in pairs],
            location=location,
            reason=reason,
            ticket_ref=ticket_ref,
            key_prefix=f"receive:{req.po_number or req.reference}",
        )
        for part in parts:
            _item_received(items, shipment, line_of[part.serial], part.serial, part_item=part)
            created.append(part.pk)
    return created


def request_po_state_set(request: ProcurementRequest, state: str) -> None:
    """Advance the PO state of the request and of its lines (never backwards)."""
    req = ProcurementRequest.objects.select_for_update().get(pk=request.pk)
    new = po_state_advance(req.po_state, state)
    if new != req.po_state:
        req.po_state = new
        req.save(update_fields=["po_state", "updated_at"])
    for line in RequestLine.objects.filter(request=req):
        if po_state_advance(line.po_state, state) != line.po_state:
            line.po_state = state
            line.save(update_fields=["po_state"])


def request_receipt_refresh(request: ProcurementRequest) -> ProcurementRequest:
    """Recompute each line's received quantity from the shipment items, then the request's state."""
    req = ProcurementRequest.objects.select_for_update().get(pk=request.pk)
    lines = list(req.lines.all())
    received_any, complete = False, bool(lines)
    for line in lines:
        got = sum(i.received_quantity for i in ShipmentItem.objects.filter(line=line, is_received=True))
        line.received_quantity = got
        target = PoState.DELIVERED if got >= line.quantity else (PoState.PARTIALLY_DELIVERED if got else "")
        if target:
            line.po_state = po_state_advance(line.po_state, target)
        line.save(update_fields=["received_quantity", "po_state"])
        received_any |= got > 0
        complete &= got >= line.quantity
    if received_any:
        req.po_state = po_state_advance(req.po_state, PoState.DELIVERED if complete else PoState.PARTIALLY_DELIVERED)
        if req.state in (RequestState.ORDERED, RequestState.PARTIALLY_RECEIVED, RequestState.APPROVED):
            req.state = RequestState.RECEIVED if complete else RequestState.PARTIALLY_RECEIVED
        # Closed only when nothing is left to sort out: received, invoiced, and no open discrepancy.
        if (
            req.state == RequestState.RECEIVED
            and req.invoice_number
            and not req.discrepancies.filter(status=DiscrepancyStatus.OPEN).exists()
        ):
            req.state = RequestState.CLOSED
        req.is_open = req.state not in (
            RequestState.RECEIVED,
            RequestState.CLOSED,
            RequestState.REJECTED,
            RequestState.CANCELLED,
        )
        req.save()
        ticket_sync_on_commit(req)
    return req


@transaction.atomic
def discrepancy_resolve(*, discrepancy: Discrepancy, actor: object, resolution: str) -> Discrepancy:
    """Close a discrepancy with what was done about it; the request closes when it was the last one open."""
    if not resolution.strip():
        raise ValidationError({"resolution": "Say what was done about it."})
    row = Discrepancy.objects.select_for_update().get(pk=discrepancy.pk)
    if row.status == DiscrepancyStatus.OPEN:
        row.status, row.resolved_at, row.resolution = DiscrepancyStatus.RESOLVED, timezone.now(), resolution[:500]
        row.resolved_by = actor if getattr(actor, "is_authenticated", False) else None
        row.save()
        request_receipt_refresh(row.request)
    return row


def request_reconcile(request: ProcurementRequest, *, now: dt.datetime | None = None) -> list[Discrepancy]:
    """Compare expected and received items over all shipments of the request; sync the open discrepancies.

    missing: expected on a delivered shipment whose notice is known, received on no shipment of the request;
    unexpected: received on a shipment whose notice is known, expected on no dispatched shipment of the request;
    quantity short/over: a quantity row's expected vs received; over_delivered: a line got more than ordered;
    no_dispatch_notice: delivered, and no notice within the grace period. Returns the open discrepancies.
    """
    now = now or timezone.now()
    grace = dt.timedelta(hours=procurement_setting("DISPATCH_NOTICE_GRACE_H"))
    shipments = list(request.shipments.all())
    all_items = list(ShipmentItem.objects.filter(shipment__request=request).select_related("line"))
    received = {i.serial for i in all_items if i.serial and i.is_received}
    expected = {i.serial for i in all_items if i.serial and i.is_expected}
    by_shipment: dict[int, list[ShipmentItem]] = defaultdict(list)
    for item in all_items:
        by_shipment[item.shipment_id].append(item)
    desired: dict[str, dict] = {}

    def want(kind: str, shipment: Shipment | None, subject: str, **values: object) -> None:
        desired[f"{kind}:{shipment.pk if shipment else '-'}:{subject}"[:200]] = {
            "kind": kind,
            "shipment": shipment,
            "subject": subject,
            **values,
        }

    for shipment in shipments:
        delivered, known = shipment.delivered_at is not None, shipment.is_dispatch_known
        recorded = shipment.delivery_recorded_at or shipment.delivered_at
        if delivered and not known and recorded is not None and recorded < now - grace:
            want(
                DiscrepancyKind.NO_DISPATCH_NOTICE,
                shipment,
                shipment.shipment_ref,
                detail=f"{shipment.shipment_ref} was delivered {shipment.delivered_at:%Y-%m-%d %H:%M} and no dispatch"
                f" notice came within {grace}; its serials could not be checked.",
            )
        for item in by_shipment[shipment.pk]:
            status = ShipmentItemStatus.RECEIVED if item.is_received else ShipmentItemStatus.EXPECTED
            if item.serial and delivered and known and item.is_expected and item.serial not in received:
                status = ShipmentItemStatus.MISSING
                want(
                    DiscrepancyKind.MISSING,
                    shipment,
                    item.serial,
                    serial=item.serial,
                    line=item.line,
                    detail=f"{item.serial} was dispatched on {shipment.shipment_ref} but not delivered.",
                )
            if item.serial and delivered and known and item.is_received and item.serial not in expected:
                want(
                    DiscrepancyKind.UNEXPECTED,
                    shipment,
                    item.serial,
                    serial=item.serial,
                    line=item.line,
                    detail=f"{item.serial} was delivered on {shipment.shipment_ref} but on no dispatch notice of "
                    f"{request.reference}; it was received into the CMDB - check it.",
                )
            if not item.serial and delivered and known and item.is_expected:
                actual = item.received_quantity
                if item.line is not None and item.line.is_serialised:
                    actual = sum(
                        1 for i in by_shipment[shipment.pk] if i.serial and i.is_received and i.line_id == item.line_id
                    )
                if actual != item.expected_quantity:
                    kind = (
                        DiscrepancyKind.QUANTITY_SHORT
                        if actual < item.expected_quantity
                        else DiscrepancyKind.QUANTITY_OVER
                    )
                    want(
                        kind,
                        shipment,
                        f"line:{item.line_id}",
                        line=item.line,
                        expected=item.expected_quantity,
                        actual=actual,
                        detail=f"{shipment.shipment_ref}: {item.expected_quantity} dispatched on "
                        f"{item.line.line_ref if item.line else '?'}, {actual} delivered.",
                    )
            if item.status != status:
                item.status = status
                item.save(update_fields=["status"])
    for line in request.lines.all():
        if line.received_quantity > line.quantity:
            want(
                DiscrepancyKind.OVER_DELIVERED,
                None,
                f"line:{line.pk}",
                line=line,
                expected=line.quantity,
                actual=line.received_quantity,
                detail=f"{line.line_ref} ordered {line.quantity}, {line.received_quantity} received.",
            )

    open_rows = {
        d.subject_key: d
        for d in Discrepancy.objects.filter(request=request, status=DiscrepancyStatus.OPEN, kind__in=RECONCILED_KINDS)
    }
    for key, row in open_rows.items():
        if key not in desired:
            row.status, row.resolved_at = DiscrepancyStatus.RESOLVED, now
            row.resolution = "Explained by a later event (the item arrived or the notice was corrected)."
            row.save(update_fields=["status", "resolved_at", "resolution"])
    for values in desired.values():
        discrepancy_open(
            request=request,
            kind=values["kind"],
            shipment=values["shipment"],
            subject=values["subject"],
            detail=values["detail"],
            line=values.get("line"),
            serial=values.get("serial", ""),
            expected=values.get("expected"),
            actual=values.get("actual"),
        )
    return list(Discrepancy.objects.filter(request=request, status=DiscrepancyStatus.OPEN))


__all__ = [
    "DeliveryResult",
    "ShipmentLineData",
    "discrepancy_open",
    "discrepancy_resolve",
    "months_add",
    "request_po_state_set",
    "request_receipt_refresh",
    "request_reconcile",
    "shipment_deliver",
    "shipment_dispatch_record",
]
