"""Placing the purchase order of an approved request in the procurement system (through the adapter)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from integrations.exceptions import IntegrationError, PermanentError

from ..models import PO_RANK, PoState, ProcurementRequest, RequestLine, RequestState
from ..ports import OrderDraft, OrderLineDraft, PurchaseOrder
from ..registry import procurement_client
from ..tickets import ticket_sync_on_commit

logger = logging.getLogger(__name__)


def order_draft_build(request: ProcurementRequest) -> OrderDraft:
    """The order we ask for, from the request and its lines."""
    lines = request.lines.select_related("server_model", "accelerator_model", "part_model", "site")
    return OrderDraft(
        request_ref=request.reference,
        title=request.title,
        budget_code=request.budget_code,
        currency=request.currency,
        justification=request.justification,
        lines=tuple(
            OrderLineDraft(
                line_ref=line.line_ref,
                sku=line.sku,
                description=str(line.item),
                quantity=line.quantity,
                unit_price=line.unit_price,
                site_code=line.site.code,
            )
            for line in lines
        ),
    )


def po_state_advance(current: str, new: str) -> str:
    """The later of two PO states: events arriving out of order never move a PO back."""
    return new if PO_RANK.get(new, 0) > PO_RANK.get(current, 0) else current


def order_attach(*, request: ProcurementRequest, po: PurchaseOrder, source: str) -> ProcurementRequest:
    """Record a PO on the request (from the adapter's reply or a `po.created` event), inside a transaction.

    Idempotent: attaching the same PO again only fills what is missing. A different PO for a request that has
    one already is refused (PermanentError): two POs for one request is exactly what must never happen.
    """
    req = ProcurementRequest.objects.select_for_update().get(pk=request.pk)
    if req.po_number and req.po_number != po.po_number:
        raise PermanentError(f"{req.reference} already has PO {req.po_number}; refusing {po.po_number} ({source}).")
    if req.state not in (
        RequestState.APPROVED,
        RequestState.ORDERED,
        RequestState.PARTIALLY_RECEIVED,
        RequestState.RECEIVED,
        RequestState.CLOSED,
    ):
        raise PermanentError(f"{req.reference} is {req.get_state_display()}; a PO needs an approved request.")
    req.po_number = po.po_number
    req.po_state = po_state_advance(req.po_state, PoState.CREATED)
    req.po_created_at = req.po_created_at or timezone.now()
    req.supplier = po.supplier or req.supplier
    req.po_error = ""
    if req.state == RequestState.APPROVED:
        req.state = RequestState.ORDERED
    req.save()
    ticket_sync_on_commit(req, note=f"PO {po.po_number} created ({source}); supplier {req.supplier or '?'}")
    by_ref = {line.line_ref: line for line in po.lines}
    for line in RequestLine.objects.filter(request=req):
        found = by_ref.get(line.line_ref)
        line.po_line_ref = (found.po_line_ref if found else "") or line.po_line_ref
        line.po_state = po_state_advance(line.po_state, PoState.CREATED)
        line.save(update_fields=["po_line_ref", "po_state"])
    return req


def order_place(*, request_id: int) -> ProcurementRequest:
    """Create the PO of an approved request. Safe to call any number of times.

    The external call runs outside any transaction and without a row lock (a slow peer must not hold a lock
    for seconds); the idempotency key fixed at approval makes the peer return the same PO to every retry,
    including a concurrent duplicate task. The reply is written in a short locked transaction.
    Raises:
        TransientError: the peer is unreachable after the adapter's own retries (the task retries later).
        PermanentError: the peer refused the order (kept in `po_error`; an operator fixes and retries).
    """
    req = ProcurementRequest.objects.get(pk=request_id)
    if req.state != RequestState.APPROVED or req.po_number:
        return req
    ProcurementRequest.objects.filter(pk=req.pk).update(po_attempts=F("po_attempts") + 1)
    try:
        po = procurement_client().order_create(order_draft_build(req), idempotency_key=req.po_idempotency_key)
    except IntegrationError as exc:
        ProcurementRequest.objects.filter(pk=req.pk).update(po_error=str(exc)[:2000])
        logger.warning("placing the PO of %s failed: %s", req.reference, exc)
        if isinstance(exc, PermanentError):
            # Transient errors are retried by the task; a refusal needs a person, so it goes on the ticket.
            ticket_sync_on_commit(req, note=f"Placing the PO failed: {exc}. Fix it, then 'Place the PO again'.")
        raise
    with transaction.atomic():
        req = order_attach(request=req, po=po, source="adapter")
    from .events import events_release_for_po  # here: the events module imports this one

    transaction.on_commit(lambda: events_release_for_po(po.po_number))
    return req


__all__ = ["order_attach", "order_draft_build", "order_place", "po_state_advance"]
