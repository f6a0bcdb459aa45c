"""The procurement side of a request's ticket (workflows/definitions/procurement.py).

The request is the record; its ticket mirrors its state. Opening, noting and moving tickets is the workflows
app's glue (workflows/glue/procurement.py), reached through the hooks in hooks.py, so this package never imports
the workflow engine. What stays here is what the ticket type calls back into procurement for.
"""

from __future__ import annotations

from typing import Any

from .hooks import request_changed_on_commit
from .models import ProcurementRequest, RequestState


def ticket_sync_on_commit(request: ProcurementRequest, *, open_ticket: bool = False, note: str = "") -> None:
    """After the surrounding transaction commits: note on the request's ticket, then bring it to the request's
    state (open it first if asked). A no-op without the workflows app."""
    request_changed_on_commit(request, open_ticket=open_ticket, note=note)


def request_ticket_link(*, request_id: int, ticket: Any) -> bool:
    """Called by the ticket type's on_create: point the request at the ticket and adopt its correlation id (so
    the CMDB changes of the request's deliveries appear on the ticket). False when the request does not exist
    or already has a ticket."""
    updated = ProcurementRequest.objects.filter(pk=request_id, ticket_ref="").update(
        ticket_ref=f"ticket:{ticket.pk}", correlation_id=ticket.correlation_id
    )
    if updated:
        ticket.data.update({"request_id": request_id, "request_ref": f"PR-{request_id}"})
    return bool(updated)


def ticket_id_of(request: ProcurementRequest) -> int | None:
    """The id of the request's ticket (from `ticket_ref`, "ticket:<id>"), or None."""
    ref = request.ticket_ref
    return int(ref.removeprefix("ticket:")) if ref.startswith("ticket:") else None


def order_retry(*, request: ProcurementRequest) -> bool:
    """Place the PO again (ticket step `retry_order`): clear the error and enqueue the task on commit."""
    from .tasks import place_order

    if request.state != RequestState.APPROVED or request.po_number:
        return False
    ProcurementRequest.objects.filter(pk=request.pk).update(po_error="")
    place_order.apply_async_on_commit(args=[request.pk])
    return True


__all__ = ["order_retry", "request_ticket_link", "ticket_id_of", "ticket_sync_on_commit"]
