"""Processing procurement events (po.*, shipment.*, invoice.posted) once they are stored and claimed.

`procurement_event_handle` is the handler `inbound.event_run` calls inside one transaction. Ordering rules:
- an event about a PO we do not know yet is deferred (`waits_for="po:<number>"`) and re-run when the PO
  becomes known (by our own order placement or by `po.created`);
- PO states only move forward (PO_RANK), so an approval arriving after the dispatch changes nothing;
- deliveries and dispatch notices may come in either order (see services/receiving.py).
CMDB changes run under the request's correlation id (the ticket's when there is one) with source
"integration", so the change history says which order brought each node and card.
"""

from __future__ import annotations

import logging
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from gpuops.context import ChangeSource, change_context
from integrations.exceptions import PermanentError

from ..inbound import EventDeferred, event_enqueue, events_waiting
from ..models import DiscrepancyKind, InboundEvent, PoState, ProcurementRequest, RequestState
from ..ports import OrderLine, PurchaseOrder
from ..tickets import ticket_sync_on_commit
from .orders import order_attach
from .receiving import (
    ShipmentLineData,
    discrepancy_open,
    request_po_state_set,
    request_receipt_refresh,
    shipment_deliver,
    shipment_dispatch_record,
)

logger = logging.getLogger(__name__)


def _request_by_po(po_number: str) -> ProcurementRequest:
    req = ProcurementRequest.objects.filter(po_number=po_number).first()
    if req is None:
        raise EventDeferred(f"po:{po_number}", f"PO {po_number} is not known yet")
    return req


def _request_by_ref(ref: str) -> ProcurementRequest:
    try:
        pk = int(ref.removeprefix("PR-"))
    except ValueError:
        raise PermanentError(f"bad request reference {ref!r}") from None
    req = ProcurementRequest.objects.filter(pk=pk).first()
    if req is None:
        raise PermanentError(f"unknown request {ref}")
    return req


def _lines(data: dict[str, Any]) -> list[ShipmentLineData]:
    return [
        ShipmentLineData(
            line_ref=line["line_ref"],
            serials=tuple(line.get("serials") or ()),
            quantity=line.get("quantity"),
            warranty_months=line.get("warranty_months"),
        )
        for line in data.get("lines", [])
    ]


def _when(value: Any) -> Any:
    return parse_datetime(value) if isinstance(value, str) else None


def _po_created(event: InboundEvent, data: dict[str, Any]) -> ProcurementRequest:
    req = ProcurementRequest.objects.filter(po_number=data["po_number"]).first() or _request_by_ref(data["request_ref"])
    po = PurchaseOrder(
        po_number=data["po_number"],
        state="created",
        request_ref=data["request_ref"],
        supplier=data.get("supplier", ""),
        lines=tuple(
            OrderLine(
                line_ref=line["line_ref"], po_line_ref=line.get("po_line_ref", ""), quantity=line.get("quantity", 0)
            )
            for line in data.get("lines", [])
        ),
    )
    req = order_attach(request=req, po=po, source=f"event {event.event_id}")
    number = po.po_number
    transaction.on_commit(lambda: events_release_for_po(number))
    return req


def _po_approved(event: InboundEvent, data: dict[str, Any]) -> ProcurementRequest:
    req = _request_by_po(data["po_number"])
    request_po_state_set(req, PoState.APPROVED)
    return req


def _po_cancelled(event: InboundEvent, data: dict[str, Any]) -> ProcurementRequest:
    req = ProcurementRequest.objects.select_for_update().get(pk=_request_by_po(data["po_number"]).pk)
    request_po_state_set(req, PoState.CANCELLED)
    req.refresh_from_db()
    reason = data.get("reason", "")
    if any(line.received_quantity for line in req.lines.all()):
        discrepancy_open(
            request=req,
            kind=DiscrepancyKind.CANCELLED_AFTER_RECEIPT,
            subject=req.po_number,
            detail=f"PO {req.po_number} was cancelled ({reason or 'no reason given'}) after goods were "
            "received; the received assets stay in the CMDB.",
        )
    elif req.state not in (RequestState.CLOSED, RequestState.CANCELLED):
        req.state, req.is_open, req.decided_at = RequestState.CANCELLED, False, timezone.now()
        req.notes = f"{req.notes}\nPO {req.po_number} cancelled by procurement: {reason}".strip()
        req.save()
        ticket_sync_on_commit(req, note=f"PO {req.po_number} cancelled by procurement: {reason or 'no reason'}")
    return req


def _dispatched(event: InboundEvent, data: dict[str, Any]) -> ProcurementRequest:
    req = _request_by_po(data["po_number"])
    shipment_dispatch_record(
        request=req,
        shipment_ref=data["shipment_id"],
        lines=_lines(data),
        carrier=data.get("carrier", ""),
        tracking=data.get("tracking", ""),
        dispatched_at=event.occurred_at,
        expected_at=_when(data.get("expected_at")),
    )
    return req


def _delivered(event: InboundEvent, data: dict[str, Any]) -> ProcurementRequest:
    req = _request_by_po(data["po_number"])
    shipment_deliver(
        request=req,
        shipment_ref=data["shipment_id"],
        site_code=data["site"],
        lines=_lines(data),
        delivered_at=_when(data.get("delivered_at")) or event.occurred_at,
    )
    return req


def _invoice(event: InboundEvent, data: dict[str, Any]) -> ProcurementRequest:
    req = ProcurementRequest.objects.select_for_update().get(pk=_request_by_po(data["po_number"]).pk)
    try:
        amount = Decimal(str(data["amount"]))
    except InvalidOperation:
        raise PermanentError(f"invoice amount {data['amount']!r} is not a number") from None
    req.invoice_number, req.invoiced_amount = data["invoice_number"], amount
    req.save()
    request_po_state_set(req, PoState.INVOICED)
    ordered = req.total_amount
    currency = data.get("currency") or req.currency
    if ordered and (amount != ordered or currency != req.currency):
        discrepancy_open(
            request=req,
            kind=DiscrepancyKind.INVOICE_MISMATCH,
            subject=data["invoice_number"],
            detail=f"Invoice {data['invoice_number']}: {amount:,.2f} {currency}; the request's lines "
            f"total {ordered:,.2f} {req.currency}.",
        )
    return request_receipt_refresh(req)


HANDLERS = {
    "po.created": _po_created,
    "po.approved": _po_approved,
    "po.cancelled": _po_cancelled,
    "shipment.dispatched": _dispatched,
    "shipment.delivered": _delivered,
    "invoice.posted": _invoice,
}


def _correlation_for(data: dict[str, Any]) -> str | None:
    req = ProcurementRequest.objects.filter(po_number=data.get("po_number", "")).only("correlation_id").first()
    return req.correlation_id if req else None


def procurement_event_handle(event: InboundEvent) -> None:
    """Apply one procurement event (called by inbound.event_run inside its transaction)."""
    handler = HANDLERS.get(event.type)
    if handler is None:
        raise PermanentError(f"no handler for event type {event.type!r}")
    data = event.payload["data"]
    with change_context(source=ChangeSource.INTEGRATION, correlation_id=_correlation_for(data)):
        req = handler(event, data)
    InboundEvent.objects.filter(pk=event.pk).update(request=req)


def events_release_for_po(po_number: str) -> int:
    """Re-enqueue the events that were waiting for this PO (call on commit). Returns how many."""
    ids = events_waiting(f"po:{po_number}")
    for event in InboundEvent.objects.filter(pk__in=ids).order_by("received_at", "id"):
        event_enqueue(event)
    if ids:
        logger.info("PO %s known: re-running %d deferred event(s)", po_number, len(ids))
    return len(ids)


__all__ = ["HANDLERS", "events_release_for_po", "procurement_event_handle"]
